"""The typed configuration of one trial: every knob the search may turn and every speed switch.

A trial config is a flat dataclass so that any field can be searched by name (Ray Tune param spaces
and MLflow params are flat). Each field documents what it changes and why it may be faster.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from trainables.fields import check_fields

PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed")
SCHEDULES = ("onecycle", "cosine", "constant", "wsd")
LOOPS = ("optimized", "legacy")
LR_SCALINGS = ("sqrt", "linear", "none")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


# What a field changes. SPEED_ONLY fields change how fast a step runs, not what is learned (up to
# floating-point rounding); STATISTICAL ones change how much each step learns, which the gradient
# noise scale models (trainables/loop/noise.py); every other field (width, patch, lr, schedule,
# precision, ...) changes what is learned, and only training can tell by how much. Precision is
# there, not a speed switch: bf16's 8-bit mantissa cost the classifier about a point of accuracy
# here (docs/benchmarks.md).
SPEED_ONLY = frozenset({
    "workers", "compile", "compile_mode", "channels_last", "cudnn_benchmark",
    "pin_memory", "zero_grad_set_to_none", "sync_every", "cache_shard", "prefetch_batches",
    "loader_workers", "grad_checkpointing", "checkpoint_every", "val_every",
    "val_skip_above_loss", "val_skip_until"})
STATISTICAL = frozenset({"batch_size", "accum_steps"})


MANTISSA_BITS = {"fp32": 23, "fp16-mixed": 10, "bf16-mixed": 7}
"""What each precision keeps of a number: a run at fewer bits learns no more than at more."""


def samples_per_step(config: dict[str, Any]) -> int:
    """Samples in one optimizer step: what the gradient noise scale compares."""
    return int(config.get("batch_size", 1)) * int(config.get("accum_steps", 1))


@dataclass(kw_only=True)
class TrialConfig:
    # ---- workload -------------------------------------------------------------------------------
    workload: str = "classifier"
    """Model family from `trainables.models.MODELS`, or a builder of your own as 'module:function'
    (imported where the workers run)."""
    width: float = 1.0
    """Channel multiplier of the model: 0.5 halves every layer's channels."""
    patch_size: int | None = 24
    """Side of the random crop along every spatial axis the data has (a segment of 1D signals, a
    square of 2D images, a cube of 3D volumes); None trains on whole samples (no crop)."""
    epochs: int = 3
    """Passes over the training set."""
    seed: int = 0
    """Seeds model init, crops and shuffling: two trials with the same config see the same data."""

    # ---- optimisation ---------------------------------------------------------------------------
    batch_size: int = 128
    """Global batch size, split evenly across the data-parallel workers."""
    lr: float = 3e-3
    """Peak learning rate of AdamW at `lr_reference_batch`; scaled to the trial's batch by
    `lr_scaling` (trainables/loop/lr.py)."""
    lr_scaling: str = "sqrt"
    """How the lr follows the batch: 'sqrt' (lr * sqrt(batch/ref), AdamW's rule), 'linear' or
    'none'. Without it a bigger batch makes fewer steps at the same lr and learns less per epoch."""
    lr_reference_batch: int | None = None
    """The global batch at which `lr` was tuned (lr is used as given there); None: the built-in
    workload's (classifier 128, unet3d 2), and no scaling for a model of your own."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    schedule: str = "onecycle"
    """Learning-rate schedule: 'onecycle' (warm-up, then cosine decay), 'cosine', 'constant' or
    'wsd' (warm-up, the peak, then a cosine decay over the last fifth). A pure function of step
    (trainables/loop/schedules.py)."""
    warmup_epochs: float | None = None
    """'wsd' only: epochs of its linear warm-up; None: a quarter of `epochs`. Counted in epochs,
    not in a share of the run, so runs of any length with the same warm-up agree step for step
    until the shorter one decays: the measure stage goes on from the race's checkpoint."""
    accum_steps: int = 1
    """Gradient accumulation: optimizer steps once every N micro-batches (same samples, fewer steps)."""
    grad_clip: float | None = None
    """Clip the global grad norm to this value (after unscaling, so fp16 clips real gradients)."""

    # ---- parallelism ----------------------------------------------------------------------------
    workers: int = 1
    """Ray Train data-parallel workers (DDP over gloo on CPU, NCCL on GPU)."""
    prefetch_batches: int = 2
    """Batches the Ray Data iterator prepares ahead of the loop (its background thread)."""
    loader_workers: int = 2
    """Legacy loop only: DataLoader worker processes (a torch DataLoader's num_workers)."""
    cache_shard: bool = True
    """Read this worker's Ray Data shard once into tensors and serve every epoch by seeded randperm
    indexing (about raw in-memory speed); False streams every epoch through `iter_torch_batches`
    with a seeded local shuffle buffer (slower at small batches; see docs/benchmarks.md)."""

    # ---- speed switches -------------------------------------------------------------------------
    loop: str = "optimized"
    """'optimized' (every switch below) or 'legacy', a plain PyTorch loop, for baselines."""
    precision: str = "fp32"
    """'fp32', 'bf16-mixed' (autocast to bf16) or 'fp16-mixed' (autocast to fp16 + GradScaler)."""
    compile: bool = False
    """Wrap the model in torch.compile (pays a one-off compile, reported as compile time)."""
    compile_mode: str = "default"
    """torch.compile mode: 'default', 'reduce-overhead' (CUDA graphs) or 'max-autotune'."""
    channels_last: bool = False
    """NHWC / NDHWC memory format for conv nets: the layout fast conv kernels prefer."""
    grad_checkpointing: bool = False
    """Recompute block activations in backward instead of storing them: less memory, more compute."""
    cudnn_benchmark: bool = True
    """Let cuDNN time its conv algorithms for our fixed shapes (no-op without CUDA)."""
    pin_memory: bool = True
    """Page-locked host batches so host-to-device copies can be non-blocking (no-op without CUDA)."""
    zero_grad_set_to_none: bool = True
    """Drop gradient tensors instead of writing zeros into them."""
    sync_every: int = 0
    """Steps between host syncs of the running loss (a NaN check); 0 means once per epoch."""
    val_every: int = 1
    """Validate every N epochs (and always after the last one)."""
    val_skip_above_loss: float | None = None
    """Skip an epoch's validation while its training loss is above this, until `val_skip_until`
    of the schedule (the last epoch always validates). A time-to-target search sets it from the
    baseline's training loss where it first reached the target: an epoch that has not learned that
    much is not at the target yet, and its validation decides nothing (on unet3d, a sliding window
    over every held-out volume, validation was 28% of the confirmations' time; docs/benchmarks.md)."""
    val_skip_until: float = 0.5
    """The fraction of the schedule from which every epoch validates again under
    `val_skip_above_loss`: where the search's stopper starts to compare scores with the baseline's."""
    early_stop_patience: int = 0
    """Stop after this many validations without improvement of the validation metric; 0 disables."""
    checkpoint_every: int = 1
    """Epochs between checkpoints (model, optimizer, schedule, timers); a worker that dies resumes
    from the last one. 0 disables. Saved outside the timed training steps."""

    def __post_init__(self) -> None:
        def need(ok: bool, message: str) -> None:
            if not ok:
                raise ValueError(message)

        check_fields(self)  # a wrong type is named here, not found deep inside a trial
        need(self.width > 0, f"width must be > 0 (got {self.width}); try 0.5, 1 or 2")
        need(self.patch_size is None or self.patch_size >= 4, f"patch_size must be >= 4 (got {self.patch_size})")
        need(self.epochs >= 1, f"epochs must be >= 1 (got {self.epochs})")
        need(self.batch_size >= 1, f"batch_size must be >= 1 (got {self.batch_size})")
        need(self.lr > 0, f"lr must be > 0 (got {self.lr})")
        need(self.lr_reference_batch is None or self.lr_reference_batch >= 1,
             "lr_reference_batch must be >= 1 or null (the workload's own)")
        need(self.workers >= 1, f"workers must be >= 1 (got {self.workers})")
        need(
            self.batch_size >= self.workers,
            f"batch_size {self.batch_size} is smaller than workers {self.workers}: "
            "each worker needs at least one sample; raise batch_size or lower workers",
        )
        need(self.accum_steps >= 1, f"accum_steps must be >= 1 (got {self.accum_steps})")
        need(self.prefetch_batches >= 0, "prefetch_batches must be >= 0")
        need(self.loader_workers >= 0, "loader_workers must be >= 0")
        need(self.sync_every >= 0, "sync_every must be >= 0 (0 = once per epoch)")
        need(self.val_every >= 1, "val_every must be >= 1")
        need(self.val_skip_above_loss is None or self.val_skip_above_loss > 0,
             "val_skip_above_loss must be > 0 or null (validate every epoch)")
        need(0 <= self.val_skip_until <= 1, "val_skip_until must be in [0, 1] (a fraction of the "
             f"schedule; got {self.val_skip_until})")
        need(self.checkpoint_every >= 0, "checkpoint_every must be >= 0 (0 disables it)")
        need(self.early_stop_patience >= 0, "early_stop_patience must be >= 0 (0 disables it)")
        need(self.grad_clip is None or self.grad_clip > 0, "grad_clip must be > 0 or null")
        need(self.warmup_epochs is None or self.warmup_epochs > 0,
             f"warmup_epochs must be > 0 or null (got {self.warmup_epochs})")
        need(self.warmup_epochs is None or self.schedule == "wsd",
             f"warmup_epochs is the 'wsd' schedule's warm-up; schedule is {self.schedule!r}: "
             "set schedule: wsd, or drop warmup_epochs")
        for name, value, allowed in (
            ("precision", self.precision, PRECISIONS),
            ("schedule", self.schedule, SCHEDULES),
            ("loop", self.loop, LOOPS),
            ("lr_scaling", self.lr_scaling, LR_SCALINGS),
            ("compile_mode", self.compile_mode, COMPILE_MODES),
        ):
            need(value in allowed, f"{name} must be one of {list(allowed)} (got {value!r})")

    @property
    def per_worker_batch(self) -> int:
        return self.batch_size // self.workers

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrialConfig:
        """Build from a flat dict, rejecting unknown keys by name (a typo must not be ignored)."""
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            raise ValueError(
                f"unknown trial setting(s) {unknown}; known settings: {cls.field_names()}"
            )
        return cls(**_coerce(values))


def _coerce(values: dict[str, Any]) -> dict[str, Any]:
    """Turn numpy scalars (what Optuna and Tune sample) into plain Python values."""
    out = {}
    for key, value in values.items():
        out[key] = value.item() if hasattr(value, "item") and not isinstance(value, str) else value
    return out
