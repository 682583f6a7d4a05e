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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.data.pipeline import ShardFeed, iter_batches, worker_data
from trainables.loop import LoopIO, fit, fit_legacy
from trainables.loop.io import identity
from trainables.loop.noise import gradient_noise_scale, noise_epochs
from trainables.loop.profile import PICK_PREFIX, START_STEP, profile, time_step
from trainables.loop.state import outcome_metrics
from trainables.loop.switches import free_device_memory, reset_peak_memory
from trainables.models import ModelBuilder
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
    model_builder: ModelBuilder | None = None
    """A user's own model builder; None builds `cfg.workload`."""
    profile: tuple[str, ...] = ()
    """Speed-only switches to pick by timing a few steps before training
    (`trainables.loop.profile`); empty: train with the config's values."""
    measure_noise: bool = False
    """At a few points of training (`noise.NOISE_POINTS` of its epochs) measure the model's
    gradient noise scale, outside the timed training, and report it with that epoch as
    `noise_scale` (trainables/loop/noise.py)."""
    time_start: bool = False
    """Time the config's steady step before training (`start_step_s`), as the profile does for
    its pick: what a prediction made from the screen is checked against, in this process."""


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
    import torch.distributed as dist

    cfg, meta = plan.cfg, plan.meta
    # Each worker owns `threads` cores; more intra-op threads than cores only adds contention.
    torch.set_num_threads(plan.threads)
    world, device = session.world_size, session.device
    batch = cfg.per_worker_batch
    # drop_last keeps every step's shape fixed (cuDNN benchmark, compile) and every worker's step
    # count equal (a DDP requirement).
    steps = plan.n_train // world // batch

    def feed(shard, train: bool) -> ShardFeed:
        # cache_shard: one pass through Ray Data, then epochs indexed from tensors in memory (near
        # raw speed, shuffled by seed + epoch + rank); otherwise streamed every epoch.
        return ShardFeed(shard, batch_size=batch, device=device, cache=cfg.cache_shard,
                         prefetch_batches=cfg.prefetch_batches, pin_memory=cfg.pin_memory,
                         shuffle=train, drop_last=train, seed=cfg.seed,
                         rank=session.rank)

    train_feed, val_feed = feed(session.train, train=True), feed(session.val, train=False)

    def all_reduce(t: torch.Tensor) -> torch.Tensor:
        if world > 1:
            dist.all_reduce(t)
        return t

    # Nodes this trial's workers run on: shows the placement strategy. Ray node ids, not Train's
    # node ranks (those group workers by IP address, which simulated nodes share).
    import ray

    node_ids = [ray.get_runtime_context().get_node_id()] * world
    if world > 1:
        dist.all_gather_object(node_ids, node_ids[0])
    nodes = len(set(node_ids))

    profiled: dict = {}  # profile_s and the picks, added to every report
    trained: dict = {}  # the model the loop trains, kept by `wrap` for the noise probe

    def report(metrics: dict, checkpoint=None) -> None:
        if plan.measure_noise and "model" in trained and session.rank == 0 and \
                metrics.get("epoch") in noise_epochs(cfg.epochs):
            metrics = {**metrics, **_noise(plan, cfg, meta, trained["model"], session, device)}
        session.report({**metrics, **profiled, "nodes": nodes}, checkpoint)

    def save_checkpoint(state: dict, metrics: dict) -> None:
        # Every rank reports (a barrier); rank 0 alone writes, the others' state is identical.
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = None
            if session.rank == 0:
                # With the picks: a restarted worker goes on with the switches it began with.
                torch.save({**state, "profile": dict(profiled)},
                           os.path.join(tmp, CHECKPOINT_FILE))
                checkpoint = session.checkpoint_cls.from_directory(tmp)
            report(metrics, checkpoint)

    def load_checkpoint() -> dict | None:
        checkpoint = session.get_checkpoint()
        if checkpoint is None:
            return None
        with checkpoint.as_directory() as folder:
            # weights_only: tensors and plain values only, never arbitrary unpickling.
            return torch.load(os.path.join(folder, CHECKPOINT_FILE), map_location=device,
                              weights_only=True)

    wrap_group = identity
    if world > 1:
        import ray.train.torch

        wrap_group = ray.train.torch.prepare_model

    def wrap(model):
        trained["model"] = model  # both loops hand their raw model here first
        return wrap_group(model)

    io = LoopIO(
        train_batches=train_feed,
        val_batches=val_feed,
        steps_per_epoch=steps,
        report=report,
        all_reduce=all_reduce,
        wrap_model=wrap,
        device=device,
        world_size=world,
        save_checkpoint=save_checkpoint,
        load_checkpoint=load_checkpoint,
        rank=session.rank,
        model_builder=plan.model_builder,
    )
    reset_peak_memory(device)  # this trial's peak, not an earlier trial's in the same process
    try:
        if plan.profile and cfg.loop != "legacy":  # the legacy loop keeps its "before" habits
            # Before fit builds the trial's model, on throwaway copies: what is learned is the
            # same as without it. Outside train_time_s; reported as profile_s.
            cfg = _profile(plan, cfg, meta, io, profiled)
        if plan.time_start and cfg.loop != "legacy" and START_STEP not in profiled:
            _time_start(cfg, meta, io, profiled)
        return _fit(cfg, meta, io, session)
    except Exception as err:
        outcome = status_of(err)
        if outcome.status == TrialStatus.INFEASIBLE:
            free_device_memory(device)  # the next trial in this process starts with free memory
        if world > 1 or outcome.retry:
            # The other ranks may wait in a collective: fail the group. The trial (run_trial)
            # turns the group's error into the same status with the same `status_of`.
            raise
        # A deterministic end (out of memory, bad configuration, ...) is a result, not a crash:
        # report it, so nothing retries it and the search learns from it.
        metrics = {**outcome_metrics(cfg, outcome), **profiled}
        session.report(metrics, None)
        return metrics


def _noise(plan: TrialPlan, cfg: TrialConfig, meta: DataMeta, model, session: Session,
           device) -> dict:
    """The trained model's gradient noise scale on this worker's training shard, at the trial's
    own per-worker batch and 4x it, cropped as training crops. Timed apart (`noise_s`)."""
    import time

    from trainables.loop.tasks import make_task

    t0 = time.perf_counter()
    task, parts = make_task(meta.task), 4
    small = cfg.per_worker_batch
    feed = ShardFeed(session.train, batch_size=small * parts, device=device, cache=True,
                     shuffle=True, drop_last=True, seed=cfg.seed + 1, rank=session.rank)
    gen = torch.Generator().manual_seed(cfg.seed + 2)
    crops = (task.crop(x, y, cfg.patch_size, gen) for x, y in feed(0))
    scale = gradient_noise_scale(model, task.loss, crops, small=small, parts=parts)
    # Tracking stores finite numbers: "all noise at this size" is a scale past any batch.
    return {"noise_scale": min(scale, 1e9), "noise_s": time.perf_counter() - t0}


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


def _fit(cfg: TrialConfig, meta: DataMeta, io: LoopIO, session: Session) -> dict:
    if cfg.loop == "legacy":
        # The legacy loop reads this worker's shard into tensors and serves it through a
        # DataLoader with worker processes, as a plain PyTorch "before" loop does.
        parts = list(iter_batches(session.train, batch_size=1024, prefetch_batches=0,
                                  device=torch.device("cpu"), pin_memory=False, drop_last=False))
        x = torch.cat([p[0] for p in parts])
        y = torch.cat([p[1] for p in parts])
        return fit_legacy(cfg, meta, io, x, y)
    return fit(cfg, meta, io)


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
