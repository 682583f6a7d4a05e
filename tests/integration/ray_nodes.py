"""Helpers for tests that start Ray nodes of their own with the Ray CLI (`ray start --block`):
free ports, the `ray` command of this environment, and a stop that leaves nothing behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RAY = str(BIN / "ray")
ADDRESS_FILE = Path("/tmp/ray/ray_current_cluster")  # where Ray's CLI looks for "the" cluster


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def stop_node(node: subprocess.Popen, temp_dir: Path) -> None:
    """SIGTERM to `ray start --block` stops the node's processes; then anything left that we
    started (our process group, or a process naming our private temp dir) is killed by pid."""
    if node.poll() is None:
        node.send_signal(signal.SIGTERM)
        try:
            node.wait(timeout=2)  # then killed: what it started goes with its process group
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait()
    try:
        os.killpg(node.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(temp_dir).encode() in cmdline.read_bytes():
                os.kill(int(cmdline.parent.name), signal.SIGKILL)
        except OSError:  # gone already, or not ours to read
            pass


def ray_cli(args: list[str], env: dict, timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run([RAY, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
