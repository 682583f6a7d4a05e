"""Kill a real search at a random moment and resume it, many times; count what went wrong.

    python tests/stress/resume_stress.py --rounds 20

Each round starts a small search (tiny data, 3 trials, 2 epochs) as its own process group, sends
SIGKILL to the whole group (driver and the Ray it started) at a random moment, resumes it from
another directory, and checks the outcome against the journal written before the kill:

  lost        a trial that had finished before the kill is missing from the leaderboard or MLflow
  rerun       a trial that had finished before the kill started again after the resume
  duplicated  a trial id with two leaderboard rows or two live MLflow runs, or more rows than
              trials
  failed      the resume exited non-zero or the search is not marked finished

The bar is 0 of each. Not a pytest test: it takes a few minutes per round on 2 cores.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from mlflow.tracking import MlflowClient  # noqa: E402

from orchestrator.records import read_journal  # noqa: E402
from tests.conftest import make_npz  # noqa: E402

TRIALS = 3


def _cli(*args, cwd: Path, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "ORCHESTRATOR_CACHE": str(cwd / "cache")}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen([sys.executable, "-m", "orchestrator", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def one_round(root: Path, kill_after_s: float) -> dict[str, int]:
    make_npz(root / "tiny.npz", n=480)
    (root / "spec.yaml").write_text(
        f"name: stress\nbaseline: none\ndata: tiny.npz\nnum_trials: {TRIALS}\nepochs: 2\nseed: 1\n"
        "space: {width: [0.25, 0.5], batch_size: [16, 32]}\noutput_dir: runs\n"
        "tracking_uri: sqlite:///mlflow.db\nbase: {patch_size: 12}\n")
    folder = root / "runs" / "stress"
    proc = _cli("search", "--spec", "spec.yaml", cwd=root, start_new_session=True)
    time.sleep(kill_after_s)
    finished_early = proc.poll() is not None
    if not finished_early:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(60)
    if finished_early and proc.returncode != 0:  # the search itself failed: not a resume case
        print(proc.stdout.read()[-3000:])
        return {"lost": 0, "rerun": 0, "duplicated": 0, "failed": 1, "killed": 0,
                "finished_before": 0, "cut_short": 0}
    finished, cut_short = read_journal(folder / "trials.jsonl")
    counts = {"lost": 0, "rerun": 0, "duplicated": 0, "failed": 0, "killed": int(not
                                                                              finished_early),
              "finished_before": len(finished), "cut_short": len(cut_short)}
    if finished_early or not (folder / "search_state.json").exists():
        return counts  # killed before it wrote anything, or too late: nothing to resume
    output = ""
    if '"finished": true' not in (folder / "search_state.json").read_text():
        elsewhere = root / "elsewhere"
        elsewhere.mkdir(exist_ok=True)
        resumed = _cli("resume", str(folder), cwd=elsewhere)
        output, _ = resumed.communicate(timeout=900)
        if resumed.returncode != 0:
            print(output[-3000:])
            counts["failed"] = 1
            return counts
    # else: killed after the search had written everything (resume rightly refuses); the
    # checks below still hold.
    rows = list(csv.DictReader((folder / "leaderboard.csv").open()))
    ids = [r["trial_id"] for r in rows]
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("stress")
    runs = [r for r in client.search_runs([exp.experiment_id])
            if r.data.tags.get("orchestrator.role") == "trial"]
    run_ids = [r.data.tags["orchestrator.trial_id"] for r in runs]
    counts["lost"] = sum(1 for t in finished if t not in ids or t not in run_ids)
    counts["rerun"] = sum(1 for t in finished if f"{t}] start" in output)
    counts["duplicated"] = (len(ids) - len(set(ids)) + len(run_ids) - len(set(run_ids))
                            + max(0, len(ids) - TRIALS))
    state = (folder / "search_state.json").read_text()
    if len(ids) != TRIALS or '"finished": true' not in state:
        counts["failed"] = 1
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-kill-s", type=float, default=26.0,
                        help="kill at a uniform random moment in [3, this] seconds")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    totals: dict[str, int] = {}
    for number in range(1, args.rounds + 1):
        kill_after = rng.uniform(3.0, args.max_kill_s)
        with tempfile.TemporaryDirectory() as tmp:
            counts = one_round(Path(tmp), kill_after)
        for key, value in counts.items():
            totals[key] = totals.get(key, 0) + value
        print(f"round {number:2d}: kill at {kill_after:5.1f}s  " +
              "  ".join(f"{k} {v}" for k, v in counts.items()), flush=True)
    print("total:   " + "  ".join(f"{k} {v}" for k, v in totals.items()))
    bad = totals.get("lost", 0) + totals.get("rerun", 0) + totals.get("duplicated", 0) + \
        totals.get("failed", 0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
