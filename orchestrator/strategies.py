"""The registry of strategies: a name (`SearchSpec.strategy`) -> its class (orchestrator/
strategy.py says what one is). A third strategy is a package and a line here."""

from __future__ import annotations

from orchestrator.screen import ScreenStrategy
from orchestrator.strategy import Strategy
from orchestrator.tune import TuneStrategy

STRATEGIES: dict[str, type[Strategy]] = {"tune": TuneStrategy, "screen": ScreenStrategy}
