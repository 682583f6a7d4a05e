"""The default space: the speed knobs (precision, batch size, width, compile, memory format, ...), bounded by what this machine can run.

A space is a compute-free function SpaceContext -> {knob: Ray Tune domain}; knobs it leaves out
take their value from the search's fixed settings.
"""

from __future__ import annotations

from ray import tune

from search_spaces.context import SpaceContext
from trainables.workloads import family


def default_space(ctx: SpaceContext) -> dict:
    if family(ctx.workload) == "unet3d":
        return segmentation_space(ctx)
    precisions = speed_precisions(ctx)
    workers = [w for w in (1, 2, 4, 8) if w <= ctx.max_workers]
    patches = [p for p in (16, 20, 24, 28, 32) if p <= ctx.image_size] or [ctx.image_size]
    space = {
        "precision": tune.choice(precisions),
        "batch_size": tune.choice([32, 64, 128, 256]),
        "workers": tune.choice(workers),
        "patch_size": tune.choice(patches),
        "width": tune.choice([0.5, 1.0, 2.0]),
    }
    if ctx.spatial_dims == 0 or ctx.image_size < 4:
        del space["patch_size"]  # feature vectors (or tiny samples): nothing to crop
    return _one_precision_is_fixed(space)


def speed_precisions(ctx: SpaceContext) -> list[str]:
    """The precisions that can make a step faster on the trials' processor. fp16 autocast is a
    GPU technique: on CPU its backward pass is far slower than fp32. bf16 has native CPU kernels
    only with avx512_bf16 or AMX; without them it is slower than fp32 too."""
    return ["fp32"] + (["bf16-mixed"] if ctx.use_gpu or ctx.native_bf16 else []) + \
        (["fp16-mixed"] if ctx.use_gpu else [])


def _one_precision_is_fixed(space: dict) -> dict:
    """fp32 alone is no knob: the trials keep the default precision (fp32), not a search axis."""
    if len(space["precision"].categories) == 1:
        del space["precision"]
    return space


def segmentation_space(ctx: SpaceContext) -> dict:
    """Seed 003's knobs for the 3D UNet: precision, batch, workers, cubic patch side (a multiple
    of 4: the UNet pools twice), base filters, and gradient checkpointing.

    Width 2 is offered on GPU only: on a CPU a 2x-wide 3D UNet costs ~3-4x the time per step,
    and seed 003's move was to halve the filters, not double them. Gradient checkpointing trades
    time (one more forward per block in backward) for activation memory (55 -> 25 MB a step at
    batch 4, patch 32; reported as `activation_mb`), which matters when patch or batch outgrow
    a device.
    """
    precisions = speed_precisions(ctx)
    workers = [w for w in (1, 2, 4, 8) if w <= ctx.max_workers]
    patches = _cube_sides(ctx, (0.5, 0.75, 1.0))
    return _one_precision_is_fixed({
        "precision": tune.choice(precisions),
        "batch_size": tune.choice([2, 4, 8]),
        "workers": tune.choice(workers),
        "patch_size": tune.choice(patches),
        "width": tune.choice([0.5, 1.0] + ([2.0] if ctx.use_gpu else [])),
        "grad_checkpointing": tune.choice([False, True]),
    })


def compact_space(ctx: SpaceContext) -> dict:
    """The knobs the seed write-ups name first (precision, batch size, width; for the 3D UNet
    the patch too), at few values: strategy screen times every combination, so a space's size
    is its cost, and this one's 16 (classifier) or 24 (unet3d, on a CPU with bf16) take about
    half a minute on a 2-core CPU, where the default space's 248 took 245-315 s. What
    `benchmarks/headline.py` searches, and the README's first command."""
    volumes = family(ctx.workload) == "unet3d"
    space = {
        "precision": tune.choice(speed_precisions(ctx)),
        "batch_size": tune.choice([2, 4, 8] if volumes else [32, 64, 128, 256]),
        "width": tune.choice([0.5, 1.0]),
    }
    if volumes:
        space["patch_size"] = tune.choice(_cube_sides(ctx, (0.5, 0.75)))
    return _one_precision_is_fixed(space)


def _cube_sides(ctx: SpaceContext, fractions: tuple[float, ...]) -> list[int]:
    """The 3D UNet's patch sides, as fractions of the volumes' chunk side (32: 16, 24, 32; 64:
    32, 48, 64), each a multiple of 4 (the UNet pools twice)."""
    return sorted({max(4, round(ctx.image_size * f) // 4 * 4) for f in fractions})


def small_space(ctx: SpaceContext) -> dict:
    """A two-knob space for quick checks and tests."""
    return {
        "batch_size": tune.choice([64, 128]),
        "width": tune.choice([0.5, 1.0]),
    }


def pipeline_space(ctx: SpaceContext) -> dict:
    """The data pipeline's knobs (issue 4), with the batch size they interact with.

    cache_shard=True reads each worker's shard once into tensors (near raw indexing speed);
    False streams every epoch through Ray Data, where prefetch_batches (the depth of its
    background prefetch) matters. Numbers: docs/benchmarks.md, "Data pipeline (issue 4)".
    """
    return {
        "cache_shard": tune.choice([True, False]),
        "prefetch_batches": tune.choice([1, 2, 4]),
        "batch_size": tune.choice([32, 128, 512]),
    }
