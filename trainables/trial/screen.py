"""The screen: a few timed training steps of every candidate configuration, no training.

What a configuration's training run costs per epoch is mostly a property of its step: its
precision, batch, workers, model width, patch and the speed-only switches. A few steps measure
that as well as a full trial would, in seconds: steady samples/s and peak memory per candidate,
and the candidates that cannot run at all (out of memory, no optimizer step in its data, a
worker group that fails) are found here and never get a trial.

Candidates with the same worker count are screened together in one process, or one Ray Train
worker group, so its start-up is paid once per worker count: `screen_in_process` (one worker,
a Ray task) and `screen_loop_per_worker` (a TorchTrainer's workers, DDP as in training, so the
timing includes the gradient all-reduce). Each candidate is timed on a fresh model (thrown away
after) on one batch of the training shard; `trainables.loop.profile.StepTimer` does the timing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch

from trainables.config import TrialConfig
from trainables.data.arrays import DataMeta
from trainables.data.pipeline import ShardFeed, worker_data
from trainables.loop.io import LoopIO, identity
from trainables.loop.profile import StepTimer
from trainables.status import TrialStatus, status_of


@dataclass(frozen=True)
class ScreenPlan:
    candidates: list[dict[str, Any]]
    """Full trial settings of each candidate (TrialConfig fields), one worker count for all."""
    meta: DataMeta
    n_train: int
    threads: int
    task: Any = None
    """What is trained (trainables/loop/task.py); None: the built-in task."""


def _result(cfg: dict, status: TrialStatus, **values) -> dict:
    return {"config": cfg, "status": str(status), **values}


def screen(plan: ScreenPlan, train_shard, device: torch.device, world: int = 1, rank: int = 0,
           all_reduce=identity, wrap_model=identity) -> list[dict]:
    """Time every candidate; a result per candidate: its config, `status` (completed, or why it
    cannot run: infeasible, failed), `samples_per_s` (global), `step_s`, `peak_mb`,
    `steps_per_epoch`."""
    return list(screen_each(plan, train_shard, device, world, rank, all_reduce, wrap_model))


def screen_each(plan: ScreenPlan, train_shard, device: torch.device, world: int = 1,
                rank: int = 0, all_reduce=identity, wrap_model=identity) -> Iterator[dict]:
    """`screen`, one candidate's result at a time (the driver counts them as they come)."""
    torch.set_num_threads(plan.threads)
    feeds: dict[int, Any] = {}
    warm = False
    for values in plan.candidates:
        cfg = TrialConfig.from_dict(values)
        batch = cfg.per_worker_batch
        steps = plan.n_train // world // batch // cfg.accum_steps
        if steps == 0:
            yield _result(values, TrialStatus.INFEASIBLE, reason=(
                f"no optimizer step: {plan.n_train} samples over {world} worker(s) at batch "
                f"{cfg.batch_size} x {cfg.accum_steps} accumulation"))
            continue
        try:
            if batch not in feeds:  # one read of the shard per batch size
                feeds[batch] = _feed(train_shard, batch, device, cfg.seed, rank)
            io = LoopIO(train_batches=lambda epoch: iter(()), val_batches=lambda: iter(()),
                        steps_per_epoch=steps, all_reduce=all_reduce, wrap_model=wrap_model,
                        device=device, world_size=world, rank=rank,
                        task=plan.task)
            first_batch, load_s, data_s = feeds[batch]
            # cuDNN's algorithm search runs once per new shape and cost 1-4 s a candidate on an
            # H100 (the screen took 105 s for 60 candidates with it, 11 s without; steady steps
            # alike, docs/benchmarks.md): the screen ranks steady steps, and each trial's
            # profile still decides cudnn_benchmark for its own run.
            timed = replace(cfg, cudnn_benchmark=False)
            timer = StepTimer(plan.meta, io, first_batch, data_parallel=world > 1)
            if not warm:
                # The process's first-use costs (thread pools, kernels' first calls, the
                # allocator's growth) land on whichever candidate runs first: they are outside
                # a trial's clock (paid by its profile before training), so outside its
                # one_off_s too. An untimed first pass pays them.
                timer(timed)
                warm = True
            started = time.perf_counter()
            t = timer(timed)
        except Exception as err:  # noqa: BLE001 - a candidate's end is its result
            outcome = status_of(err)
            if world > 1:
                raise  # the other ranks wait in a collective: the group fails as one
            yield _result(values, outcome.status, reason=outcome.reason)
            continue
        yield _result(
            values, TrialStatus.COMPLETED, step_s=t.step_s, one_off_s=t.one_off_s,
            data_s=data_s, load_s=load_s,
            # Each timed step is one micro-batch per worker and an optimizer step (with
            # accumulation a run steps less often: a slight overestimate of its time).
            samples_per_s=batch * world / t.step_s if t.step_s > 0 else float("nan"),
            peak_mb=t.peak_mb, steps_per_epoch=steps,
            screen_s=time.perf_counter() - started)


def _feed(shard, batch: int, device: torch.device, seed: int, rank: int):
    """(a first batch, the one-off read of the shard, the feed's own seconds per batch): what a
    trial's cached feed costs beside its steps (`ShardFeed`: the read, then indexed epochs).
    Per batch is the median over an epoch's batches, as a step is the median of its steps: on
    a 2-core machine another process (Ray's own, the read's executor winding down) takes a
    core now and then, and an indexing op's two threads then wait milliseconds for it (one
    such window turned 20 us a batch into 3 ms, and a tiny model's prediction 1.6x slow)."""
    feed = ShardFeed(shard, batch_size=batch, device=device, cache=True, shuffle=True,
                     drop_last=True, seed=seed, rank=rank)
    t0 = time.perf_counter()
    batches = feed(0)
    first = next(batches)
    load_s = time.perf_counter() - t0
    times, t1 = [], time.perf_counter()
    for _ in batches:  # the rest of an epoch: indexing and copies, no model
        now = time.perf_counter()
        times.append(now - t1)
        t1 = now
    return first, load_s, statistics.median(times) if times else 0.0


def screen_in_process(plan: ScreenPlan, datasets: dict, use_gpu: bool) -> Iterator[dict]:
    """One-worker candidates, screened in this (Ray task's) process, each result yielded as it
    is timed (a streaming Ray task: the driver shows progress)."""
    device = torch.device("cuda", 0) if use_gpu and torch.cuda.is_available() else \
        torch.device("cpu")
    yield from screen_each(plan, datasets["train"], device)


def screen_loop_per_worker(config: dict) -> list[dict]:
    """Ray Train entry point: one worker of a group screening `config["plan"]`'s candidates."""
    import ray.train
    import ray.train.torch
    import torch.distributed as dist

    ctx = ray.train.get_context()

    def all_reduce(t: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(t)
        return t

    results = screen(config["plan"], worker_data(config)[0],
                     ray.train.torch.get_device(), world=ctx.get_world_size(),
                     rank=ctx.get_world_rank(), all_reduce=all_reduce,
                     wrap_model=ray.train.torch.prepare_model)
    ray.train.report({"screened": len(results)})  # every rank reports: a barrier
    return results if ctx.get_world_rank() == 0 else []
