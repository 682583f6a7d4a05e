"""`train_config` reruns a saved configuration as the search that found it would have: on its
own data, and for a built-in workload with no data file on that workload's built-in data."""

from __future__ import annotations

import json

import pytest

import orchestrator.api as api
from trainables.config import TrialConfig


@pytest.fixture
def captured(monkeypatch):
    specs = []
    monkeypatch.setattr(api, "run_search", lambda spec: specs.append(spec) or spec)
    return specs


@pytest.mark.parametrize("workload", ["classifier", "unet3d"])
def test_a_built_in_workload_reruns_on_its_own_built_in_data(tmp_path, captured, workload):
    config = {**TrialConfig().to_dict(), "workload": workload, "epochs": 4}
    path = tmp_path / "best_config.json"
    path.write_text(json.dumps({"name": "found", "data": None, "config": config}))
    api.train_config(path)
    (spec,) = captured
    assert spec.workload == workload and spec.data is None
    assert spec.base["workload"] == workload and spec.epochs == 4


def test_a_custom_model_keeps_its_data(tmp_path, captured):
    from tests.conftest import make_npz

    data = make_npz(tmp_path / "mine.npz")
    config = {**TrialConfig().to_dict(), "workload": "examples.bring_your_own:build"}
    path = tmp_path / "best_config.json"
    path.write_text(json.dumps({"name": "own", "data": data, "config": config}))
    api.train_config(path)
    assert captured[0].data == data and captured[0].base["workload"] == config["workload"]
