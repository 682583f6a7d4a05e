"""Strategy 'screen' end to end on a local Ray (issue 21): the baseline's noise scale, a screen of
every combination (what cannot run found there, in seconds, and never trained), predictions
recorded with the trials they led to, the economics on the parent run, a Ctrl-C during the
confirmations and the resume, and a second search on the same data that starts from the first
one's measurements."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import statistics
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from orchestrator import SearchSpec, run_search
from orchestrator import jsonl
from orchestrator.interrupt import SearchInterrupted
from orchestrator.screen.knowledge import CONFIRM
from orchestrator.records import Role, read_journal
from orchestrator.screen.screening import ROUNDS
from orchestrator.stopper import validation_gate

pytestmark = pytest.mark.integration


def _spec(tmp_path: Path, data: str, name: str, **changes) -> SearchSpec:
    options = dict(
        name=name, data=data, num_trials=3, seed=0, strategy="screen",
        objective="match_baseline", full_epochs=4, tolerance=0.05,
        # batch 64 runs out of memory at its first step (tests/integration/faults.py)
        space={"batch_size": [16, 32, 64], "width": [0.25, 0.5]},
        base={"patch_size": 12, "lr": 0.01, "loader_workers": 0,
              "workload": "tests.integration.faults:ooms_at_big_batch"},
        output_dir=str(tmp_path / "runs"), tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    return SearchSpec(**{**options, **changes})


def test_screen_predict_confirm_then_a_second_search_starts_from_the_first(
        ray_session, tmp_path, monkeypatch):
    from orchestrator import history_baseline
    from tests.conftest import make_npz, sqlite_store

    # The machine runs at one speed throughout (what a moved speed does is
    # tests/integration/test_recurring_search.py's): a busy moment must not read as a new day.
    monkeypatch.setattr(history_baseline, "DRIFT_NOISE", float("inf"))

    data = make_npz(tmp_path / "tiny.npz", n=480, n_val=120)
    sqlite_store(tmp_path)  # the store _spec names, its tables made
    # Ctrl-C once the first confirmation has ended; the resume finishes the search.
    out = _CtrlC(when=("[trial 1/", "s wall"))
    with pytest.raises(SearchInterrupted):
        run_search(_spec(tmp_path, data, "first"), out=out)
    folder = tmp_path / "runs" / "first"
    kept, _ = read_journal(folder / "trials.jsonl")  # what a resume keeps
    confirmed = {t for t, rec in kept.items() if rec.role == Role.TRIAL}
    assert confirmed, out.getvalue()[-4000:]
    resumed_out = io.StringIO()
    first = run_search(_spec(tmp_path, data, "first"), out=resumed_out, resume=True)
    resumed = resumed_out.getvalue()
    assert "resuming: stages done ['baseline', 'predict', 'screen']" in resumed, resumed
    printed = out.getvalue() + resumed
    # What was confirmed before the stop stands and is not run again; the measurements hold
    # every confirmation once, the ones before the stop included.
    trials = first.trials[first.trials["role"] == "trial"]
    assert confirmed <= set(trials["trial_id"])
    assert not any(f"{t}] start" in resumed for t in confirmed)
    measured = jsonl.read(next((tmp_path / "runs" / "measurements").glob("*.jsonl")))
    remembered = [e["trial_id"] for e in measured if e["kind"] == CONFIRM]
    assert sorted(remembered) == sorted(trials["trial_id"]), (remembered, printed)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert "RUNNING" not in {r.info.status for r in client.search_runs(
        [client.get_experiment_by_name("first").experiment_id])}

    # The baseline measured its gradient noise scale along its run.
    assert [e for e, _ in first.baseline["noise"]] and first.baseline["epochs"] == 4
    # The screen timed every combination (and a switch for the fastest); what cannot run was
    # found there and never got a trial.
    saved = json.loads((folder / "screen.json").read_text())
    screened = saved["results"]
    assert len(screened) >= 6
    # The baseline's own settings in the optimized loop, timed beside them.
    assert saved["loop_alone"]["config"]["loop"] == "optimized"
    big = [r for r in screened if r["config"]["batch_size"] == 64]
    assert big and {r["status"] for r in big} == {"infeasible"}
    assert all("out of memory" in r["reason"] for r in big)
    ran = [r for r in screened if r["status"] == "completed"]
    assert ran and all(r["samples_per_s"] > 0 and r["peak_mb"] > 0 for r in ran)
    # The contenders were timed again, in rounds of their own: their step is the rounds' median.
    rounded = [r for r in ran if len(r.get("rounds", [])) == ROUNDS]
    assert rounded and all(r["step_s"] == statistics.median(r["rounds"]) for r in rounded)
    assert f"{len(rounded)} contenders in {ROUNDS} rounds" in printed
    predictions = json.loads((folder / "predictions.json").read_text())
    assert predictions and 64 not in {p["config"]["batch_size"] for p in predictions}
    assert len(trials) >= 1 and 64 not in set(trials["batch_size"])
    # Each trial carries the prediction it was run on, and the same re-timed at its start
    # (its own step, timed in its process before its first epoch).
    assert trials["predicted_time_to_target_s"].notna().all()
    assert trials["predicted_at_start_s"].notna().all()
    assert "screen:" in printed and "predict:" in printed

    # The economics are printed and on the parent run.
    assert any(line.startswith("search cost") and "baseline runs" in line
               for line in first.notes)
    parent = client.get_run(first.parent_run_id)
    assert parent.data.metrics["search_cost_baseline_runs"] > 0
    artifacts = {a.path for a in client.list_artifacts(first.parent_run_id)}
    assert {"screen.json", "predictions.json", "baseline.json"} <= artifacts
    # The race reads each confirmation's curve from early on: it validates from its first
    # epoch (no loss gate); the measured run skips the validations that cannot decide it: its
    # gate is the baseline's training loss where the baseline first reached the target, doubled.
    gate = validation_gate(first.baseline, first.baseline["val_score"] - 0.05)
    assert [e for e, _ in first.baseline["losses"]] == [1, 2, 3, 4] and gate
    runs = client.search_runs([client.get_experiment_by_name("first").experiment_id])
    by_role = {}
    for r in runs:
        if "width" in r.data.params:
            by_role.setdefault(r.data.tags.get("orchestrator.role"), set()).add(
                r.data.params.get("val_skip_above_loss"))
    assert by_role["trial"] == {"null"} and \
        by_role.get("measured", {str(gate["val_skip_above_loss"])}) == \
        {str(gate["val_skip_above_loss"])}, by_role
    assert (folder / "economics.json").is_file() and first.economics["target"] == \
        pytest.approx(first.baseline["val_score"] - 0.05)
    # The measured run keeps its pace beside its confirmation's: the summary holds them together.
    answer = json.loads((folder / "measured.json").read_text())
    assert answer["samples_per_s"] > 0 and answer["confirmed_samples_per_s"] > 0, answer
    paced = answer["samples_per_s"] / answer["confirmed_samples_per_s"]
    assert first.economics["pace_vs_confirmation"] == (
        pytest.approx(paced) if answer["reached"] else None)

    # A second search on the same workload and data, against the first one's baseline: it
    # says what it learns from, times nothing again, and retries nothing the first settled.
    # Its budget is the question's: the first's confirmations count against its --trials.
    out = io.StringIO()
    second = run_search(_spec(tmp_path, data, "second", num_trials=4,
                              baseline=str(folder / "baseline.json")), out=out)
    printed = out.getvalue()
    assert "learning from 1 earlier search(es)" in printed
    # Every combination the first screened is known; only a switch variant or a contender that
    # the second's ranking (on the first's re-timed steps) asks for anew may be timed.
    known = re.search(r"screen: (\d+) configurations timed in [\d.]+ s \((\d+) known from "
                      r"earlier searches\)", printed)
    combinations = sum("channels_last" not in r["config"] for r in screened)
    assert known and int(known.group(2)) >= combinations, printed
    again = second.trials[second.trials["role"] == "trial"]
    assert len(again) <= 4 - len(trials), printed
    columns = [*first.knobs, "planned_epochs"]
    assert columns == [*second.knobs, "planned_epochs"] and "channels_last" in columns
    assert not {tuple(r) for r in again[columns].values} & {tuple(r) for r in
                                                           trials[columns].values}
    earlier = second.trials[second.trials["role"] == "earlier"]
    assert len(earlier) >= 1  # what the first reached is a row of the second, not a new trial

    # Run again with the first's budget, the search answers from what is known: no trial.
    out = io.StringIO()
    third = run_search(_spec(tmp_path, data, "third", baseline=str(folder / "baseline.json")),
                       out=out)
    assert not len(third.trials[third.trials["role"] == "trial"]), out.getvalue()
    assert third.best is not None and third.best["trial_id"] in set(
        first.trials["trial_id"]) | set(again["trial_id"])


class _CtrlC(io.StringIO):
    """The search's output; sends this process SIGINT (Ctrl-C) once, on the first line that
    holds every part of `when`."""

    def __init__(self, when: tuple[str, ...]):
        super().__init__()
        self.when = when

    def write(self, text: str) -> int:
        if self.when and all(part in text for part in self.when):
            self.when = ()
            os.kill(os.getpid(), signal.SIGINT)
        return super().write(text)
