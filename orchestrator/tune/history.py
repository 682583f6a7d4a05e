"""A resumed search's sampler starts from what the search already learned.

Resume starts a new Tune run for the trials still to go; its Optuna study is seeded with every
trial the journal says finished, through Optuna's public API (each one enqueued, asked and told
in an in-memory storage that `OptunaSearch` then loads by study name), and told by the same
`searcher.tell` that told the live study, so TPE or NSGA-II go on from the same history.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from orchestrator.tune.searcher import tell
from trainables.status import traits


def seeded_storage(records: Iterable[Any], searched: dict, metric: str | list[str],
                   mode: str | list[str], study_name: str):
    """An Optuna storage holding a study named `study_name` with one finished trial per record
    (a `TrialRecord` of the journal). Records whose knobs are not in the space (an edited space)
    are skipped."""
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    modes = mode if isinstance(mode, list) else [mode]
    distributions = OptunaSearch.convert_search_space(searched)
    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(
        storage=storage, study_name=study_name,
        directions=["minimize" if m == "min" else "maximize" for m in modes])
    for rec in records:
        if traits(rec.status).optuna_state is None:
            continue  # not a trial of the study (discarded)
        params = {k: rec.knobs.get(k) for k in distributions}
        try:
            for name, value in params.items():
                distributions[name].to_internal_repr(value)  # a choice no longer offered raises
        except (ValueError, TypeError):
            continue  # a knob missing from the record, or a value outside today's space
        study.enqueue_trial(params)
        tell(study, study.ask(distributions), rec.status, rec.metrics, metric, mode)
    return storage
