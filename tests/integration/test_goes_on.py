"""The winner's measured run goes on from its race checkpoint and is the run handed over.

A race contender trains warmup-stable-decay with its warm-up counted in epochs
(orchestrator/screen/race.py `contender_schedule`); the measured run of the winner, E epochs on
the same warm-up, goes on from the contender's last checkpoint (the race stopped it at d < E,
inside the stretch both schedules share) and trains E - d epochs. That holds only if it is the
run a user gets from `best_config.json`: trained whole, through the same Ray trial path, it
must score the same epoch for epoch. A long job of a tiny model: 24 epochs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch

from orchestrator import SearchSpec, jsonl, run_search, train_config
from orchestrator.lengths import decay_epoch
from orchestrator.screen.race import WARMUP_SHARE, horizon
from trainables.trial.worker import CHECKPOINT_FILE

pytestmark = pytest.mark.integration


def _ended(folder, role: str) -> list[dict]:
    return [t for t in jsonl.read(folder / "trials.jsonl") if t["role"] == role and t["ended"]]


# In the trial's own process its checkpoints are Tune's; in a worker group (what a multi-GPU
# trial is), Ray Train's, which its reports name. A group waits for Tune to take each report
# (trainables/trial/reports.py): before it did, its winner had trained on and dropped the
# reported checkpoint by the time the stop reached it (once in CI).
@pytest.mark.parametrize("group", [False, True], ids=["in-process", "worker-group"])
def test_the_measured_run_goes_on_from_its_contender_and_is_the_run_handed_over(
        ray_session, tmp_path, group):
    from tests.conftest import make_npz, sqlite_store

    data = make_npz(tmp_path / "tiny.npz", n=480, n_val=120)
    sqlite_store(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = io.StringIO()
    # A slow lr: the baseline reaches its target late enough in 24 epochs that the winner's
    # measured run outlasts its contender's warm-up (a quarter of the share of its plan the
    # race reads).
    run_search(SearchSpec(
        name="long", data=data, strategy="screen", full_epochs=24, num_trials=1,
        tolerance=0.01, seed=0, space={"precision": ["fp32", "bf16-mixed"]},
        base={"batch_size": 16, "lr": 3e-4, "patch_size": 12, "width": 0.25,
              "loader_workers": 0}, always_use_worker_group=group,
        output_dir=str(tmp_path / "runs"), tracking_uri=uri), out=out)
    printed = out.getvalue()
    folder = tmp_path / "runs" / "long"
    (contender,) = _ended(folder, "trial")
    assert contender["knobs"]["schedule"] == "wsd", contender["knobs"]
    baseline = json.loads((folder / "baseline.json").read_text())
    share = horizon(baseline, json.loads((folder / "economics.json").read_text())["target"])
    assert contender["knobs"]["warmup_epochs"] == pytest.approx(
        WARMUP_SHARE * share * contender["knobs"]["epochs"])
    measured = json.loads((folder / "measured.json").read_text())
    went_on = measured["continued_from"]
    assert measured["reached"] and went_on == contender["epochs"], printed
    assert 0 < went_on < measured["epochs"] and measured["continued_trial"] == \
        contender["trial_id"]
    assert f"the first {went_on} its contender's ({contender['trial_id']})" in printed
    # Its first epochs are the contender's points, on the contender's clock.
    assert measured["curve"][:went_on] == contender["curve"][:went_on]
    assert [p[0] for p in measured["curve"]] == list(range(1, measured["epochs"] + 1))
    run = _ended(folder, "measured")[-1]
    assert run["metrics"]["restarts"] == 0 and run["curve"][0][0] == went_on + 1
    assert run["metrics"]["train_time_s"] == measured["train_time_s"] > contender["metrics"][
        "train_time_s"]

    # It kept its checkpoint where its decay began: a longer run of it would go on from there
    # (orchestrator/lengths.py), where that is past the epoch it went on from itself.
    keep = decay_epoch(measured["config"])
    if keep > went_on:
        assert measured["decay_epoch"] == keep, measured
        saved = torch.load(Path(measured["decay_checkpoint"]) / CHECKPOINT_FILE,
                           weights_only=True)
        assert saved["state"]["epoch"] == keep
    else:
        assert "decay_checkpoint" not in measured, (keep, went_on)

    if group:
        return  # the same run either way: trained whole once, in the trial's own process
    # What best_config.json hands over, trained whole through the same trial path: the same
    # scores and losses, epoch for epoch.
    train_config(folder / "best_config.json", data=data, output_dir=str(tmp_path / "runs"),
                 tracking_uri=uri, name="whole")
    (whole,) = [t for t in jsonl.read(tmp_path / "runs" / "whole" / "trials.jsonl")
                if t["ended"]]
    assert whole["epochs"] == measured["epochs"]
    assert [p[0] for p in whole["curve"]] == [p[0] for p in measured["curve"]]
    assert [p[1] for p in whole["curve"]] == pytest.approx(
        [p[1] for p in measured["curve"]], rel=1e-5)
    assert [loss for _, loss in whole["losses"][went_on:]] == pytest.approx(
        [loss for _, loss in run["losses"]], rel=1e-5)
