"""Batch sizes that cannot make an optimizer step, caught before any trial runs.

Each worker trains on `n_train // workers` samples in batches of `batch_size // workers` and drops
the last partial batch (fixed shapes, equal step counts across workers). A batch larger than the
shard leaves 0 steps: the trial would report its random init's accuracy at ~0 s of training and
win any time-weighted ranking. So values of `batch_size` that cannot step are dropped from the
space (with a note naming the knob), and a search where none can (or the pinned one cannot) is
refused with the largest batch size that works.
"""

from __future__ import annotations

from collections.abc import Callable

from ray.tune.search.sample import Categorical

from search_spaces.check import domain_values


def steps_per_epoch(n_train: int, batch_size: int, workers: int) -> int:
    """Optimizer-step micro-batches one worker makes per epoch (drop_last)."""
    return (n_train // workers) // max(1, batch_size // workers)


def largest_batch(n_train: int, workers: int) -> int:
    """The largest batch_size that makes a step: each worker's batch is its whole shard."""
    return (n_train // workers) * workers


def fit_batch_to_shards(space: dict, base: dict, n_train: int,
                        note: Callable[[str], None] = print) -> dict:
    """The space without batch sizes that make 0 steps with the most workers it may use;
    ValueError when no batch size (or the pinned one) can step."""
    workers = max(domain_values(space["workers"]) if "workers" in space
                  else [base.get("workers", 1)])
    shard = n_train // workers
    works = largest_batch(n_train, workers)

    def why(b: int) -> str:
        return (f"batch_size {b} makes 0 optimizer steps with {shard} samples per worker "
                f"({n_train} samples, {workers} worker(s))")

    if "batch_size" not in space:
        b = int(base.get("batch_size", 128))
        if steps_per_epoch(n_train, b, workers) == 0:
            raise ValueError(f"{why(b)}; the largest that works is {works}")
        return space
    domain = space["batch_size"]
    if not isinstance(domain, Categorical):
        # A numeric range: its upper bound must step (the loop marks any other 0-step trial
        # infeasible, and it never ranks).
        top = int(max(domain_values(domain)))
        if steps_per_epoch(n_train, top, workers) == 0:
            raise ValueError(f"knob 'batch_size': {why(top)}; the largest that works is {works}")
        return space
    values = list(domain.categories)
    kept = [b for b in values if steps_per_epoch(n_train, int(b), workers) > 0]
    if not kept:
        raise ValueError(f"knob 'batch_size': {why(int(min(values)))}; "
                         f"the largest that works is {works}")
    if len(kept) < len(values):
        from ray import tune

        dropped = [b for b in values if b not in kept]
        note(f"  note: knob 'batch_size': dropped {dropped} from the space: {why(dropped[0])} "
             f"(the largest that works is {works})")
        space = {**space, "batch_size": tune.choice(kept)}
    return space
