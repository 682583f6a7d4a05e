"""Whether a bet pays: racing a candidate predicted slower than the best found so far.

Such a candidate wins only where its prediction was too slow, and the race spends on it
whatever it spends to decide it (`confirm.judged_at`: a quarter of its plan, or of the share
the race reads) either way. What it may save is the best's time minus its own, on each run the
answer is trained for, where it wins. So a bet is raced only where that saving, per chance,
over the runs it has to pay back in, is at least what deciding it costs.

Those runs are the user's (`SearchSpec.runs_ahead`: how many times the answer will be
trained), or by default the runs the search itself pays back in as it stands, its cost so far
and the best's run over what the best saves a run: a bet must pay for itself as soon as the
search it adds to. Only once an answer is secured (`Evidence.secured`): until then a bet is
also the fallback where the decided contenders all miss. Read back from the week's long-jobs
searches (docs/screen.md), none of the 87 bets at 15, 32, 60 and 128 epochs would have paid
back within its search's payback (0.2-2.3 runs); the 28 that won were expected 0-7% sooner
than the best at 128 unet3d epochs, 25-36% at 32, each for 0.6-0.9 of the best's time spent
deciding it.

A bet saves only where it reaches the target: its saving is weighed by the chance a contender
raced so far in the search has had of reaching it (`Evidence.raced_reach`). The prediction's
error (`SPREAD`) is measured on the contenders the race decided, a time each; one it cut as
short of the target has none, and is a bet lost whatever its prediction said.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from orchestrator.economics import payback

# How far a candidate's time to the target lies from its calibrated prediction: the standard
# deviation of log(race's expected time / calibrated prediction) over the week's race
# contenders, 0.41-0.56 on unet3d, 0.26-0.38 on the classifier, per benchmark folder.
SPREAD = 0.45


def saving(best_s: float, predicted_s: float, spread: float = SPREAD) -> float:
    """What a candidate predicted at `predicted_s` saves a run on the best's `best_s`, per
    chance: E[max(0, best - T)] for T lognormal about the prediction (log-sd `spread`)."""
    if not (best_s > 0 and predicted_s > 0):
        return 0.0
    d = math.log(best_s / predicted_s) / spread
    return best_s * _phi(d) - predicted_s * math.exp(spread ** 2 / 2) * _phi(d - spread)


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def pays(best_s: float, predicted_s: float, cost_s: float, runs: float,
         reach: float = 1.0) -> bool:
    """A bet on `predicted_s` against `best_s`, costing `cost_s` to decide, pays over `runs`,
    where it reaches the target with chance `reach` (it saves nothing where it misses)."""
    return runs * reach * saving(best_s, predicted_s) >= cost_s


def runs_to_repay(runs_ahead: float | None, spent: Callable[[], float],
                  baseline_s: float | None) -> Callable[[float], float]:
    """The runs a bet's saving counts over, given the best time to the target so far: the
    user's `runs_ahead`, else the search's own payback were it to end with that best (its cost
    so far, `spent()`, and the best's measured run, over what the best saves a baseline run of
    `baseline_s`). Infinite (every bet stands) where the best saves nothing to repay from."""
    def runs(best_s: float) -> float:
        if runs_ahead is not None:
            return float(runs_ahead)
        runs = payback(spent() + best_s, baseline_s, best_s)
        return math.inf if runs is None else runs
    return runs
