"""Going on from another run's checkpoint: where a longer run is the shorter one, continued.

A run of E epochs on a warmup-stable-decay schedule whose warm-up is counted in epochs
(trainables/loop/schedules.py) takes, step for step, the same learning rates as a run of P
epochs with the same warm-up, until the shorter one decays. Data order (seeded per epoch), crop
positions (the generator's state is checkpointed) and initialization are the run's seed's. So
where another run of the same configuration but its length stopped after d epochs, inside that
shared stretch, its checkpoint is this run after d epochs: the measure stage trains the race's
winner E - d epochs more instead of E (orchestrator/measure.py). Anything else, and the run
trains from scratch.
"""

from __future__ import annotations

from trainables.config import TrialConfig
from trainables.identity import LENGTH_SETTINGS, run_of, without
from trainables.loop.lr import schedule_multiplier
from trainables.loop.schedules import shared_steps


def why_not_continued(cfg: TrialConfig, saved: dict, steps_per_epoch: int) -> str | None:
    """Why `cfg` cannot go on from `saved` (another run's checkpoint, with its `config` and
    `state`) after `steps_per_epoch` micro-batches an epoch; None: it can, its first epochs are
    the saved run's."""
    if "config" not in saved:
        return "the checkpoint does not say what it trained"
    before = TrialConfig.from_dict(saved["config"])
    same = lambda c: without(run_of(c.to_dict()), LENGTH_SETTINGS)  # noqa: E731
    if same(before) != same(cfg):
        return "it trained another configuration"
    done = int(saved["state"]["opt_steps"])
    if int(saved["state"]["epoch"]) >= cfg.epochs:
        return f"it trained {saved['state']['epoch']} epochs, this run has {cfg.epochs}"
    steps = max(1, steps_per_epoch // cfg.accum_steps)
    mine = schedule_multiplier(cfg, steps * cfg.epochs)
    theirs = schedule_multiplier(before, steps * before.epochs)
    # Its steps so far and the next one (the lr it set for it) must be this run's.
    if shared_steps(mine, theirs, done) <= done:
        return (f"its schedule ({before.schedule}, {before.epochs} epochs) left this run's "
                f"({cfg.schedule}, {cfg.epochs} epochs) before its step {done}")
    return None
