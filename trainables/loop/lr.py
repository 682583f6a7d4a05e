"""The learning rate follows the batch size (issue 17, item 0).

A search that quadruples the batch makes 4x fewer optimizer steps per epoch; at the same lr that
trial learns less per epoch and looks worse than it is (measured: batch 128 at batch 32's lr
ended 2.1 points lower). So the peak lr is scaled from the batch it was tuned at,
`lr_reference_batch` (default: the built-in workload's, its `reference_batch`; none for a model of
your own, whose lr is then used as given), by a documented rule:

    linear:  lr * batch / reference          (Goyal et al. 2017, SGD)
    sqrt:    lr * sqrt(batch / reference)     (the usual rule for Adam/AdamW; the default)
    none:    lr as given

`batch` is the global batch per optimizer step (batch_size * accum_steps). A search with a
baseline scales from the baseline's lr at the baseline's batch where the rule would give a trial
at that batch another lr (`from_baseline`): the baseline is the run the user tuned.

A scaled-up lr needs a warm-up: 'onecycle' and 'wsd' have one built in; 'cosine' and 'constant'
get a linear warm-up over the first `WARMUP_FRAC` of the steps whenever the rule raises the lr.
"""

from __future__ import annotations

import math

from trainables.config import TrialConfig
from trainables.loop.schedules import lr_multiplier
from trainables.workloads import WORKLOADS

WARMUP_FRAC = 0.05
BUILT_IN_WARMUP = ("onecycle", "wsd")


def lr_factor(cfg: TrialConfig) -> float:
    """How much the rule multiplies `cfg.lr` for this trial's batch."""
    batch = cfg.batch_size * cfg.accum_steps
    # A model of your own has no known reference: its lr is used as given unless you name one.
    known = WORKLOADS.get(cfg.workload)
    reference = cfg.lr_reference_batch or (known.reference_batch if known else batch)
    ratio = batch / reference
    if cfg.lr_scaling == "linear":
        return ratio
    if cfg.lr_scaling == "sqrt":
        return math.sqrt(ratio)
    return 1.0


def scaled_lr(cfg: TrialConfig) -> float:
    """The peak learning rate this trial trains with."""
    return cfg.lr * lr_factor(cfg)


def from_baseline(base: dict, baseline: dict) -> dict:
    """The trials' fixed settings, their lr scaled from the baseline's: a trial at the
    baseline's batch trains at the baseline's lr. The seeds' baseline trains lr 3e-3 at batch 32
    unscaled; scaled from the workload's batch 128 a trial at batch 32 trained at half that,
    and at 60 epochs no candidate reached the baseline's score (docs/benchmarks.md). Unchanged
    where the rule already agrees, or where you named the batch your lr was tuned at
    (`lr_reference_batch`)."""
    if base.get("lr_reference_batch") is not None:
        return base
    ran = TrialConfig.from_dict(baseline)
    batch = {"batch_size": ran.batch_size, "accum_steps": ran.accum_steps}
    if math.isclose(scaled_lr(TrialConfig.from_dict({**base, **batch})), scaled_lr(ran)):
        return base
    return {**base, "lr": scaled_lr(ran), "lr_reference_batch": ran.batch_size * ran.accum_steps}


def schedule_multiplier(cfg: TrialConfig, total_steps: int):
    """The schedule as a function of the optimizer step, with a warm-up where the scaled lr needs
    one (onecycle warms up already)."""
    warm = cfg.schedule not in BUILT_IN_WARMUP and lr_factor(cfg) > 1.0
    warm_steps = max(1, int(WARMUP_FRAC * total_steps))
    # wsd's warm-up is counted in epochs of its own: the same at any length (schedules.py).
    ramp = None if cfg.warmup_epochs is None else \
        cfg.warmup_epochs * total_steps / cfg.epochs

    def multiplier(step: int) -> float:
        base = lr_multiplier(cfg.schedule, step, total_steps, warmup_steps=ramp)
        if warm and step < warm_steps:
            return base * (step + 1) / warm_steps
        return base

    return multiplier
