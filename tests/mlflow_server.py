"""A real `mlflow server` on 127.0.0.1 that a test can stop and start again on the same port and
the same backend store, to play a tracking-server outage."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

MLFLOW_CLI = shutil.which("mlflow") or str(Path(sys.executable).with_name("mlflow"))


def mlflow_cli_missing() -> bool:
    return not Path(MLFLOW_CLI).is_file()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    def __init__(self, root: Path):
        self.root = root
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 180.0) -> None:
        log = open(self.root / "server.log", "ab")
        # Its own process group: the server's workers are stopped with it, and nothing else is.
        self.proc = subprocess.Popen(
            [MLFLOW_CLI, "server", "--backend-store-uri", f"sqlite:///{self.root / 'db'}",
             "--artifacts-destination", str(self.root / "artifacts"),
             "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            # No background job runner (7 worker processes): tracking is all these tests need,
            # and a loaded 2-core machine then starts the server in seconds, not a minute.
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited; see {self.root / 'server.log'}")
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"mlflow server did not come up in {timeout_s}s")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass
        self.proc = None
        # The port must refuse connections before the test goes on "during the outage".
        deadline = time.time() + 10
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) != 0:
                    return
            time.sleep(0.2)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
