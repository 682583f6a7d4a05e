"""Strategy 'screen' (orchestrator/screen/strategy.py): time every combination for a few steps
(screening.py), predict each one's time to the baseline's accuracy (predict.py), confirm the
fastest predicted by training (confirm.py), with what earlier searches measured
(knowledge.py) and what decided twins say (twins.py)."""

from orchestrator.screen.strategy import ScreenStrategy

__all__ = ["ScreenStrategy"]
