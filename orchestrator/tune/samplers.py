"""The Optuna samplers a search uses, as Ray Tune must hold them: picklable.

Tune pickles its searcher, sampler included, into the run's tuner.pkl before the first trial and
into every searcher checkpoint after. Optuna 5.1's genetic samplers (`BaseGASampler`, under
NSGA-II) hold a `threading.Lock` that pickle refuses, so a Pareto search failed in its tune
stage with "cannot pickle '_thread.lock' object". `NSGAII` drops the lock from its pickled
state and makes a new one on load; the lock only guards the sampler's in-process generation
cache, which no other process shares. On Optuna 5.0 (no lock) it is NSGA-II as it is.
"""

from __future__ import annotations

import threading
from typing import Any

from optuna.samplers import NSGAIISampler, TPESampler


class NSGAII(NSGAIISampler):
    """Optuna's NSGA-II, picklable."""

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_thread_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._thread_lock = threading.Lock()  # unused on Optuna 5.0, which has none


# Optuna keys a genetic sampler's study attributes by its class's name (`__init_subclass__`):
# keep NSGA-II's, so a study reads the same whichever of the two classes wrote it.
for _key in ("_GENERATION_KEY", "_PARENT_CACHE_KEY_PREFIX"):
    if hasattr(NSGAIISampler, _key):
        setattr(NSGAII, _key, getattr(NSGAIISampler, _key))


def sampler(pareto: bool, seed: int, num_trials: int):
    """Seeded NSGA-II for a Pareto search (two objectives), seeded TPE otherwise."""
    if pareto:
        return NSGAII(seed=seed, population_size=max(4, num_trials // 3))
    return TPESampler(seed=seed, n_startup_trials=max(3, num_trials // 4))
