"""Tags that say where a trial ran: library versions, the device, and the code's git sha."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path


def environment_tags() -> dict[str, str]:
    import optuna
    import ray
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else \
        f"cpu ({platform.processor() or platform.machine()})"
    try:
        git = {"capture_output": True, "text": True, "timeout": 5, "cwd": Path(__file__).parent}
        sha = subprocess.run(["git", "rev-parse", "HEAD"], **git).stdout.strip()
        # Uncommitted changes mean the sha alone does not name the code that ran.
        if sha and subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                  **git).stdout.strip():
            sha += "-dirty"
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return {"env.torch": torch.__version__, "env.ray": ray.__version__,
            "env.optuna": optuna.__version__, "env.python": platform.python_version(),
            "env.device": device, "env.git_sha": sha or "unknown"}
