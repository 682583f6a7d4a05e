"""The screen stage, driver side: which candidates to time, and where to time them.

Candidates are every combination of the searched knobs' choices, laid over the fixed settings.
Speed-only switches (channels_last, compile, cuDNN benchmark) are not multiplied in: the
profile's rule applies (trainables/loop/profile.py), the config's own value first, and the
switches are timed one at a time, afterwards, for the candidates the prediction ranks first and
for one batch of each of the models predicted fastest (`to_refine`, `switch_variants`), so a
switch costs a timing per model instead of doubling the screen.

Each worker count is one Ray job: one-worker candidates in a Ray task holding a trial's
resources, wider ones in a TorchTrainer worker group of that width (its start-up paid once).
A group that fails marks its candidates `failed`; an earlier search's timings on the same
machine kind are taken, not measured again (orchestrator/screen/knowledge.py).

The candidates a confirmation may reach are then timed again, in ROUNDS - 1 more rounds (each
its own Ray job, the order reversed every other round), and their step time is the median of
the rounds' (`retimed`). One round reads the machine as it is for those seconds, and a 2-core VM
drifts: bf16 (AMX) steps of one unet3d config ran 42.7, 95.6 and 47.9 samples/s in three
searches' screens, fp32 33.1-34.4, and the search whose screen read bf16 2x fast confirmed
three configurations 28-63% slower than it predicted (docs/benchmarks.md). Rounds spread over
the screen's whole length, and in other processes, outvote a window that is fast or slow.
"""

from __future__ import annotations

import collections
import itertools
import math
import statistics
from collections.abc import Callable
from typing import Any

from search_spaces import domain_values
from trainables.config import TrialConfig
from trainables.identity import key_without, model_key
from trainables.status import TrialStatus, status_of

# Speed-only switches and the values a screen tries beside the config's own (per device kind).
SWITCHES = {"channels_last": [False, True]}
# Rounds a contender's step is timed in (the first screen is the first round).
ROUNDS = 3


def candidates(searched: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the searched knobs' choices, as full trial settings. A continuous
    domain cannot be enumerated: that is a refusal, raised before any work."""
    names = list(searched)
    choices = []
    for name in names:
        values = domain_values(searched[name])
        if not hasattr(searched[name], "categories"):
            raise ValueError(f"strategy 'screen' times every combination of the space's "
                             f"choices, but {name!r} is continuous ({searched[name]}); give "
                             f"it a list of values, or use strategy 'tune'")
        choices.append(values)
    return [{**base, **dict(zip(names, combo))} for combo in itertools.product(*choices)]


def knobs_of(config: dict[str, Any], names: list[str]) -> dict[str, Any]:
    return {k: config.get(k) for k in names}


def to_refine(ranked: list[dict[str, Any]], first: int, models: int,
              switches: set[str]) -> list[dict[str, Any]]:
    """The configs whose switches are timed, out of `ranked` (fastest predicted first): the
    `first` ones, then the fastest of each other model until `models` are covered. A switch's
    gain is its model's layers', near alike across batches (channels_last, unet3d fp32 width 1
    patch 24: 1.38-1.41x at batch 2, 1.41-1.48x at batch 4), so a candidate that is not timed is
    predicted at its model's gain (orchestrator/screen/predict.switch_gains): one timing per model
    instead of one per candidate."""
    layers = lambda config: key_without(config, switches | {"batch_size"})  # noqa: E731
    chosen = list(ranked[:first])
    seen = {layers(c) for c in chosen}
    for config in ranked[first:]:
        if len(seen) >= models:
            break
        if layers(config) not in seen:
            seen.add(layers(config))
            chosen.append(config)
    return chosen


def contenders(ranked: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """About `count` of `ranked` (fastest predicted first) to time in more rounds: the fastest of
    each model (its learning knobs but precision: width, patch, ...), an equal share each. The
    confirm stage does not go down the ranking in order: a miss casts doubt on its model's
    values and moves the confirmations to other models (orchestrator/screen/confirm.Confirmations), and
    on unet3d every configuration that reached the target was outside the 12 predicted fastest
    (the thinner model and the smaller patch are predicted fastest, and learn too little)."""
    models = [model_key(c) for c in ranked]
    share = math.ceil(count / max(1, len(set(models))))
    taken: collections.Counter = collections.Counter()
    out = []
    for config, model in zip(ranked, models):
        if taken[model] < share:
            taken[model] += 1
            out.append(config)
    return out


def rounds_of(result: dict) -> list[float]:
    """The step times a screen result was timed at, one per round."""
    return list(result.get("rounds") or [result["step_s"]])


def retimed(result: dict, again: list[dict]) -> dict:
    """`result` with the rounds of `again` (later screens of its config) added: its step time
    the median of all rounds', its peak memory the highest. A later round that could not run
    (a worker group lost) adds nothing."""
    steps = rounds_of(result) + [r["step_s"] for r in again
                                 if r["status"] == TrialStatus.COMPLETED]
    step_s = statistics.median(steps)
    scale = result["step_s"] / step_s if step_s > 0 else 1.0
    peaks = [result.get("peak_mb", math.nan), *(r.get("peak_mb", math.nan) for r in again)]
    peaks = [p for p in peaks if p == p]
    return {**result, "rounds": steps, "step_s": step_s,
            "samples_per_s": result["samples_per_s"] * scale,
            "peak_mb": max(peaks) if peaks else math.nan}


def switch_variants(config: dict[str, Any], meta, use_gpu: bool,
                    pinned: set[str]) -> list[dict[str, Any]]:
    """The config with each speed-only switch flipped (one at a time), where it can matter."""
    out = []
    resolved = TrialConfig.from_dict(config)  # the value a trial would run with
    for switch, values in SWITCHES.items():
        if switch in pinned or meta.spatial_dims not in (2, 3):
            continue
        out += [{**config, switch: v} for v in values if v != getattr(resolved, switch)]
    return out


def run_screen(configs: list[dict[str, Any]], *, meta, n_train: int, datasets: dict,
               plan, task, progress: Callable[[int], None] = lambda n: None
               ) -> list[dict]:
    """Time `configs` (grouped by worker count); one result per config, in order.
    `progress(n)`: n more configs are timed (one at a time in one process; a worker group's
    all at once)."""
    from trainables.trial.screen import ScreenPlan

    by_workers: dict[int, list[dict]] = {}
    for cfg in configs:
        by_workers.setdefault(int(cfg.get("workers", 1)), []).append(cfg)
    results: dict[int, dict] = {}
    for workers, group in sorted(by_workers.items()):
        screen_plan = ScreenPlan(candidates=group, meta=meta, n_train=n_train,
                                 threads=plan.threads(workers), task=task)
        counted = [0]

        def tick(n: int) -> None:
            counted[0] += n
            progress(n)

        try:
            found = _in_process(screen_plan, datasets, plan, tick) if workers == 1 else \
                _in_group(screen_plan, datasets, plan, workers)
        except Exception as err:  # noqa: BLE001 - the group's end is its candidates' result
            outcome = status_of(err)
            found = [{"config": c, "status": str(outcome.status), "reason": outcome.reason}
                     for c in group]
        progress(len(group) - counted[0])  # a worker group's, or what a lost task left
        for cfg, result in zip(group, found):
            results[id(cfg)] = result
    return [results[id(cfg)] for cfg in configs]


def _in_process(screen_plan, datasets: dict, plan, progress: Callable[[int], None]
                ) -> list[dict]:
    import ray

    from trainables.trial.screen import screen_in_process

    bundle = plan.in_process()
    # A streaming task: each result comes back as it is timed, so progress shows as it goes.
    task = ray.remote(screen_in_process).options(
        num_cpus=bundle["CPU"], num_gpus=bundle.get("GPU", 0), max_retries=0,
        num_returns="streaming")
    found = []
    for ref in task.remote(screen_plan, datasets, plan.use_gpu):
        found.append(ray.get(ref))
        progress(1)
    return found


def _in_group(screen_plan, datasets: dict, plan, workers: int) -> list[dict]:
    import ray.train
    from ray.train.torch import TorchConfig, TorchTrainer

    from trainables.data.pipeline import data_config, group_datasets
    from trainables.trial.screen import screen_loop_per_worker

    group_data, loop_data = group_datasets(datasets, workers)
    trainer = TorchTrainer(
        screen_loop_per_worker, train_loop_config={"plan": screen_plan, **loop_data},
        torch_config=TorchConfig(backend="nccl" if plan.use_gpu else "gloo"),
        scaling_config=ray.train.ScalingConfig(num_workers=workers, use_gpu=plan.use_gpu,
                                               resources_per_worker=plan.worker(workers)),
        datasets=group_data, dataset_config=data_config(),
        run_config=ray.train.RunConfig(failure_config=ray.train.FailureConfig(max_failures=0)))
    return trainer.fit().return_value


def describe(results: list[dict], seconds: float, reused: int = 0) -> str:
    """'screen: 16 configurations in 12.3 s (4 known from earlier searches): 15 run, 1
    infeasible; 8 contenders in 3 rounds'."""
    counts: dict[str, int] = {}
    for r in results:
        word = "run" if r["status"] == TrialStatus.COMPLETED else r["status"]
        counts[word] = counts.get(word, 0) + 1
    parts = ", ".join(f"{n} {w}" for w, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    known = f" ({reused} known from earlier searches)" if reused else ""
    rounds = sum(len(rounds_of(r)) > 1 for r in results if r["status"] == TrialStatus.COMPLETED)
    again = f"; {rounds} contenders in {ROUNDS} rounds" if rounds else ""
    return f"screen: {len(results)} configurations timed in {seconds:.1f} s{known}: {parts}{again}"


def runnable(results: list[dict]) -> list[dict]:
    return [r for r in results if r["status"] == TrialStatus.COMPLETED]
