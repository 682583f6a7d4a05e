"""The speed profile's candidates on the built-in classifier, without Ray (docs/benchmarks.md,
"Speed profile"): each channels_last candidate's steady step time and one-off cost, then what
`profile()` picks, for three configurations of the default space.

    python benchmarks/profile_candidates.py [THREADS]
"""

from __future__ import annotations

import sys

import torch

from trainables.config import TrialConfig
from trainables.loop.io import LoopIO
from trainables.loop.profile import StepTimer, _profile_batch, profile
from trainables.workloads import workload_data

CONFIGS = (
    {"precision": "bf16-mixed", "batch_size": 128, "patch_size": 28, "width": 2.0},
    {"precision": "bf16-mixed", "batch_size": 128, "patch_size": 16, "width": 0.5},
    {"precision": "fp32", "batch_size": 128, "patch_size": 24, "width": 1.0},
)


def main(threads: int) -> None:
    torch.set_num_threads(threads)
    data = workload_data("classifier", None)
    meta = data.meta()
    xv, yv = torch.from_numpy(data.x_val), torch.from_numpy(data.y_val)
    for knobs in CONFIGS:
        cfg = TrialConfig(epochs=1, **knobs)
        io = LoopIO(train_batches=lambda epoch: iter(()),
                    steps_per_epoch=len(data.x_train) // cfg.batch_size,
                    val_batches=lambda: ((xv[i:i + 256], yv[i:i + 256])
                                         for i in range(0, len(xv), 256)))
        timer = StepTimer(meta, io, _profile_batch(io, cfg.batch_size))
        for channels_last in (False, True):
            t = timer(TrialConfig(epochs=1, channels_last=channels_last, **knobs))
            print(f"{knobs} channels_last={channels_last}: steady {t.step_s * 1000:.1f} ms/step,"
                  f" one-off {t.one_off_s:.2f} s")
        found = profile(cfg, meta, io, ("channels_last",))
        print(f"  profile() picks {found.picks} in {found.seconds:.2f} s; estimated training s: "
              + ", ".join(f"{k} {v:.1f}" for k, v in found.estimates.items()))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
