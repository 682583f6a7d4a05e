"""What a measured run records (measured.json, each of its attempts) and how the measure stage
(orchestrator/measure.py) says it."""

from __future__ import annotations

from orchestrator.curves import best_score, first_at
from orchestrator.lengths import CONTENDER
from orchestrator.records import TrialRecord
from orchestrator.stages import StageContext


def measurement(ctx: StageContext, rec: TrialRecord, config: dict,
                confirmed: TrialRecord, went_on_from: list | None = None) -> dict:
    """What measured.json keeps of a run of the exported `config`; `confirmed`: the
    confirmation it hands over, whose pace (same settings and switches, its own length) the
    summary holds the measured run's against (orchestrator/economics.py `pace_held`);
    `went_on_from`: (the curve, the trial, which run) it went on from, where not `confirmed`."""
    target = ctx.objective.target
    went_on = int(rec.metrics.get("continued_from") or 0)
    before, whose, which = went_on_from or (confirmed.curve, confirmed.trial_id, CONTENDER)
    # A run that went on from another's checkpoint: its first epochs are that run's.
    curve = [p for p in before if p[0] <= went_on] + rec.curve if went_on else rec.curve
    point = first_at(curve, target)
    return {"trial_id": rec.trial_id, "config": config, "epochs": rec.epochs,
            "continued_from": went_on, "continued_trial": whose if went_on else None,
            "continued_run": which if went_on else None,
            "status": str(rec.status), "train_time_s": rec.metrics.get("train_time_s"),
            "time_to_target_s": point.seconds if point else None,
            "reached": point is not None, "val_score": rec.metrics.get("val_score"),
            "best_score": best_score(curve), "curve": curve,
            "first_use_s": rec.metrics.get("first_use_s"), "target": target,
            "samples_per_s": rec.metrics.get("samples_per_s"),
            "confirmed_samples_per_s": confirmed.metrics.get("samples_per_s"),
            "search": str(ctx.folder.root), "search_id": ctx.search_id}


def as_confirmed(ctx: StageContext, rec: TrialRecord, config: dict, planned: int
                 ) -> dict | None:
    """The confirmation itself, where it is the exported run: measured at its whole plan, it
    ran every epoch of it (it first reached the target at its last), with the same seed,
    settings and picks; nothing to train again."""
    if int(config["epochs"]) != planned or rec.epochs != planned or not rec.reached:
        return None
    return {**measurement(ctx, rec, config, rec), "confirmation": True}


def describe(measured: dict, target: float, own: str) -> str:
    how = "trained as exported" if measured.get("search_id") == own else \
        f"measured by {measured.get('search')}"
    if measured.get("confirmation"):
        how = "as exported: its confirmation ran them, to the target at its last"
    elif measured.get("continued_from"):
        which = measured.get("continued_run") or CONTENDER  # one an earlier version measured
        how = (f"as exported, the first {measured['continued_from']} {which} "
               f"({measured['continued_trial']}), which it went on from")
    if not measured["reached"]:
        best = measured.get("best_score")
        shown_best = "nothing validated" if best is None else f"best {best:.4f}"
        return (f"measure: {measured['epochs']} epochs {how}: {shown_best},"
                f" below the target {target:.4f}")
    return (f"measure: {measured['epochs']} epochs {how}: {measured['train_time_s']:.1f} s of "
            f"training, the target {target:.4f} first at "
            f"{measured['time_to_target_s']:.1f} s, best {measured['best_score']:.4f}")
