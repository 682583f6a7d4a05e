"""Bring your own model and data: every switch of the optimized loop applies to them.

    python examples/bring_your_own.py            # a 4-trial search on your model, ~1-2 minutes

The contract:
* a model builder `build(cfg: TrialConfig, meta: DataMeta) -> torch.nn.Module`. `cfg` carries
  the sampled knobs (use `cfg.width` to scale your layers if you want width searched);
  `meta.in_channels`, `meta.num_classes`, `meta.task` describe the data. Classification models
  map (N, C, H, W) to (N, num_classes) logits; segmentation models map (N, C, D, H, W) to
  (N, num_classes, D, H, W). Any input side the search may crop to (patch_size) must work.
* data: arrays `x` (N, H, W) or (N, C, H, W) float and `y` (N,) int class ids, optionally
  `x_val`, `y_val` -- as a dict or ArrayData in Python, an .npz or a Parquet file anywhere.

From the command line, the same model is a `module:function` path:

    PYTHONPATH=examples orchestrator search --model bring_your_own:build --data my.npz
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator import SearchSpec, run_search  # noqa: E402
from trainables.config import TrialConfig  # noqa: E402
from trainables.data.arrays import DataMeta  # noqa: E402


def build(cfg: TrialConfig, meta: DataMeta) -> nn.Module:
    """A residual-free little CNN whose channels follow the searched width."""
    c = max(8, round(24 * cfg.width))
    return nn.Sequential(
        nn.Conv2d(meta.in_channels, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(c, 2 * c, 3, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * c, meta.num_classes),
    )


def make_arrays(n: int = 2000, size: int = 24, seed: int = 0) -> dict[str, np.ndarray]:
    """Stripes: class = stripe orientation (4 classes), under noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    grid = np.arange(size)
    patterns = np.stack([
        np.sin(grid[None, :] * 0.8).repeat(size, 0),                    # vertical
        np.sin(grid[:, None] * 0.8).repeat(size, 1),                    # horizontal
        np.sin((grid[:, None] + grid[None, :]) * 0.6),                  # diagonal
        np.sin((grid[:, None] - grid[None, :]) * 0.6),                  # anti-diagonal
    ]).astype(np.float32)
    x = patterns[y] + rng.normal(0, 0.8, (n, size, size)).astype(np.float32)
    return {"x": x, "y": y}


def main(n: int = 2000, num_trials: int = 4, epochs: int = 2, **options):
    """The example search (`options`: any other SearchSpec field; the tests shrink it)."""
    result = run_search(SearchSpec(
        name="byo-example", model=build, data=make_arrays(n), num_trials=num_trials,
        epochs=epochs,
        space={"width": [0.5, 1.0], "batch_size": [32, 64], "precision": ["fp32", "bf16-mixed"]},
        base={"patch_size": 20}, **options,
    ))
    print(result.leaderboard())
    print("best config:", result.best_config_path)
    return result


if __name__ == "__main__":
    main()
