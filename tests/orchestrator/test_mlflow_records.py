"""A child run is reproducible from MLflow alone: every config field a param, `config.json`, the
dataset as an MLflow input (same on parent and children), system metrics, and the experiment
kind tag. Against a real SQLite MLflow store; trials are played through the real TrialBook and
MlflowTracker (no Ray). Also: the tracking verbs as typed steps, and the null tracker."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from orchestrator.tracking import MlflowTracker, NullTracker, Tracker
from orchestrator.tracking.datasets import dataset_record
from orchestrator.tracking.outbox import load_journal, save_journal
from orchestrator.tracking.steps import (EndSearch, EndTrial, LogEpoch, LogSystem, StartSearch,
                                         StartTrial, from_json, to_json)
from orchestrator.trial_book import TrialBook
from trainables.config import TrialConfig
from trainables.data.arrays import from_arrays
from trainables.trial.sampling import NodeSampler, device_tags


@dataclass
class FakeTrial:  # the parts of a Tune trial that TrialBook reads
    trial_id: str
    config: dict
    error_file: str | None = None


def _data(tmp_path: Path):
    rng = np.random.default_rng(0)
    path = tmp_path / "tiny.npz"
    np.savez(path, x=rng.random((40, 1, 8, 8), dtype=np.float32), y=rng.integers(0, 3, 40))
    with np.load(path) as f:
        return from_arrays(dict(f), source=str(path)), path


def test_child_run_holds_config_dataset_and_system_metrics(tmp_path):
    import hashlib

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    data, path = _data(tmp_path)
    tracker = MlflowTracker(uri, artifact_root=tmp_path / "artifacts")
    base = {"epochs": 2, "patch_size": 8, "lr": 0.01}
    book = TrialBook(tracker, journal=None, base=base)
    tracker.start_search("records", {"epochs": 2}, {"spec.yaml": "name: records\n"},
                         dataset=dataset_record(data))
    trial = FakeTrial("t1", {"width": 0.5, "batch_size": np.int64(16)})  # as Optuna samples
    book.on_trial_start(0, [], trial)
    # The trial samples its own node and sends the samples with its report, as a training
    # process does (trainables/trial/sampling.py).
    began = int(time.time() * 1000)
    with NodeSampler(interval_s=0.2) as sampler:
        time.sleep(1.0)  # a few samples at 0.2 s
        report = sampler.attach(lambda metrics, _: book.on_trial_result(0, [], trial, metrics))
        # The last report takes a last sample as it is made, so the series reaches the end of
        # training. The clock reads before the report, not after: writing it takes a while.
        done_at = int(time.time() * 1000)
        report({"epoch": 1, "val_score": 0.5, "status": "completed", "done": True}, None)
    book.on_trial_complete(0, [], trial)
    tracker.end_search({}, {"t1": {"best_trial": "true"}}, {"trials": 1.0})

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("records")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    runs = {r.data.tags["orchestrator.role"]: r for r in client.search_runs([exp.experiment_id])}
    child, parent = runs["trial"], runs["search"]

    expected = TrialConfig.from_dict({**base, "width": 0.5, "batch_size": 16}).to_dict()
    assert set(child.data.params) == set(TrialConfig.field_names())
    assert child.data.params["batch_size"] == "16" and child.data.params["lr"] == "0.01"
    local = client.download_artifacts(child.info.run_id, "config.json", str(tmp_path))
    logged = json.loads(Path(local).read_text())
    assert logged == expected
    assert TrialConfig.from_dict(logged) == TrialConfig.from_dict(expected)  # rebuilds the trial

    want = hashlib.sha256(path.read_bytes()).hexdigest()
    for run in (parent, child):
        (inp,) = run.inputs.dataset_inputs
        assert inp.dataset.name == "tiny.npz" and inp.dataset.digest == want[:16]
        assert json.loads(inp.dataset.source) == {"uri": path.resolve().as_uri()}
        profile = json.loads(inp.dataset.profile)
        assert profile["train_shape"] == list(data.x_train.shape) and profile["sha256"] == want

    system = [k for k in child.data.metrics if k.startswith("system/")]
    assert "system/cpu_utilization_percentage" in system
    assert "system/system_memory_usage_megabytes" in system
    steps = client.get_metric_history(child.info.run_id, "system/cpu_utilization_percentage")
    assert len(steps) >= 4  # sampled through the trial, not once
    assert [m.step for m in steps] == list(range(len(steps)))
    times = sorted(m.timestamp for m in steps)  # when each was sampled, not when written
    assert began <= times[0] <= began + 500 and times[-1] >= done_at
    assert "system" not in child.data.metrics and "final_system" not in child.data.metrics
    # Where it trained, from the trial itself (here: this process).
    assert child.data.tags["env.device"] == device_tags()["env.device"]
    assert child.data.tags["node.hostname"] == socket.gethostname()


def test_array_digest_tells_data_apart(tmp_path):
    data, _ = _data(tmp_path)
    synthetic = from_arrays({"x": data.x_train, "y": data.y_train}, source="synthetic")
    same = from_arrays({"x": data.x_train.copy(), "y": data.y_train.copy()}, source="synthetic")
    other = from_arrays({"x": data.x_train + 1, "y": data.y_train}, source="synthetic")
    a, b, c = (dataset_record(d) for d in (synthetic, same, other))
    assert a.source_type == "code" and a.name == "synthetic"
    assert a.digest == b.digest != c.digest


def test_steps_round_trip_through_a_journal(tmp_path):
    steps = [StartSearch("s", {"k": 1}, {"p.png": b"\x89PNG", "a.txt": "x"},
                         dataset=dataset_record(_data(tmp_path)[0])),
             StartTrial("t", {"width": 0.5}, config={"width": 0.5}),
             LogEpoch("t", {"acc": 0.5}, 1, 123),
             LogSystem("t", [["system/cpu_utilization_percentage", 12.5, 123, 0]],
                       {"node.id": "abc", "env.device": "cpu (x86_64)"}),
             EndTrial("t", "completed", {}, None, 124),
             EndSearch({}, {"t": {"pareto": "true"}}, {"trials": 1.0}, 125)]
    assert [from_json(json.loads(json.dumps(to_json(s)))) for s in steps] == steps
    save_journal(tmp_path / "j.json", "sqlite:///x", steps)
    assert load_journal(tmp_path / "j.json") == steps
    with pytest.raises(ValueError, match="unknown tracking step 'log_everything'"):
        from_json({"op": "log_everything", "kwargs": {}})


def test_tracker_is_an_interface_with_a_null_implementation():
    with pytest.raises(TypeError):
        Tracker()  # abstract: an implementation must give every verb
    null = NullTracker()
    null.start_search("s", {}, {})
    null.start_trial("t", {}, config={})
    null.log_epoch("t", {}, 1)
    null.log_system("t", [[1, {"cpu_utilization_percentage": 1.0}]], {"node.id": "n"})
    null.end_trial("t", "completed", {})
    null.end_search({}, {}, {})
    assert null.parent_run_id is None


def test_a_sqlite_store_opened_early_serves_the_tracker_and_a_bad_one_ends_quietly(tmp_path):
    # The search opens a new SQLite store (its table creation: seconds) while Ray starts; the
    # tracker made afterwards must write to that same file, and a store that cannot be opened
    # ends the thread quietly: the tracker meets the error itself, in the driver.
    from orchestrator.tracking.mlflow_writer import open_store_early

    assert open_store_early("http://127.0.0.1:1") is None  # a server: nothing slow to open
    uri = f"sqlite:///{tmp_path / 'early.db'}"
    thread = open_store_early(uri)
    thread.join(timeout=120)
    assert not thread.is_alive() and (tmp_path / "early.db").is_file()
    tracker = MlflowTracker(uri, artifact_root=tmp_path / "artifacts")
    tracker.start_search("early", params={"seed": 1}, artifacts={})
    tracker.outbox.flush()
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("early").experiment_id])
    assert [r.data.params for r in runs] == [{"seed": "1"}]

    (tmp_path / "not-a-db").write_text("this is not a database")
    bad = f"sqlite:///{tmp_path / 'not-a-db'}"
    failing = open_store_early(bad)
    failing.join(timeout=120)  # ended quietly
    with pytest.raises(Exception):
        MlflowClient(bad).search_experiments()
