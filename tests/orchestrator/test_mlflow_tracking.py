"""What people see in MLflow, against a real `mlflow server`: the parent/child runs, params,
metrics by epoch, tags (status, env.*, best_trial, pareto), the artifacts; and that a server
outage mid-search, or one that never ends, loses and doubles nothing.

Trials are played through the real TrialBook and MlflowTracker with stand-ins for Tune's trial
objects (no Ray), so the outage can be placed exactly. Run: python -m pytest -q tests/orchestrator
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from orchestrator.folder import SearchFolder
from orchestrator.finish import write_results
from orchestrator.spec import SearchSpec
from orchestrator.tracking import MlflowTracker
from orchestrator.tracking.outbox import main as import_journal
from orchestrator.records import Role
from orchestrator.trial_book import TrialBook
from trainables.trial.sampling import SYSTEM_KEY, device_tags, node_tags, sample

pytestmark = [pytest.mark.integration, pytest.mark.mlflow_server]

# trial id -> (width, final accuracy, final train time, how it ends)
PLAN = {
    "t_best": (0.5, 0.90, 4.0, "completed"),  # most accurate, and faster than t_slow
    "t_fast": (0.25, 0.80, 2.0, "completed"),  # fastest: on the Pareto set, not the best
    "t_slow": (0.5, 0.70, 5.0, "completed"),  # dominated by t_best
    "t_diverged": (0.25, 0.10, 1.0, "diverged"),
    "t_pruned": (0.25, 0.50, 1.0, "pruned"),
    "t_failed": (0.5, 0.0, 0.0, "failed"),
}
EXPECTED_RUN_STATUS = {"completed": "FINISHED", "diverged": "FAILED", "pruned": "KILLED",
                       "failed": "FAILED"}
EPOCHS = 2


@dataclass
class FakeTrial:
    """The parts of a Tune trial that TrialBook reads."""

    trial_id: str
    config: dict
    error_file: str | None = None


class Search:
    """A search played event by event, as Tune would call the TrialBook."""

    def __init__(self, tmp: Path, name: str, uri: str, **tracker_options):
        self.spec = SearchSpec(name=name, epochs=EPOCHS, num_trials=len(PLAN),
                               output_dir=str(tmp / "runs"), tracking_uri=uri)
        self.objective = self.spec.make_objective()
        self.out_dir = tmp / "runs" / name
        self.out_dir.mkdir(parents=True)
        self.messages = io.StringIO()
        self.tracker = MlflowTracker(uri, fallback_dir=self.out_dir, out=self.messages,
                                     **tracker_options)
        self.book = _book(self.tracker)
        self.started = time.time()
        self.tmp = tmp

    def start(self) -> None:
        self.tracker.start_search(
            self.spec.name, params={"objective": self.objective.formula, "epochs": EPOCHS},
            artifacts={"spec.yaml": "name: x\n", "search_space.json": "{}",
                       "objective.txt": self.objective.formula})

    def play(self, trial_id: str, epochs: range = range(1, EPOCHS + 1), end: bool = True):
        width, acc, secs, ending = PLAN[trial_id]
        trial = FakeTrial(trial_id, {"width": width, "batch_size": 16})
        if epochs.start == 1:
            self.book.on_trial_start(0, [], trial)
        if ending == "failed":
            error = self.tmp / f"{trial_id}.txt"
            error.write_text("Traceback ...\nRuntimeError: worker lost\n")
            trial.error_file = str(error)
            self.book.on_trial_error(0, [], trial)
            return
        for epoch in epochs:
            last = epoch == EPOCHS
            status = "running" if ending == "pruned" or not last else ending
            if ending == "diverged":
                status = "diverged"
            metrics = {"epoch": epoch, "val_accuracy": acc * epoch / EPOCHS,
                       "val_score": acc * epoch / EPOCHS,
                       "train_time_s": secs * epoch / EPOCHS, "train_loss": 1.0 / epoch,
                       "samples_per_s": 100.0, "status": status,
                       SYSTEM_KEY: _system(first=epoch == 1)}
            self.book.on_trial_result(0, [], trial, self.objective(metrics))
            if ending == "diverged":
                break
        if end:
            self.book.on_trial_complete(0, [], trial)

    def play_all(self) -> None:
        for trial_id in PLAN:
            self.play(trial_id)

    def finish(self):
        from types import SimpleNamespace

        from orchestrator.stages import StageContext
        from orchestrator.tune import TuneStrategy

        wall = time.time() - self.started
        ctx = StageContext(spec=self.spec, prepared=SimpleNamespace(
            searched={"width": None}, base=self.spec.trial_base()),
            folder=SearchFolder(self.out_dir), book=self.book, tracker=self.tracker,
            out=io.StringIO(), fit=None, objective=self.objective)
        return write_results(ctx, TuneStrategy(), measured=None, wall_s=wall, cost_s=wall)


def _system(first: bool) -> dict:
    """What a trial's training process sends with a report: a sample of its node, and in its
    first report where it trains (trainables/trial/sampling.py)."""
    payload = {"samples": [[int(time.time() * 1000), sample([])]]}
    return {**payload, "tags": {**node_tags(), **device_tags()}} if first else payload


def _book(tracker, journal=None) -> TrialBook:
    book = TrialBook(tracker, out=io.StringIO(), journal=journal)
    book.begin(Role.TRIAL, planned=len(PLAN), epochs=EPOCHS)
    return book


def _runs(uri: str, name: str):
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(name)
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("orchestrator.role") == "search"]
    children = {r.data.tags["orchestrator.trial_id"]: r for r in runs
                if r.data.tags.get("orchestrator.role") == "trial"}
    assert len(children) == len(runs) - len(parents), "a trial was logged twice"
    return client, parents, children


def assert_complete(uri: str, name: str, parent_run_id: str | None = None,
                    restarted: tuple[str, ...] = ()) -> None:
    """Every trial of PLAN is in the store once, finished as planned, under one parent that holds
    every artifact; each epoch's metrics once (a `restarted` trial reported its epochs again)."""
    client, parents, children = _runs(uri, name)
    assert len(parents) == 1
    parent = parents[0]
    if parent_run_id:
        assert parent.info.run_id == parent_run_id
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["trials"] == len(PLAN)
    assert set(children) == set(PLAN)
    for trial_id, run in children.items():
        ending = PLAN[trial_id][3]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags["status"] == ending
        assert run.info.status == EXPECTED_RUN_STATUS[ending]
        assert run.data.params["width"] == str(PLAN[trial_id][0])
        if ending != "failed":
            assert "final_val_accuracy" in run.data.metrics
    for trial_id in ("t_best", "t_fast", "t_slow"):
        steps = [m.step for m in client.get_metric_history(children[trial_id].info.run_id,
                                                            "val_accuracy")]
        assert sorted(set(steps)) == [1, 2]  # step = epoch
        assert trial_id in restarted or len(steps) == 2
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"spec.yaml", "search_space.json", "objective.txt", "leaderboard.csv",
            "best_config.json", "pareto.png"} <= artifacts


def test_runs_params_metrics_tags_and_artifacts(mlflow_server, tmp_path):
    search = Search(tmp_path, "it-structure", mlflow_server.uri)
    search.start()
    search.play_all()
    result = search.finish()
    assert_complete(mlflow_server.uri, "it-structure", result.parent_run_id)
    assert search.messages.getvalue() == ""  # no outage, nothing to say

    client, _, children = _runs(mlflow_server.uri, "it-structure")
    tags = {tid: run.data.tags for tid, run in children.items()}
    assert [t for t in tags if tags[t]["best_trial"] == "true"] == ["t_best"]
    assert {t for t in tags if tags[t]["pareto"] == "true"} == {"t_best", "t_fast"}
    assert "worker lost" in tags["t_failed"]["failure_reason"]
    assert "stopped early" in tags["t_pruned"]["failure_reason"]  # says why it stopped
    env = tags["t_best"]
    assert env["env.torch"] == torch.__version__
    assert env["env.ray"] and env["env.optuna"] and env["env.device"]
    assert env["env.git_sha"] != "unknown"
    assert env["node.hostname"] and "system/cpu_utilization_percentage" in \
        children["t_best"].data.metrics  # from the trial's own reports

    local = Path(client.download_artifacts(result.parent_run_id, "pareto.png", str(tmp_path)))
    png = local.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert (search.out_dir / "pareto.png").read_bytes() == png


def test_resumed_search_reuses_its_parent_and_trial_runs(mlflow_server, tmp_path):
    first = Search(tmp_path / "a", "it-resume", mlflow_server.uri)
    first.start()
    first.play("t_best", range(1, 2), end=False)  # the search stops mid-trial
    parent = first.tracker.parent_run_id

    again = Search(tmp_path / "b", "it-resume", mlflow_server.uri, parent_run_id=parent)
    again.start()
    again.play_all()  # t_best restarts under the same trial id
    again.finish()
    assert_complete(mlflow_server.uri, "it-resume", parent, restarted=("t_best",))


def test_outage_mid_search_loses_and_doubles_nothing(mlflow_server, tmp_path):
    search = Search(tmp_path, "it-outage", mlflow_server.uri)
    search.start()
    search.play("t_best", range(1, 2), end=False)
    mlflow_server.stop()
    try:
        begun = time.time()
        search.play("t_best", range(2, EPOCHS + 1))
        for trial_id in list(PLAN)[1:]:
            search.play(trial_id)  # trials start, report and end while the store is down
        assert time.time() - begun < 10  # Tune's driver was not held up
        assert search.tracker.outbox.pending > 0
    finally:
        mlflow_server.start()
    result = search.finish()  # retries the held records: the server is back
    assert search.tracker.outbox.pending == 0
    said = search.messages.getvalue()
    assert said.count("unreachable") == 1 and "reachable again" in said
    assert result.tracking_uri == mlflow_server.uri
    assert_complete(mlflow_server.uri, "it-outage", result.parent_run_id)


def test_store_that_never_returns_falls_back_to_local_sqlite(mlflow_server, tmp_path):
    search = Search(tmp_path, "it-fallback", mlflow_server.uri, retry_window_s=2)
    search.start()
    search.play("t_best")
    parent = search.tracker.parent_run_id
    mlflow_server.stop()
    try:
        for trial_id in list(PLAN)[1:]:
            search.play(trial_id)
        result = search.finish()
    finally:
        mlflow_server.start()

    fallback = f"sqlite:///{search.out_dir / 'mlflow-fallback.db'}"
    said = search.messages.getvalue()
    assert said.count("still unreachable") == 1
    assert fallback in said and "mlflow ui --backend-store-uri" in said
    assert result.tracking_uri == fallback
    assert_complete(fallback, "it-fallback")  # the whole search, here

    # ... and the journal it names imports into the server once it is back, continuing the
    # parent run the server already had, without doubling the trial it already had.
    journal = search.out_dir / "mlflow-journal.json"
    assert str(journal) in said
    assert import_journal([str(journal), "--tracking-uri", mlflow_server.uri]) == 0
    assert_complete(mlflow_server.uri, "it-fallback", parent)
    assert import_journal([str(journal), "--tracking-uri", mlflow_server.uri]) == 0  # twice: same
    assert_complete(mlflow_server.uri, "it-fallback", parent)


def test_driver_death_during_an_outage_loses_nothing_and_resume_tags_every_trial(
        mlflow_server, tmp_path):
    """The records held through an outage are in the persisted outbox; the resumed driver writes
    them, deletes the cut-short trial's partial run, and tags trials of both drivers."""
    from mlflow.entities import ViewType

    outbox, journal = tmp_path / "mlflow-outbox.jsonl", tmp_path / "trials.jsonl"
    first = Search(tmp_path / "a", "it-dies", mlflow_server.uri, outbox_file=outbox)
    first.book = _book(first.tracker, journal)
    first.start()
    first.play("t_best")
    parent = first.tracker.parent_run_id
    mlflow_server.stop()
    try:
        first.play("t_fast")  # held: only in memory and in the outbox file
        first.play("t_slow", range(1, 2), end=False)  # cut short by the driver's death
        assert first.tracker.outbox.pending > 0
    finally:
        mlflow_server.start()
    del first  # the driver dies: nothing more is written from it

    again = Search(tmp_path / "b", "it-dies", mlflow_server.uri, outbox_file=outbox,
                   parent_run_id=parent)
    again.book = _book(again.tracker, journal)
    assert set(again.book.records) == {"t_best", "t_fast"} and again.book.cut_short == ["t_slow"]
    again.start()  # writes the dead driver's held records first
    again.book.discard_cut_short()
    for trial_id in list(PLAN)[2:]:
        again.play(trial_id)
    again.finish()
    assert_complete(mlflow_server.uri, "it-dies", parent)
    client, _, children = _runs(mlflow_server.uri, "it-dies")
    assert children["t_best"].data.tags["best_trial"] == "true"  # run by the first driver
    assert all("pareto" in run.data.tags for run in children.values())
    exp = client.get_experiment_by_name("it-dies")
    deleted = client.search_runs([exp.experiment_id], run_view_type=ViewType.DELETED_ONLY)
    assert [(r.data.tags["orchestrator.trial_id"], r.info.status) for r in deleted] == [
        ("t_slow", "KILLED")]
