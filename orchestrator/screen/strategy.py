"""Strategy 'screen': screen -> predict -> confirm -> measure, between the baseline and finish.

    screen   time every combination of the space's choices for a few steps (samples/s, peak
             memory; what cannot run is found here, in seconds); then the speed-only switches,
             one at a time, for the few candidates predicted fastest; then the contenders again,
             in more rounds, for a median step (orchestrator/screen/screening.py). The
             baseline's own settings in the optimized loop are timed too: what the loop alone
             gives, before any search
    predict  each candidate's time to the baseline's accuracy, from its step time, the
             baseline's learning curve and its gradient noise scale (orchestrator/screen/
             predict.py)
    confirm  train the fastest predicted to the target, each stopped once decided, until the
             next prediction cannot beat what was measured (orchestrator/screen/confirm.py)
    measure  the fastest to the target, trained as it is handed over (orchestrator/measure.py)

What an earlier search of the same model and data measured on this machine kind is reused
(orchestrator/screen/knowledge.py): its baseline, screens, confirmations and measured runs. Each
stage writes its result to the search folder (screen.json, predictions.json, measured.json), so
a resumed search reads it back instead of measuring again.
"""

from __future__ import annotations

import json
import math
import time

from orchestrator import history_baseline, measure
from orchestrator.records import Role, TrialRecord
from orchestrator.screen import predict as predictor
from orchestrator.screen import race, screening
from orchestrator.screen.confirm import Settled, run_confirmations, settle, teach_finished
from orchestrator.screen.knowledge import (BASELINE, CONFIRM, MEASURED, SCREEN, SEARCH,
                                           WHOLE_SCREEN, Knowledge, model_identity)
from orchestrator.screen.progress import Progress
from orchestrator.stages import Stage, StageContext
from orchestrator.step_timing import run_screen
from orchestrator.strategy import Strategy
from trainables.config import TrialConfig
from trainables.identity import canonical, config_key
from trainables.status import OnResume, TrialStatus, traits

# Candidates whose switches (channels_last, ...) are timed after the first screen: the REFINED
# predicted fastest, and one batch of each model up to as many models as confirmations.
REFINED = 3
# Contenders per confirmation: this many times the confirmations, the predicted fastest of each
# model, are timed in more rounds (screening.ROUNDS, screening.contenders).
CONTENDERS = 2


class ScreenStrategy(Strategy):
    name = "screen"
    measures_noise = True

    def __init__(self) -> None:
        self.results: list[dict] = []
        self.loop_alone: dict | None = None
        """The screen of the baseline's own settings in the optimized loop."""
        self.predictions: list[predictor.Prediction] = []
        self.settled = Settled()
        self._knowledge: Knowledge | None = None
        self._task: tuple | None = None  # (what the trials train,), once resolved

    def stages(self, objective) -> tuple[Stage, ...]:
        return Stage.SCREEN, Stage.PREDICT, Stage.CONFIRM, Stage.MEASURE

    def run(self, stage: Stage, ctx: StageContext) -> None:
        {Stage.SCREEN: self.screen, Stage.PREDICT: self.predict, Stage.CONFIRM: self.confirm,
         Stage.MEASURE: lambda c: measure.run(c, self)}[stage](ctx)

    def restore(self, stage: Stage, ctx: StageContext) -> None:
        if stage == Stage.SCREEN:
            saved = json.loads(ctx.folder.screen.read_text())
            # A folder written before the loop-alone timing holds the list alone.
            self.results = saved["results"] if isinstance(saved, dict) else saved
            self.loop_alone = saved.get("loop_alone") if isinstance(saved, dict) else None
        elif stage == Stage.PREDICT:
            self.predictions = [predictor.Prediction(**p) for p in
                                json.loads(ctx.folder.predictions.read_text())]
        elif stage == Stage.CONFIRM:
            self._settle(ctx)  # the rows and calibration of earlier searches' results

    # -- what earlier searches left -----------------------------------------------------------
    def knowledge(self, ctx: StageContext) -> Knowledge:
        if self._knowledge is None:
            from orchestrator.machine import plan_machine_kind
            from orchestrator.tracking.datasets import dataset_record

            p = ctx.prepared
            self._knowledge = Knowledge.load(
                ctx.spec.output_dir, model_identity(ctx.spec, p.base, p.data.meta()),
                dataset_record(p.data).digest, plan_machine_kind(p.plan))
        # The machine's speed this search compares on, once its baseline is known (timed here
        # where an earlier search recorded it): what it measures is stamped with it, and what
        # earlier searches measured at another speed is not reused.
        self._knowledge.clock = history_baseline.clock_of(ctx.baseline)
        self._knowledge.clock_of = history_baseline.clock_settings(ctx.baseline)
        return self._knowledge

    def header(self, ctx: StageContext) -> list[str]:
        lines = ["strategy: screen every combination, predict each one's time to the "
                 "baseline's accuracy, confirm the fastest predicted, measure the fastest"]
        known = self.knowledge(ctx).summary()
        return lines + ([known] if known else [])

    def params(self, ctx: StageContext) -> dict[str, str]:
        return {"learned_from": json.dumps(self.knowledge(ctx).searches())}

    def artifacts(self, ctx: StageContext) -> dict[str, str]:
        return {name: path.read_text() for name, path in (
            ("screen.json", ctx.folder.screen), ("predictions.json", ctx.folder.predictions))
            if path.is_file()}

    def known_baseline(self, ctx: StageContext, config: dict) -> dict | None:
        return self.knowledge(ctx).baseline(config)

    def known_measurement(self, ctx: StageContext, config: dict) -> dict | None:
        return self.knowledge(ctx).measured(config, ctx.objective.target)

    # -- screen -------------------------------------------------------------------------------
    def screen(self, ctx: StageContext) -> None:
        started, p = time.time(), ctx.prepared
        moved = self.knowledge(ctx).elsewhen()
        if moved:  # what an earlier search timed at another speed is timed again
            ctx.say(f"screen: {moved} of the earlier measurements of this model and data were "
                    f"made while this machine ran at another speed (beyond "
                    f"{history_baseline.DRIFT_NOISE:.0%} of this search's baseline step, "
                    f"{self.knowledge(ctx).clock:.4f} s): not reused; what this search needs "
                    "of them is measured again")
        # The baseline's own settings in the optimized loop ride along with the first round.
        first = [*screening.candidates(p.searched, p.base), self._loop_alone_config(ctx)]
        plan = canonical({"candidates": [config_key(c) for c in first],
                          "trials": ctx.spec.num_trials, "profile": ctx.spec.profile})
        earlier = self.knowledge(ctx).whole_screen(plan)
        if earlier is not None:  # the same screen ran here before: its results, whole
            self.results, self.loop_alone = earlier["results"], earlier["loop_alone"]
            reused = len(self.results)
        else:
            reused = self._screen_anew(ctx, first)
            self.knowledge(ctx).add(WHOLE_SCREEN, plan=plan, results=self.results,
                                    loop_alone=self.loop_alone)
        ctx.folder.screen.write_text(json.dumps(
            {"results": self.results, "loop_alone": self.loop_alone}, indent=2, default=str))
        ctx.say(screening.describe(self.results, time.time() - started, reused))

    def _screen_anew(self, ctx: StageContext, first: list[dict]) -> int:
        """Time `first` (an earlier search's screen of a configuration is reused), then the
        switches of the few predicted fastest, then the contenders again; how many were known."""
        p = ctx.prepared
        timed, known = self._timed(ctx, first, "screen: round 1")
        results, alone, reused = timed[:-1], timed[-1], sum(known[:-1])
        pinned = set(ctx.spec.base) | set(p.searched)
        if ctx.spec.profile != "off":  # then the switches: the few predicted fastest, a batch
            # of each model a confirmation may reach
            ranked = predictor.predict(screening.runnable(results), ctx.baseline,
                                       ctx.objective.target)
            refined = screening.to_refine([pred.config for pred in ranked], REFINED,
                                          max(REFINED, ctx.spec.num_trials),
                                          set(screening.SWITCHES))
            variants = [v for config in refined for v in screening.switch_variants(
                config, p.data.meta(), p.plan.use_gpu, pinned)]
            more, more_known = self._timed(ctx, variants, "screen: speed switches")
            results, reused = results + more, reused + sum(more_known)
        self.results, self.loop_alone = self._retime(ctx, results), alone
        return reused

    def _loop_alone_config(self, ctx: StageContext) -> dict:
        """The baseline's own settings in the optimized loop: the part of any speedup that
        needs no search. Every setting, resolved: a baseline this search trained records the
        settings it was given, one from history all of them, and a repeated search must find
        the same screen under either (its plan is keyed on the configurations)."""
        record = ctx.baseline
        return TrialConfig.from_dict({
            **ctx.prepared.base, **record["config"], "loop": "optimized",
            "epochs": int(record.get("epochs") or record["config"].get("epochs", 1))}).to_dict()

    def _timed(self, ctx: StageContext, configs: list[dict], label: str
               ) -> tuple[list[dict], list[bool]]:
        """Screen results of `configs`: an earlier search's on this machine kind, else timed;
        and which were known."""
        knowledge = self.knowledge(ctx)
        known = [knowledge.screened(c) for c in configs]
        todo = [c for c, k in zip(configs, known) if k is None]
        fresh = iter(self._run_screen(ctx, todo, label))
        results = []
        for k in known:
            if k is None:
                k = next(fresh)
                knowledge.add(SCREEN, result=k)
            results.append(k)
        return results, [k is not None for k in known]

    @staticmethod
    def _run_screen(ctx: StageContext, configs: list[dict], label: str) -> list[dict]:
        """Time `configs` for a few steps each, with a progress line under `label`."""
        p = ctx.prepared
        with Progress(ctx.out, len(configs), label) as bar:
            return run_screen(configs, meta=p.data.meta(), n_train=len(p.data.x_train),
                              datasets=ctx.datasets(), plan=p.plan, task=ctx.task(),
                              progress=bar.advance) if configs else []

    def _retime(self, ctx: StageContext, results: list[dict]) -> list[dict]:
        """`results` with the contenders (CONTENDERS x confirmations of the predicted fastest,
        an equal share of each model: `screening.contenders`) timed in `screening.ROUNDS`
        rounds; a result an earlier search already re-timed (this machine kind) keeps its
        rounds."""
        ranked = predictor.predict(screening.runnable(results), ctx.baseline,
                                   ctx.objective.target, ctx.profile())
        chosen = {config_key(c) for c in screening.contenders(
            [pred.config for pred in ranked], CONTENDERS * ctx.spec.num_trials)}
        todo = [i for i, r in enumerate(results) if config_key(r["config"]) in chosen
                and len(screening.rounds_of(r)) < screening.ROUNDS]
        again: dict[int, list[dict]] = {i: [] for i in todo}
        for round_ in range(screening.ROUNDS - 1):
            order = todo[::-1] if round_ % 2 == 0 else todo  # the first round went forward
            label = f"screen: contenders, round {round_ + 2} of {screening.ROUNDS}"
            timed = self._run_screen(ctx, [results[i]["config"] for i in order], label)
            for i, result in zip(order, timed):
                again[i].append(result)
        out = list(results)
        for i, more in again.items():
            out[i] = screening.retimed(results[i], more)
            self.knowledge(ctx).add(SCREEN, result=out[i])  # the latest entry is what is reused
        return out

    # -- predict ------------------------------------------------------------------------------
    def predict(self, ctx: StageContext) -> None:
        self.predictions = predictor.predict(screening.runnable(self.results), ctx.baseline,
                                             ctx.objective.target, ctx.profile())
        ctx.folder.predictions.write_text(json.dumps([p.to_dict() for p in self.predictions],
                                                     indent=2, default=str))
        for line in predictor.describe(self.predictions, ctx.baseline, self.knobs(ctx)):
            ctx.say(line)

    def knobs(self, ctx: StageContext) -> list[str]:
        """What tells one candidate from another: the searched knobs and the switches the
        screen varied (and, in a trial's config, its planned epochs)."""
        varied = [k for k in screening.SWITCHES
                  if len({r["config"].get(k) for r in self.results}) > 1]
        return [*ctx.prepared.searched, *varied]

    def trial_knobs(self, ctx: StageContext, prediction: predictor.Prediction) -> dict:
        """What a confirmation of `prediction` trains besides the fixed settings: its knobs,
        its planned epochs and, in a race, its schedule (`race.contender_schedule`)."""
        config = prediction.trial_config
        knobs = {k: config[k] for k in [*self.knobs(ctx), "epochs"] if k in config}
        if ctx.spec.confirm != "race":
            return knobs
        if self._task is None:
            self._task = (ctx.task(),)
        share = race.horizon(ctx.baseline, ctx.objective.target)
        return knobs | race.contender_schedule(config, int(config["epochs"]), self._task[0],
                                               share)

    # -- confirm ------------------------------------------------------------------------------
    def _settle(self, ctx: StageContext) -> Settled:
        """What earlier searches settled for this target, taught to the evidence once."""
        if not self.settled.todo and not self.settled.settled:
            self.settled = settle(self.predictions, self.knowledge(ctx), ctx.evidence,
                                  ctx.objective.target, ctx.search_id,
                                  lambda p: self.trial_knobs(ctx, p))
        return self.settled

    def confirm(self, ctx: StageContext) -> None:
        target, spec = ctx.objective.target, ctx.spec
        settled = self._settle(ctx)
        # Confirmed before a stop: not run again, and what they measured counts as it did live.
        done = ctx.book.finished(Role.TRIAL)
        teach_finished(ctx.evidence, done, target)
        ran = {config_key(r.knobs) for r in done}
        todo = [p for p in settled.todo if config_key(self.trial_knobs(ctx, p)) not in ran]
        if settled.skipped:
            ctx.say(f"confirm: {settled.skipped} configuration(s) skipped: an earlier search on "
                    "this machine kind could not bring them to this target")
        # The budget is the question's (this model, data and target), not this search's: a
        # configuration an earlier search settled for this target spent a confirmation of it.
        # Run again, a search answers from what is known; --trials above it looks further.
        planned = min(spec.num_trials - len(done) - settled.settled, len(todo))
        if settled.settled and todo and planned <= 0:
            ctx.say(f"confirm: nothing new to confirm: earlier searches confirmed "
                    f"{settled.settled} configuration(s) for this target, the whole budget of "
                    f"{spec.num_trials} (--trials); raise it to look further ({len(todo)} more "
                    "are predicted faster than the baseline)")
        try:
            if planned > 0:
                run_confirmations(ctx, todo, planned, lambda p: self.trial_knobs(ctx, p),
                                  ctx.profile())
        finally:  # also on a stop: what ended is known to later searches at once
            self._remember_finished(ctx, target)

    def earlier(self) -> list[TrialRecord]:
        return list(self.settled.earlier)

    def loop_alone_s(self, ctx: StageContext) -> float | None:
        """The loop alone's run at the baseline's length, projected from its screen as a
        prediction is (its epochs are the baseline's: the same settings learn alike), scaled
        by the confirmations' measured over predicted times."""
        if ctx.baseline is None:
            return None
        if ctx.baseline["config"].get("loop", "optimized") != "legacy":
            return float(ctx.baseline["train_time_s"])  # the baseline is the optimized loop
        alone = self.loop_alone
        if not alone or alone.get("status") != TrialStatus.COMPLETED or "step_s" not in alone:
            return None
        epochs = int(ctx.baseline.get("epochs") or 1)
        per_epoch = alone["steps_per_epoch"] * (alone["step_s"] + alone.get("data_s", 0.0))
        seconds = (epochs * per_epoch + alone.get("one_off_s", 0.0)) * \
            ctx.evidence.calibration()
        return seconds if math.isfinite(seconds) and seconds > 0 else None

    # -- what this search leaves to later ones ------------------------------------------------
    def _remember_finished(self, ctx: StageContext, target: float) -> None:
        """Every confirmation of this search that ended (not cut short by a stop) and is not
        in the measurements yet, with how far it fell short when it learned too little (a later
        search rules out what learns no more)."""
        own, knowledge = ctx.search_id, self.knowledge(ctx)
        known = {e.get("trial_id") for e in knowledge.entries
                 if e["kind"] == CONFIRM and e.get("search_id") == own}
        for rec in ctx.book.finished(Role.TRIAL):
            if rec.trial_id in known or traits(rec.status).on_resume != OnResume.KEEP:
                continue
            knowledge.add(CONFIRM, config={**ctx.prepared.base, **rec.knobs}, knobs=rec.knobs,
                          picks=rec.picks, short_by=rec.short_by, target=target,
                          status=str(rec.status),
                          trial_id=rec.trial_id, time_to_target_s=rec.time_to_target_s,
                          expected_s=rec.expected_s,
                          expected_high_s=rec.metrics.get("expected_high_s"),
                          expected_epoch=rec.metrics.get("expected_epoch"),
                          expected_reach=rec.metrics.get("expected_reach"),
                          expected_paced_s=rec.metrics.get("expected_paced_s"),
                          val_score=rec.metrics.get("val_score"), curve=rec.curve,
                          epochs=rec.epochs, search=str(ctx.folder.root), search_id=own)

    def finished(self, ctx: StageContext, measured: dict | None) -> None:
        knowledge, own = self.knowledge(ctx), ctx.search_id
        if ctx.baseline and ctx.baseline.get("search_id") == own and \
                knowledge.baseline(ctx.baseline["config"]) is None:
            knowledge.add(BASELINE, config=ctx.baseline["config"], record=ctx.baseline)
        for attempt in (measured or {}).get("attempts", []):  # each length, reached or not
            if attempt.get("search_id") == own:
                knowledge.add(MEASURED, config=attempt["config"], target=ctx.objective.target,
                              measurement=attempt)
        knowledge.add(SEARCH, folder=str(ctx.folder.root), search_id=own, time=time.time())

