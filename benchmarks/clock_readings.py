"""How far this machine's reading of its own speed wanders while nothing changes (issue 41).

    python benchmarks/clock_readings.py [--workload unet3d] [--pairs 30] [--gap 2]

A search that reuses a recorded baseline reads this machine's speed as the baseline's step,
timed here for a few steps (orchestrator/history_baseline.py `read_step`), and holds it
against the step the baseline was timed at. This reads that step the way a search does, as
`--pairs` pairs of readings `--gap` seconds apart in one search's process on its own Ray (the
search's prepare stage, then readings instead of a baseline; nothing trained, nothing
recorded), and prints each pair, their spread, and how many pairs would read "moved" against
the first pair's faster reading at the drift line (`DRIFT_NOISE`): on an unmoved machine, every
one of them a false reading. Run it with nothing else running.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator import baseline as baselines  # noqa: E402
from orchestrator import history_baseline  # noqa: E402
from orchestrator.search import Search  # noqa: E402
from orchestrator.spec import SearchSpec  # noqa: E402


class _Readings(Search):
    """A search whose baseline stage reads the baseline's step `pairs` times (`found`: each
    pair's seconds since the first and its readings) and stops."""

    def __init__(self, spec: SearchSpec, pairs: int, gap: float):
        super().__init__(spec)
        self.pairs, self.gap, self.found = pairs, gap, []

    def run_baseline(self) -> None:
        ctx = self.ctx
        kind = baselines.resolved_kind(self.spec)
        config = baselines.baseline_config(kind, ctx.prepared.base, self.spec.baseline_set)
        config = baselines.resolved_config({"config": config})
        started = time.time()
        for n in range(self.pairs):
            if n:
                time.sleep(self.gap)
            timed = self._time_here(config)  # no `then`: two readings, as a search's first
            self.found.append((time.time() - started, timed["readings"]))
            print(f"{time.time() - started:6.1f} s  " +
                  "  ".join(f"{r:.4f}" for r in timed["readings"]), flush=True)
        raise _Done


class _Done(Exception):
    pass


def summary(pairs: list[list[float]]) -> dict:
    """The readings' spread, and the pairs a search would read as a moved speed against the
    first pair's faster reading (every reading beyond `DRIFT_NOISE`, on one side)."""
    readings = [r for p in pairs for r in p]
    then = min(pairs[0])
    moved = [p for p in pairs[1:] if history_baseline.moved(
        then, {"status": "completed", "step_s": min(p), "readings": list(p)}) is not None]
    faster = [min(p) for p in pairs]
    return {"readings": len(readings), "low": min(readings), "high": max(readings),
            "median": statistics.median(readings), "pair_low": min(faster),
            "pair_high": max(faster), "then": then, "moved": len(moved),
            "against": len(pairs) - 1}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="unet3d", choices=("unet3d", "classifier"))
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--gap", type=float, default=2.0, help="seconds between pairs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        spec = SearchSpec(workload=args.workload, strategy="screen", num_trials=1,
                          output_dir=f"{tmp}/runs", name="clock",
                          tracking_uri=f"sqlite:///{tmp}/mlflow.db")
        search = _Readings(spec, args.pairs, args.gap)
        try:
            search.run()
        except _Done:
            pass
        except Exception as err:  # the search wraps its stage's error: unwrap ours
            if not isinstance(err.__cause__, _Done):
                raise
    s = summary([list(p) for _, p in search.found])
    print(f"{s['readings']} readings {s['low']:.4f}-{s['high']:.4f} s "
          f"({s['high'] / s['low']:.2f}x), median {s['median']:.4f} s; the faster of each pair "
          f"{s['pair_low']:.4f}-{s['pair_high']:.4f} s ({s['pair_high'] / s['pair_low']:.2f}x)")
    print(f"against the first pair's {s['then']:.4f} s, {s['moved']} of {s['against']} pairs "
          f"read a moved speed at the drift line ({history_baseline.DRIFT_NOISE:.0%}, every "
          "reading beyond it)")


if __name__ == "__main__":
    main()
