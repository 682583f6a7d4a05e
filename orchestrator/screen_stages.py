"""The stages of strategy 'screen': screen -> predict -> confirm, between the baseline and finish.

    screen   time every combination of the space's choices for a few steps (samples/s, peak
             memory; what cannot run is found here, in seconds); then the speed-only switches,
             one at a time, for the few candidates predicted fastest; then the contenders again,
             in more rounds, for a median step (orchestrator/screening.py)
    predict  each candidate's time to the baseline's accuracy, from its step time, the
             baseline's learning curve and its gradient noise scale (orchestrator/predict.py)
    confirm  train the fastest predicted to the target, in order, each stopped once decided
             (reached it; or slower than the baseline or than one that reached it, or, once a
             twin of it is decided, projected slower at its own measured pace: orchestrator/
             twins.py), until the next prediction cannot beat what was measured
             (orchestrator/tuning.Confirmations)

What an earlier search on the same workload and data measured is reused (orchestrator/
knowledge.py): its screens on this machine kind, its confirmed results; a configuration it could
not run or bring to the target is not tried again. Each stage writes its result to the search
folder (screen.json, predictions.json), so a resumed search reads it back instead of measuring
again.
"""

from __future__ import annotations

import json
import time

from orchestrator import predict as predictor
from orchestrator import screening
from orchestrator.knowledge import CONFIRM, SCREEN, SEARCH, Knowledge, machine_kind
from orchestrator.prepare import profile_switches
from orchestrator.records import Role, TrialRecord
from orchestrator.stopper import TargetStopper, validation_gate
from orchestrator.tracking.datasets import dataset_record
from orchestrator.trial_book import config_key
from orchestrator.tuning import Confirmations, TuneRun, trainable
from trainables.config import TrialConfig
from trainables.status import OnResume, TrialStatus, traits
from trainables.trial.trainable import reuse_actors

# Candidates whose switches (channels_last, ...) are timed after the first screen: the REFINED
# predicted fastest, and one batch of each model up to as many models as confirmations.
REFINED = 3
# Contenders per confirmation: this many times the confirmations, the predicted fastest of each
# model, are timed in more rounds (screening.ROUNDS, screening.contenders).
CONTENDERS = 2
# A (calibrated) prediction may be this much too fast: a candidate predicted at most 1/SLACK
# times a measured time to the target is still worth confirming.
SLACK = 0.75


class ScreenStages:
    """The three stages, run by a `Search` (orchestrator/search.py), whose state they read."""

    def __init__(self, search):
        self.search = search
        self.results: list[dict] = []
        self.predictions: list[predictor.Prediction] = []
        self.earlier: list[TrialRecord] = []
        """Confirmed results of earlier searches this one reuses (leaderboard rows)."""
        self._knowledge: Knowledge | None = None

    @property
    def knowledge(self) -> Knowledge:
        if self._knowledge is None:
            s = self.search
            p = s.prepared
            gpu = None
            if p.plan.use_gpu:
                import torch

                gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "GPU"
            self._knowledge = Knowledge.load(s.spec.output_dir, s.spec.workload,
                                             dataset_record(p.data).digest,
                                             machine_kind(p.plan.cpus_per_trial, gpu))
        return self._knowledge

    def header(self) -> str | None:
        """The header's line on what earlier searches this one starts from."""
        earlier = self.knowledge.searches()
        if not earlier:
            return None
        screens = sum(e["kind"] == SCREEN and e["machine"] == self.knowledge.machine
                      for e in self.knowledge.entries)
        confirms = sum(e["kind"] == CONFIRM for e in self.knowledge.entries)
        return (f"learning from {len(earlier)} earlier search(es) on this workload and data "
                f"({self.knowledge.path}): {screens} screens on this machine kind, "
                f"{confirms} confirmed configurations")

    # -- screen -------------------------------------------------------------------------------
    def screen(self) -> None:
        s, started = self.search, time.time()
        p = s.prepared
        configs = screening.candidates(p.searched, p.base)
        results, reused = self._timed(configs)
        pinned = set(s.spec.base) | set(p.searched)
        if s.spec.profile != "off":  # then the switches: the few predicted fastest, a batch
            # of each model a confirmation may reach
            ranked = predictor.predict(screening.runnable(results), s.baseline, s.objective.target)
            refined = screening.to_refine([pred.config for pred in ranked], REFINED,
                                          max(REFINED, s.spec.num_trials), set(screening.SWITCHES))
            variants = [v for config in refined for v in screening.switch_variants(
                config, p.data.meta(), p.plan.use_gpu, pinned)]
            more, more_reused = self._timed(variants)
            results, reused = results + more, reused + more_reused
        self.results = results = self._retime(results)
        s.folder.screen.write_text(json.dumps(results, indent=2, default=str))
        print(screening.describe(results, time.time() - started, reused), file=s.out,
              flush=True)

    def _timed(self, configs: list[dict]) -> tuple[list[dict], int]:
        """Screen results of `configs`: an earlier search's on this machine kind, else timed."""
        s = self.search
        p = s.prepared
        known = [self.knowledge.screened(c) for c in configs]
        todo = [c for c, k in zip(configs, known) if k is None]
        fresh = iter(screening.run_screen(
            todo, meta=p.data.meta(), n_train=len(p.data.x_train), datasets=s._datasets(),
            plan=p.plan, model_builder=s.spec.resolved_model()) if todo else [])
        results = []
        for k in known:
            if k is None:
                k = next(fresh)
                self.knowledge.add(SCREEN, result=k)
            results.append(k)
        return results, len(configs) - len(todo)

    def _retime(self, results: list[dict]) -> list[dict]:
        """`results` with the contenders (CONTENDERS x confirmations of the predicted fastest,
        an equal share of each model: `screening.contenders`) timed in `screening.ROUNDS`
        rounds; a result an earlier search already re-timed (this machine kind) keeps its
        rounds."""
        s = self.search
        p = s.prepared
        ranked = predictor.predict(screening.runnable(results), s.baseline, s.objective.target,
                                   profile_switches(s.spec, p.searched, p.base))
        chosen = {config_key(c) for c in screening.contenders(
            [pred.config for pred in ranked], CONTENDERS * s.spec.num_trials)}
        todo = [i for i, r in enumerate(results) if config_key(r["config"]) in chosen
                and len(screening.rounds_of(r)) < screening.ROUNDS]
        again: dict[int, list[dict]] = {i: [] for i in todo}
        for round_ in range(screening.ROUNDS - 1):
            order = todo[::-1] if round_ % 2 == 0 else todo  # the first round went forward
            timed = screening.run_screen(
                [results[i]["config"] for i in order], meta=p.data.meta(),
                n_train=len(p.data.x_train), datasets=s._datasets(), plan=p.plan,
                model_builder=s.spec.resolved_model()) if order else []
            for i, result in zip(order, timed):
                again[i].append(result)
        out = list(results)
        for i, more in again.items():
            out[i] = screening.retimed(results[i], more)
            self.knowledge.add(SCREEN, result=out[i])  # the latest entry is what is reused
        return out

    def read_screen(self) -> None:
        self.results = json.loads(self.search.folder.screen.read_text())

    # -- predict ------------------------------------------------------------------------------
    def predict(self) -> None:
        s = self.search
        prepared = s.prepared
        self.predictions = predictor.predict(
            screening.runnable(self.results), s.baseline, s.objective.target,
            profile_switches(s.spec, prepared.searched, prepared.base))
        s.folder.predictions.write_text(json.dumps([p.to_dict() for p in self.predictions],
                                                   indent=2, default=str))
        for line in predictor.describe(self.predictions, s.baseline, self.knobs):
            print(line, file=s.out, flush=True)

    def read_predictions(self) -> None:
        self.predictions = [predictor.Prediction(**p) for p in
                            json.loads(self.search.folder.predictions.read_text())]

    @property
    def knobs(self) -> list[str]:
        """What tells one candidate from another: the searched knobs and the switches the
        screen varied (and, in a trial's config, its planned epochs)."""
        varied = [k for k in screening.SWITCHES
                  if len({r["config"].get(k) for r in self.results}) > 1]
        return [*self.search.prepared.searched, *varied]

    def trial_knobs(self, prediction: predictor.Prediction) -> dict:
        config = prediction.trial_config
        return {k: config[k] for k in [*self.knobs, "epochs"] if k in config}

    # -- confirm ------------------------------------------------------------------------------
    def confirm(self) -> None:
        s = self.search
        target = s.objective.target
        stopper = TargetStopper(s.objective, curve=s.baseline.get("curve"))
        todo, skipped, missed, measured, reached = [], 0, [], [], []
        settled = 0  # configurations earlier searches confirmed for this target
        own = str(s.folder.root)  # this search's own confirmations are its journal's rows
        seen: set[int] = set()  # the earlier confirmations met so far
        for pred in self.predictions:
            if not pred.predicted_speedup > 1.0:
                continue  # predicted no faster than the baseline: not worth a trial
            earlier = self.knowledge.confirmed(pred.trial_config, target, besides=own)
            if earlier is None:
                todo.append(pred)
                continue
            if id(earlier) in seen:
                continue  # another switch variant of a run already settled: one row, one count
            seen.add(id(earlier))
            if earlier.get("time_to_target_s") is not None:
                # As it ran: the same run, but the switches are the earlier trial's.
                knobs = {k: earlier["knobs"][k] for k in self.trial_knobs(pred)
                         if k in earlier["knobs"]}
                self.earlier.append(_earlier_record(earlier, knobs))
                _teach_twins(stopper, earlier["knobs"], earlier.get("curve"), target,
                             earlier["status"])
                reached.append(knobs)
                settled += 1
                stopper.best_s = min(stopper.best_s or float("inf"),
                                     earlier["time_to_target_s"])
                if pred.predicted_time_s > 0:  # how far off the prediction was: calibrates
                    measured.append(earlier["time_to_target_s"] / pred.predicted_time_s)
            else:
                skipped += 1  # failed, or could not reach a target this low: never retried
                settled += 1
                _teach_twins(stopper, earlier["knobs"], earlier.get("curve"), target,
                             earlier["status"])
                if earlier.get("short_by") is not None:  # it learned too little: so do others
                    missed.append((self.trial_knobs(pred), earlier["short_by"]))
        # Confirmed before a stop: not run again, and what they measured counts as it did live
        # (the fastest time to the target, misses that rule out others, the calibration).
        done = s.book.finished(Role.TRIAL)
        ran = {config_key(r.knobs) for r in done}
        todo = [p for p in todo if config_key(self.trial_knobs(p)) not in ran]
        for rec in done:
            _tighten(stopper, rec)
            _teach_twins(stopper, rec.knobs, rec.curve, target, rec.status)
            if rec.short_by is not None:
                missed.append((rec.knobs, rec.short_by))
            predicted = (rec.prediction or {}).get("predicted_time_s")
            if _reached(rec):
                reached.append(rec.knobs)
                if predicted:
                    measured.append(rec.metrics["time_to_target_s"] / predicted)
        if skipped:
            print(f"confirm: {skipped} configuration(s) skipped: an earlier search could not "
                  "run them or bring them to this target", file=s.out, flush=True)
        # The budget is the question's (this workload, data and target), not this search's: a
        # configuration an earlier search settled for this target spent a confirmation of it.
        # Run again, a search answers from what is known; --trials above it looks further.
        planned = min(s.spec.num_trials - len(done) - settled, len(todo))
        if settled and todo and planned <= 0:
            print(f"confirm: nothing new to confirm: earlier searches confirmed {settled} "
                  f"configuration(s) for this target, the whole budget of "
                  f"{s.spec.num_trials} (--trials); raise it to look further ({len(todo)} "
                  f"more are predicted faster than the baseline)", file=s.out, flush=True)
        try:
            if planned > 0:
                self._confirm(todo, planned, stopper, missed, measured, reached)
        finally:  # also on a stop: what ended is known to later searches at once
            self._remember_finished(target)

    def _confirm(self, todo: list[predictor.Prediction], planned: int, stopper: TargetStopper,
                 missed: list, measured: list[float], reached: list[dict]) -> None:
        s = self.search
        # A candidate whose switches the screen did not time (it times them only for the few
        # predicted fastest, and confirm may go past those) picks them as a `tune` trial
        # does, by timing a few steps at its start; one that was timed keeps its value.
        # Each skips the validations that cannot decide it (trainables/loop/fit.validates).
        base = {**s.prepared.base, **validation_gate(s.baseline, s.objective.target)}
        ctx = s._trial_context(base, s.objective,
                               profile_switches(s.spec, s.prepared.searched, s.prepared.base),
                               None, time_start=True)
        s.book.follow(stopper)
        s.book.begin(Role.TRIAL, s.spec.num_trials, s.spec.epochs, base=base, predictions={
            config_key(self.trial_knobs(p)): p.to_dict() for p in todo})
        searcher = Confirmations([self.trial_knobs(p) for p in todo],
                                 [p.predicted_time_s for p in todo], stopper, SLACK,
                                 missed=missed, measured=measured, reached=reached,
                                 # every field, the defaults it ran with included (a
                                 # recorded baseline may hold fields this version lacks)
                                 baseline={**TrialConfig().to_dict(), **s.baseline["config"]})
        if searcher.next_index() is None:
            # Nothing left is predicted to beat what was measured: no Tune run to start (one
            # that ends before its first trial races Tune's own saving of its state).
            why = "every one is ruled out by a miss" if stopper.best_s is None else \
                f"none is predicted to beat {stopper.best_s:.1f} s to the target"
            print(f"confirm: nothing to confirm: {why}", file=s.out, flush=True)
            return
        workers = [int(p.config.get("workers", 1)) for p in todo]
        s._fit(TuneRun(trainable(ctx, s._datasets()), {}, num_samples=planned,
                       max_concurrent=s.prepared.plan.max_concurrent_trials,
                       reuse_actors=reuse_actors(workers, s.spec.always_use_worker_group),
                       searcher=searcher, stopper=stopper, time_budget_s=s.spec.time_budget_s))

    def _remember_finished(self, target: float) -> None:
        """Every confirmation of this search that ended (not cut short by a stop) and is not
        in the measurements yet, with how far it fell short when it learned too little (a later
        search rules out what learns no more)."""
        own = str(self.search.folder.root)
        known = {e.get("trial_id") for e in self.knowledge.entries
                 if e["kind"] == CONFIRM and e.get("search") == own}
        for rec in self.search.book.finished(Role.TRIAL):
            if rec.trial_id in known or traits(rec.status).on_resume != OnResume.KEEP:
                continue
            reached = rec.metrics.get("time_to_target_s")
            self.knowledge.add(CONFIRM, config={**self.search.prepared.base, **rec.knobs},
                               knobs=rec.knobs, short_by=rec.short_by,
                               target=target, status=str(rec.status), trial_id=rec.trial_id,
                               time_to_target_s=reached if reached == reached else None,
                               val_score=rec.metrics.get("val_score"), curve=rec.curve,
                               search=own)

    def remember_search(self) -> None:
        self.knowledge.add(SEARCH, folder=str(self.search.folder.root), time=time.time())


def _reached(rec: TrialRecord) -> bool:
    reached = rec.metrics.get("time_to_target_s")
    return reached is not None and reached == reached


def _tighten(stopper: TargetStopper, rec: TrialRecord) -> None:
    if traits(rec.status).rankable and _reached(rec):
        stopper.best_s = min(stopper.best_s or float("inf"), rec.metrics["time_to_target_s"])


def _teach_twins(stopper: TargetStopper, knobs: dict, curve: list | None, target: float,
                 status: str) -> None:
    """What a confirmation that ended (this search's before a stop, or an earlier search's)
    says about its twins: the epoch it reached `target` at, or the last it trained without.
    One that failed says nothing about learning."""
    if curve and not traits(status).failed:
        reached = predictor.first_epoch_at(curve, target)
        stopper.twins.learn(knobs, reached or int(curve[-1][0]), reached is not None)


def _earlier_record(entry: dict, knobs: dict) -> TrialRecord:
    """An earlier search's confirmed result, as a leaderboard row of this one."""
    metrics = {"time_to_target_s": entry["time_to_target_s"],
               "train_time_s": entry["time_to_target_s"],
               "val_score": entry.get("val_score") or float("nan"),
               "objective": -entry["time_to_target_s"]}
    return TrialRecord(entry.get("trial_id", "earlier"), 0, knobs, 0.0, 0.0,
                       TrialStatus(entry["status"]), reason=f"confirmed by {entry['search']}",
                       metrics=metrics, role=Role.EARLIER, curve=entry.get("curve") or [])
