"""Learning-rate schedules as pure functions of the optimizer step (multipliers of the peak lr)."""

from __future__ import annotations

import math

# onecycle's ramp starts at this share of the peak (OneCycleLR's div_factor of 25), and both
# decays end at this share of it.
START = 1 / 25
FLOOR = 1e-4
# warmup-stable-decay decays over its last this share of its steps (MiniCPM's 10-20%).
DECAY_SHARE = 0.2


def lr_multiplier(schedule: str, step: int, total_steps: int, warmup_frac: float = 0.25,
                  warmup_steps: float | None = None) -> float:
    """The multiplier of the peak lr at `step` (0-based) of `total_steps` optimizer steps.

    onecycle: linear warm-up from 1/25 to 1 over the first quarter, then cosine down to ~0
    (OneCycleLR's shape); cosine: cosine from 1 to 0; constant: 1; wsd (warmup-stable-decay):
    onecycle's ramp over `warmup_steps` (a quarter of the run where None), the peak, then a
    cosine down to ~0 over the last `DECAY_SHARE` of the run. Its warm-up is counted in steps,
    not in a share of the run, so runs of any length that share it agree step for step until
    the shorter one's decay: a longer run can go on from a shorter one's checkpoint
    (`shared_steps`).
    """
    if schedule == "constant" or total_steps <= 1:
        return 1.0
    last = total_steps - 1
    progress = min(step, last) / last
    if schedule == "cosine":
        return 0.5 * (1 + math.cos(math.pi * progress))
    if schedule == "onecycle":
        if progress < warmup_frac:
            return START + (1 - START) * progress / warmup_frac
        return _decay((progress - warmup_frac) / (1 - warmup_frac))
    if schedule == "wsd":
        # At most the run's first 4/5: a run shorter than its warm-up still decays.
        warmup = min(warmup_frac * last if warmup_steps is None else warmup_steps,
                     (1 - DECAY_SHARE) * last)
        if step < warmup:
            return START + (1 - START) * step / warmup
        decay_from = (1 - DECAY_SHARE) * last
        if step < decay_from:
            return 1.0
        return _decay((min(step, last) - decay_from) / (last - decay_from))
    raise ValueError(f"unknown schedule {schedule!r}")


def _decay(rest: float) -> float:
    """A cosine from the peak at `rest` 0 to `FLOOR` at 1."""
    return FLOOR + (1 - FLOOR) * 0.5 * (1 + math.cos(math.pi * rest))


def shared_steps(first, second, until: int) -> int:
    """How many first optimizer steps two schedules (functions of the step) agree on, counted
    up to `until`: where a run may go on from the other's checkpoint after that many steps."""
    for step in range(until + 1):
        if not math.isclose(first(step), second(step), rel_tol=1e-12, abs_tol=1e-15):
            return step
    return until + 1
