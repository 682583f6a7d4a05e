"""The worker adapter (`trainables.trial.worker.run`): the loop behind a Ray session, on real Ray
Data datasets in this process (no Tune, no worker group): reports, checkpoints, resume, and
out of memory turned into an `infeasible` report.

Needs Ray (local, from the session fixture); run under the Ray lock like integration tests.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from trainables.config import TrialConfig
from trainables.data.npz import load_npz
from trainables.models import build_classifier
from trainables.trial.worker import CHECKPOINT_FILE, Session, TrialPlan, run

pytestmark = pytest.mark.integration


def _plan(npz: str, model_builder=None, **settings) -> TrialPlan:
    from trainables.loop.task import ModelTask

    data = load_npz(npz)
    cfg = TrialConfig(**{"width": 0.25, "batch_size": 16, "patch_size": 12, "epochs": 2,
                         "workload": "custom" if model_builder else "classifier", **settings})
    return TrialPlan(cfg=cfg, meta=data.meta(), n_train=len(data.x_train), threads=1,
                     task=ModelTask(model_builder) if model_builder else None), data


def _session(data, store: Path, reports: list, resume_from=None) -> Session:
    """A one-worker session whose report keeps metrics and persists checkpoints (the loop
    writes each into a temporary folder, as Ray's storage expects, and deletes it)."""
    import ray.tune

    from trainables.data.pipeline import to_ray_datasets

    datasets = to_ray_datasets(data)
    saved: list = []

    def report(metrics, checkpoint):
        if checkpoint is not None:
            kept = store / f"checkpoint_{len(saved)}"
            shutil.copytree(checkpoint.path, kept)
            saved.append(ray.tune.Checkpoint.from_directory(str(kept)))
        reports.append({**metrics, "checkpointed": checkpoint is not None})

    session = Session(world_size=1, rank=0, device=torch.device("cpu"),
                      train=datasets["train"], val=datasets["val"], report=report,
                      get_checkpoint=lambda: resume_from, checkpoint_cls=ray.tune.Checkpoint)
    session.saved = saved  # what the test resumes from
    return session


def test_reports_every_epoch_with_a_checkpoint(ray_session, tiny_npz, tmp_path):
    plan, data = _plan(tiny_npz)
    reports: list = []
    session = _session(data, tmp_path, reports)
    final = run(plan, session)

    assert [r["epoch"] for r in reports] == [1, 2]
    assert all(r["checkpointed"] and r["nodes"] == 1 for r in reports)
    assert reports[-1]["status"] == "completed" and reports[-1]["done"] is True
    assert final["epoch"] == 2 and 0.0 <= final["val_score"] <= 1.0
    assert len(session.saved) == 2
    assert (Path(session.saved[0].path) / CHECKPOINT_FILE).is_file()


def test_resumes_from_a_checkpoint_and_counts_the_restart(ray_session, tiny_npz, tmp_path):
    plan, data = _plan(tiny_npz)
    first: list = []
    session = _session(data, tmp_path / "a", first)
    run(plan, session)

    again: list = []
    run(plan, _session(data, tmp_path / "b", again, resume_from=session.saved[0]))
    assert [r["epoch"] for r in again] == [2]  # epoch 1 is not trained again
    assert again[-1]["restarts"] == 1 and again[-1]["status"] == "completed"


def test_out_of_memory_is_reported_infeasible(ray_session, tiny_npz, tmp_path):
    def oom(cfg, meta):
        model = build_classifier(cfg, meta)

        def explode(module, inputs):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")

        model.register_forward_pre_hook(explode)
        return model

    plan, data = _plan(tiny_npz, model_builder=oom)
    reports: list = []
    final = run(plan, _session(data, tmp_path, reports))
    assert [r["status"] for r in reports] == ["infeasible"]
    assert final["reason"].startswith("out of memory") and "CUDA out of memory" in final["reason"]
