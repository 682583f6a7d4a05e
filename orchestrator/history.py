"""A resumed search's sampler starts from what the search already learned.

Resume starts a new Tune run for the trials still to go; its Optuna study is seeded with every
trial the journal says finished, through Optuna's public API (an in-memory storage holding
`create_trial` records that `OptunaSearch` loads by study name), so TPE or NSGA-II go on from
the same history instead of starting over.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainables.status import RANKABLE, TrialStatus


def seeded_storage(records: Iterable[Any], searched: dict, metric: str | list[str],
                   mode: str | list[str], study_name: str):
    """An Optuna storage holding a study named `study_name` with one finished trial per record
    (a `TrialRecord` of the journal): completed ones with their values, pruned ones as PRUNED,
    the rest as FAIL. Records whose knobs are not in the space (an edited space) are skipped."""
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    metrics = metric if isinstance(metric, list) else [metric]
    modes = mode if isinstance(mode, list) else [mode]
    distributions = OptunaSearch.convert_search_space(searched)
    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(
        storage=storage, study_name=study_name,
        directions=["minimize" if m == "min" else "maximize" for m in modes])
    for rec in records:
        params = {k: rec.knobs.get(k) for k in distributions}
        values = [rec.metrics.get(m) for m in metrics]
        if rec.status in RANKABLE and None not in values:
            state = optuna.trial.TrialState.COMPLETE
        elif rec.status == TrialStatus.PRUNED:
            state, values = optuna.trial.TrialState.PRUNED, None
        else:
            state, values = optuna.trial.TrialState.FAIL, None
        try:
            trial = optuna.trial.create_trial(params=params, distributions=distributions,
                                              state=state, values=values)
        except ValueError:
            continue  # a knob missing from the record, or a value outside today's space
        study.add_trial(trial)
    return storage
