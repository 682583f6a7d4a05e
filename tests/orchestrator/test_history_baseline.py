"""A baseline taken from history (orchestrator/history_baseline.py): whose clock its seconds
are on, held to this machine's speed where it drifted since, and what this tool's MLflow run
gives back of its learning (no Ray)."""

from __future__ import annotations

import math

import pytest


def test_a_run_from_history_is_on_this_clock_only_as_this_tool_recorded_it_here():
    from orchestrator.history_baseline import record, same_clock

    curve = [[1, 0.6, 10.0], [2, 0.8, 19.0]]
    ours = {"source": "runs:/r", "curve": curve, "settings": {}, "seconds_from": "train_time_s",
            "machine_kind": "here", "task": "built-in classifier"}
    assert same_clock(ours, "here", "built-in classifier", {})
    assert not same_clock(ours, "an H100", "built-in classifier", {})  # another machine kind
    assert not same_clock(ours, "here", "your task", {})  # another model or loss
    assert not same_clock(ours, "here", "built-in classifier", {"batch_size": 100})
    assert not same_clock({**ours, "seconds_from": "the run's wall clock"}, "here",
                          "built-in classifier", {})
    assert not same_clock({**ours, "machine_kind": None, "task": None}, "here",
                          "built-in classifier", {})  # your own run, or a CSV: timed here
    kept = record(ours, {}, None, "folder", "id", own_clock=True)
    assert kept["train_time_s"] == 19.0 and kept["curve"] == curve and kept["clock"] == "recorded"
    step = {"status": "completed", "steps_per_epoch": 10, "step_s": 0.5, "one_off_s": 1.0}
    timed = record(ours, {}, step, "folder", "id")
    assert timed["train_time_s"] == pytest.approx(1.0 + 2 * 5.0) and timed["clock"] == "timed here"
    with pytest.raises(RuntimeError, match="could not be timed here"):
        record(ours, {}, {"status": "infeasible", "reason": "out of memory"}, "folder", "id")


def test_a_run_of_this_tool_is_scaled_where_the_machine_drifted_since():
    """One machine kind is not one speed: the step the run timed before its training is held
    against its step timed here. Within DRIFT_NOISE the recorded seconds stand; beyond it they
    are scaled by the ratio, slower or faster (on the same VM kind, unet3d's 84-s baseline
    timed its step 1.6x slower on another day). Nothing to hold it against: as recorded."""
    from orchestrator.baseline import result_line
    from orchestrator.history_baseline import (DRIFT_NOISE, clock_of, clock_settings, drifted,
                                               record, timed_step, times_here)

    curve = [[1, 0.6, 10.0], [2, 0.8, 19.0]]
    ours = {"source": "runs:/r", "curve": curve, "settings": {}, "seconds_from": "train_time_s",
            "machine_kind": "here", "task": "built-in classifier", "start_step_s": 0.04}

    def here(*steps):
        return timed_step([{"status": "completed", "step_s": s, "steps_per_epoch": 10}
                           for s in steps])

    same = record(ours, {}, here(0.041, 0.046, 0.039), "folder", "id", own_clock=True)
    assert same["drift"] == pytest.approx(0.041 / 0.04)  # the median of the rounds
    assert same["clock"] == "recorded" and same["train_time_s"] == 19.0
    assert "the same clock: 0.0410 s a step here against 0.0400 s" in result_line("x", same)
    slower = record(ours, {}, here(0.064, 0.066, 0.062), "folder", "id", own_clock=True)
    assert slower["drift"] == pytest.approx(1.6) and slower["train_time_s"] == pytest.approx(30.4)
    assert [t for _, _, t in slower["curve"]] == pytest.approx([16.0, 30.4])
    assert slower["history_seconds"] == curve and slower["recorded_step_s"] == 0.04
    assert "scaled 1.60x" in result_line("x", slower) and "19.0 s as recorded" in \
        result_line("x", slower)
    faster = record(ours, {}, here(0.02), "folder", "id", own_clock=True)
    assert faster["train_time_s"] == pytest.approx(9.5)
    # The edge: within the noise stands, past it scales.
    assert not drifted(1 + DRIFT_NOISE - 1e-9) and drifted(1 + DRIFT_NOISE + 1e-9)
    assert not drifted(1 / (1 + DRIFT_NOISE) + 1e-9) and drifted(1 / (1 + DRIFT_NOISE) - 1e-9)
    # Timed here: every run not on its own clock; this tool's where it timed its step then.
    assert times_here({}, False) and times_here(ours, True)
    assert not times_here({**ours, "start_step_s": None}, True)
    # The clock a search reuses earlier timings by: the step its baseline's seconds are on.
    assert clock_of(same) == 0.04 and clock_of(slower) == pytest.approx(0.064)
    assert clock_of(record(ours, {}, here(0.05), "f", "i")) == 0.05  # each epoch took it
    assert clock_of({"start_step_s": 0.03}) == 0.03 and clock_of(None) is None
    # What it is the step of: the settings, but the length and the seed.
    assert clock_settings({"config": {"epochs": 8, "seed": 0}}) == \
        clock_settings({"config": {"epochs": 32, "seed": 1}}) != \
        clock_settings({"config": {"epochs": 8, "batch_size": 100}})
    # Timed by its search the way this search times it (`clock_step_s`): held against that, not
    # the trial's own start step, timed in a busier process (0.0142 s against 0.0107-0.0128 s
    # for the classifier's baseline on an idle machine: scaled 0.76x for no move).
    timed_alike = {**ours, "start_step_s": 0.0142, "clock_step_s": 0.0112}
    kept = record(timed_alike, {}, here(0.0107), "folder", "id", own_clock=True)
    assert kept["drift"] == pytest.approx(0.0107 / 0.0112) and kept["train_time_s"] == 19.0
    assert kept["recorded_step_s"] == 0.0112 and clock_of(kept) == 0.0112
    assert record({**timed_alike, "clock_step_s": None}, {}, here(0.0102), "f", "i",
                  own_clock=True)["drift"] == pytest.approx(0.0102 / 0.0142)
    assert times_here({**ours, "start_step_s": None, "clock_step_s": 0.01}, True)
    assert clock_of({"start_step_s": 0.03, "clock_step_s": 0.02}) == 0.02
    # Nothing to hold it against (a run before start_step_s was recorded, a timing that failed).
    for history, step in (({**ours, "start_step_s": None}, here(0.064)),
                          (ours, timed_step([{"status": "infeasible", "reason": "oom"}]))):
        kept = record(history, {}, step, "folder", "id", own_clock=True)
        assert kept["train_time_s"] == 19.0 and kept["drift"] is None
        assert "(the same clock)" in result_line("x", kept)


def test_the_step_is_the_faster_of_two_readings_so_a_busy_moment_scales_nothing():
    """One reading is a few steps within a tenth of a second; a busy moment of the machine
    moved all three rounds of one (0.0159-0.0179 s against 0.0107-0.0112 s before and after)
    and scaled an unmoved baseline 1.50x. The faster reading is the step, and both are kept; a
    reading that failed does not count, and where none ran the first failure is the record."""
    from orchestrator.history_baseline import at_todays_speed, steadiest, timed_step

    def reading(*steps):
        return timed_step([{"status": "completed", "step_s": s, "steps_per_epoch": 250}
                           for s in steps])

    busy, steady = reading(0.0159, 0.0160, 0.0179), reading(0.0110, 0.0112, 0.0115)
    step = steadiest([busy, steady])
    assert step["step_s"] == 0.0112 and step["readings"] == [0.0160, 0.0112]
    recorded = {"kind": "seeds", "config": {}, "status": "completed", "val_score": 0.77,
                "train_time_s": 58.2, "curve": [[15, 0.77, 58.2]], "clock_step_s": 0.0106}
    assert at_todays_speed(recorded, busy)["train_time_s"] == pytest.approx(58.2 * 0.016 / 0.0106)
    assert at_todays_speed(recorded, step)["train_time_s"] == 58.2  # not scaled: same speed
    failed = {"status": "failed", "reason": "oom"}
    assert steadiest([failed, steady])["step_s"] == 0.0112
    assert steadiest([failed, {"status": "failed"}]) == failed and steadiest([]) is None


def test_a_recorded_baseline_json_is_held_to_todays_speed_once():
    """A search's baseline.json given by path is held to this machine's speed as this tool's
    run from history is: within the noise as recorded; beyond it every one of its seconds
    scaled, and its step now today's, so given again it is not scaled twice."""
    from orchestrator.baseline import result_line
    from orchestrator.history_baseline import at_todays_speed, clock_of

    recorded = {"kind": "seeds", "config": {}, "status": "completed", "val_score": 0.8,
                "train_time_s": 20.0, "full_run_s": 20.0, "time_to_score_s": 18.0,
                "curve": [[1, 0.6, 10.0], [2, 0.8, 20.0]], "start_step_s": 0.04}

    def here(step):
        return {"status": "completed", "step_s": step, "steps_per_epoch": 10}

    same = at_todays_speed(recorded, here(0.044))
    assert same["train_time_s"] == 20.0 and same["curve"] == recorded["curve"]
    assert "scaled" not in result_line("b.json", same)
    slower = at_todays_speed(recorded, here(0.08))
    assert slower["drift"] == pytest.approx(2.0) and slower["recorded_train_time_s"] == 20.0
    assert [slower[k] for k in ("train_time_s", "full_run_s", "time_to_score_s")] == \
        pytest.approx([40.0, 40.0, 36.0])
    assert [t for _, _, t in slower["curve"]] == pytest.approx([20.0, 40.0])
    assert "scaled 2.00x" in result_line("b.json", slower) and "20.0 s as recorded" in \
        result_line("b.json", slower)
    assert clock_of(same) == 0.04 and clock_of(slower) == 0.08  # what the search reuses by
    again = at_todays_speed(slower, here(0.08))  # its step is today's now: not scaled twice
    assert again["train_time_s"] == pytest.approx(40.0) and again["drift"] == pytest.approx(1.0)
    assert at_todays_speed(recorded, {"status": "failed"})["train_time_s"] == 20.0
    # Its search timed its step as this one does: that is what today's is held against.
    timed_alike = {**recorded, "start_step_s": 0.05, "clock_step_s": 0.04}
    assert at_todays_speed(timed_alike, here(0.039))["train_time_s"] == 20.0
    assert at_todays_speed({**timed_alike, "clock_step_s": None}, here(0.039))["drift"] == \
        pytest.approx(0.78)
    assert clock_of(at_todays_speed(timed_alike, here(0.08))) == 0.08


def test_a_run_from_mlflow_keeps_what_it_measured_of_its_learning(tmp_path):
    """A search whose baseline is this tool's MLflow run predicts as one from its baseline.json:
    the run's noise scale (where it was measured) and training loss per epoch come back with
    its curve. Without them a classifier search at 60 epochs fell back to the square-root rule
    and planned batch 128 for 120 epochs where the same baseline's file planned 67. A run of
    your own without them keeps none."""
    import mlflow

    from orchestrator.history_baseline import load, record

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("history")
    search = client.create_run(experiment).info.run_id
    client.log_param(search, "task", "built-in classifier")
    ours = client.create_run(experiment, tags={"mlflow.parentRunId": search}).info.run_id
    yours = client.create_run(experiment).info.run_id
    for run in (ours, yours):
        for epoch, score in [(1, 0.5), (2, 0.7), (3, 0.8)]:
            client.log_metric(run, "val_score", score, step=epoch)
            client.log_metric(run, "train_time_s", 10.0 * epoch, step=epoch)
        for epoch, loss in [(1, 2.1), (2, float("nan")), (3, 1.5)]:
            client.log_metric(run, "train_loss", loss, step=epoch)
    for epoch, noise in [(1, 580.0), (3, 945.0)]:
        client.log_metric(ours, "noise_scale", noise, step=epoch)
    for run in (ours, yours):
        client.log_metric(run, "start_step_s", 0.04)
        client.log_metric(run, "clock_step_s", 0.03, step=3)
    history = load(f"runs:/{ours}", uri)
    assert history["clock_step_s"] == 0.03  # timed by its search as a search times it
    assert history["noise"] == [[1, 580.0], [3, 945.0]]
    assert history["losses"] == [[1, 2.1], [3, 1.5]]  # what is not a number is left out
    assert history["start_step_s"] == 0.04  # the step it timed before training
    kept = record(history, {}, None, "folder", "id", own_clock=True)
    assert kept["noise"] == history["noise"] and kept["noise_scale"] == 945.0
    assert kept["losses"] == history["losses"]
    yours_history = load(f"runs:/{yours}", uri)
    assert yours_history["start_step_s"] is None  # your own run's metric may mean anything
    assert yours_history["clock_step_s"] is None
    own = record(yours_history, {}, {"status": "completed", "step_s": 0.1, "steps_per_epoch": 5},
                 "folder", "id")
    assert own["noise"] == [] and own["losses"] == [] and math.isnan(own["noise_scale"])


def _readings(*steps):
    """`reading()` for history_baseline.read_step: each call the next step, timed as one."""
    from orchestrator.history_baseline import timed_step

    left = list(steps)
    return lambda: timed_step([{"status": "completed", "step_s": left.pop(0),
                                "steps_per_epoch": 54}])


def test_a_slow_stretch_of_an_unmoved_machine_scales_nothing():
    """Two readings in a slow stretch (0.0765 and 0.0693 s against the 0.0511 s its first search
    timed) scaled an unmoved 80-s baseline 1.36x, where its screen re-timed the same
    configurations at 0.98x: an idle machine's readings spread that far. They are within the
    noise now; readings beyond it are confirmed, spread further: one within, and the recorded
    seconds stand; where every one says the speed moved, they are scaled, by the fastest (the
    smaller baseline)."""
    from orchestrator.history_baseline import (CONFIRM_READINGS, READINGS, at_todays_speed,
                                               moved, read_step)

    recorded = {"kind": "seeds", "config": {}, "status": "completed", "val_score": 0.95,
                "train_time_s": 80.0, "curve": [[16, 0.95, 80.0]], "clock_step_s": 0.0511}
    waits = []
    that_evening = read_step(_readings(0.0765, 0.0693), 0.0511, waits.append)
    assert at_todays_speed(recorded, that_evening)["train_time_s"] == 80.0 and len(waits) == 1
    timed = read_step(_readings(0.081, 0.079, 0.084, 0.066, 0.09), 0.0511, waits.append)
    assert timed["readings"] == [0.081, 0.079, 0.084, 0.066]  # it stopped at one within
    assert len(waits) == 4 and waits[-1] > waits[1]  # spread further than the first two
    kept = at_todays_speed(recorded, timed)
    assert kept["train_time_s"] == 80.0 and "clock" not in kept
    assert kept["drift"] == pytest.approx(0.066 / 0.0511)

    slower = [0.083, 0.086, 0.081, 0.09, 0.084, 0.088, 0.085, 0.087]  # a slower day: every reading says so
    timed = read_step(_readings(*slower), 0.0511, lambda s: None)
    assert len(timed["readings"]) == READINGS + CONFIRM_READINGS
    scaled = at_todays_speed(recorded, timed)
    assert scaled["train_time_s"] == pytest.approx(80.0 * 0.081 / 0.0511)
    assert scaled["clock_step_s"] == 0.081

    # Nothing to hold it against: two readings, no more.
    assert len(read_step(_readings(0.2, 0.2), None, lambda s: None)["readings"]) == 2
    # Faster: every reading beyond the noise below it, else the speed did not move.
    assert moved(0.0511, {"status": "completed", "step_s": 0.03, "readings": [0.03, 0.04]}) \
        is None
    assert moved(0.0511, {"status": "completed", "step_s": 0.03, "readings": [0.03, 0.032]}) \
        == pytest.approx(0.03 / 0.0511)


def test_the_clock_benchmark_counts_what_an_unmoved_machine_misreads(monkeypatch):
    """benchmarks/clock_readings.py's count, on pairs read on one idle evening against its
    first search's 0.0511 s: at the old line (35%) three of four read a moved speed; at today's,
    by every reading, none."""
    from benchmarks.clock_readings import summary
    from orchestrator import history_baseline

    pairs = [[0.0511, 0.06], [0.0724, 0.0798], [0.0736, 0.072], [0.0746, 0.0762],
             [0.0566, 0.0743]]
    today = summary(pairs)
    assert today["moved"] == 0 and today["against"] == 4 and today["then"] == 0.0511
    assert (today["low"], today["high"], today["pair_high"]) == (0.0511, 0.0798, 0.0746)
    monkeypatch.setattr(history_baseline, "DRIFT_NOISE", 0.35)
    assert summary(pairs)["moved"] == 3
