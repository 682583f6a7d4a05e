"""Strategy 'tune': Optuna proposes, Ray Tune trains (orchestrator/tune/strategy.py); the
Optuna searcher that tells each trial's truth (searcher.py) and a resumed study's history
(history.py)."""

from orchestrator.tune.strategy import TuneStrategy, make_searcher

__all__ = ["TuneStrategy", "make_searcher"]
