"""Tiny .npy volume folders for 3D tests: images/ and labels/ as a user would bring them."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_volume_folder(root: Path, *, count: int = 3, size: int = 24, seed: int = 5) -> Path:
    """`count` synthetic organelle volumes of `size`^3 (the last one is held out for validation);
    with size 24 the training volumes are cut into 16^3 chunks, 8 per volume."""
    from trainables.data.volumes import synthetic_volume

    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for i in range(count):
        image, mask = synthetic_volume(size, rng)
        np.save(root / "images" / f"vol{i}.npy", image)
        np.save(root / "labels" / f"vol{i}.npy", mask)
    return root
