"""Strategy 'tune': Optuna proposes `num_trials` configurations through Ray Tune; each trains.

    tune      seeded TPE (NSGA-II for a Pareto search) over the space; ASHA when asked; under a
              time-to-target objective each trial is stopped once decided (orchestrator/
              stopper.py), and under match_baseline it is cut by the baseline's learning curve
              and skips the validations that cannot decide it, as the screen's confirmations
              are: the two strategies answer the same question on the same terms
    measure   under match_baseline, the best trial trained as it is handed over
              (orchestrator/measure.py)
"""

from __future__ import annotations

from orchestrator import measure
from orchestrator.prepare import worker_counts
from orchestrator.records import Role, TrialRecord
from orchestrator.spec import SearchSpec
from orchestrator.stages import Stage, StageContext
from orchestrator.stopper import target_stopper, validation_gate
from orchestrator.strategy import Strategy
from orchestrator.tune.history import seeded_storage
from orchestrator.tune.samplers import sampler
from orchestrator.tune.searcher import TruthfulOptunaSearch
from orchestrator.tune_runs import TuneRun, trainable
from search_spaces.warm_start import warm_start_points
from trainables.trial.trainable import reuse_actors


class TuneStrategy(Strategy):
    name = "tune"
    uses_ledger = True

    def stages(self, objective) -> tuple[Stage, ...]:
        return (Stage.TUNE, Stage.MEASURE) if objective.needs_baseline else (Stage.TUNE,)

    def run(self, stage: Stage, ctx: StageContext) -> None:
        if stage == Stage.TUNE:
            self.tune(ctx)
        elif stage == Stage.MEASURE:
            measure.run(ctx, self)

    def tune(self, ctx: StageContext) -> None:
        spec, p = ctx.spec, ctx.prepared
        history = ctx.book.finished(Role.TRIAL)
        to_run = spec.num_trials - len(history)
        if to_run <= 0:
            return
        base = dict(p.base)
        if ctx.objective.needs_baseline and ctx.baseline:
            base |= validation_gate(ctx.baseline, ctx.objective.target)
        trial_ctx = ctx.trial_context(base, ctx.objective, ctx.profile(), ctx.ledger)
        stopper = target_stopper(ctx.objective, ctx.evidence, ctx.baseline)
        ctx.book.begin(Role.TRIAL, spec.num_trials, spec.epochs, base=base)
        ctx.fit(TuneRun(
            trainable(trial_ctx, ctx.datasets()), p.searched, num_samples=to_run,
            max_concurrent=p.plan.max_concurrent_trials,
            reuse_actors=reuse_actors(worker_counts(p.searched, p.base),
                                      spec.always_use_worker_group),
            searcher=make_searcher(spec, ctx.objective, p.searched, p.base, history,
                                   ctx.evidence) if p.searched else None,
            scheduler=_scheduler(spec, ctx.objective), stopper=stopper,
            time_budget_s=spec.time_budget_s))


def make_searcher(spec: SearchSpec, objective, searched: dict, base: dict,
                  history: list[TrialRecord] = (), evidence=None):
    """Optuna through Ray Tune: seeded TPE, or seeded NSGA-II for a Pareto search.

    history: trial records of a resumed search; the study starts with them (see `history`).
    evidence: the search's record of decisions, so Optuna hears what a stopper decided."""
    # A resumed search's sampler must not replay the dead driver's random draws (the same seed
    # would propose its first configurations again): offset the seed by the history it holds.
    seed = spec.seed + len(history)
    ran = [rec.knobs for rec in history]
    points = [p for p in warm_start_points(spec.warm_start, searched, base)
              if not any(p.items() <= knobs.items() for knobs in ran)]
    seeded = {}
    if history:
        seeded = {"study_name": spec.name,
                  "storage": seeded_storage(history, searched, objective.metric, objective.mode,
                                            spec.name)}
    # The seed lives in the sampler (OptunaSearch ignores its own `seed` next to a sampler).
    return TruthfulOptunaSearch(metric=objective.metric, mode=objective.mode,
                                sampler=sampler(not objective.scalar, seed, spec.num_trials),
                                points_to_evaluate=points or None, evidence=evidence, **seeded)


def _scheduler(spec: SearchSpec, objective):
    if not spec.early_stopping:
        return None
    from ray.tune.schedulers import ASHAScheduler

    return ASHAScheduler(
        metric=objective.metric, mode=objective.mode, time_attr="training_iteration",
        max_t=spec.epochs, grace_period=spec.grace_period,
        reduction_factor=spec.reduction_factor)
