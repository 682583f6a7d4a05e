"""How a stage runs trials: one Ray Tune run over the shared trial function.

Every stage that trains (the baseline, the search's trials) builds its Tune run here, with the
search's one trial book as its callback, so every trial is journalled, printed and recorded in
MLflow the same way, in the same folder and under the same parent run.
"""

from __future__ import annotations

import math
import pickle
import statistics
from dataclasses import dataclass, field
from typing import Any

from ray.tune.search import Searcher

from orchestrator.history import seeded_storage
from orchestrator.records import TrialRecord
from orchestrator.searcher import TruthfulOptunaSearch
from orchestrator.spec import SearchSpec
from orchestrator.trial_book import TrialBook, config_key as _key
from search_spaces.warm_start import warm_start_points
from trainables.config import (MANTISSA_BITS, learning_knobs, model_of, samples_per_step,
                               training_of)


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
    """Proposes given configurations (the predict stage's, fastest predicted first) and stops
    once none left, allowing for prediction error (`slack`), can beat a time to the target
    already measured (the stopper's `best_s`).

    A miss teaches something: a trial the stopper saw fall behind the baseline's learning curve,
    or end below the target (its `behind`), rules out every configuration that learns no more
    than it did: the same model (`trainables.config.learning_knobs`: width, patch, lr, ...) at
    as many samples per step or more (a bigger batch learns less per sample) and at as few
    mantissa bits or fewer, or at any precision when it fell short by more than a precision
    costs (`PRECISION_COST`). The same model at a smaller batch, or at a finer precision after
    a near miss, may still reach the target, so it is not ruled out, only tried after every
    model and precision not yet tried (a confirmation budget spent on one model that cannot
    learn enough answers nothing), the one that fell least short first.
    A miss also casts doubt on each value of its model's knobs (width 0.5, patch 16): the
    value that keeps missing is likely what learns too little (thinner models and smaller
    patches trade accuracy for speed), so a model with fewer doubted values is tried first, a
    value doubted until a configuration holding it reaches the target (`reached`). The
    predictions rank candidates by speed alone and the fastest share the thinnest model and the
    smallest patch: without this, every confirmation of a small budget went to models that
    could not reach the target (unet3d, docs/benchmarks.md). The baseline's values are never
    doubted: it reached the target (the target is its score), so a miss is blamed on where it
    differs from the baseline's model. Blaming the baseline's own width for an fp32 unet3d miss
    that differed from it only in its patch (16) left every value doubted after two misses, and
    the last two confirmations went to width 0.5 at patch 16 (the README's first command).
    A configuration that differs from one already proposed, or one that reached the target in an
    earlier search, only in speed switches (`trainables.config.SPEED_ONLY`) is not proposed:
    it trains the same run, and the screen has timed both (the faster, predicted first, is the
    one proposed; an earlier trial's profile picked its switches).
    Predictions are calibrated by what was measured: once confirmations (this search's, or an
    earlier search's, `measured`) have reached the target, every prediction is scaled by the
    median of their measured / predicted times before the comparison with `best_s`. A few
    steps miss what a whole run pays per epoch (validation, the epoch's host sync, launches on
    a GPU), so predictions run short by a similar factor for every candidate, and an
    uncalibrated bound would confirm candidates that cannot win."""

    def __init__(self, configs: list[dict], predicted: list[float], stopper,
                 slack: float = 0.75, missed: list[tuple[dict, float]] = (),
                 measured: list[float] = (), reached: list[dict] = (),
                 baseline: dict | None = None):
        """missed: (configuration, how far short it fell) of earlier searches' misses, which
        teach as this search's own do. measured: measured / predicted time to the target of
        earlier searches' confirmations that reached it; reached: their configurations.
        baseline: the baseline's configuration, every field resolved (it reached the
        target)."""
        super().__init__()
        self.configs, self.predicted = list(configs), list(predicted)
        self.stopper, self.slack, self.earlier = stopper, slack, list(missed)
        self.measured, self.reached = list(measured), list(reached)
        self.baseline = [baseline] if baseline else []
        models = [model_of(c) for c in self.configs]
        self.varied = {k for k in set().union(*models)
                       if len({repr(m.get(k)) for m in models}) > 1}
        self.left = list(range(len(self.configs)))  # not proposed yet, fastest predicted first
        self.proposed: dict[str, dict] = {}  # trial id -> its configuration
        self.predicted_of: dict[str, float] = {}  # trial id -> its predicted time

    def calibration(self) -> float:
        """Measured over predicted time to the target (median; 1 before any measurement)."""
        reached = self.stopper.reached
        ratios = self.measured + [reached[t] / self.predicted_of[t] for t in self.predicted_of
                                  if t in reached and self.predicted_of[t] > 0]
        return statistics.median(ratios) if ratios else 1.0

    def suggest(self, trial_id: str):
        i = self.next_index()
        if i is None:
            return Searcher.FINISHED  # the rest are predicted slower than a time measured
        self.left.remove(i)
        self.proposed[trial_id] = dict(self.configs[i])
        self.predicted_of[trial_id] = self.predicted[i]
        return dict(self.configs[i])

    def next_index(self) -> int | None:
        """The configuration to propose next (None: none left can win). Proposes nothing; it
        only drops from `left` what a miss or a proposal already rules out."""
        missed = self.earlier + [(self.proposed[t], gap) for t, gap in self.stopper.behind.items()
                                 if t in self.proposed]
        self.left = [i for i in self.left if not self._same_run(self.configs[i])
                     and not any(_learns_no_more(self.configs[i], m, gap) for m, gap in missed)]
        short = {}  # model -> the least it fell short by
        for config, gap in missed:
            model = _key(learning_knobs(config))
            short[model] = min(short.get(model, math.inf), gap)
        doubted = self._doubted([m for m, _ in missed])
        # Stable: within a rank, fastest predicted first.
        order = sorted(self.left, key=lambda i: (
            len(self._pairs(self.configs[i]) & doubted),
            short.get(_key(learning_knobs(self.configs[i])), -1.0)))
        best, scale = self.stopper.best_s, self.calibration() * self.slack
        return next((i for i in order if best is None or self.predicted[i] * scale <= best),
                    None)

    def _doubted(self, missed: list[dict]) -> set:
        """The (knob, value) pairs of the models that missed that no configuration which
        reached the target (the baseline included) holds."""
        reached = self.baseline + self.reached + [self.proposed[t] for t in self.stopper.reached
                                                  if t in self.proposed]
        held = set().union(*map(self._pairs, reached))
        return set().union(*map(self._pairs, missed)) - held

    def _pairs(self, config: dict) -> set:
        """(knob, value) of `config`'s model, for the knobs the candidates differ in (a value
        they all share tells none of them apart)."""
        return {(k, repr(v)) for k, v in model_of(config).items() if k in self.varied}

    def _same_run(self, config: dict) -> bool:
        """It trains what a proposed configuration, or one that reached the target already
        (an earlier search's), trains: a profile picked that one's switches."""
        return any(training_of(c) == training_of(config)
                   for c in [*self.proposed.values(), *self.reached])

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        pass  # what a confirmation measured reaches `best` through the stopper

    # Tune saves its searcher with the run's state. What is saved is where the queue stands;
    # the stopper is the run's own (Tune restores that), so it is not saved twice.
    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump({"left": self.left, "proposed": self.proposed,
                         "predicted_of": self.predicted_of}, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            state = pickle.load(f)
        self.left, self.proposed = state["left"], state["proposed"]
        self.predicted_of = state.get("predicted_of", {})


# What a finer precision can give back: bf16's 8-bit mantissa cost the classifier about a point
# of accuracy against fp32 (docs/benchmarks.md). A miss by more is the model's, not its
# precision's: on unet3d an fp32 run fell short by 3.3 points where its bf16 twin had by 3.2.
PRECISION_COST = 0.01


def _learns_no_more(config: dict, missed: dict, short_by: float = 0.0) -> bool:
    """`config` learns no more than `missed`, a configuration that missed the target by
    `short_by`: the same model at as many samples per step or more, at as few mantissa bits or
    fewer, or at any precision when the miss was larger than a precision can make up."""
    bits = MANTISSA_BITS.get(config.get("precision"), 0)
    return model_of(config) == model_of(missed) \
        and samples_per_step(config) >= samples_per_step(missed) \
        and (bits <= MANTISSA_BITS.get(missed.get("precision"), 0) or short_by > PRECISION_COST)


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
