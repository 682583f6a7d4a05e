"""The search driver: one search as stages that run in order and record their progress.

    prepare   check the spec, data and space against the hardware (bad input ends here, as an
              InputError); start or join Ray; open the MLflow parent run; print the header
    baseline  train the baseline trial, or read a recorded one (orchestrator/baseline.py)
    tune      strategy 'tune': Ray Tune + Optuna over the search's trials
    screen, predict, confirm
              strategy 'screen': time every candidate for a few steps, predict each one's time
              to the baseline's accuracy, train the fastest predicted to it
              (orchestrator/screen_stages.py)
    finish    leaderboard, best config, Pareto set, MLflow tags (orchestrator/finish.py)

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
from collections.abc import Callable
from typing import TextIO, TypeVar

import yaml

from orchestrator import baseline as baselines
from orchestrator import resources
from orchestrator.errors import InputError, SearchFailed, write_traceback
from orchestrator.finish import write_results
from orchestrator.folder import SearchFolder, portable_spec
from orchestrator.interrupt import Interrupts, SearchInterrupted, Stop
from orchestrator.prepare import (Prepared, describe_space, load_data, prepare,
                                  print_space, profile_switches, worker_counts)
from orchestrator.records import Role
from orchestrator.result import SearchResult
from orchestrator.screen_stages import ScreenStages
from orchestrator.spec import SearchSpec
from orchestrator.stopper import target_stopper
from orchestrator.tracking import MlflowTracker, Tracker
from orchestrator.tracking.datasets import dataset_record
from orchestrator.tracking.mlflow_writer import open_store_early
from orchestrator.trial_book import TrialBook
from orchestrator.tuning import TuneRun, make_searcher, trainable

T = TypeVar("T")


class Search:
    """`Search(spec).run()`: the search `spec` describes. `resume`: continue the one in
    `output_dir/name` that a stop left unfinished. `tracker`: where records go (default MLflow
    at `spec.tracking_uri`)."""

    def __init__(self, spec: SearchSpec, *, out: TextIO = sys.stdout,
                 tracker: Tracker | None = None, resume: bool = False):
        self.spec, self.out, self.resume = spec, out, resume
        self.folder = SearchFolder.of(spec.output_dir, spec.name)
        self.objective = spec.make_objective()
        self.tracker, self.book, self.ledger = tracker, None, None
        self.prepared: Prepared | None = None  # set by the prepare stage
        self.datasets, self.baseline, self.started_ray = None, None, False
        self.uses_ray = True  # False: a resume with only the results left to write (prepare)
        self.done = set(self.folder.stages_done()) if resume else set()
        self.started, self.seconds = time.time(), {}  # stage -> seconds, in this driver
        self.screens = ScreenStages(self) if spec.strategy == "screen" else None

    def run(self) -> SearchResult:
        """prepare -> baseline -> tune (or screen -> predict -> confirm) -> finish; a stage the
        folder records as done is read back instead of run again."""
        try:
            with Interrupts(self.out, on_stop=self._stopping) as self.interrupts:
                self._stage("prepare", self.prepare)
                self._stage("baseline", self.run_baseline, restore=self.read_baseline)
                if self.screens is None:
                    self._stage("tune", self.tune)
                else:
                    self._stage("screen", self.screens.screen, restore=self.screens.read_screen)
                    self._stage("predict", self.screens.predict,
                                restore=self.screens.read_predictions)
                    self._stage("confirm", self.screens.confirm)
                return self._stage("finish", self.finish)
        finally:
            self.close()

    def _stage(self, name: str, run: Callable[[], T], restore: Callable[[], T] | None = None):
        if name in self.done:
            return restore() if restore else None
        began = time.time()
        try:
            result = run()
        except (InputError, SearchInterrupted):
            raise
        except Stop:  # the first signal, between trials: stopped where it was
            raise self._interrupted() from None
        except Exception as err:
            raise SearchFailed(name, err, self.folder.root if self._resumable() else None,
                               write_traceback(err, self.folder.error_log)) from err
        if self.interrupts.interrupted:
            raise self._interrupted()
        self.seconds[name] = time.time() - began
        # prepare always runs (it checks and starts what the others use); finish is recorded by
        # the folder's `finished`, which it writes last.
        if name not in ("prepare", "finish"):
            self.folder.mark_done(name, self.seconds[name])
        return result

    # -- stages -----------------------------------------------------------------------------
    def prepare(self) -> None:
        spec = self.spec
        data = load_data(spec)  # a file that does not read fails before Ray
        joining = _joining()
        if not joining:  # the plan needs only this machine: check it before Ray starts
            self.prepared = prepare(spec, data, *resources.local_resources())
        self.uses_ray = joining or self._trains_more()
        store = None if self.tracker else open_store_early(spec.resolved_tracking_uri())
        if self.uses_ray:  # a resume with only the results left to write needs no Ray
            self.started_ray = resources.init_ray()
        if store is not None:
            store.join()
        self.interrupts.install()  # ray.init took SIGTERM for itself
        if joining:
            self.prepared = prepare(spec, data, *resources.cluster_resources())
        previous = self.folder.read_state() if self.resume else {}
        if not self.resume:
            self.folder.start_fresh()
        self.tracker = self.tracker or MlflowTracker(
            spec.resolved_tracking_uri(), artifact_root=spec.resolved_artifact_root(),
            fallback_dir=self.folder.root, outbox_file=self.folder.outbox)
        if self.uses_ray and not spec.rerun_duplicates:
            from trainables.trial.ledger import start_ledger

            self.ledger = start_ledger()
        p = self.prepared
        self.book = TrialBook(self.tracker, out=self.out, journal=self.folder.journal,
                              base=p.base, ledger=self.ledger, seed=p.base.get("seed", spec.seed))
        self._header(p)
        self.tracker.start_search(
            spec.name,
            params={"objective": self.objective.formula, "num_trials": spec.num_trials,
                    "epochs": spec.epochs, "data": p.data.source, "seed": spec.seed,
                    "strategy": spec.strategy,
                    **({"learned_from": json.dumps(self.screens.knowledge.searches())}
                       if self.screens else {})},
            artifacts={"spec.yaml": yaml.safe_dump(spec.to_dict(), sort_keys=False),
                       "search_space.json": json.dumps(describe_space(p.searched), indent=2)},
            parent_run_id=previous.get("parent_run_id"), dataset=dataset_record(p.data))
        self.book.discard_cut_short()
        self.folder.write_state(spec=portable_spec(spec.to_dict(), self.folder.root.parent),
                                parent_run_id=self.tracker.parent_run_id,
                                tracking_uri=self.tracker.location, finished=False)

    def run_baseline(self) -> None:
        kind, p = baselines.resolved_kind(self.spec), self.prepared
        if kind == "none":
            return
        if kind in baselines.BASELINES:
            config = baselines.baseline_config(kind, p.base)
            done = self.book.finished(Role.BASELINE)  # ended, but its stage was not recorded
            rec = done[-1] if done else self._train_baseline(config)
            record = baselines.record_of(kind, config, rec, self.tracker.parent_run_id)
        else:  # measured before: compare with it, do not run it again
            record = baselines.load_record(kind)
        self.folder.baseline.write_text(json.dumps(record, indent=2, default=str))
        self.read_baseline()
        print(baselines.result_line(kind, record), file=self.out, flush=True)

    def _train_baseline(self, config: dict):
        from trainables.trial.trainable import reuse_actors

        epochs = baselines.baseline_epochs(self.spec, config)
        config = {**config, "epochs": epochs}
        # It runs as given (no profile, no ledger), and its objective only adds full_run_s. The
        # screen's predictions need its trained model's gradient noise scale.
        ctx = self._trial_context(config, baselines.baseline_objective(self.spec), (), None,
                                  measure_noise=self.screens is not None)
        self.book.begin(Role.BASELINE, 1, epochs, base=config)
        self._fit(TuneRun(
            trainable(ctx, self._datasets()), {}, num_samples=1, max_concurrent=1,
            reuse_actors=reuse_actors([config.get("workers", 1)],
                                      self.spec.always_use_worker_group)))
        return self.book.finished(Role.BASELINE)[-1]

    def read_baseline(self) -> None:
        if self.folder.baseline.is_file():
            self.baseline = json.loads(self.folder.baseline.read_text())
            self.objective = baselines.with_baseline(self.objective, self.baseline)

    def tune(self) -> None:
        from trainables.trial.trainable import reuse_actors

        spec, p = self.spec, self.prepared
        history = self.book.finished(Role.TRIAL)
        to_run = spec.num_trials - len(history)
        if to_run <= 0:
            return
        ctx = self._trial_context(p.base, self.objective,
                                  profile_switches(spec, p.searched, p.base), self.ledger)
        stopper = target_stopper(self.objective)
        self.book.follow(stopper)
        self.book.begin(Role.TRIAL, spec.num_trials, spec.epochs)
        self._fit(TuneRun(
            trainable(ctx, self._datasets()), p.searched, num_samples=to_run,
            max_concurrent=p.plan.max_concurrent_trials,
            reuse_actors=reuse_actors(worker_counts(p.searched, p.base),
                                      spec.always_use_worker_group),
            searcher=make_searcher(spec, self.objective, p.searched, p.base, history,
                                   self.book.stop_reasons) if p.searched else None,
            scheduler=self._scheduler(), stopper=stopper, time_budget_s=spec.time_budget_s))

    def finish(self) -> SearchResult:
        self.book.close_open()  # none after a clean tune stage; a safety net, never `running`
        wall = time.time() - self.started
        screens, extra = self.screens, {}
        if screens is not None:
            extra = {"screen.json": self.folder.screen.read_text(),
                     "predictions.json": self.folder.predictions.read_text()}
        result = write_results(
            name=self.spec.name, data_name=self.spec.to_dict()["data"],
            knobs=screens.knobs if screens else list(self.prepared.searched),
            base=self.prepared.base, book=self.book, tracker=self.tracker,
            objective=self.objective, folder=self.folder, baseline=self.baseline, wall_s=wall,
            # What finding the config cost: the baseline is a run the user makes anyway.
            search_cost_s=wall - self.seconds.get("baseline", 0.0),
            earlier=screens.earlier if screens else (), artifacts=extra)
        if screens is not None:
            screens.remember_search()
        # Only now: a search stopped before this point stays resumable.
        self.folder.write_state(finished=True, parent_run_id=self.tracker.parent_run_id)
        return result

    # -- what the stages share ----------------------------------------------------------------
    def _header(self, p: Prepared) -> None:
        spec, out = self.spec, self.out
        config = baselines.baseline_config(baselines.resolved_kind(spec), p.base)
        print(f"search {spec.name!r}: {spec.trials_line()} on {p.data.describe()}", file=out)
        print("  " + baselines.describe(baselines.resolved_kind(spec), config, p.base,
                                        baselines.baseline_epochs(spec, config)), file=out)
        print_space(p, spec, out)
        if self.screens is not None:
            print("  strategy: screen every combination, predict each one's time to the "
                  "baseline's accuracy, confirm the fastest predicted", file=out)
            if line := self.screens.header():
                print(f"  {line}", file=out)
        print(f"  {self.objective.formula}", file=out)
        print(f"  {p.plan.max_concurrent_trials} trial(s) at a time, {p.plan.cpus_per_trial} CPUs"
              + (f" and up to {p.plan.gpus_per_trial} GPUs" if p.plan.use_gpu else "")
              + " per trial", file=out, flush=True)
        if self.resume:
            trials = self.book.finished(Role.TRIAL)
            print(f"  resuming: stages done {sorted(self.done) or 'none'}; "
                  f"{len(trials)} trial(s) already finished, {len(self.book.cut_short)} cut "
                  f"short by the stop (discarded, run again), "
                  f"{max(0, spec.num_trials - len(trials))} to run"
                  + ("" if self.uses_ray else
                     "; only the results are left to write (no Ray needed)"),
                  file=out, flush=True)

    def _trial_context(self, base: dict, objective, profile: tuple[str, ...], ledger,
                       measure_noise: bool = False, time_start: bool = False):
        from trainables.trial.trainable import TrialContext

        p = self.prepared
        return TrialContext(
            base=base, meta=p.data.meta(), model_builder=self.spec.resolved_model(),
            n_train=len(p.data.x_train), resources=p.plan,
            storage_path=str(self.folder.train_storage), objective=objective,
            always_use_worker_group=self.spec.always_use_worker_group,
            placement=self.spec.placement, ledger=ledger, profile=profile,
            measure_noise=measure_noise, time_start=time_start)

    def _trains_more(self) -> bool:
        """Whether a stage that trains is still to run (not recorded done by the folder)."""
        training = ("baseline", "tune") if self.screens is None else \
            ("baseline", "screen", "predict", "confirm")
        return not self.done.issuperset(training)

    def _datasets(self) -> dict:
        """The data in Ray's object store, once per search: every trial of every stage shares it,
        and a worker group reads its share of it cut here for its worker count."""
        if self.datasets is None:
            from trainables.data.pipeline import to_ray_datasets

            p = self.prepared
            self.datasets = to_ray_datasets(p.data, worker_counts=worker_counts(p.searched, p.base))
        return self.datasets

    def _scheduler(self):
        if not self.spec.early_stopping:
            return None
        from ray.tune.schedulers import ASHAScheduler

        return ASHAScheduler(
            metric=self.objective.metric, mode=self.objective.mode,
            time_attr="training_iteration", max_t=self.spec.epochs,
            grace_period=self.spec.grace_period, reduction_factor=self.spec.reduction_factor)

    def _fit(self, run: TuneRun) -> None:
        # Every stage's Tune run writes its trial folders into the one search folder.
        tuner = run.tuner(self.spec.name, str(self.folder.root.parent), self.book)
        with self.interrupts.fitting():
            tuner.fit()
        if self.interrupts.interrupted:  # Tune stopped its trials: the stage stops here
            raise Stop

    def _stopping(self) -> None:
        if self.book is not None:
            self.book.stopping = True

    def _resumable(self) -> bool:
        return self.folder.state.is_file()

    def _interrupted(self) -> SearchInterrupted | KeyboardInterrupt:
        """End what is open after a first signal; the error that says how to resume."""
        if self.book is not None:
            self.book.close_open()  # running trials end `interrupted`
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


def run_search(spec: SearchSpec, *, out: TextIO = sys.stdout,
               tracker: Tracker | None = None, resume: bool = False) -> SearchResult:
    """Run a whole search and return its result (the CLI is a thin layer over this).

    resume: continue the search in `output_dir/name` that a stop left unfinished (see `Search`)."""
    return Search(spec, out=out, tracker=tracker, resume=resume).run()
