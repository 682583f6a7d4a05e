"""Tracking that outlives a tracking server going away: nothing lost, nothing doubled, and Tune
never waits on (or dies of) MLflow.

Every tracker event becomes a *step* (a typed record of the event, see `steps`) appended to
a journal and written in order. A step that fails because the store is unreachable stays at the
head of the queue and is retried on the next event; the search goes on meanwhile. When the search
ends, the queue is retried with backoff for a bounded window; if the store is still down, the
whole journal is replayed into a local SQLite store next to the search's other outputs and saved
as JSON, so it can be imported into the server later:

    python -m orchestrator.tracking.outbox runs/NAME/mlflow-journal.json --tracking-uri URI

Steps are safe to repeat (see `mlflow_writer`), so a step whose write reached the server but whose
answer was lost, or a replay of a journal partly written already, doubles nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from orchestrator import jsonl
from orchestrator.tracking.mlflow_writer import MlflowWriter
from orchestrator.tracking.steps import StartSearch, Step, from_json, to_json

# MLflow errors that retrying cannot fix: the store answered and refused the write.
_REFUSALS = {"INVALID_PARAMETER_VALUE", "RESOURCE_ALREADY_EXISTS", "BAD_REQUEST",
             "PERMISSION_DENIED", "UNAUTHENTICATED", "RESOURCE_DOES_NOT_EXIST"}

def is_outage(err: Exception) -> bool:
    """True if the store could not be reached (retry later), False if it refused the write."""
    from mlflow.exceptions import MlflowException

    if isinstance(err, MlflowException):
        return err.error_code not in _REFUSALS
    return isinstance(err, OSError)  # requests' connection errors and timeouts are OSErrors


class Outbox:
    """The journal of one search's tracking steps, and how far it has been written."""

    def __init__(self, writer: MlflowWriter, *, retry_interval_s: float = 2.0,
                 out: TextIO | None = None, file: Path | None = None):
        """file: an append-only copy of the queue on disk (a line per step, and a `written`
        mark as the store takes them), so records held through an outage outlive the driver;
        an outbox made on an existing file first writes what its dead predecessor had not."""
        self.writer = writer
        self.file = file
        self.journal: list[Step] = []
        self.written = 0  # journal[:written] are in the store (or were refused by it)
        self.retry_interval_s = retry_interval_s
        self.out = out
        self._failed_at: float | None = None  # when the head of the queue last failed
        self._prelude: Step | None = None
        if file is not None and file.exists():
            self.journal, self.written = read_file(file)
            if self.written and isinstance(self.journal[0], StartSearch):
                # The search's first step again (safe to repeat), so the writer knows the
                # experiment and parent run the held steps belong to.
                self._prelude = self.journal[0]

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "out"}  # a stream is not state

    def __setstate__(self, state):
        self.__dict__.update(state, out=None)

    def continue_parent(self, parent_run_id: str | None) -> None:
        """A reopened outbox's steps belong to this parent run (the resumed search's)."""
        if self._prelude is not None and parent_run_id:
            self._prelude = with_parent([self._prelude], parent_run_id)[0]

    @property
    def pending(self) -> int:
        return len(self.journal) - self.written

    def say(self, line: str) -> None:
        print(line, file=self.out or sys.stderr, flush=True)

    def submit(self, step: Step) -> None:
        self.journal.append(step)
        if self.file is not None:
            jsonl.append(self.file, to_json(step), default=_plain)
        # While the store is down, try it again at most every retry_interval_s: a hanging
        # server costs the Tune driver one request timeout per try.
        if self._failed_at is None or time.time() - self._failed_at >= self.retry_interval_s:
            self.flush()

    def flush(self) -> bool:
        """Write the queue in order, stopping at the first step the store cannot take now.
        True when nothing is left. Never raises: MLflow's trouble must not end the search."""
        before = self.written
        try:
            return self._flush()
        finally:
            if self.file is not None and self.written > before:
                jsonl.append(self.file, {"written": self.written})

    def _write(self, step: Step) -> bool:
        """Write one step; False if the store is unreachable (a refused step is skipped)."""
        try:
            self.writer.write(step)
        except Exception as err:  # noqa: BLE001 - every failure is held or reported
            if is_outage(err):
                if self._failed_at is None:
                    self.say(f"tracking: {self.writer.tracking_uri} unreachable "
                              f"({_short(err)}); the search goes on and its records are "
                              "held and retried")
                self._failed_at = time.time()
                return False
            self.say(f"tracking: {self.writer.tracking_uri} refused {step.op} "
                      f"({_short(err)}); skipped")
        return True

    def _flush(self) -> bool:
        if self._prelude is not None:
            if not self._write(self._prelude):
                return False
            self._prelude = None
        while self.written < len(self.journal):
            if not self._write(self.journal[self.written]):
                return False
            self.written += 1
        if self._failed_at is not None:
            self.say(f"tracking: {self.writer.tracking_uri} reachable again; held records "
                      "written")
            self._failed_at = None
        return True

    def drain(self, window_s: float) -> bool:
        """Flush, retrying with backoff for up to window_s seconds. True when all is written."""
        deadline = time.time() + window_s
        wait = 1.0
        while not self.flush():
            left = deadline - time.time()
            if left <= 0:
                return False
            time.sleep(min(wait, left))
            wait = min(wait * 2, 10.0)
        return True

    def fall_back(self, directory: Path) -> str:
        """Replay the whole journal into a local SQLite store in `directory` and save it as JSON
        for a later import; return the one message that says where both are."""
        directory.mkdir(parents=True, exist_ok=True)
        journal_path = directory / "mlflow-journal.json"
        # The parent run the server already holds, if any: an import continues it, and the
        # local copy's parent is tagged with it.
        journal = with_parent(self.journal, self.writer.parent_run_id)
        save_journal(journal_path, self.writer.tracking_uri, journal)
        local_uri = f"sqlite:///{directory / 'mlflow-fallback.db'}"
        for name in ("mlflow.store.db.utils", "alembic"):  # table creation is not news here
            logging.getLogger(name).setLevel(logging.WARNING)
        local = MlflowWriter(local_uri, artifact_root=directory / "mlflow-fallback-artifacts")
        importing = (f"  import it into the server once it is back: python -m "
                     f"orchestrator.tracking.outbox {journal_path} --tracking-uri "
                     f"{self.writer.tracking_uri}")
        try:
            replay(local, journal)
        except Exception as err:  # noqa: BLE001 - the journal still holds every record
            return (f"tracking: {self.writer.tracking_uri} still unreachable and the local "
                    f"fallback store failed too ({_short(err)}); every record is in "
                    f"{journal_path}\n{importing}")
        return (f"tracking: {self.writer.tracking_uri} still unreachable at the end of the "
                f"search; {self.pending} held records were not written there. Nothing is lost: "
                f"the whole search is in {local_uri}\n"
                f"  view it: mlflow ui --backend-store-uri {local_uri} --workers 1\n{importing}")



def with_parent(journal: list[Step], parent_run_id: str | None) -> list[Step]:
    if not parent_run_id:
        return journal
    return [dataclasses.replace(step, parent_run_id=parent_run_id)
            if isinstance(step, StartSearch) else step for step in journal]


def replay(writer: MlflowWriter, journal: list[Step]) -> None:
    """Write every step of a journal, in order, raising on the first failure."""
    for step in journal:
        writer.write(step)


def save_journal(path: Path, tracking_uri: str, journal: list[Step]) -> None:
    steps = [to_json(step) for step in journal]
    path.write_text(json.dumps({"tracking_uri": tracking_uri, "steps": steps}, default=_plain))


def load_journal(path: Path) -> list[Step]:
    return [from_json(raw) for raw in json.loads(Path(path).read_text())["steps"]]


def read_file(path: Path) -> tuple[list[Step], int]:
    """A persisted outbox (see `Outbox.file`): its steps, and how many of them the store took."""
    steps: list[Step] = []
    written = 0
    for line in jsonl.read(path):
        if "written" in line:
            written = line["written"]
        else:
            steps.append(from_json(line))
    return steps, written


def _plain(value: Any) -> Any:  # numpy scalars and the like
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def _short(err: Exception) -> str:
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    cause = re.search(r"\[Errno -?\d+\] [^'\")]+|Read timed out|timed out", text)
    if cause:  # the reason under MLflow's and urllib3's wrapping
        return cause.group(0)
    return text if len(text) <= 200 else text[:200] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator.tracking.outbox",
        description="Import a search's tracking journal (written when its MLflow server was "
                    "unreachable) into an MLflow store; safe to run twice.")
    parser.add_argument("journal", help="mlflow-journal.json from the search's output folder")
    parser.add_argument("--tracking-uri", required=True, help="where to write it")
    args = parser.parse_args(argv)
    replay(MlflowWriter(args.tracking_uri), load_journal(args.journal))
    print(f"imported {args.journal} into {args.tracking_uri}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
