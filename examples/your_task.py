"""Your training, not ours: a Task with its own loss, optimizer, schedule, augmentation and score.

    python examples/your_task.py           # a screen search through the Python API
    python examples/your_task.py --cli     # the same search through the command line

The search asks how much faster *this* training reaches the accuracy it reaches today: the
baseline is the task at your settings (`--baseline base`), and every trial trains the same task
with the loop's speed switches (precision, batch with its lr scaling, width, channels_last...)
applied around it. Here the task is:
* a focal loss (Lin et al. 2017) instead of cross-entropy;
* SGD with Nesterov momentum and a cosine schedule over the whole run (`cfg.total_steps`),
  built with `cfg.lr`, the peak lr already scaled to the trial's batch;
* a random horizontal flip, on the trial's device, inside the timed step;
* macro-F1 as the score: per-class true/false positives and false negatives summed over the
  validation set (`score_reduction = "sum"`), made into F1 once (`finish_score`).

From the command line the task is a `module:Class` path, imported from the working directory:

    orchestrator search --spec your_task.yaml --task examples.your_task:FocalTask \\
        --data your_task.npz --strategy screen --full-epochs 8 --baseline-set batch_size=32

(`your_task.yaml` holds the space and the fixed settings: `cli()` below writes it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator import SearchSpec, run_search  # noqa: E402
from orchestrator.cli import main as cli_main  # noqa: E402

CLASSES = 4
SPACE = {"precision": ["fp32", "bf16-mixed"], "batch_size": [32, 64], "width": [0.5, 1.0]}
# What every trial keeps, and where today's run (the baseline) differs: its batch is searched.
BASE = {"lr": 0.05, "patch_size": 20, "lr_reference_batch": 32}
BASELINE_SET = {"batch_size": 32}


class FocalTask:
    """A 4-class image task: focal loss, SGD + cosine, flips, macro-F1."""

    score_reduction = "sum"
    gamma = 2.0

    def model(self, cfg, meta) -> nn.Module:
        c = max(8, round(24 * cfg.width))  # the searched width scales the channels
        return nn.Sequential(
            nn.Conv2d(meta.in_channels, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c, 2 * c, 3, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * c, meta.num_classes))

    def loss(self, outputs: torch.Tensor, batch) -> torch.Tensor:
        """Focal loss: cross-entropy down-weighted where the model is already right."""
        ce = F.cross_entropy(outputs, batch[1], reduction="none")
        return ((1 - torch.exp(-ce)) ** self.gamma * ce).mean()

    def optimizer(self, params, cfg):
        optimizer = torch.optim.SGD(params, lr=cfg.lr, momentum=0.9, nesterov=True,
                                    weight_decay=cfg.weight_decay)
        # Stepped once per optimizer step: the cosine spans the trial's whole run.
        return optimizer, torch.optim.lr_scheduler.CosineAnnealingLR(optimizer,
                                                                      cfg.total_steps)

    def augment(self, batch):
        x, y = batch
        flip = torch.rand(len(x), device=x.device) < 0.5
        return torch.where(flip[:, None, None, None], x.flip(-1), x), y

    def score(self, outputs: torch.Tensor, batch) -> torch.Tensor:
        """(classes, 3): true positives, false positives, false negatives of each class."""
        pred, y = outputs.argmax(1), batch[1]
        return torch.stack([torch.stack([((pred == k) & (y == k)).sum(),
                                         ((pred == k) & (y != k)).sum(),
                                         ((pred != k) & (y == k)).sum()])
                            for k in range(outputs.shape[1])])

    def finish_score(self, counts: torch.Tensor) -> float:
        tp, fp, fn = counts.double().unbind(1)
        return float((2 * tp / (2 * tp + fp + fn).clamp(min=1)).mean())  # macro-F1


def make_arrays(n: int = 2400, size: int = 24, seed: int = 0) -> dict[str, np.ndarray]:
    """Stripes at four orientations under noise (a flip maps a diagonal to the other: the
    flip is an augmentation the classes survive only because the noise dominates)."""
    rng = np.random.default_rng(seed)
    grid = np.arange(size)
    patterns = np.stack([np.sin(grid[None, :] * 0.8).repeat(size, 0),
                         np.sin(grid[:, None] * 0.8).repeat(size, 1),
                         np.sin((grid[:, None] + grid[None, :]) * 0.3),
                         np.sin(grid[:, None] * 0.3) * np.sin(grid[None, :] * 0.3)])
    y = rng.integers(0, CLASSES, n)
    x = (patterns[y] + rng.normal(0, 0.9, (n, size, size))).astype(np.float32)
    cut = n * 4 // 5
    return {"x": x[:cut, None], "y": y[:cut], "x_val": x[cut:, None], "y_val": y[cut:]}


def search(n: int = 2400, full_epochs: int = 8, trials: int = 3, **options):
    """The example's screen search through the Python API (`options`: more SearchSpec
    fields; the tests shrink it)."""
    return run_search(SearchSpec(
        name=options.pop("name", "your-task"), task=FocalTask(), data=make_arrays(n),
        strategy="screen", full_epochs=full_epochs, num_trials=trials, space=SPACE,
        base=BASE, baseline_set=BASELINE_SET, **options))


def cli(folder: Path, n: int = 2400, full_epochs: int = 8, trials: int = 3,
        extra: list[str] = ()) -> int:
    """The same search through the command line: the data as an .npz, the space and fixed
    settings in a spec file, the task by path."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    data, spec = folder / "your_task.npz", folder / "your_task.yaml"
    np.savez(data, **make_arrays(n))
    spec.write_text(yaml.safe_dump({"name": "your-task-cli", "space": SPACE, "base": BASE}))
    args = ["search", "--spec", str(spec), "--task", "examples.your_task:FocalTask",
            "--data", str(data), "--strategy", "screen", "--full-epochs", str(full_epochs),
            "--trials", str(trials),
            *[a for k, v in BASELINE_SET.items() for a in ("--baseline-set", f"{k}={v}")],
            *extra]
    print("orchestrator " + " ".join(args))
    return cli_main(args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", action="store_true", help="through the command line")
    if parser.parse_args().cli:
        sys.exit(cli(Path(".")))
    result = search()
    print(result.leaderboard())
    print("economics:", result.economics)
