"""Where a trial's loop runs: adapts `fit` to a Ray session.

Two sessions run the same code:
* a Ray Train worker (`train_loop_per_worker`): one of `workers` data-parallel processes, with its
  dataset shard, `ray.train.report` (every rank must call it: it is a barrier) and checkpoints;
* the Tune trial process itself (`run_in_tune`), for single-worker trials: same data pipeline,
  same loop, no worker group to start (saves most of a trial's fixed cost).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.data.pipeline import ShardFeed, iter_batches, worker_data
from trainables.loop import LoopIO, fit, fit_legacy
from trainables.loop.noise import ALL_NOISE, gradient_noise_scale, noise_epochs
from trainables.loop.profile import PICK_PREFIX, START_STEP, profile, time_step
from trainables.loop.state import outcome_metrics
from trainables.loop.switches import free_device_memory, reset_peak_memory
from trainables.status import TrialStatus, status_of
from trainables.trial.sampling import NodeSampler

CHECKPOINT_FILE = "state.pt"


@dataclass(frozen=True)
class TrialPlan:
    """Everything a worker needs to train one trial: handed over as it is (pickled by Ray),
    never flattened to a dict and parsed back."""

    cfg: TrialConfig
    meta: DataMeta
    n_train: int
    """Training samples of the whole data set (the shards split them)."""
    threads: int
    """Intra-op threads of each worker: the CPUs it holds."""
    task: Any = None
    """What is trained (trainables/loop/task.py): yours, or your model with the built-in rest;
    None: the built-in task of `cfg.workload`."""
    profile: tuple[str, ...] = ()
    """Speed-only switches to pick by timing a few steps before training
    (`trainables.loop.profile`); empty: train with the config's values."""
    measure_noise: bool = False
    """At a few points of training (`noise.NOISE_POINTS` of its epochs) measure the model's
    gradient noise scale, outside the timed training, and report it with that epoch as
    `noise_scale` (trainables/loop/noise.py)."""
    time_start: bool = False
    """Time the config's steady step before training (`start_step_s`), as the profile does for
    its pick: the process's warm-up before the clock starts (first_use_s), and what a
    prediction made from the screen is checked against, in this process."""
    start_from: str | None = None
    """Another run's checkpoint (a path or URI) to go on from where it shares this run's first
    epochs (trainables/loop/resume.py): the race's winner, measured (orchestrator/measure.py).
    A checkpoint of this trial's own (a restart) comes first."""


@dataclass
class Session:
    """What the loop needs from Ray, whichever process it runs in."""

    world_size: int
    rank: int
    device: torch.device
    train: Any
    """This worker's training data: a Ray Data shard (DataIterator) or Dataset."""
    val: Any
    report: Callable[[dict, Any], None]
    """(metrics, checkpoint or None) -> None."""
    get_checkpoint: Callable[[], Any]
    checkpoint_cls: Any


def run(plan: TrialPlan, session: Session) -> dict:
    """Train `plan` in `session`: warm up (outside the clock), then the loop."""
    return TrialRun(plan, session).train()


class TrialRun:
    """One trial in one training process: its feeds, reports, checkpoints and warm-up around
    the loop (`fit`, or `fit_legacy` for a baseline), which knows nothing of Ray.

    Before the loop's clock starts, the process warms up: the profile's timings (or, with
    nothing to profile, a few timed steps of the trial's own config: `time_start`) pay its
    first-use costs (thread pools, first kernels, the allocator's growth; on a GPU the CUDA
    context and cuDNN's algorithm search), and a cached shard is read into memory. Every trial
    of a search, the baseline included, does the same, so those costs are outside every clock
    alike: reported as `first_use_s`, apart from `train_time_s`."""

    def __init__(self, plan: TrialPlan, session: Session):
        self.plan, self.session, self.cfg = plan, session, plan.cfg
        self.device, self.world = session.device, session.world_size
        self.profiled: dict = {}  # profile_s, the picks and first_use_s: on every report
        self.trained: nn.Module | None = None  # the model the loop trains (the noise probe)
        self.nodes = 1

    def train(self) -> dict:
        plan, cfg = self.plan, self.cfg
        # Each worker owns `threads` cores; more intra-op threads than cores only adds
        # contention.
        torch.set_num_threads(plan.threads)
        train_feed, val_feed = self._feed(self.session.train, True), \
            self._feed(self.session.val, False)
        self.nodes = self._node_count()
        io = LoopIO(
            train_batches=train_feed, val_batches=val_feed,
            # drop_last keeps every step's shape fixed (cuDNN benchmark, compile) and every
            # worker's step count equal (a DDP requirement).
            steps_per_epoch=plan.n_train // self.world // cfg.per_worker_batch,
            report=self.report, all_reduce=self.all_reduce, wrap_model=self.wrap,
            device=self.device, world_size=self.world, save_checkpoint=self.save_checkpoint,
            load_checkpoint=self.load_checkpoint, rank=self.session.rank,
            task=plan.task)
        reset_peak_memory(self.device)  # this trial's peak, not an earlier trial's here
        try:
            cfg = self._warm_up(cfg, io, train_feed)
            return self._fit(cfg, io)
        except Exception as err:
            return self._ended(err, cfg)

    # -- the loop's seam ------------------------------------------------------------------------
    def _feed(self, shard, train: bool) -> ShardFeed:
        # cache_shard: one pass through Ray Data, then epochs indexed from tensors in memory
        # (near raw speed, shuffled by seed + epoch + rank); otherwise streamed every epoch.
        cfg = self.cfg
        return ShardFeed(shard, batch_size=cfg.per_worker_batch, device=self.device,
                         cache=cfg.cache_shard, prefetch_batches=cfg.prefetch_batches,
                         pin_memory=cfg.pin_memory, shuffle=train, drop_last=train,
                         seed=cfg.seed, rank=self.session.rank)

    def all_reduce(self, t: torch.Tensor) -> torch.Tensor:
        if self.world > 1:
            import torch.distributed as dist

            dist.all_reduce(t)
        return t

    def _node_count(self) -> int:
        """Nodes this trial's workers run on: shows the placement strategy. Ray node ids, not
        Train's node ranks (those group workers by IP address, which simulated nodes share)."""
        import ray

        node_ids = [ray.get_runtime_context().get_node_id()] * self.world
        if self.world > 1:
            import torch.distributed as dist

            dist.all_gather_object(node_ids, node_ids[0])
        return len(set(node_ids))

    def report(self, metrics: dict, checkpoint=None) -> None:
        plan, cfg = self.plan, self.cfg
        if plan.measure_noise and self.trained is not None and self.session.rank == 0 and \
                metrics.get("epoch") in noise_epochs(cfg.epochs):
            metrics = {**metrics, **_noise(plan, cfg, plan.meta, self.trained, self.session,
                                           self.device)}
        self.session.report({**metrics, **self.profiled, "nodes": self.nodes}, checkpoint)

    def save_checkpoint(self, state: dict, metrics: dict) -> None:
        # Every rank reports (a barrier); rank 0 alone writes, the others' state is identical.
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = None
            if self.session.rank == 0:
                # With the picks: a restarted worker goes on with the switches it began with.
                torch.save({**state, "profile": dict(self.profiled)},
                           os.path.join(tmp, CHECKPOINT_FILE))
                checkpoint = self.session.checkpoint_cls.from_directory(tmp)
            self.report(metrics, checkpoint)

    def load_checkpoint(self) -> dict | None:
        """This trial's last checkpoint (a restart), else the one it goes on from (marked
        `continued`), else None."""
        checkpoint, continued = self.session.get_checkpoint(), False
        if checkpoint is None and self.plan.start_from:
            checkpoint, continued = self.session.checkpoint_cls(self.plan.start_from), True
        if checkpoint is None:
            return None
        with checkpoint.as_directory() as folder:
            path = os.path.join(folder, CHECKPOINT_FILE)
            if continued and not os.path.isfile(path):
                # Another run's checkpoint that is gone (its folder cleaned away, or a group
                # that went on past `_TAKEN_S` replaced it): this run trains from scratch rather
                # than fail.
                return None
            # weights_only: tensors and plain values only, never arbitrary unpickling.
            saved = torch.load(path, map_location=self.device, weights_only=True)
        return {**saved, "continued": True} if continued else saved

    def wrap(self, model: nn.Module) -> nn.Module:
        self.trained = model  # both loops hand their raw model here first
        if self.world > 1:
            import ray.train.torch

            return ray.train.torch.prepare_model(model)
        return model

    # -- before the clock -----------------------------------------------------------------------
    def _warm_up(self, cfg: TrialConfig, io: LoopIO, train_feed: ShardFeed) -> TrialConfig:
        """The config the loop trains (with the profile's picks), after the process's warm-up
        and the shard's read; their seconds are `first_use_s`."""
        plan, started = self.plan, time.perf_counter()
        if plan.profile and cfg.loop != "legacy":  # the legacy loop keeps its "before" habits
            # On throwaway copies, before fit builds the trial's model: what is learned is the
            # same as without it. Reported as profile_s.
            cfg = _profile(plan, cfg, plan.meta, io, self.profiled)
        if plan.time_start and START_STEP not in self.profiled:
            _time_start(cfg, plan.meta, io, self.profiled)
        if cfg.loop != "legacy":
            train_feed.load()  # the cached shard's one-off read (the legacy loop's: `_fit`)
        self.profiled["first_use_s"] = self.profiled.get("first_use_s", 0.0) + \
            time.perf_counter() - started
        return cfg

    def _fit(self, cfg: TrialConfig, io: LoopIO) -> dict:
        if cfg.loop != "legacy":
            return fit(cfg, self.plan.meta, io)
        # The legacy loop reads this worker's shard into tensors and serves it through a
        # DataLoader with worker processes, as a plain PyTorch "before" loop does; the read is
        # outside its clock, as the optimized loop's is.
        started = time.perf_counter()
        parts = list(iter_batches(self.session.train, batch_size=1024, prefetch_batches=0,
                                  device=torch.device("cpu"), pin_memory=False, drop_last=False))
        x, y = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        self.profiled["first_use_s"] = self.profiled.get("first_use_s", 0.0) + \
            time.perf_counter() - started
        return fit_legacy(cfg, self.plan.meta, io, x, y)

    def _ended(self, err: Exception, cfg: TrialConfig) -> dict:
        outcome = status_of(err)
        if outcome.status == TrialStatus.INFEASIBLE:
            free_device_memory(self.device)  # the next trial here starts with free memory
        if self.world > 1 or outcome.retry:
            # The other ranks may wait in a collective: fail the group. The trial (run_trial)
            # turns the group's error into the same status with the same `status_of`.
            raise err
        # A deterministic end (out of memory, bad configuration, ...) is a result, not a crash:
        # report it, so nothing retries it and the search learns from it.
        metrics = {**outcome_metrics(cfg, outcome), **self.profiled}
        self.session.report(metrics, None)
        return metrics


def _noise(plan: TrialPlan, cfg: TrialConfig, meta: DataMeta, model, session: Session,
           device) -> dict:
    """The trained model's gradient noise scale on this worker's training shard, at the trial's
    own per-worker batch and 4x it, cropped as training crops. Timed apart (`noise_s`)."""
    import time

    from trainables.data.crops import crop_batch
    from trainables.loop.task import task_for

    t0 = time.perf_counter()
    task, parts = plan.task or task_for(cfg.workload, meta.task), 4
    small = cfg.per_worker_batch
    feed = ShardFeed(session.train, batch_size=small * parts, device=device, cache=True,
                     shuffle=True, drop_last=True, seed=cfg.seed + 1, rank=session.rank)
    gen = torch.Generator().manual_seed(cfg.seed + 2)
    crops = (crop_batch(meta.task, x, y, cfg.patch_size, gen) for x, y in feed(0))
    scale = gradient_noise_scale(model, task.loss, crops, small=small, parts=parts)
    return {"noise_scale": min(scale, ALL_NOISE), "noise_s": time.perf_counter() - t0}


def _profile(plan: TrialPlan, cfg: TrialConfig, meta: DataMeta, io: LoopIO,
             profiled: dict) -> TrialConfig:
    """The config with the profile's picks (also put in `profiled`, which every report carries).
    A worker restarted from a checkpoint takes the picks the checkpoint saved instead of timing
    again: it must go on training as it began."""
    saved = io.load_checkpoint()
    if saved is not None and "profile" in saved:
        profiled.update(saved["profile"])
    else:
        found = profile(cfg, meta, io, plan.profile)
        profiled.update(found.metrics() if found.picks else {})
    picks = {k.removeprefix(PICK_PREFIX): v for k, v in profiled.items()
             if k.startswith(PICK_PREFIX)}
    return dataclasses.replace(cfg, **picks)


def _time_start(cfg: TrialConfig, meta: DataMeta, io: LoopIO, profiled: dict) -> None:
    """The config's steady step, timed before training (a profile that ran timed it already),
    put in `profiled`; a restarted worker keeps what its checkpoint saved."""
    saved = io.load_checkpoint()
    if saved is not None and START_STEP in saved.get("profile", {}):
        profiled[START_STEP] = saved["profile"][START_STEP]
        return
    step_s = time_step(cfg, meta, io)
    if step_s is not None:
        profiled[START_STEP] = step_s


def train_loop_per_worker(config: dict) -> dict:
    """Ray Train entry point: one data-parallel worker; `config` is {"plan": TrialPlan} and
    what `group_datasets` gave the group."""
    import ray.train
    import ray.train.torch

    ctx = ray.train.get_context()
    device = ray.train.torch.get_device()
    sampler = NodeSampler(device)  # this worker's node, sampled and sent with every report
    train, val = worker_data(config)
    session = Session(
        world_size=ctx.get_world_size(), rank=ctx.get_world_rank(), device=device,
        train=train, val=val,
        report=sampler.attach(
            lambda metrics, checkpoint: ray.train.report(metrics, checkpoint=checkpoint)),
        get_checkpoint=ray.train.get_checkpoint, checkpoint_cls=ray.train.Checkpoint,
    )
    with sampler:
        return run(config["plan"], session)


def run_in_tune(plan: TrialPlan, datasets: dict, objective: Callable[[dict, dict], dict] | None,
                use_gpu: bool) -> dict:
    """A single-worker trial inside the Tune trial process: same pipeline and loop, reported
    through `ray.tune.report`, checkpointed through Tune (its FailureConfig restarts it)."""
    import ray.tune

    state: dict = {}

    def report(metrics: dict, checkpoint) -> None:
        ray.tune.report(objective(metrics, state) if objective else metrics,
                        checkpoint=checkpoint)

    device = torch.device("cuda", 0) if use_gpu and torch.cuda.is_available() else \
        torch.device("cpu")
    sampler = NodeSampler(device)  # this process's node, sampled and sent with every report
    session = Session(
        world_size=1, rank=0, device=device, train=datasets["train"], val=datasets["val"],
        report=sampler.attach(report), get_checkpoint=ray.tune.get_checkpoint,
        checkpoint_cls=ray.tune.Checkpoint,
    )
    with sampler:
        return run(plan, session)
