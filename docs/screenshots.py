"""Refresh the README's MLflow screenshots from a real search, with headless Chromium.

    .venv/bin/python docs/screenshots.py            # a 4-trial search, then two screenshots
    .venv/bin/python docs/screenshots.py --store sqlite:////path/mlflow.db --experiment name

Writes docs/mlflow-compare.png (the compare view of the search's trials) and
docs/mlflow-trial-run.png (one trial's run page: params, dataset, system metrics), and prints
that trial's params, inputs and system metrics as MLflow returns them. Needs Debian's
`chromium` package (`apt-get install -y chromium`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_search(work: Path) -> tuple[str, str]:
    uri = f"sqlite:///{work / 'mlflow.db'}"
    subprocess.run([sys.executable, "-m", "orchestrator", "search", "--name", "screens",
                    "--trials", "4", "--epochs", "2", "--baseline", "none",
                    "--output-dir", str(work / "runs"), "--tracking-uri", uri],
                   cwd=ROOT, check=True)
    return uri, "screens"


def shoot(url: str, out: Path, height: int) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("no chromium: apt-get install -y chromium")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size=1600,{height}", "--virtual-time-budget=20000",
                    f"--screenshot={out}", url], check=True, capture_output=True)
    print(f"wrote {out}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", help="an MLflow tracking URI holding a search (default: run one)")
    ap.add_argument("--experiment", default="screens")
    args = ap.parse_args(argv)
    from mlflow.tracking import MlflowClient

    work = Path(tempfile.mkdtemp(prefix="screens-"))
    uri, name = (args.store, args.experiment) if args.store else run_search(work)
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(name)
    trials = [r for r in client.search_runs([exp.experiment_id], order_by=["start_time ASC"])
              if r.data.tags.get("orchestrator.role") == "trial"]
    port = free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("mlflow")), "server", "--backend-store-uri", uri,
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        ids = json.dumps([r.info.run_id for r in trials])
        # MLflow 3.17's UI opens in its GenAI mode; the training views are its 'machine_learning'
        # mode (the "Model training" switch at the top left).
        mode = "workflowType=machine_learning"
        query = urllib.parse.urlencode({"runs": ids, "experiments": json.dumps([exp.experiment_id])})
        shoot(f"{base}/#/compare-runs?{query}&{mode}", ROOT / "docs" / "mlflow-compare.png", 1700)
        first = trials[0]
        shoot(f"{base}/#/experiments/{exp.experiment_id}/runs/{first.info.run_id}?{mode}",
              ROOT / "docs" / "mlflow-trial-run.png", 1500)
    finally:
        server.terminate()
        server.wait(timeout=30)

    # What MLflow itself returns for that trial (the closing note quotes it).
    run = client.get_run(first.info.run_id)
    print(f"\ntrial run {run.info.run_name} ({run.info.run_id}), status {run.info.status}")
    print(f"params ({len(run.data.params)}):", json.dumps(dict(sorted(run.data.params.items()))))
    print("inputs:", [(d.dataset.name, d.dataset.digest, d.dataset.source_type,
                       json.loads(d.dataset.profile or "{}")) for d in run.inputs.dataset_inputs])
    system = {k: v for k, v in run.data.metrics.items() if k.startswith("system/")}
    print(f"system metrics ({len(system)}):", json.dumps(dict(sorted(system.items()))))
    print("artifacts:", [a.path for a in client.list_artifacts(run.info.run_id)])


if __name__ == "__main__":
    main()
