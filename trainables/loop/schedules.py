"""Learning-rate schedules as pure functions of the optimizer step (multipliers of the peak lr)."""

from __future__ import annotations

import math


def lr_multiplier(schedule: str, step: int, total_steps: int, warmup_frac: float = 0.25) -> float:
    """The multiplier of the peak lr at `step` (0-based) of `total_steps` optimizer steps.

    onecycle: linear warm-up from 1/25 to 1 over the first quarter, then cosine down to ~0
    (OneCycleLR's shape); cosine: cosine from 1 to 0; constant: 1.
    """
    if schedule == "constant" or total_steps <= 1:
        return 1.0
    progress = min(step, total_steps - 1) / (total_steps - 1)
    if schedule == "cosine":
        return 0.5 * (1 + math.cos(math.pi * progress))
    if schedule == "onecycle":
        start = 1 / 25
        if progress < warmup_frac:
            return start + (1 - start) * progress / warmup_frac
        rest = (progress - warmup_frac) / (1 - warmup_frac)
        return 1e-4 + (1 - 1e-4) * 0.5 * (1 + math.cos(math.pi * rest))
    raise ValueError(f"unknown schedule {schedule!r}")
