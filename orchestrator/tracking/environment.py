"""Tags that say where a search ran: library versions, the device, and the code's git sha.

The driver's own environment tags the search's parent run. A trial's run gets the driver's
library versions and git sha (every node runs the same code), but not its device: the device,
the torch build and the GPUs are what the trial's own training process reports in its first
report (`trainables.trial.sampling.NODE_TAGS`), because on a cluster the driver runs on a head
without GPUs while trials train on GPU nodes.
"""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

from trainables.trial.sampling import NODE_TAGS, device_tags


def environment_tags() -> dict[str, str]:
    """The driver's environment: the search's parent run's tags."""
    import optuna
    import ray

    try:
        git = {"capture_output": True, "text": True, "timeout": 5, "cwd": Path(__file__).parent}
        sha = subprocess.run(["git", "rev-parse", "HEAD"], **git).stdout.strip()
        # Uncommitted changes mean the sha alone does not name the code that ran.
        if sha and subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                  **git).stdout.strip():
            sha += "-dirty"
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return {**device_tags(), "env.ray": ray.__version__, "env.optuna": optuna.__version__,
            "env.python": platform.python_version(), "env.git_sha": sha or "unknown"}


def search_wide(tags: dict[str, str]) -> dict[str, str]:
    """The tags of `environment_tags` that hold for every trial wherever it ran (versions, git
    sha); a trial's device tags come from the trial itself."""
    return {k: v for k, v in tags.items() if k not in NODE_TAGS}
