"""The predict stage: each screened configuration's time to the baseline's accuracy, before any of
them trains.

    time to target = epochs to target x time per epoch

* Time per epoch comes from the screen: the candidate's steps per epoch x (its steady step time
  + its feed's time per batch), plus its one-off cost: its first steps' warm-up (its own
  kernels; compilation). Its process's first-use costs and the read of its shard happen
  before a trial's clock starts, as the baseline's do, so they are not in its time.
* Epochs come from the baseline's own run. It trained N epochs (`full_epochs`) to its score S,
  and first reached the target S - tolerance at epoch E_b of its N. A bigger batch takes fewer
  optimizer steps per epoch, so it needs more epochs to learn as much: by the empirical model of
  large-batch training (McCandlish et al. 2018), (1 + b / B_noise) / (1 + b0 / B_noise) times
  the epochs of the baseline's batch b0, with B_noise the gradient noise scale measured along
  the baseline's run (trainables/loop/noise.py). B_noise grows as the loss falls, so each of
  the baseline's epochs is converted at its own B_noise and the ratio is their mean: a bigger
  batch costs most early on. A candidate is therefore planned for
  P = ceil(N x ratio) epochs (its schedule spans them, as the baseline's spans N), and expected
  to reach the target at the same point of its schedule as the baseline did: epoch
  ceil(P x E_b / N).
* A speed-only switch the trial's profile picks (channels_last) runs at the pick's speed, not at
  the screened default's: the screen times the switch for the few candidates predicted fastest
  and for one batch of each model, and a candidate it did not is predicted at its own time
  divided by the gain the profile's pick had on its model (else on its precision, else on
  all). On a CPU without bf16 instructions channels_last made unet3d's 3D convs 1.4x faster,
  and confirmations predicted at the default layout ran 1.3-1.8x faster than predicted
  (docs/benchmarks.md).
* Knobs that change what is learned (width, patch size) are not modelled: their candidates are
  predicted as if they learned as the baseline's model does, and the confirm stage's real
  training decides them (a candidate that lags stops once it can no longer win).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any

from orchestrator.curves import first_at
from trainables.identity import key_without
from trainables.loop.noise import ALL_NOISE, epochs_ratio, run_epochs_ratio

# With no noise scale measured (a baseline recorded before it was measured), a batch larger
# than the baseline's is assumed to need epochs in proportion to the square root of the ratio:
# between "bigger batches are free" and "only steps count".
FALLBACK = "sqrt"


@dataclass(frozen=True)
class Prediction:
    config: dict[str, Any]
    """The candidate's full trial settings, as screened (its `planned_epochs` apart)."""
    samples_per_s: float
    epochs_ratio: float
    """Epochs it needs per epoch of the baseline's (statistical efficiency of its batch)."""
    planned_epochs: int
    predicted_epochs: int
    predicted_time_s: float
    """Training time (train_time_s) to the target."""
    predicted_speedup: float
    """The baseline's whole run (its N epochs, the run the user makes) over this."""
    switch_gain: float = 1.0
    """The speedup expected from the profile's picks over the screened step (included in
    `samples_per_s` and the time; 1.0: none, or the switches were timed for this config)."""
    step_s: float = math.nan
    """Seconds per step the prediction counts (the screened step over `switch_gain`)."""
    steps_to_target: int = 0
    """Optimizer steps of its `predicted_epochs`: what a step timed otherwise rescales."""

    def at_step(self, step_s: float) -> float:
        """The predicted time to the target had the screen timed `step_s` a step (a trial's
        own step, timed in its process before training)."""
        return self.predicted_time_s + self.steps_to_target * (step_s - self.step_s)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def trial_config(self) -> dict[str, Any]:
        """What its confirmation trains: the screened settings, for its planned epochs."""
        return {**self.config, "epochs": self.planned_epochs}


def switch_gains(screened: list[dict], profiled: Collection[str]) -> list[float]:
    """Per screened result, the speedup its trial's profile is expected to find. For a config
    that leaves a `profiled` switch to the profile and had no variant of it screened: the median
    gain of the profile's pick (the faster of own and variant, own / fastest step time) over the
    screened pairs of its model (the same settings at another batch: the gain is the layers'),
    else of its precision, else of all; 1.0 for every other config."""
    profiled = set(profiled)
    # A config and its switch variants share `variant`; a model's pairs at every batch share
    # `layers` (the gain is its layers').
    variant = lambda cfg: key_without(cfg, profiled)  # noqa: E731
    layers = lambda cfg: key_without(cfg, profiled | {"batch_size"})  # noqa: E731
    groups: dict[str, list[dict]] = {}
    for r in screened:
        groups.setdefault(variant(r["config"]), []).append(r)
    by_model: dict[str, list[float]] = {}
    by_precision: dict[Any, list[float]] = {}
    for group in groups.values():
        own = [r for r in group if not profiled & r["config"].keys()]
        if own and len(group) > 1:
            gain = own[0]["step_s"] / min(r["step_s"] for r in group)
            by_model.setdefault(layers(own[0]["config"]), []).append(gain)
            by_precision.setdefault(own[0]["config"].get("precision"), []).append(gain)
    every = [g for gains in by_precision.values() for g in gains]
    out = []
    for r in screened:
        cfg = r["config"]
        left = not profiled & cfg.keys() and len(groups[variant(cfg)]) == 1
        gains = by_model.get(layers(cfg)) or by_precision.get(
            cfg.get("precision")) or every
        out.append(statistics.median(gains) if left and gains else 1.0)
    return out


def epochs_to_target(planned: int, reached: int, full: int) -> int:
    """The epoch a candidate planned for `planned` epochs is expected at the target: the same
    point of its schedule as the baseline's, which first reached it at epoch `reached` of its
    `full`."""
    return max(1, min(planned, math.ceil(planned * reached / full - 1e-9)))


def predict(screened: list[dict], baseline: dict, target: float,
            profiled: Collection[str] = ()) -> list[Prediction]:
    """A prediction for every screened candidate that can run, fastest first. `profiled`: the
    switches each trial's profile picks (where a config leaves them unset)."""
    curve = baseline.get("curve") or []
    full = int(baseline.get("epochs") or len(curve) or 1)
    point = first_at(curve, target)
    reached = point.epoch if point else full
    base_time = float(baseline["train_time_s"])  # the run the user makes: all N epochs
    b0 = int(baseline["config"].get("batch_size", 1))
    noise = float(baseline.get("noise_scale", math.nan))
    series = baseline.get("noise") or []
    out = []
    for r, gain in zip(screened, switch_gains(screened, set(profiled))):
        cfg = r["config"]
        batch = int(cfg.get("batch_size", b0))
        ratio = run_epochs_ratio(batch, b0, series, full) if series else \
            epochs_ratio(batch, b0, noise)
        if math.isnan(ratio):
            ratio = math.sqrt(batch / b0) if batch > b0 else 1.0
        planned = max(1, math.ceil(full * ratio - 1e-9))
        epochs = epochs_to_target(planned, reached, full)
        # A trial's epoch is its steps and its feed, and its clock its first steps' warm-up
        # (its process's first-use costs and its shard's read are outside it, as the
        # baseline's are: trainables/trial/worker.py).
        step_s = r["step_s"] / gain
        per_epoch = r["steps_per_epoch"] * (step_s + r.get("data_s", 0.0))
        seconds = epochs * per_epoch + r.get("one_off_s", 0.0)
        out.append(Prediction(dict(cfg), r["samples_per_s"] * gain, ratio, planned,
                              epochs, seconds, base_time / seconds if seconds > 0 else math.nan,
                              gain, step_s, epochs * r["steps_per_epoch"]))
    return sorted(out, key=lambda p: p.predicted_time_s)


def describe(predictions: list[Prediction], baseline: dict, knobs: list[str],
             shown: int = 5) -> list[str]:
    noise = [b for _, b in baseline.get("noise") or []] or [baseline.get("noise_scale")]
    how = f"no noise scale measured: epochs follow the batch by its {FALLBACK}"
    if noise[-1] is not None and math.isfinite(noise[-1]):
        how = "gradient noise scale " + " -> ".join(
            "inf" if b >= ALL_NOISE else f"{b:,.0f}" for b in noise) + " along the baseline"
    lines = [f"predict: time to the baseline's accuracy for {len(predictions)} configurations "
             f"({how}, baseline batch {baseline['config'].get('batch_size')})"]
    for p in predictions[:shown]:
        what = " ".join(f"{k}={p.config[k]}" for k in knobs if k in p.config)
        pick = f" (x{p.switch_gain:.2f} from the profile's pick)" if p.switch_gain != 1.0 else ""
        lines.append(f"  {what}  {p.samples_per_s:,.0f} samples/s{pick}, {p.predicted_epochs} of "
                     f"{p.planned_epochs} epochs: {p.predicted_time_s:.1f} s "
                     f"({p.predicted_speedup:.2f}x)")
    return lines
