"""What a search space may depend on: the hardware a trial gets and the data's shape."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpaceContext:
    use_gpu: bool = False
    """Trials run on CUDA devices (fp16 autocast is only offered there)."""
    native_bf16: bool = True
    """The trials' processor runs bf16 natively: a GPU, or a CPU with the bf16 instructions
    (avx512_bf16 or AMX), as read on the driver's node. Without them bf16 autocast is slower
    than fp32 (unet3d: 20 against 42 samples/s on a Cascade Lake), so it is no speed knob."""
    cpus_per_trial: int = 2
    """CPUs one trial's workers share: bounds the `workers` knob on CPU."""
    gpus_per_trial: int = 1
    """GPUs one trial may use (one per worker): bounds `workers` on GPU."""
    image_size: int = 32
    """Smallest spatial side of the samples: bounds `patch_size`."""
    spatial_dims: int = 2
    """Spatial axes of a sample: 0 feature vectors, 1 signals, 2 images, 3 volumes."""
    workload: str = "classifier"
    """The built-in workload (or 'custom'): the default space differs for 3D."""

    @property
    def max_workers(self) -> int:
        return self.gpus_per_trial if self.use_gpu else self.cpus_per_trial
