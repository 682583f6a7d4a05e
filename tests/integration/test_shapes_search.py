"""Data of any shape through a real search (issue 12): the 1D-signals example with a user's
Conv1d model, and flat feature vectors on the built-in classifier (an MLP), on local Ray."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator import SearchSpec, run_search
from tests.conftest import sqlite_store

pytestmark = pytest.mark.integration


def test_signals_example_runs_a_conv1d_search(ray_session, tmp_path):
    # Imported as examples.signals_1d (a namespace package under the repository root, which
    # the trial workers import from too), so its `build` unpickles there.
    from examples import signals_1d

    result = signals_1d.search(n=400, num_trials=2, epochs=2, output_dir=str(tmp_path / "runs"),
                               tracking_uri=sqlite_store(tmp_path),
                               baseline="none")  # the example's search is the subject
    assert set(result.trials["status"]) == {"completed"}
    assert result.best["val_score"] > 0.5  # 3 classes: chance is 0.33
    assert result.best_config["patch_size"] in (48, 64)


def test_feature_vectors_search_without_crops(ray_session, tmp_path):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    x = rng.normal(0, 0.5, (300, 12)).astype(np.float32)
    x[:, 0] += 2.0 * y
    result = run_search(SearchSpec(
        baseline="none",
        name="it-features", data={"x": x, "y": y}, num_trials=1, epochs=2, space={},
        base={"batch_size": 32, "lr": 0.01, "width": 0.5},
        output_dir=str(tmp_path / "runs"), tracking_uri=sqlite_store(tmp_path)))
    assert result.best["val_score"] > 0.8
    assert result.best_config["patch_size"] is None  # nothing to crop: no crop
