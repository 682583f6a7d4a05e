"""Checks of a whole search's inputs that no single field can make: found before Ray starts."""

from __future__ import annotations

import numpy as np

from trainables.config import TrialConfig
from trainables.data.arrays import ArrayData
from trainables.workloads import family

DEFAULT_PATCH = TrialConfig().patch_size


def default_patch(base: dict, searched: dict, data: ArrayData) -> dict:
    """`base` with patch_size None (no crop) where the user set none and the default crop
    cannot apply: feature vectors, or samples smaller than the default patch."""
    if "patch_size" in searched or "patch_size" in base or \
            family(base.get("workload")) == "unet3d":
        return base
    if data.spatial_dims == 0 or DEFAULT_PATCH > data.image_size:
        return {**base, "patch_size": None}
    return base


def check_inputs(num_trials: int, searched: dict, data: ArrayData) -> None:
    """Raise ValueError for a search that would waste its trials or cannot learn anything."""
    if not searched and num_trials > 1:
        raise ValueError(f"the space searches no knob, so {num_trials} trials would all train "
                         "the same config; use --trials 1 or search at least one knob")
    if data.meta().task == "classify":
        classes = np.unique(data.y_train)
        if len(classes) < 2:
            raise ValueError(f"{data.source}: the training labels hold a single class "
                             f"({classes.tolist()}); a classifier needs at least 2")
