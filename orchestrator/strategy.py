"""How a search finds configurations: a small interface, one implementation per strategy.

    tune    Optuna proposes `num_trials` configurations through Ray Tune and each trains
            (orchestrator/tune/)
    screen  every combination of the space is timed for a few steps, each one's time to the
            baseline's accuracy predicted, the fastest predicted confirmed by training
            (orchestrator/screen/)

The driver (orchestrator/search.py) runs prepare and the baseline, then the strategy's own
`stages` in order, then finish; it never asks which strategy it holds. A stage a strategy
names is run by `run(stage, ctx)` or, when the folder records it done (a resumed search), read
back by `restore(stage, ctx)`. A third strategy is a class in a package of its own and a line in
`orchestrator.strategies.STRATEGIES`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from orchestrator.records import TrialRecord
from orchestrator.stages import Stage, StageContext


class Strategy(ABC):
    name: str
    measures_noise: bool = False
    """The baseline measures its gradient noise scale along its run (the screen's predictions
    need it)."""
    uses_ledger: bool = False
    """Its sampler may propose a configuration twice: the search keeps a ledger of what ran
    (trainables/trial/ledger.py), and a repeat reports the first run's result."""

    @abstractmethod
    def stages(self, objective) -> tuple[Stage, ...]:
        """The strategy's stages, between the baseline and finish, in order."""

    @abstractmethod
    def run(self, stage: Stage, ctx: StageContext) -> None:
        """Run `stage`."""

    def restore(self, stage: Stage, ctx: StageContext) -> None:
        """Read back a stage the folder records done (default: nothing to read)."""

    def header(self, ctx: StageContext) -> list[str]:
        """The header's lines on what the strategy will do."""
        return []

    def params(self, ctx: StageContext) -> dict[str, str]:
        """MLflow parameters of the search's parent run."""
        return {}

    def knobs(self, ctx: StageContext) -> list[str]:
        """What tells one trial from another: the leaderboard's configuration columns."""
        return list(ctx.prepared.searched)

    def artifacts(self, ctx: StageContext) -> dict[str, str]:
        """What the strategy measured, as files of the MLflow parent run."""
        return {}

    def earlier(self) -> list[TrialRecord]:
        """Results of earlier searches this one reuses (leaderboard rows, role 'earlier')."""
        return []

    def known_baseline(self, ctx: StageContext, config: dict) -> dict | None:
        """A baseline an earlier search recorded with this configuration (its length and seed
        included) on this machine kind, to reuse instead of training it again; None: train
        it."""
        return None

    def known_measurement(self, ctx: StageContext, config: dict) -> dict | None:
        """The measured run of `config` an earlier search recorded for this target on this
        machine kind; None: train it."""
        return None

    def loop_alone_s(self, ctx: StageContext) -> float | None:
        """The baseline's own settings in the optimized loop, projected to the baseline's
        length (seconds of training); None where the strategy did not time them."""
        return None

    def finished(self, ctx: StageContext, measured: TrialRecord | None) -> None:
        """After the results are written: what this search leaves to later ones."""
