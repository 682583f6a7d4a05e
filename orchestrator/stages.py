"""A search's stages, and what a stage works with.

    prepare   check the spec, data and space (bad input ends here); start or join Ray; open
              the MLflow parent run; print the header
    baseline  train the baseline trial, or take a recorded one (orchestrator/baseline.py)
    ...       the strategy's own stages (orchestrator/strategy.py): `tune`, or `screen`,
              `predict`, `confirm`; then `measure` under match_baseline
    finish    leaderboard, best config, economics, MLflow tags (orchestrator/finish.py)

A stage gets a `StageContext`: the spec, the prepared data and plan, the folder, the trial
book, the evidence, and three verbs (`datasets`, `trial_context`, `fit`), so it needs nothing
of the driver (orchestrator/search.py) but what the context holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TextIO

from orchestrator.evidence import Evidence
from orchestrator.folder import SearchFolder
from orchestrator.prepare import Prepared, profile_switches, worker_counts
from orchestrator.spec import SearchSpec
from orchestrator.tracking import Tracker
from orchestrator.trial_book import TrialBook
from orchestrator.tune_runs import TuneRun


class Stage(StrEnum):
    """A stage's name: what `search_state.json` records as done, and the seconds it took."""

    PREPARE = "prepare"
    BASELINE = "baseline"
    TUNE = "tune"
    SCREEN = "screen"
    PREDICT = "predict"
    CONFIRM = "confirm"
    MEASURE = "measure"
    FINISH = "finish"

    @property
    def recorded(self) -> bool:
        """Whether the folder records it as done: prepare always runs (it checks and starts
        what the others use); finish is recorded by the folder's `finished`."""
        return self not in (Stage.PREPARE, Stage.FINISH)


@dataclass
class StageContext:
    """What every stage after prepare works with."""

    spec: SearchSpec
    prepared: Prepared
    folder: SearchFolder
    book: TrialBook
    tracker: Tracker
    out: TextIO
    fit: Callable[[TuneRun], None]
    """Run a stage's Tune run (the driver's: it stops the stage on a signal)."""
    objective: Any
    """The search's objective, told the baseline's score once the baseline stage ran."""
    baseline: dict | None = None
    """The baseline's record (baseline.json), once the baseline stage ran."""
    evidence: Evidence = field(default_factory=Evidence)
    """What decided trials say (orchestrator/evidence.py), shared by every stage's stopper,
    searcher and the trial book."""
    ledger: Any = None
    """The search's duplicate ledger (strategy 'tune' without rerun_duplicates), or None."""
    search_id: str = ""
    """This search's id (a resumed search keeps it; a new search under the same name gets a
    new one): what it records is told apart from what earlier searches recorded."""
    spent: Callable[[], float] = lambda: 0.0
    """What the search has cost so far, seconds (the driver's `_cost_s`): what a bet in the
    race must pay back (orchestrator/screen/bets.py)."""
    _datasets: dict | None = None

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def datasets(self) -> dict:
        """The data in Ray's object store, once per search: every trial of every stage shares it,
        and a worker group reads its share of it cut here for its worker count."""
        if self._datasets is None:
            from trainables.data.pipeline import to_ray_datasets

            p = self.prepared
            self._datasets = to_ray_datasets(p.data,
                                             worker_counts=worker_counts(p.searched, p.base))
        return self._datasets

    def task(self):
        """What the trials train (trainables/loop/task.py): the spec's task, or its model with
        the built-in rest, or None for a built-in workload."""
        return self.spec.resolved_task(self.prepared.data.meta().task)

    def profile(self) -> tuple[str, ...]:
        """The speed-only switches each trial picks by timing a few steps at its start."""
        p = self.prepared
        return profile_switches(self.spec, p.searched, p.base)

    def trial_context(self, base: dict, objective, profile: tuple[str, ...] = (),
                      ledger: Any = None, measure_noise: bool = False,
                      time_start: bool = True, start_from: str | None = None):
        """What every trial of one Tune run shares. Each trial warms its process up before its
        clock starts (its profile, or a few timed steps of its own config: `time_start`), so
        the first-use costs of a process are outside every trial's training time alike."""
        from trainables.trial.trainable import TrialContext

        p = self.prepared
        return TrialContext(
            base=base, meta=p.data.meta(), task=self.task(),
            n_train=len(p.data.x_train), resources=p.plan,
            storage_path=str(self.folder.train_storage), objective=objective,
            always_use_worker_group=self.spec.always_use_worker_group,
            placement=self.spec.placement, ledger=ledger, profile=profile,
            measure_noise=measure_noise, time_start=time_start, start_from=start_from)
