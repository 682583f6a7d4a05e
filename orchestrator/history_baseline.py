"""A baseline taken from history: the run you already made, not trained again.

    --baseline runs:/RUN_ID   a run in the search's MLflow store: this tool's, or your own,
                              whose metric history holds a validation score per epoch
                              (`val_score`, step = epoch) and whose params give its settings
    --baseline run.csv        a CSV with the columns epoch, seconds, score

Its learning curve gives S (its final score) and where it reached S - tolerance; its settings
(the run's params that are trial settings, then `baseline_set` over them, over the search's
fixed settings) are what it trained. Its time is what the same settings cost here, so that
both sides of every ratio are on one clock:

* a run this tool trained on this machine kind, of the same task, its settings unchanged (no
  `baseline_set`): its own recorded training time (the same loop, the same warm-up before it,
  the same kind of machine), checked against this machine today. Timing its step instead read
  unet3d's 32-epoch baseline as 60 s where its run trained 84 s (docs/benchmarks.md#long-jobs-
  the-race): a few steps in a tight loop miss part of what an epoch costs. But one machine kind
  is not one speed: hours later the same 2-core VM kind timed every unet3d configuration at
  0.52-0.80x the speed it had, and the recorded 84-s run trained in 136 s
  (docs/benchmarks.md). So its step is timed here too (the faster of `READINGS` readings, each
  the median of `ROUNDS` timings), beside the step its search timed the same way before it
  trained (`clock_step_s`; in a run recorded before that was, the step its trial timed in
  its own process, `start_step_s`): where every reading lies beyond `DRIFT_NOISE` of it, on
  one side, confirmed by more readings spread further (`moved`), the recorded seconds are
  scaled by the ratio (`drift`), which keeps what the loop adds to each step and moves it to
  today's speed (`times_here`). The same holds
  for a baseline an earlier search recorded (its baseline.json, or the one a repeated search
  reuses), and its clock is what the search's reuse goes by: earlier timings made at another
  speed are measured again (`clock_of`, orchestrator/screen/knowledge.py);
* any other run: the baseline stage times its step on this machine for a few steps
  (orchestrator/step_timing.py), and each epoch of its curve takes that; the recorded seconds,
  from another machine or another day, are kept beside, as `history_seconds`.

With your own task (`--task`), the trials then train exactly what that run trained. Bad input
(a run that does not exist, a CSV without a score column) is refused before any work.
"""

from __future__ import annotations

import csv
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from trainables.config import TrialConfig
from trainables.identity import step_key
from trainables.status import TrialStatus

PREFIX = "runs:/"
COLUMNS = ("epoch", "seconds", "score")
# Times the baseline's step is timed here, in one process: their median is one reading.
ROUNDS = 3
# Readings of it, `READING_GAP_S` apart: the faster is its step (`steadiest`).
READINGS = 2
READING_GAP_S = 1.0
# Where those read a moved speed, up to `CONFIRM_READINGS` more, `CONFIRM_GAP_S` apart (about
# ten seconds with the reading), and the speed moved only where every reading says so
# (`moved`): two readings are a second or two of a machine whose slow stretches last longer.
# Its readings spread 1.77x in four idle minutes, with a stretch of 40 s where every one read
# 1.5x the stretch before it (benchmarks/clock_readings.py, docs/benchmarks.md): the six span
# a minute.
CONFIRM_READINGS = 6
CONFIRM_GAP_S = 8.0
# How far the step timed here may lie from the one a run of this tool was timed at (`step_then`)
# and still be the same speed. Timed by its search before it trained, the two are timed the
# same way; a run recorded before that was holds only its trial's own start step, timed alike
# (a few steps after warm-up, the median) but not in the same process: on a quiet machine the
# screen's task timed unet3d's fp32 step at 0.037 s where its trial's own read 0.039 s
# (docs/benchmarks.md). Within it the recorded seconds stand. Beyond it the ratio errs low where
# the trial's process is busier than the task (0.076-0.099 s against 0.060-0.065 s on the day
# the 84-s run took 136 s: scaled 1.52x for 1.62x), so the baseline is scaled a little too
# little rather than too much.
# The line clears what one idle 2-core AMD EPYC (family 25) reads from one minute to the next:
# 60 readings of unet3d's fp32 step in one process over four minutes read 0.049-0.083 s, the
# faster of each pair 0.049-0.075 s, with slow stretches of up to 45 s. Against the 0.051 s a
# first search timed (a fast pair itself) that is up to 1.47x with the machine unmoved: at 35%,
# 8 of the 30 pairs read a moved speed, and 3 of 6 repeats of the README's command (1.42-1.47x)
# scaled its 80-s baseline and printed 3.06-3.16x for a 2.18x answer, where the same baseline
# trained again that evening took 83 s (docs/benchmarks.md, 2026-12-07). Earlier, at 25%, two
# readings of one second's two speeds (1.26-1.34x apart) scaled a baseline 0.77x.
DRIFT_NOISE = 0.5


def is_history(baseline: str | None) -> bool:
    return isinstance(baseline, str) and (baseline.startswith(PREFIX) or
                                          baseline.lower().endswith(".csv"))


def load(baseline: str, tracking_uri: str) -> dict[str, Any]:
    """{'source', 'curve' ([epoch, score, seconds]), 'settings', 'seconds_from'}; ValueError
    (one line) for a run that does not exist, a CSV that cannot be read or has no score."""
    if baseline.startswith(PREFIX):
        from orchestrator.tracking.history import read_run

        run_id = baseline.removeprefix(PREFIX).strip("/").split("/")[0]
        if not run_id:
            raise ValueError(f"baseline {baseline!r}: give a run id, as runs:/RUN_ID")
        run = read_run(tracking_uri, run_id)
        return {"source": baseline, "curve": run.curve, "settings": _settings(run.params),
                "seconds_from": run.seconds_from, "machine_kind": run.machine_kind,
                "task": run.task, "noise": run.noise, "losses": run.losses,
                "start_step_s": run.start_step_s, "clock_step_s": run.clock_step_s}
    return {"source": str(Path(baseline).resolve()), "curve": _csv_curve(Path(baseline)),
            "settings": {}, "seconds_from": "the CSV's seconds", "machine_kind": None,
            "task": None}


def same_clock(history: dict, machine_kind: str, task: str, baseline_set: dict | None
               ) -> bool:
    """Whether the run's recorded training time is this search's clock: this tool trained it
    (its `train_time_s` per epoch) on this machine kind, with the same task (model, loss,
    optimizer), and it is compared as it ran."""
    from orchestrator.tracking.history import TIME

    return history.get("machine_kind") == machine_kind and history.get("task") == task and \
        history.get("seconds_from") == TIME and not baseline_set


def _csv_curve(path: Path) -> list[list[float]]:
    if not path.is_file():
        raise ValueError(f"baseline {path}: no such CSV (epoch, seconds, score)")
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    columns = {c.strip().lower() for c in (rows[0].keys() if rows else [])}
    missing = [c for c in COLUMNS if c not in columns]
    if missing:
        raise ValueError(f"baseline {path}: no {', '.join(repr(c) for c in missing)} "
                         f"column{'s' if len(missing) > 1 else ''}: it needs epoch, seconds, "
                         "score (a validation score per epoch, higher is better)")
    curve = []
    for n, row in enumerate(rows, 2):
        values = {k.strip().lower(): v for k, v in row.items()}
        try:
            point = [int(values["epoch"]), float(values["score"]), float(values["seconds"])]
        except (TypeError, ValueError):
            raise ValueError(f"baseline {path}, line {n}: epoch, seconds and score must be "
                             f"numbers (got {values})") from None
        if not all(math.isfinite(v) for v in point):
            raise ValueError(f"baseline {path}, line {n}: not a finite number")
        curve.append(point)
    return sorted(curve)


def _settings(params: dict[str, str]) -> dict[str, Any]:
    """The run's params that are trial settings, read back from their logged text."""
    fields = set(TrialConfig.field_names())
    out = {}
    for key, text in params.items():
        if key in fields:
            try:
                out[key] = yaml.safe_load(text)
            except yaml.YAMLError:
                out[key] = text
    return out


def config_of(history: dict, base: dict, own: dict) -> dict:
    """What the run trained: the search's fixed settings, the run's own, `baseline_set`; its
    length its curve's."""
    epochs = max(int(e) for e, _, _ in history["curve"])
    config = {**base, **history["settings"], **own, "epochs": epochs}
    return TrialConfig.from_dict(config).to_dict()


def times_here(history: dict, own_clock: bool) -> bool:
    """Whether the baseline's step is timed here: each epoch's time (not `own_clock`), or the
    drift since this tool's run trained (it timed its step then). A search that reuses earlier
    searches' timings is timed too: what they timed at another speed is not reused
    (`clock_of`), so the baseline, scaled or not, and every timing compared with it share one
    clock."""
    return not own_clock or bool(step_then(history))


def step_then(recorded: dict) -> float | None:
    """The step a run's seconds are held against: timed as this search times one
    (`clock_step_s`), where its search timed it so; else the one its trial timed before its
    training (`start_step_s`), in its own, busier process."""
    return recorded.get("clock_step_s") or recorded.get("start_step_s")


def timed_step(results: list[dict]) -> dict | None:
    """`ROUNDS` timings of the baseline's settings as one: the first's, with the median step of
    those that ran; None where none ran (the first's failure is then the record's error)."""
    ran = [r for r in results if r.get("status") == TrialStatus.COMPLETED]
    if not ran:
        return results[0] if results else None
    steps = sorted(float(r["step_s"]) for r in ran)
    return {**ran[0], "step_s": statistics.median(steps), "rounds": steps}


def steadiest(readings: list[dict | None]) -> dict | None:
    """The faster of the readings (each a `timed_step`) that ran, every reading's step kept
    (`readings`); the first where none ran. One reading is a few steps in a fraction of a
    second (the classifier's 11-ms step: 0.1 s), and a busy moment of the machine moves all of
    its rounds: on an idle 2-core machine one search timed the classifier's baseline at 0.0159-
    0.0179 s where the searches before and after it timed 0.0107-0.0112 s, and scaled its
    baseline 1.50x (docs/benchmarks.md). A machine that is slower is slower in both."""
    ran = [r for r in readings if step_of(r) is not None]
    if not ran:
        return readings[0] if readings else None
    return {**min(ran, key=step_of), "readings": [step_of(r) for r in ran]}


def read_step(reading: Callable[[], dict | None], then: float | None = None,
              sleep: Callable[[float], None] = time.sleep) -> dict | None:
    """This machine's step (`steadiest`) from `READINGS` readings (`reading()`: one
    `timed_step`); held against `then`, readings that say the speed `moved` are confirmed by up
    to `CONFIRM_READINGS` more, `CONFIRM_GAP_S` apart, until one lies within the noise."""
    readings = []
    for n in range(READINGS):
        if n:
            sleep(READING_GAP_S)
        readings.append(reading())
    for _ in range(CONFIRM_READINGS):
        if then is None or moved(then, steadiest(readings)) is None:
            break
        sleep(CONFIRM_GAP_S)
        readings.append(reading())
    return steadiest(readings)


def step_of(timed: dict | None) -> float | None:
    """The step a timing (`timed_step`) measured; None where it did not run."""
    if timed is None or timed.get("status") != TrialStatus.COMPLETED or not timed.get("step_s"):
        return None
    return float(timed["step_s"])


def drift(then: float | None, timed: dict | None) -> float | None:
    """This machine's step over `then`, the one the run was timed at (`step_then`; >1: slower
    today); None where either is missing."""
    now = step_of(timed)
    return now / float(then) if then and now else None


def moved(then: float | None, timed: dict | None) -> float | None:
    """The drift to scale by where this machine's speed moved since `then`: every reading of
    today's step (`steadiest`'s) beyond the noise of it on the same side; the fastest reading's
    ratio, the smaller baseline either way (a speedup read low rather than high). None where
    any reading lies within the noise: a busy stretch of an unmoved machine, not a new day."""
    ratio = drift(then, timed)
    if ratio is None:
        return None
    readings = timed.get("readings") or [step_of(timed)]
    ratios = [float(r) / float(then) for r in readings]
    same_side = all(r > 1 for r in ratios) or all(r < 1 for r in ratios)
    return ratio if same_side and all(drifted(r) for r in ratios) else None


def drifted(ratio: float | None, noise: float | None = None) -> bool:
    """The machine's speed moved beyond what two timings of one speed differ by (`noise`, either
    way: a ratio above 1 + noise or below 1 / (1 + noise); None: `DRIFT_NOISE`, read at the call,
    so a test that sets it holds)."""
    noise = DRIFT_NOISE if noise is None else noise
    return ratio is not None and abs(math.log(ratio)) > math.log1p(noise)


def clock_of(record: dict | None) -> float | None:
    """The step (seconds) that a baseline record's seconds are on: today's where it was timed
    here and scaled to it (or each epoch took it), else the one its run timed before training.
    A search stamps what it measures with it, and reuses only what was measured within
    `DRIFT_NOISE` of it (orchestrator/screen/knowledge.py); None: no step known (a record
    from before steps were recorded), and reuse goes by the machine kind alone."""
    if not record:
        return None
    timed = record.get("timed_here") or {}
    if record.get("clock") in (SCALED, TIMED_HERE) and timed.get("step_s"):
        return float(timed["step_s"])
    step = step_then(record) or record.get("recorded_step_s")
    return float(step) if step else None


def clock_settings(record: dict | None) -> str | None:
    """What the clock is the step of: the baseline's settings, but its length and seed. Two
    searches' clocks compare only where these are the same (a seeds baseline's fp32 batch-2
    step against a `base` one's says nothing of the machine)."""
    if not record or not record.get("config"):
        return None
    return step_key({**TrialConfig().to_dict(), **record["config"]})


def same_speed(step_s: float | None, clock: float | None) -> bool:
    """Whether a timing made where the step took `step_s` is on `clock` (either unknown: yes)."""
    return not step_s or not clock or not drifted(float(clock) / float(step_s))


# The seconds of a search's recorded baseline (its baseline.json) that move with the machine.
SECONDS = ("train_time_s", "full_run_s", "time_to_score_s")
SCALED = "recorded, scaled by the machine's drift"
TIMED_HERE = "timed here"


def at_todays_speed(recorded: dict, timed: dict | None) -> dict:
    """A baseline a search recorded (its baseline.json given by path, or the one a repeated
    search reuses), held to this machine's speed as this tool's run from history is: its
    seconds scaled where its step timed here `moved` from the one it timed then."""
    then = clock_of(recorded)
    ratio = moved(then, timed)
    if ratio is None:
        return {**recorded, "drift": drift(then, timed), "timed_here": timed}
    scaled = {k: recorded[k] * ratio for k in SECONDS
              if isinstance(recorded.get(k), (int, float))}
    # Its step is now today's: given again, it is scaled from here, not twice.
    return {**recorded, **scaled, "curve": [[e, s, t * ratio] for e, s, t in recorded["curve"]],
            "recorded_train_time_s": recorded["train_time_s"], "drift": ratio,
            "recorded_step_s": then, "start_step_s": timed["step_s"],
            "clock_step_s": timed["step_s"],
            "timed_here": timed, "clock": SCALED}


def record(history: dict, config: dict, timed: dict | None, search: str, search_id: str,
           own_clock: bool = False) -> dict:
    """The baseline's record (baseline.json) from its history and its step timed here (a
    screen result: step_s, data_s, one_off_s, steps_per_epoch). `own_clock` (`same_clock`):
    its own recorded seconds, scaled where this machine's speed `moved` since; else each
    epoch takes the step timed here."""
    ratio = drift(step_then(history), timed) if own_clock else None
    if own_clock:
        scale = moved(step_then(history), timed) or 1.0
        curve = [[int(e), float(s), float(t) * scale] for e, s, t in history["curve"]]
        clock = SCALED if scale != 1.0 else "recorded"
    elif timed is None or timed.get("status") != TrialStatus.COMPLETED:
        raise RuntimeError(f"the baseline's settings could not be timed here "
                           f"({(timed or {}).get('status')}: {(timed or {}).get('reason')})")
    else:
        per_epoch = timed["steps_per_epoch"] * (timed["step_s"] + timed.get("data_s", 0.0))
        one_off = timed.get("one_off_s", 0.0)
        curve = [[int(e), float(s), one_off + int(e) * per_epoch]
                 for e, s, _ in history["curve"]]
        clock = TIMED_HERE
    epochs, noise = curve[-1][0], history.get("noise") or []
    return {"kind": "history", "source": history["source"], "config": config,
            "trial_id": history["source"], "status": str(TrialStatus.COMPLETED),
            "val_score": curve[-1][1],
            "train_time_s": curve[-1][2], "full_run_s": None,
            "epochs": epochs, "curve": curve, "history_seconds": history["curve"],
            "seconds_from": history["seconds_from"], "timed_here": timed,
            "clock": clock, "drift": ratio, "recorded_step_s": step_then(history),
            # What this tool's run measured of its learning (none for a run of your own).
            "noise_scale": noise[-1][1] if noise else math.nan, "noise": noise,
            "losses": history.get("losses") or [], "first_use_s": None,
            "noise_s": 0.0, "parent_run_id": None, "search": search, "search_id": search_id}
