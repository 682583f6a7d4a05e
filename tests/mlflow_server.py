"""A real `mlflow server` on 127.0.0.1 that a test can take down and bring back on the same port
and the same backend store, to play a tracking-server outage.

Clients reach the server through a relay on `port`. An outage (`stop()`) closes the relay: the
port refuses new connections and every open one is cut, which is what a client sees of a server
that went down; `start()` listens again at once. Restarting the server process itself costs
~6 s a cycle here (`stop(kill=True)` stops it; `start()` then starts it again).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
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


class _Relay:
    """Accepts connections on `port` and pipes each, both ways, to `target`; `close()` refuses new
    ones and cuts the open ones."""

    def __init__(self, port: int, target: int):
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", port))  # SO_REUSEADDR: rebinds at once
        self.listener.settimeout(0.1)  # so that the accepting thread sees `close` soon
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            for sock in (client, server):  # each write passed on at once: no Nagle delay
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                if self.closed:
                    client.close()
                    server.close()
                    return
                self.open |= {client, server}
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)  # pass the half-close on (an HTTP client's EOF)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.listener.close()
            for sock in self.open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self.open.clear()


class MlflowServer:
    def __init__(self, root: Path):
        self.root = root
        self.port = _free_port()
        """What clients connect to: the relay."""
        self.server_port = _free_port()
        """Where the server process listens."""
        self.proc: subprocess.Popen | None = None
        self.relay: _Relay | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 180.0) -> None:
        """Bring the server back: its process if it is not running, then the relay."""
        if self.proc is None or self.proc.poll() is not None:
            self._start_process(timeout_s)
        if self.relay is None:
            self.relay = _Relay(self.port, self.server_port)

    def _start_process(self, timeout_s: float) -> None:
        log = open(self.root / "server.log", "ab")
        # Its own process group: the server's workers are stopped with it, and nothing else is.
        self.proc = subprocess.Popen(
            [MLFLOW_CLI, "server", "--backend-store-uri", f"sqlite:///{self.root / 'db'}",
             "--artifacts-destination", str(self.root / "artifacts"),
             "--host", "127.0.0.1", "--port", str(self.server_port), "--workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            # No background job runner (7 worker processes): tracking is all these tests need,
            # and a loaded 2-core machine then starts the server in seconds, not a minute.
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited; see {self.root / 'server.log'}")
            try:
                url = f"http://127.0.0.1:{self.server_port}/health"
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop(kill=True)
        raise RuntimeError(f"mlflow server did not come up in {timeout_s}s")

    def stop(self, kill: bool = False) -> None:
        """Take the server down for its clients: `port` refuses connections and open ones are
        cut. `kill`: its process is stopped too (a real restart follows on `start`)."""
        if self.relay is not None:
            self.relay.close()
            self.relay = None
        if kill and self.proc is not None:
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
        return self.relay is not None and self.proc is not None and self.proc.poll() is None
