"""The loop's state as a value, and the one place the per-epoch metrics are made.

`LoopState` is everything a restarted worker needs to continue where its checkpoint was (besides
the model, optimizer, schedule and scaler states); `epoch_metrics` turns it into the metrics both
loops (optimized and legacy) report, so they always report the same keys.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch

from trainables.config import TrialConfig
from trainables.loop.switches import peak_memory_mb
from trainables.status import Outcome, TrialStatus


@dataclass
class LoopState:
    epoch: int = 0
    """Last finished epoch."""
    train_time: float = 0.0
    """Seconds inside training steps (host clock, device synced), summed over epochs."""
    eval_time: float = 0.0
    data_wait: float = 0.0
    """Seconds the loop waited for its next batch (inside `train_time`)."""
    warmup_s: float = 0.0
    """Training time of the first `WARMUP_STEPS` optimizer steps (compile, first kernels)."""
    warm_samples: int = 0
    """Samples seen by the end of the warm-up steps."""
    samples: int = 0
    """This worker's training samples so far."""
    opt_steps: int = 0
    best_score: float = -math.inf
    stale: int = 0
    """Validations since `best_score` last improved (early stopping)."""
    activation_mb: float = 0.0
    """Activation memory of one training step (saved for backward; `loop.memory`)."""
    restarts: int = 0
    """Times this trial resumed from a checkpoint after its worker died."""
    continued_from: int = 0
    """The epoch of another run's checkpoint this one went on from (its first epochs are that
    run's: trainables/loop/resume.py); 0: trained from its start."""
    val: dict = field(default_factory=lambda: {"val_loss": math.nan, "val_score": 0.0})
    """The last validation's metrics."""
    val_epoch: int = 0
    """The epoch `val` is from (0: none yet): an epoch that skipped validation reports the last
    one's metrics, and `val_epoch` tells them apart from its own."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def resumed(cls, saved: dict, continued: bool = False) -> LoopState:
        """The state a checkpoint saved, counting this restart; `continued`: another run's
        checkpoint this one goes on from, not a restart."""
        state = cls(**saved)
        if continued:
            state.continued_from, state.restarts = state.epoch, 0
        else:
            state.restarts += 1
        return state


def epoch_metrics(cfg: TrialConfig, st: LoopState, *, train_loss: float, world_size: int,
                  lr: float, device: torch.device, status: TrialStatus | None) -> dict:
    """What one epoch reports: global samples (shards are equal, so local x world size),
    throughput with and without the warm-up steps, and the trial status so far."""
    reason = None
    if st.opt_steps == 0 and status in (None, TrialStatus.EARLY_STOPPED):
        # No optimizer step: the "accuracy" is the random init's and the time ~0, which would
        # win any time-weighted ranking. Never completed; end the trial now.
        status = TrialStatus.INFEASIBLE
        reason = (f"0 optimizer steps in epoch {st.epoch}: each worker's shard is smaller than "
                  f"its batch ({cfg.per_worker_batch}); lower batch_size or workers")
    done = status is not None or st.epoch == cfg.epochs
    if done and status is None:
        status = TrialStatus.COMPLETED
    samples = st.samples * world_size
    steady_time = st.train_time - st.warmup_s
    if st.warmup_s and steady_time > 0:
        steady = (st.samples - st.warm_samples) * world_size / steady_time
    else:
        steady = samples / max(st.train_time, 1e-9)
    metrics = {
        "epoch": st.epoch,
        "epochs_planned": cfg.epochs,
        "train_loss": train_loss,
        **st.val,
        "val_epoch": st.val_epoch,
        "best_val_score": max(st.best_score, 0.0),
        "train_time_s": st.train_time,
        "eval_time_s": st.eval_time,
        "samples": samples,
        "samples_per_s": samples / st.train_time if st.train_time else 0.0,
        "steady_samples_per_s": steady,
        "warmup_s": st.warmup_s,
        "data_wait_frac": st.data_wait / st.train_time if st.train_time else 0.0,
        "optimizer_steps": st.opt_steps,
        "lr": lr,
        "peak_mem_mb": peak_memory_mb(device),
        "activation_mb": st.activation_mb,
        "restarts": st.restarts,
        "continued_from": st.continued_from,
        "status": str(status or TrialStatus.RUNNING),
        "done": done,
    }
    if status == TrialStatus.DIVERGED:
        metrics["reason"] = f"loss became NaN or inf in epoch {st.epoch} ({cfg.precision})"
    if reason:
        metrics["reason"] = reason
    return metrics


def validated(metrics: dict) -> bool:
    """Whether a report's val_* metrics are its own epoch's: one that skipped validation
    repeats the last validation's (its `val_epoch`). A report without `val_epoch` (a failure's,
    `outcome_metrics`) counts as its own."""
    return metrics.get("val_epoch", metrics.get("epoch")) == metrics.get("epoch")


def outcome_metrics(cfg: TrialConfig, outcome: Outcome, epoch: int = 0) -> dict:
    """The final report of a trial that ended with an exception (see `status_of`): no score,
    no time, the status and the reason."""
    return {"epoch": epoch, "epochs_planned": cfg.epochs, "val_score": 0.0, "train_time_s": 0.0,
            "optimizer_steps": 0, "status": str(outcome.status), "done": True,
            "reason": outcome.reason}
