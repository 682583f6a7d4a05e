"""The driver's half of per-trial system metrics: the trial book takes a report's samples and
node tags out of the result and hands them to the tracker, which numbers them into MLflow points;
a trial's run gets its device tags from the trial, not from the driver. No Ray.
Run: python -m pytest -q tests/orchestrator/test_system_records.py
"""

from __future__ import annotations

import io
from types import SimpleNamespace

from orchestrator.records import Role
from orchestrator.tracking import NullTracker
from orchestrator.tracking.environment import environment_tags, search_wide
from orchestrator.tracking.system_metrics import SystemSeries
from orchestrator.trial_book import TrialBook
from trainables.trial.sampling import NODE_TAGS, SYSTEM_KEY


class SystemTracker(NullTracker):
    def __init__(self):
        self.system: list = []
        self.epochs: list = []

    def log_epoch(self, trial_id, metrics, step):
        self.epochs.append(dict(metrics))

    def log_system(self, trial_id, samples, tags):
        self.system.append((trial_id, samples, tags))


def test_trial_book_hands_samples_and_tags_to_the_tracker_and_keeps_them_out_of_metrics():
    tracker = SystemTracker()
    book = TrialBook(tracker, out=io.StringIO())
    book.begin(Role.TRIAL, planned=1, epochs=2)
    trial = SimpleNamespace(trial_id="t", config={"lr": 0.1}, status="RUNNING")
    book.on_trial_start(0, [], trial)
    first = {"epoch": 1, "val_score": 0.5, "train_time_s": 1.0,
             SYSTEM_KEY: {"samples": [[1000, {"cpu_utilization_percentage": 50.0}]],
                          "tags": {"node.id": "n2", "env.device": "NVIDIA A10G"}}}
    book.on_trial_result(0, [], trial, first)
    book.on_trial_result(0, [], trial, {"epoch": 2, "val_score": 0.6, "train_time_s": 2.0})
    assert tracker.system == [("t", [[1000, {"cpu_utilization_percentage": 50.0}]],
                               {"node.id": "n2", "env.device": "NVIDIA A10G"})]
    assert SYSTEM_KEY not in first  # Tune keeps no copy of the samples in its state
    assert all(not any(k.startswith(SYSTEM_KEY) for k in m) for m in tracker.epochs)
    assert set(book.records["t"].metrics) == {"val_score", "train_time_s"}


def test_points_are_numbered_per_metric_and_trial_with_their_sample_times():
    series = SystemSeries()
    a = series.points("t", [[1000, {"cpu_utilization_percentage": 1, "rank1/cpu_x": 2}],
                            [2000, {"cpu_utilization_percentage": 3}]])
    b = series.points("t", [[3000, {"cpu_utilization_percentage": 4}]])
    other = series.points("u", [[1500, {"cpu_utilization_percentage": 5}]])
    assert a == [["system/cpu_utilization_percentage", 1.0, 1000, 0],
                 ["system/rank1/cpu_x", 2.0, 1000, 0],
                 ["system/cpu_utilization_percentage", 3.0, 2000, 1]]
    assert b == [["system/cpu_utilization_percentage", 4.0, 3000, 2]]  # goes on across reports
    assert other == [["system/cpu_utilization_percentage", 5.0, 1500, 0]]


def test_a_trial_run_gets_no_device_tags_from_the_driver():
    env = environment_tags()
    assert set(NODE_TAGS) <= set(env)  # the parent run: the driver's own device
    shared = search_wide(env)
    assert not set(NODE_TAGS) & set(shared)
    assert {"env.ray", "env.optuna", "env.python", "env.git_sha"} <= set(shared)
