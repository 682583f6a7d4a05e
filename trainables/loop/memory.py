"""Activation memory of one training step: what gradient checkpointing trades for recompute.

On CUDA `peak_mem_mb` (torch's allocator high-water mark) shows the trade directly. On CPU there
is no allocator to ask, and the process's peak RSS mixes data, model and earlier trials of a
reused actor; so the loop also measures, once per trial, the bytes autograd keeps for backward
during one forward pass (`activation_mb`), device-independent and per trial.
"""

from __future__ import annotations

import torch


class SavedTensorMeter:
    """Context manager: sums the distinct storages autograd saves for backward inside it.

    With checkpointing on, a checkpointed block keeps only its input (held by the checkpoint,
    not saved through autograd) and its intermediate tensors are never saved: they are
    recomputed in backward. So the sum drops by roughly the blocks' internal activations.
    """

    def __init__(self) -> None:
        self.bytes = 0
        self._seen: set[int] = set()
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        if t.is_leaf and t.requires_grad:
            return t  # a parameter: model memory, not activations
        storage = t.untyped_storage()
        # Several saved tensors may share one storage (views, in-place ops): count it once.
        if storage.data_ptr() not in self._seen:
            self._seen.add(storage.data_ptr())
            self.bytes += storage.nbytes()
        return t

    @property
    def mb(self) -> float:
        return self.bytes / 2**20

    def __enter__(self) -> SavedTensorMeter:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)
