"""How a stage runs trials: one Ray Tune run over the shared trial function.

Every stage that trains (the baseline, the search's trials) builds its Tune run here, with the
search's one trial book as its callback, so every trial is journalled, printed and recorded in
MLflow the same way, in the same folder and under the same parent run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from orchestrator.trial_book import TrialBook


class _StagingRace(logging.Filter):
    """Drops Ray Tune's "Saving experiment state to storage ... failed" error where the file
    it could not find is one of its own temporary files: Tune copies its staging folder to the
    search's ray/ while the searcher's state is being rewritten there (write to a temporary
    file, then rename), and the copy may list the temporary file and find it gone. The next
    save copies the whole state again, and a search's own records (its journal, not Ray's
    state) are what resume reads, so nothing is lost; a user only sees a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (str(record.msg).startswith("Saving experiment state to storage")
                    and isinstance(error, FileNotFoundError) and "-tmp-" in str(error))


_STAGING_LOGGER = "ray.tune.execution.experiment_state"


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

        staging = logging.getLogger(_STAGING_LOGGER)
        if not any(isinstance(f, _StagingRace) for f in staging.filters):
            staging.addFilter(_StagingRace())
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
