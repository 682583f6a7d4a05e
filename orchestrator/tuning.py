"""How a stage runs trials: one Ray Tune run over the shared trial function.

Every stage that trains (the baseline, the search's trials) builds its Tune run here, with the
search's one trial book as its callback, so every trial is journalled, printed and recorded in
MLflow the same way, in the same folder and under the same parent run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ray.tune.search import Searcher

from orchestrator.history import seeded_storage
from orchestrator.records import TrialRecord
from orchestrator.searcher import TruthfulOptunaSearch
from orchestrator.spec import SearchSpec
from orchestrator.trial_book import TrialBook, config_key as _key
from search_spaces.warm_start import warm_start_points
from trainables.config import learning_knobs


def make_searcher(spec: SearchSpec, objective, searched: dict, base: dict,
                  history: list[TrialRecord] = (), decided: dict | None = None):
    """Optuna through Ray Tune: seeded TPE, or seeded NSGA-II for a Pareto search.

    history: trial records of a resumed search; the study starts with them (see `history`).
    decided: the stopper's decisions (trial id -> (status, reason)), so Optuna hears them."""
    from optuna.samplers import NSGAIISampler, TPESampler

    # A resumed search's sampler must not replay the dead driver's random draws (the same seed
    # would propose its first configurations again): offset the seed by the history it holds.
    seed = spec.seed + len(history)
    if not objective.scalar:
        sampler = NSGAIISampler(seed=seed, population_size=max(4, spec.num_trials // 3))
    else:
        sampler = TPESampler(seed=seed, n_startup_trials=max(3, spec.num_trials // 4))
    ran = [rec.knobs for rec in history]
    points = [p for p in warm_start_points(spec.warm_start, searched, base)
              if not any(p.items() <= knobs.items() for knobs in ran)]
    seeded = {}
    if history:
        seeded = {"study_name": spec.name,
                  "storage": seeded_storage(history, searched, objective.metric, objective.mode,
                                            spec.name)}
    # The seed lives in the sampler (OptunaSearch ignores its own `seed` next to a sampler).
    return TruthfulOptunaSearch(metric=objective.metric, mode=objective.mode, sampler=sampler,
                                points_to_evaluate=points or None, decided=decided, **seeded)


class Confirmations(Searcher):
    """Proposes given configurations in order (the predict stage's, fastest predicted first),
    and stops proposing once the next one's predicted time, allowing for prediction error
    (`slack`), cannot beat a time to the target already measured (`best()`)."""

    def __init__(self, configs: list[dict], predicted: list[float],
                 best: Callable[[], float | None], slack: float = 0.75,
                 lagged: Callable[[], set[str]] = set):
        """lagged: ids of trials cut for learning less than the baseline; a configuration with
        the same learning knobs as one of them (`trainables.config.learning_knobs`) is skipped:
        a faster step does not make a thinner model learn more."""
        super().__init__()
        self.configs, self.predicted = list(configs), list(predicted)
        self.best, self.slack, self.lagged, self.next = best, slack, lagged, 0
        self.proposed: dict[str, dict] = {}  # trial id -> its configuration

    def suggest(self, trial_id: str):
        while self.next < len(self.configs):
            config, predicted = self.configs[self.next], self.predicted[self.next]
            best = self.best()
            if best is not None and predicted * self.slack > best:
                return Searcher.FINISHED  # the rest are predicted slower still
            self.next += 1
            behind = {_key(learning_knobs(self.proposed[t])) for t in self.lagged()
                      if t in self.proposed}
            if _key(learning_knobs(config)) not in behind:
                self.proposed[trial_id] = dict(config)
                return dict(config)
        return Searcher.FINISHED

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        pass  # what a confirmation measured reaches `best` through the stopper


@dataclass
class TuneRun:
    """One Tune run of a stage: `num_samples` trials of `trainable` over `param_space`."""

    trainable: Any
    """`run_trial` with its TrialContext and datasets bound, and its resources."""
    param_space: dict[str, Any]
    num_samples: int
    max_concurrent: int
    reuse_actors: bool
    searcher: Any = None
    scheduler: Any = None
    stopper: Any = None
    time_budget_s: float | None = None
    callbacks: list[Any] = field(default_factory=list)

    def tuner(self, name: str, storage_path: str, book: TrialBook):
        from ray import tune
        from ray.tune.logger import JsonLoggerCallback

        return tune.Tuner(
            self.trainable,
            param_space=self.param_space,
            tune_config=tune.TuneConfig(
                search_alg=self.searcher,
                scheduler=self.scheduler,
                # metric/mode live on the searcher and scheduler (TuneConfig rejects the lists
                # of a Pareto search); a one-config run has neither and ranks by itself.
                num_samples=self.num_samples,
                max_concurrent_trials=self.max_concurrent,
                time_budget_s=self.time_budget_s,
                # Only where every trial trains in its own actor (see reuse_actors).
                reuse_actors=self.reuse_actors,
            ),
            run_config=tune.RunConfig(
                name=name, storage_path=storage_path, verbose=0,
                # In-process trials restart from their last checkpoint after a crash.
                # Only a lost trial process reaches Tune as an error: every other failure is
                # reported as the trial's status (run_trial), so this retries nothing else.
                failure_config=tune.FailureConfig(max_failures=2),
                # One checkpoint per in-process trial is all a restart resumes from.
                checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
                # result.json per trial (what Tune's ResultGrid reads), nothing heavier.
                callbacks=[book, JsonLoggerCallback(), *self.callbacks],
                stop=self.stopper,
            ),
        )


def trainable(ctx, datasets):
    """The trial function with the stage's context and the search's datasets bound."""
    from ray import tune

    from trainables.trial.trainable import run_trial, trial_resources

    return tune.with_resources(tune.with_parameters(run_trial, ctx=ctx, datasets=datasets),
                               trial_resources(ctx))
