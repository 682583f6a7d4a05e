"""The built-in synthetic image set of the classifier workload, generated once and cached."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from trainables.data.arrays import ArrayData, DataError
from trainables.data.npz import load_npz

SYNTHETIC_DEFAULTS = dict(n_train=8000, n_val=2000, size=32, num_classes=10, seed=1234)


def synthetic_images(
    n_train: int = 8000,
    n_val: int = 2000,
    size: int = 32,
    num_classes: int = 10,
    seed: int = 1234,
    noise: float = 0.3,
    channels: int = 1,
) -> ArrayData:
    """Deterministic images whose class is a *combination* of parts spread over the whole image.

    A bank of 16 small textured parts sits on a 4x4 grid of anchors. Each class owns 5 of them;
    an image shows its class's parts (jittered, random strength) plus 2 distractor parts of other
    classes, under Gaussian noise. So a crop that sees fewer anchors sees less evidence (patch
    size changes accuracy) and telling 10 overlapping part-sets apart takes enough filters
    (width changes accuracy). With `channels` > 1 (CIFAR's shape: 3) each part has a colour of
    its own, drawn apart (the one-channel set is the same array whatever `channels` exists).
    """
    rng = np.random.default_rng(seed)
    colours = np.random.default_rng(seed + 1).uniform(0.4, 1.6, (16, channels)).astype(
        np.float32) if channels > 1 else np.ones((16, 1), np.float32)
    n_parts, part, per_class, distractors = 16, 5, 5, 2
    bank = rng.standard_normal((n_parts, part, part)).astype(np.float32)
    bank /= np.abs(bank).max(axis=(1, 2), keepdims=True)
    step = size // 4
    anchors = [(step // 2 + step * i, step // 2 + step * j) for i in range(4) for j in range(4)]
    owners = np.stack([rng.choice(n_parts, per_class, replace=False) for _ in range(num_classes)])

    def render(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, num_classes, n)
        x = rng.normal(0.0, noise, (n, channels, size, size)).astype(np.float32)
        jitter = rng.integers(-2, 3, (n, per_class + distractors, 2))
        gain = rng.uniform(0.6, 1.4, (n, per_class + distractors)).astype(np.float32)
        for i in range(n):
            others = np.setdiff1d(np.arange(n_parts), owners[y[i]])
            parts = np.concatenate([owners[y[i]], rng.choice(others, distractors, replace=False)])
            for k, p in enumerate(parts):
                r = int(np.clip(anchors[p][0] - part // 2 + jitter[i, k, 0], 0, size - part))
                c = int(np.clip(anchors[p][1] - part // 2 + jitter[i, k, 1], 0, size - part))
                x[i, :, r : r + part, c : c + part] += \
                    gain[i, k] * colours[p][:, None, None] * bank[p]
        return x, y.astype(np.int64)

    x_train, y_train = render(n_train)
    x_val, y_val = render(n_val)
    return ArrayData(x_train, y_train, x_val, y_val, num_classes, source="synthetic")


def cache_dir() -> Path:
    return Path(os.environ.get("ORCHESTRATOR_CACHE", Path.home() / ".cache" / "orchestrator"))


def cached_synthetic_images(**overrides: int) -> ArrayData:
    """The synthetic set, generated once per parameter set and then read from an .npz cache."""
    params = {**SYNTHETIC_DEFAULTS, **overrides}
    key = hashlib.sha1(repr(sorted(params.items())).encode()).hexdigest()[:12]
    path = cache_dir() / f"synthetic-{key}.npz"
    if path.exists():
        try:
            return load_npz(path, source="synthetic")
        except DataError:
            path.unlink()  # a torn write from an interrupted run: regenerate it
    data = synthetic_images(**params)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
    np.savez(tmp, x=data.x_train, y=data.y_train, x_val=data.x_val, y_val=data.y_val)
    os.replace(tmp, path)  # atomic: concurrent first runs never see half a file
    return data
