"""The search driver: one search as stages that run in order and record their progress.

    prepare   check the spec, data and space against the hardware (bad input ends here, as an
              InputError); start or join Ray; open the MLflow parent run; print the header
    baseline  train the baseline trial, or take a recorded one (orchestrator/baseline.py)
    ...       the strategy's stages (orchestrator/strategy.py): strategy 'tune' (orchestrator/
              tune/) or 'screen' (orchestrator/screen/)
    finish    leaderboard, best config, economics, MLflow tags (orchestrator/finish.py)

Every stage that ends is recorded in the search folder (`search_state.json`), so a search
stopped anywhere (Ctrl-C, `kill -9`, a lost head) is finished by `orchestrator resume DIR`: the
same stages run again with what the folder holds. A stage done is read back, not run again;
trials the journal says finished are kept; trials a stop cut short are discarded and run anew.
A stage that raises ends the search as `SearchFailed`, naming the stage and the traceback file.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import TextIO, TypeVar

import yaml

from orchestrator import baseline as baselines
from orchestrator import history_baseline, resources
from orchestrator.errors import InputError, SearchFailed, write_traceback
from orchestrator.finish import write_results
from orchestrator.folder import SearchFolder, portable_spec
from orchestrator.interrupt import Interrupts, SearchInterrupted, Stop
from orchestrator.machine import plan_machine_kind
from orchestrator.prepare import Prepared, describe_space, load_data, prepare, print_space
from orchestrator.records import Role
from orchestrator.result import SearchResult
from orchestrator.spec import SearchSpec
from orchestrator.stages import Stage, StageContext
from orchestrator.strategies import STRATEGIES
from orchestrator.tracking import MlflowTracker, Tracker
from orchestrator.tracking.datasets import dataset_record
from orchestrator.tracking.mlflow_writer import open_store_early
from orchestrator.trial_book import TrialBook
from orchestrator.tune_runs import TuneRun

T = TypeVar("T")


class Search:
    """`Search(spec).run()`: the search `spec` describes. `resume`: continue the one in
    `output_dir/name` that a stop left unfinished. `tracker`: where records go (default MLflow
    at `spec.tracking_uri`). `started`: when the user started it (the CLI: its process's start),
    the start of the search's wall time and cost."""

    def __init__(self, spec: SearchSpec, *, out: TextIO = sys.stdout,
                 tracker: Tracker | None = None, resume: bool = False,
                 started: float | None = None):
        self.spec, self.out, self.resume = spec, out, resume
        self.folder = SearchFolder.of(spec.output_dir, spec.name)
        self.strategy = STRATEGIES[spec.strategy]()
        self.objective = spec.make_objective()
        self.tracker, self.ledger = tracker, None
        self.ctx: StageContext | None = None  # set by the prepare stage
        self.started_ray = False
        self.uses_ray = True  # False: a resume with only the results left to write (prepare)
        self.done = set(self.folder.stages_done()) if resume else set()
        self.earlier_s = self.folder.read_state().get("stage_s", {}) if resume else {}
        self.started, self.seconds = started or time.time(), {}  # stage -> seconds, here

    @property
    def stages(self) -> tuple[Stage, ...]:
        return (Stage.BASELINE, *self.strategy.stages(self.objective))

    def run(self) -> SearchResult:
        """prepare -> baseline -> the strategy's stages -> finish; a stage the folder records
        as done is read back instead of run again."""
        try:
            with Interrupts(self.out, on_stop=self._stopping) as self.interrupts:
                self._stage(Stage.PREPARE, self.prepare)
                self._stage(Stage.BASELINE, self.run_baseline, restore=self.read_baseline)
                for stage in self.strategy.stages(self.objective):
                    self._stage(stage, lambda s=stage: self.strategy.run(s, self.ctx),
                                restore=lambda s=stage: self.strategy.restore(s, self.ctx))
                return self._stage(Stage.FINISH, self.finish)
        finally:
            self.close()

    def _stage(self, stage: Stage, run: Callable[[], T], restore: Callable[[], T] | None = None):
        if stage in self.done:
            return restore() if restore else None
        began = time.time()
        try:
            result = run()
        except (InputError, SearchInterrupted):
            raise
        except Stop:  # the first signal, between trials: stopped where it was
            raise self._interrupted() from None
        except Exception as err:
            raise SearchFailed(stage, err, self.folder.root if self._resumable() else None,
                               write_traceback(err, self.folder.error_log)) from err
        if self.interrupts.interrupted:
            raise self._interrupted()
        self.seconds[stage] = time.time() - began
        if stage.recorded:
            self.folder.mark_done(stage, self.seconds[stage])
        return result

    # -- stages -----------------------------------------------------------------------------
    def prepare(self) -> None:
        spec = self.spec
        data = load_data(spec)  # a file that does not read fails before Ray
        joining = _joining()
        prepared = None
        if not joining:  # the plan needs only this machine: check it before Ray starts
            prepared = prepare(spec, data, *resources.local_resources())
        self.uses_ray = joining or not self.done.issuperset(self.stages)
        store = None if self.tracker else open_store_early(spec.resolved_tracking_uri())
        if self.uses_ray:  # a resume with only the results left to write needs no Ray
            self.started_ray = resources.init_ray()
        if store is not None:
            store.join()
        self.interrupts.install()  # ray.init took SIGTERM for itself
        if joining:
            prepared = prepare(spec, data, *resources.cluster_resources())
        previous = self.folder.read_state() if self.resume else {}
        if not self.resume:
            self.folder.start_fresh()
        # A folder written before search ids names its search by its path.
        search_id = previous.get("search_id") or (str(self.folder.root) if self.resume
                                                  else uuid.uuid4().hex)
        self.tracker = self.tracker or MlflowTracker(
            spec.resolved_tracking_uri(), artifact_root=spec.resolved_artifact_root(),
            fallback_dir=self.folder.root, outbox_file=self.folder.outbox)
        self.ctx = self._context(prepared, search_id)
        self._header(prepared)
        self.tracker.start_search(
            spec.name,
            params={"objective": self.objective.formula, "num_trials": spec.num_trials,
                    "epochs": spec.epochs, "data": prepared.data.source, "seed": spec.seed,
                    "strategy": spec.strategy, "task": self._task_name(),
                    "machine_kind": plan_machine_kind(prepared.plan),
                    **self.strategy.params(self.ctx)},
            artifacts={"spec.yaml": yaml.safe_dump(spec.to_dict(), sort_keys=False),
                       "search_space.json": json.dumps(describe_space(prepared.searched),
                                                       indent=2)},
            parent_run_id=previous.get("parent_run_id"), dataset=dataset_record(prepared.data))
        self.ctx.book.discard_cut_short()
        self.folder.write_state(spec=portable_spec(spec.to_dict(), self.folder.root.parent),
                                search_id=search_id, parent_run_id=self.tracker.parent_run_id,
                                tracking_uri=self.tracker.location, finished=False)

    def _context(self, p: Prepared, search_id: str = "") -> StageContext:
        if self.uses_ray and not self.spec.rerun_duplicates and self.strategy.uses_ledger:
            from trainables.trial.ledger import start_ledger

            self.ledger = start_ledger()
        ctx = StageContext(spec=self.spec, prepared=p, folder=self.folder, book=None,
                           tracker=self.tracker, out=self.out, fit=self._fit,
                           objective=self.objective, ledger=self.ledger,
                           search_id=search_id, spent=self._cost_s)
        ctx.book = TrialBook(self.tracker, out=self.out, journal=self.folder.journal,
                             base=p.base, ledger=self.ledger,
                             seed=p.base.get("seed", self.spec.seed), evidence=ctx.evidence)
        return ctx

    def run_baseline(self) -> None:
        ctx, kind = self.ctx, baselines.resolved_kind(self.spec)
        if kind == "none":
            return
        if kind in baselines.BASELINES:
            config = baselines.baseline_config(kind, ctx.prepared.base, self.spec.baseline_set)
            config = {**config, "epochs": baselines.baseline_epochs(self.spec, config)}
            record = None if self.spec.rerun_baseline else \
                self.strategy.known_baseline(ctx, config)
            if record is None:
                done = ctx.book.finished(Role.BASELINE)  # ended, its stage not recorded
                # Its step timed where a later search times it: before any training.
                step = history_baseline.step_of(self._time_here(
                    baselines.resolved_config({"config": config})))
                rec = done[-1] if done else self._train_baseline(config)
                record = baselines.record_of(kind, config, rec, self.tracker.parent_run_id,
                                             str(self.folder.root), ctx.search_id)
                record = self._clocked(record, step)
            else:  # an earlier search's: at today's speed, as a recorded one
                record = self._at_todays_speed(record)
        elif history_baseline.is_history(kind):  # your run: its curve, on this clock
            record = self._history_baseline(kind)
        else:  # measured before: compare with it, do not run it again; at today's speed
            record = self._at_todays_speed(baselines.load_record(kind))
        self.folder.baseline.write_text(json.dumps(record, indent=2, default=str))
        self.read_baseline()
        ctx.say(baselines.result_line(kind, record, ctx.search_id))

    def _history_baseline(self, source: str) -> dict:
        ctx, p = self.ctx, self.ctx.prepared
        history = history_baseline.load(source, self.spec.resolved_tracking_uri())
        config = history_baseline.config_of(history, p.base, self.spec.baseline_set)
        own = history_baseline.same_clock(history, plan_machine_kind(p.plan), self._task_name(),
                                          self.spec.baseline_set)
        then = history_baseline.step_then(history) if own else None  # a CSV's: none
        timed = self._time_here(config, then) if history_baseline.times_here(history, own) \
            else None
        return history_baseline.record(history, config, timed, str(self.folder.root),
                                       ctx.search_id, own_clock=own)

    def _clocked(self, record: dict, step: float | None) -> dict:
        """The trained baseline with its step timed as a later search times it, at the same
        point (its baseline stage's start, before any training: timed right after the
        classifier's baseline trained, it read 0.0091 s where later searches' starts read
        0.0106-0.0118 s): `clock_step_s`, also on its MLflow run, what a search that takes it
        from history holds today's timing against (orchestrator/history_baseline.py)."""
        from orchestrator.tracking.history import CLOCK_STEP

        if step is None:
            return record  # held against its trial's start step, as before
        self.tracker.log_epoch(record["trial_id"], {CLOCK_STEP: step}, step=record["epochs"])
        return {**record, CLOCK_STEP: step}

    def _at_todays_speed(self, record: dict) -> dict:
        """A baseline an earlier search recorded, its seconds scaled where this machine's speed
        moved since (its step timed here against the one it timed then); its clock is what
        the search reuses earlier timings by (history_baseline.clock_of)."""
        if not history_baseline.clock_of(record):  # recorded before steps were: as it is
            return record
        return history_baseline.at_todays_speed(
            record, self._time_here(baselines.resolved_config(record),
                                    then=history_baseline.clock_of(record)))

    def _time_here(self, config: dict, then: float | None = None) -> dict | None:
        """The baseline's settings timed on this machine for a few steps, each reading the
        median of history_baseline.ROUNDS timings; held against `then` (the step a recorded
        baseline's seconds are on) where one is (history_baseline.read_step)."""
        from orchestrator.step_timing import run_screen

        ctx, p = self.ctx, self.ctx.prepared

        def reading() -> dict | None:
            return history_baseline.timed_step(run_screen(
                [dict(config) for _ in range(history_baseline.ROUNDS)], meta=p.data.meta(),
                n_train=len(p.data.x_train), datasets=ctx.datasets(), plan=p.plan,
                task=ctx.task()))

        return history_baseline.read_step(reading, then)

    def _train_baseline(self, config: dict):
        from trainables.trial.trainable import reuse_actors
        from orchestrator.tune_runs import trainable

        ctx = self.ctx
        # It runs as given (no profile, no ledger), warmed up before its clock as every trial
        # is, and its objective only adds full_run_s. The screen's predictions need its
        # trained model's gradient noise scale.
        trial_ctx = ctx.trial_context(config, baselines.baseline_objective(self.spec),
                                      measure_noise=self.strategy.measures_noise)
        ctx.book.begin(Role.BASELINE, 1, config["epochs"], base=config)
        self._fit(TuneRun(
            trainable(trial_ctx, ctx.datasets()), {}, num_samples=1, max_concurrent=1,
            reuse_actors=reuse_actors([config.get("workers", 1)],
                                      self.spec.always_use_worker_group)))
        return ctx.book.finished(Role.BASELINE)[-1]

    def read_baseline(self) -> None:
        if self.folder.baseline.is_file():
            baseline = json.loads(self.folder.baseline.read_text())
            self.objective = self.ctx.objective = baselines.with_baseline(self.objective,
                                                                          baseline)
            self.ctx.baseline = baseline
            self.ctx.evidence.baseline_reached(baselines.resolved_config(baseline))

    def finish(self) -> SearchResult:
        ctx = self.ctx
        ctx.book.close_open()  # none after a clean stage; a safety net, never `running`
        from orchestrator import measure

        measured = measure.read(ctx)
        result = write_results(ctx, self.strategy, measured=measured,
                               wall_s=time.time() - self.started, cost_s=self._cost_s())
        self.strategy.finished(ctx, measured)
        # Only now: a search stopped before this point stays resumable.
        self.folder.write_state(finished=True, parent_run_id=self.tracker.parent_run_id)
        return result

    def _cost_s(self) -> float:
        """What finding the answer cost: the search's wall time from its start (and the stages
        earlier drivers of a resumed search ran), minus the baseline's run, which the user
        makes anyway, and nothing else."""
        here = time.time() - self.started
        before = sum(s for stage, s in self.earlier_s.items() if stage != Stage.BASELINE)
        baseline = self.ctx.baseline or {}
        trained_here = baseline.get("search_id") == self.ctx.search_id and \
            Stage.BASELINE in self.seconds
        run_s = self.seconds[Stage.BASELINE] - float(baseline.get("noise_s") or 0.0) \
            if trained_here else 0.0
        return max(0.0, here + before - run_s)

    # -- what the stages share ----------------------------------------------------------------
    def _task_name(self) -> str:
        """What the trials train, as MLflow records it: your task's 'module:Class', your
        model's, or the built-in workload's."""
        from trainables.loop.task import name_of

        task = self.ctx.task()
        return name_of(task) if task is not None else f"built-in {self.spec.workload}"

    def _header(self, p: Prepared) -> None:
        spec, out = self.spec, self.out
        kind = baselines.resolved_kind(spec)
        config = baselines.baseline_config(kind, p.base, spec.baseline_set)
        print(f"search {spec.name!r}: {spec.trials_line()} on {p.data.describe()}", file=out)
        print("  " + baselines.describe(kind, config, p.base,
                                        baselines.baseline_epochs(spec, config)), file=out)
        print_space(p, spec, out)
        for line in self.strategy.header(self.ctx):
            print(f"  {line}", file=out)
        print(f"  {self.objective.formula}", file=out)
        print(f"  {p.plan.max_concurrent_trials} trial(s) at a time, {p.plan.cpus_per_trial} CPUs"
              + (f" and up to {p.plan.gpus_per_trial} GPUs" if p.plan.use_gpu else "")
              + " per trial", file=out, flush=True)
        if self.resume:
            book = self.ctx.book
            trials = book.finished(Role.TRIAL)
            print(f"  resuming: stages done {sorted(self.done) or 'none'}; "
                  f"{len(trials)} trial(s) already finished, {len(book.cut_short)} cut "
                  f"short by the stop (discarded, run again), "
                  f"{max(0, spec.num_trials - len(trials))} to run"
                  + ("" if self.uses_ray else
                     "; only the results are left to write (no Ray needed)"),
                  file=out, flush=True)

    def _fit(self, run: TuneRun) -> None:
        # Every stage's Tune run writes Ray's own files into the search folder's ray/.
        tuner = run.tuner("tune", str(self.folder.ray), self.ctx.book)
        with self.interrupts.fitting():
            tuner.fit()
        if self.interrupts.interrupted:  # Tune stopped its trials: the stage stops here
            raise Stop

    def _stopping(self) -> None:
        if self.ctx is not None:
            self.ctx.book.stopping = True

    def _resumable(self) -> bool:
        return self.folder.state.is_file()

    def _interrupted(self) -> SearchInterrupted | KeyboardInterrupt:
        """End what is open after a first signal; the error that says how to resume."""
        if self.ctx is not None:
            self.ctx.book.close_open()  # running trials end `interrupted`
        if self.tracker is not None and self.tracker.parent_run_id:
            self.tracker.interrupt_search()
        if not self._resumable():  # stopped before the folder was written: start again
            return KeyboardInterrupt()
        return SearchInterrupted(self.folder.root)

    def close(self) -> None:
        import ray

        if self.ledger is not None:  # one per search: a long-lived session keeps none
            ray.kill(self.ledger)
            self.ledger = None
        if self.started_ray:
            ray.shutdown()


def _joining() -> bool:
    """Whether this search joins a running Ray (a job on a cluster, a notebook's session)."""
    import ray

    return ray.is_initialized() or bool(os.environ.get("RAY_ADDRESS"))


def run_search(spec: SearchSpec, *, out: TextIO = sys.stdout, tracker: Tracker | None = None,
               resume: bool = False, started: float | None = None) -> SearchResult:
    """Run a whole search and return its result (the CLI is a thin layer over this).

    resume: continue the search in `output_dir/name` that a stop left unfinished (see `Search`).
    started: when its wall time starts (default: now)."""
    return Search(spec, out=out, tracker=tracker, resume=resume, started=started).run()
