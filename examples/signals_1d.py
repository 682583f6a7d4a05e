"""1D signals, your own Conv1d model, through the Python API (audio, sensors, spectra, MNIST-1D).

    python examples/signals_1d.py            # a 4-trial search, ~1-2 minutes on a laptop

Signals are arrays `x` of shape (N, C, L): C channels of length L. A 3-D array is read as
(N, H, W) images unless the search is told otherwise, so the spec says `spatial_dims=1`.
`patch_size` then crops random windows of length patch_size along L (validation: the centre
window); `patch_size=None` trains on whole signals. Every loop switch (precision,
accumulation, clipping, schedules, compile) applies; channels_last does not (no such layout).

From the command line:  orchestrator search --data signals.npz --spatial-dims 1 \
    --model signals_1d:build   (with PYTHONPATH=examples)
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
    """A small Conv1d net: (N, C, L) -> (N, num_classes); any length L works (global pooling)."""
    c = max(8, round(16 * cfg.width))
    return nn.Sequential(
        nn.Conv1d(meta.in_channels, c, 5, padding=2), nn.BatchNorm1d(c), nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Conv1d(c, 2 * c, 5, padding=2), nn.BatchNorm1d(2 * c), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(2 * c, meta.num_classes),
    )


def make_signals(n: int = 2000, channels: int = 2, length: int = 64,
                 seed: int = 0) -> dict[str, np.ndarray]:
    """Three classes of noisy waves: class k is a sine of frequency k+1 in channel 0."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    t = np.linspace(0, 2 * np.pi, length, dtype=np.float32)
    phase = rng.uniform(0, 2 * np.pi, (n, 1)).astype(np.float32)
    x = rng.normal(0, 0.5, (n, channels, length)).astype(np.float32)
    x[:, 0] += np.sin((y[:, None] + 1) * 2 * t[None, :] + phase)
    return {"x": x, "y": y}


def search(n: int = 2000, num_trials: int = 4, epochs: int = 2, **spec_options):
    """Run the example's search; options (output_dir, tracking_uri, ...) go to SearchSpec."""
    return run_search(SearchSpec(
        name=spec_options.pop("name", "signals-1d"), model=build, data=make_signals(n),
        spatial_dims=1, num_trials=num_trials, epochs=epochs,
        space={"width": [0.5, 1.0], "batch_size": [32, 64], "patch_size": [48, 64]},
        base={"lr": 3e-3}, **spec_options,
    ))


if __name__ == "__main__":
    result = search()
    print(result.leaderboard())
    print("best config:", result.best_config_path)
