"""The screen stage, driver side: which candidates to time, and where to time them.

Candidates are every combination of the searched knobs' choices, laid over the fixed settings.
Speed-only switches (channels_last, compile, cuDNN benchmark) are not multiplied in: the
profile's rule applies (trainables/loop/profile.py), the config's own value first, and the
switches are timed one at a time, afterwards, for the candidates the prediction ranks first and
for one batch of each of the models predicted fastest (`to_refine`, `switch_variants`), so a
switch costs a timing per model instead of doubling the screen.

Each worker count is one Ray job (orchestrator/step_timing.py); a group that fails marks its
candidates `failed`; an earlier search's timings on the same machine kind are taken, not
measured again (orchestrator/screen/knowledge.py).

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
from typing import Any

from search_spaces import domain_values
from trainables.config import TrialConfig
from trainables.identity import key_without, model_key
from trainables.status import TrialStatus

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
