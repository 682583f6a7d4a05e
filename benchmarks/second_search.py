"""A second search after a first one, re-measured at the current code: what it costs, from the
first search's measurements alone (issue 21, item 4).

    python benchmarks/second_search.py HEADLINE_OUT [WORKLOAD ...]

HEADLINE_OUT is a `benchmarks/headline.py --out` folder. Per workload, a fresh folder gets a copy
of repeat 1's measurements up to that first search's own `search` entry (nothing the headline's
later searches added), and a strategy 'screen' search with the headline's settings runs there
against repeat 1's baseline record. Printed: its cost over the first search's, its new trials,
its best.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from headline import FULL_EPOCHS, SPACE, search_cost_s, stage_seconds  # noqa: E402

from orchestrator import SearchSpec, run_search  # noqa: E402


def main(root: Path, workloads: list[str]) -> None:
    for w in workloads:
        src = root / w / "repeat-0"
        dst = Path(tempfile.mkdtemp(prefix=f"second-{w}-"))
        (dst / "measurements").mkdir()
        store = next((src / "measurements").glob("*.jsonl"))
        kept = []
        for line in store.read_text().splitlines():
            kept.append(line)
            if json.loads(line)["kind"] == "search":
                break
        (dst / "measurements" / store.name).write_text("\n".join(kept) + "\n")
        spec = SearchSpec(name=f"headline-{w}-again", workload=w, space=SPACE,
                          strategy="screen", objective="match_baseline",
                          baseline=str(src / f"headline-{w}" / "baseline.json"),
                          full_epochs=FULL_EPOCHS[w], num_trials=6, tolerance=0.01, seed=0,
                          output_dir=str(dst), tracking_uri=f"sqlite:///{dst}/mlflow.db")
        result = run_search(spec)
        second = search_cost_s(stage_seconds(dst / spec.name))
        first = search_cost_s(stage_seconds(src / f"headline-{w}"))
        trials = result.trials[result.trials["role"] == "trial"]
        best = {k: result.best.get(k) for k in [*result.knobs, "time_to_target_s"]} \
            if result.best else None
        print(f"{w}: second search {second:.1f} s / first {first:.1f} s = {second / first:.3f}; "
              f"{len(trials)} new trial(s); best {best}; folder {dst}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:] or ["classifier", "unet3d"])
