"""A search asked again stands by its answer (issue 38, item 6), through the Python API with a
model given as a function: the same model, data, machine kind, speed and target settle
everything the first search measured, so the second trains nothing (no baseline, no
confirmation, no measured run), costs a fraction of the first and hands over the same
configuration; a second model on the same data, in the same output folder, shares nothing with
the first; and where the machine's speed moved since, nothing timed at the old speed is reused.

Whether this machine runs at the first search's speed is measured (a millisecond step on a busy
2-core machine can time 25% apart): the tests about reuse hold the speed (`same_speed`), the
one about a moved speed moves it by 10x in the first's measurements."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import pytest
from torch import nn

from orchestrator import SearchSpec, history_baseline, jsonl, run_search

pytestmark = pytest.mark.integration


def small(cfg, meta):
    c = max(4, round(8 * cfg.width))
    return nn.Sequential(nn.Conv2d(meta.in_channels, c, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, meta.num_classes))


def other(cfg, meta):  # another model: its own measurements
    c = max(4, round(6 * cfg.width))
    return nn.Sequential(nn.Conv2d(meta.in_channels, c, 5, padding=2), nn.ReLU(),
                         nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(c, meta.num_classes))


def _spec(tmp_path: Path, data: dict, model, name: str) -> SearchSpec:
    return SearchSpec(name=name, model=model, data=data, strategy="screen", full_epochs=6,
                      num_trials=2, tolerance=0.05, seed=0,
                      space={"precision": ["fp32", "bf16-mixed"], "width": [0.5, 1.0]},
                      base={"batch_size": 32, "lr": 0.03, "patch_size": None},
                      output_dir=str(tmp_path / "runs"),
                      tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")


def _whole_screens(folder: Path) -> list[dict]:
    """The whole screens the searches in `folder` recorded for the small model."""
    (path,) = [p for p in (folder / "runs" / "measurements").glob("*.jsonl")
               if "small" in p.name]
    return [e for e in jsonl.read(path) if e["kind"] == "whole_screen"]


def _trained(out: str) -> list[str]:
    """The trials a search's output says it started."""
    return [line for line in out.splitlines() if line.startswith("[") and "] start" in line]


@pytest.fixture(scope="module")
def first(ray_session, tmp_path_factory):
    """(folder, data, the first search's result, its printed output): one search of the `small`
    model, which both tests ask again in their own ways."""
    import numpy as np

    from tests.conftest import make_npz, sqlite_store

    tmp_path = tmp_path_factory.mktemp("recurring")
    with np.load(make_npz(tmp_path / "tiny.npz", n=320, n_val=80, size=12, channels=1)) as f:
        data = {k: f[k] for k in ("x", "y", "x_val", "y_val")}
    sqlite_store(tmp_path)
    out = io.StringIO()
    result = run_search(_spec(tmp_path, data, small, "mine"), out=out)
    return tmp_path, data, result, out.getvalue()


@pytest.fixture
def same_speed(monkeypatch):
    """This machine runs at the first search's speed, whatever a busy moment times."""
    monkeypatch.setattr(history_baseline, "DRIFT_NOISE", math.inf)


def test_a_repeated_search_trains_nothing_and_hands_over_the_same_answer(first, same_speed):
    tmp_path, data, first, first_out = first
    assert first.economics is not None, first_out[-3000:]
    assert _trained(first_out)  # its baseline at least
    predicted = (Path(first.output_dir) / "predictions.json").read_text()

    out = io.StringIO()
    again = run_search(_spec(tmp_path, data, small, "mine"), out=out)  # the same folder, anew
    printed = out.getvalue()
    assert _trained(printed) == [], printed  # nothing trains: not the baseline, not a trial
    assert "recorded by" in printed  # the baseline an earlier search recorded
    # The first's screen, whole: a contender's re-timed rounds must not re-rank the screen
    # (that picked other switch variants, and confirmed one the first never predicted).
    assert (Path(again.output_dir) / "predictions.json").read_text() == predicted
    assert again.baseline["val_score"] == first.baseline["val_score"]
    # The same answer, to the byte, and the same speedup: nothing was re-measured.
    assert again.best_config == first.best_config
    for key in ("speedup", "found_s", "baseline_s", "target"):
        assert again.economics[key] == first.economics[key], key
    assert again.economics["search_cost_s"] <= 0.5 * first.economics["search_cost_s"]
    folder = Path(again.output_dir)
    assert json.loads((folder / "economics.json").read_text()) == again.economics

    # Another model on the same data, in the same folder: it learns nothing from the first.
    out = io.StringIO()
    run_search(_spec(tmp_path, data, other, "theirs"), out=out)
    printed = out.getvalue()
    assert "learning from" not in printed and "recorded by" not in printed, printed
    assert "[baseline" in printed  # its own baseline trains
    files = sorted((tmp_path / "runs" / "measurements").glob("*.jsonl"))
    assert len(files) == 2 and any("small" in f.name for f in files) and \
        any("other" in f.name for f in files)


def test_a_baseline_from_history_trains_no_baseline(first, tmp_path):
    """`--baseline runs:/RUN_ID` (a run an earlier search recorded in MLflow) and a CSV of
    epoch, seconds, score: the search trains no baseline and compares on this machine's clock:
    the run's own training time where this tool recorded it on this machine kind, its step
    timed here for the CSV (issue 41). In a folder of their own: nothing known of their
    model."""
    from mlflow.tracking import MlflowClient

    store, data, first, _ = first
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    (run,) = [r for r in client.search_runs(
        [client.get_experiment_by_name("mine").experiment_id])
        if r.data.tags.get("orchestrator.trial_id") == first.baseline["trial_id"]]
    csv = tmp_path / "today.csv"
    csv.write_text("epoch,seconds,score\n" + "".join(
        f"{e},{t},{s}\n" for e, s, t in first.baseline["curve"]))
    # The run's own model (its folder here holds nothing of it), then another model for the CSV.
    for name, baseline, model in (("from-mlflow", f"runs:/{run.info.run_id}", small),
                                  ("from-csv", str(csv), other)):
        spec = _spec(tmp_path, data, model, name)
        spec.baseline, spec.num_trials = baseline, 1
        spec.tracking_uri = f"sqlite:///{store / 'mlflow.db'}"  # where its run is
        out = io.StringIO()
        result = run_search(spec, out=out)
        printed = out.getvalue()
        assert "[baseline" not in printed, printed  # not trained again
        record = result.baseline
        if name == "from-mlflow":  # this tool's run of this task here: its clock is ours,
            assert "its recorded training time" in printed, printed  # checked against today's
            # its step as its search timed it before it trained, on its MLflow run too
            assert run.data.metrics["clock_step_s"] == first.baseline["clock_step_s"] > 0
            assert record["recorded_step_s"] == pytest.approx(first.baseline["clock_step_s"])
            assert record["drift"] == pytest.approx(
                record["timed_here"]["step_s"] / record["recorded_step_s"])
            scale = record["drift"] if record["clock"] != "recorded" else 1.0
            assert record["train_time_s"] == pytest.approx(
                first.baseline["train_time_s"] * scale)
        else:  # a CSV says nothing of its machine: its step is timed here
            assert "its step timed here" in printed, printed
        assert record["kind"] == "history" and record["val_score"] == first.baseline["val_score"]
        assert [e for e, _, _ in record["curve"]] == [e for e, _, _ in first.baseline["curve"]]
        assert record["train_time_s"] > 0 and result.economics["baseline_s"] == \
            record["train_time_s"]


def test_a_recorded_baseline_is_held_to_todays_speed_and_so_is_what_is_reused(
        first, tmp_path, monkeypatch):
    """The first search's baseline given again: in a folder of its own (its baseline.json) its
    step is timed here beside the one it timed then, and its seconds scaled only beyond the
    noise; in the first's folder (its MLflow run), at the first's speed, the search reuses the
    first's timings: the baseline keeps their clock and the answer its speedup, to the byte
    (issue 41)."""
    from mlflow.tracking import MlflowClient

    store, data, first, _ = first
    spec = _spec(tmp_path, data, small, "from-json")
    spec.baseline, spec.num_trials = str(Path(first.output_dir) / "baseline.json"), 1
    out = io.StringIO()
    record = run_search(spec, out=out).baseline
    assert "[baseline" not in out.getvalue(), out.getvalue()
    assert record["drift"] == pytest.approx(record["timed_here"]["step_s"] /
                                            first.baseline["clock_step_s"])
    scale = history_baseline.moved(first.baseline["clock_step_s"], record["timed_here"]) or 1.0
    assert record["train_time_s"] == pytest.approx(first.baseline["train_time_s"] * scale)

    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    (run,) = [r for r in client.search_runs(
        [client.get_experiment_by_name("mine").experiment_id])
        if r.data.tags.get("orchestrator.trial_id") == first.baseline["trial_id"]]
    spec = _spec(store, data, small, "mine")  # the first's folder: it learns from the first
    spec.baseline = f"runs:/{run.info.run_id}"
    monkeypatch.setattr(history_baseline, "DRIFT_NOISE", math.inf)  # at the first's speed
    screens = len(_whole_screens(store))
    out = io.StringIO()
    again = run_search(spec, out=out)
    assert _trained(out.getvalue()) == [], out.getvalue()
    # the first's whole screen, found under the run's settings as history gives them back
    assert len(_whole_screens(store)) == screens, out.getvalue()
    assert again.baseline["drift"] == pytest.approx(again.baseline["timed_here"]["step_s"] /
                                                    first.baseline["clock_step_s"])
    assert again.baseline["clock"] == "recorded"
    assert again.economics["baseline_s"] == pytest.approx(first.economics["baseline_s"])
    assert again.economics["speedup"] == pytest.approx(first.economics["speedup"])


def test_asked_again_where_the_machines_speed_moved_nothing_timed_at_the_old_speed_is_reused(
        first, tmp_path, monkeypatch):
    """The first search's measurements, as if made on a day this machine ran 10x faster (their
    speed, and its baseline's step, rewritten): asked again, the search holds the baseline it
    recorded to today's speed (not trained again: scaled), and times, confirms and measures
    anew, on today's clock, instead of ranking today's runs against the old day's
    (issue 41: equal terms)."""
    from tests.conftest import sqlite_store

    store, data, first, _ = first
    faster = 0.1
    known = tmp_path / "runs" / "measurements"
    shutil.copytree(store / "runs" / "measurements", known)
    (path,) = [p for p in known.glob("*.jsonl") if "small" in p.name]
    entries = list(jsonl.read(path))
    for entry in entries:
        assert entry.get("clock_step_s"), entry  # the first stamped what it measured
        entry["clock_step_s"] *= faster
        if entry["kind"] == "baseline":  # its run's step then (a run from history: its own)
            for key in ("start_step_s", "clock_step_s", "recorded_step_s"):
                if entry["record"].get(key):
                    entry["record"][key] *= faster
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    sqlite_store(tmp_path)
    monkeypatch.setattr(history_baseline, "CONFIRM_GAP_S", 0.0)  # every reading confirms it
    out = io.StringIO()
    again = run_search(_spec(tmp_path, data, small, "mine"), out=out)
    printed = out.getvalue()
    record = again.baseline
    assert "[baseline" not in printed and "recorded by" in printed, printed  # not trained
    then = first.baseline["clock_step_s"] * faster
    assert record["drift"] == pytest.approx(record["timed_here"]["step_s"] / then)
    assert len(record["timed_here"]["readings"]) == \
        history_baseline.READINGS + history_baseline.CONFIRM_READINGS
    assert history_baseline.moved(then, record["timed_here"]) and "scaled" in printed
    assert record["train_time_s"] == pytest.approx(first.baseline["train_time_s"] *
                                                   record["drift"])
    assert again.economics["baseline_s"] == pytest.approx(record["train_time_s"])
    assert "not reused; what this search needs of them is measured again" in printed and \
        "known from earlier" not in printed
    assert _trained(printed), printed  # confirmed and measured anew: today's clock
    today = [e for e in jsonl.read(path)][len(entries):]
    assert today and {e["clock_step_s"] for e in today} == {record["timed_here"]["step_s"]}
