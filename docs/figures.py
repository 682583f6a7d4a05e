"""Write today's figures into docs/benchmarks.md and README.md from the benchmarks' results, so
the pages quote what the scripts measured and nothing else.

    .venv/bin/python docs/figures.py           # rewrite the generated figures
    .venv/bin/python docs/figures.py --check   # exit 1 (and say so) if they are out of date

Sources: benchmarks/results/headline.json (benchmarks/headline.py) and
benchmarks/results/long_jobs.json (benchmarks/long_jobs.py), every key written by those
scripts. Each generated block sits between markers,

    <!-- figures: NAME (docs/figures.py; do not edit by hand) -->
    ...
    <!-- end figures: NAME -->

`today` (docs/benchmarks.md's opening table) and `readme` (README.md's line).
tests/test_docs.py fails when a page is not what this writes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
PAGES = {"today": REPO / "docs" / "benchmarks.md", "readme": REPO / "README.md"}
COMMAND = ".venv/bin/python docs/figures.py"
_BEGIN = "<!-- figures: {name} (docs/figures.py; do not edit by hand) -->"
_END = "<!-- end figures: {name} -->"


def _load(name: str) -> dict | None:
    path = RESULTS / name
    return json.loads(path.read_text()) if path.is_file() else None


def _median(value, fmt: str = "{:.2f}") -> str:
    """A median with its spread, or the value; '-' for nothing measured. A median over fewer
    repeats than ran says over how many: a repeat without a value (no answer, or one that missed
    the target when retrained) is not a repeat that agreed."""
    if isinstance(value, dict):
        if not value.get("n"):
            return "-"
        ran = _ran(value)
        if ran == 1:  # one run has no spread (the long-jobs reference may run once a length)
            return (fmt + " (one run)").format(value["median"])
        of = f"; {value['n']} of {ran} repeats" if value["n"] < ran else ""
        return (fmt + " (" + fmt + "-" + fmt + of + ")").format(value["median"], value["min"],
                                                                value["max"])
    return "-" if value is None else fmt.format(value)


def _ran(value: dict) -> int:
    """How many repeats a spread was taken over, those without a value included."""
    return len(value.get("values") or []) or value["n"]


def _missed(workload: dict) -> str:
    """How many of the answers' retrains with other seeds ended below their repeat's target."""
    runs = [r for repeat in workload.get("retrains_per_repeat") or [] for r in repeat or []]
    return f"{sum(not r['reached'] for r in runs)} of {len(runs)}" if runs else "-"


def _short(machine: str) -> str:
    """A machine as a table cell: its CPU's name and cores, without the list of its flags."""
    name, _, rest = machine.partition(", ")
    cores = rest.split(", ")[0] if rest else ""
    name = name.replace("(R)", "").replace(" Processor", "")
    return f"{name}, {cores}" if cores else name


def _met(ok) -> str:
    return {True: "met", False: "**not met**", None: "-"}[ok]


HEADLINE_ROWS = [  # (label, key, format, target key)
    ("speedup, handed over and retrained (x)", "speedup", "{:.2f}", "speedup"),
    ("speedup as the search measured it (x)", "speedup_in_search", "{:.2f}", None),
    ("to the same target (x)", "speedup_same_target", "{:.2f}", None),
    ("the optimized loop alone (x, projected)", "loop_alone_speedup", "{:.2f}", None),
    ("search cost (baseline runs)", "search_cost_baseline_runs", "{:.2f}",
     "search_cost_baseline_runs"),
    ("payback (runs)", "payback_runs", "{:.1f}", "payback_runs"),
    ("hit rate", "hit_rate", "{:.2f}", "hit_rate"),
    ("prediction error", "prediction_error", "{:.0%}", "prediction_error"),
    ("false cuts", "false_cuts", "{:d}", "false_cuts"),
    ("found / reference search", "vs_reference", "{:.2f}", "vs_reference"),
]


def today() -> str:
    headline, long_jobs = _load("headline.json"), _load("long_jobs.json")
    out = []
    if headline:
        w = headline["workloads"]
        names = list(w)
        out += [f"Headline ([section](#headline-equal-terms)): `benchmarks/headline.py`, "
                f"{headline['measured']}, {headline['machine']}; medians of "
                f"{len(w[names[0]]['seeds'])} independent repeats (spread in brackets).", "",
                "| figure | " + " | ".join(f"{n} ({w[n]['full_epochs']} epochs)" for n in names)
                + " | target |", "|---|" + "---|" * len(names) + "---|"]
        for label, key, fmt, target in HEADLINE_ROWS:
            cells = [_median(w[n].get(key), fmt) for n in names]
            goal = "" if target is None else ", ".join(
                f"{n}: {_met(w[n]['targets_met'].get(target))}" for n in names)
            out.append(f"| {label} | " + " | ".join(cells) + f" | {goal} |")
        out.append("| retrains below the target | " + " | ".join(_missed(w[n]) for n in names)
                   + " | |")
        for n in names:
            second = w[n]["second_search"]
            out.append(f"| {n}, asked again | cost {second['cost_ratio_to_first']:.2f} of the "
                       f"first, same answer: {second['same_answer']}, "
                       f"{second['new_confirmations']} new confirmations |" + " |" * len(names))
    if long_jobs:
        counts = sorted({len(row["seeds"]) for lengths in long_jobs["workloads"].values()
                         for row in lengths.values()})
        out += ["", f"Long jobs ([section](#long-jobs-the-race)): `benchmarks/long_jobs.py`, "
                f"{long_jobs['measured']}; medians of "
                f"{'/'.join(map(str, counts))} race search(es) a length (the issue asks 3); "
                f"each row's own machine and time in its last column (a cost in baseline runs "
                f"is a ratio on one machine).",
                "", "| workload | full epochs | search cost (baseline runs) | "
                "payback (runs) | answers | speedup (x) | full confirmation: speedup (x), cost |"
                " decided by | measured (when, where) |", "|---|---|---|---|---|---|---|---|---|"]
        # Rows measured before they recorded the race's decision point ran with 40% of a plan.
        for name, lengths in long_jobs["workloads"].items():
            for n, row in sorted(lengths.items(), key=lambda item: int(item[0])):
                found = row["speedup"]
                out.append(f"| {name} | {n} | {_median(row['search_cost_baseline_runs'])} | "
                           f"{_median(row['payback_runs'], '{:.1f}')} | "
                           f"{found['n']} of {len(found['values'])} | "
                           f"{_median(row['speedup'])} | "
                           f"{_median(row['reference_speedup'])}, "
                           f"{_median(row.get('reference_search_cost_baseline_runs'))} | "
                           f"{row.get('decide_at', 0.4):.0%} of a plan | "
                           f"{row.get('measured', long_jobs['measured'])}, "
                           f"{_short(row.get('machine', long_jobs['machine']))} |")
    return "\n".join(out) if out else "(no results yet: run the benchmarks)"


def readme() -> str:
    headline = _load("headline.json")
    if not headline:
        return "(no headline measured yet)"
    parts = []
    for name, r in headline["workloads"].items():
        found = r["speedup"]
        held = (f" in the {found['n']} of {_ran(found)} repeats whose answer held, retrained "
                f"with other seeds") if found["n"] < _ran(found) else ""
        parts.append(f"on {name} at {r['full_epochs']} epochs, "
                     f"{_median(found['median'])}x as handed over{held} "
                     f"({_median(r['speedup_same_target']['median'])}x to the same target; the "
                     f"loop alone {_median(r['loop_alone_speedup']['median'])}x) for "
                     f"{_median(r['search_cost_baseline_runs']['median'])} baseline runs, "
                     f"paying back after {_median(r['payback_runs']['median'], '{:.1f}')}")
    return (f"Measured by `benchmarks/headline.py` ({headline['measured']}, "
            f"{headline['machine']}; medians of 3 independent repeats, each answer retrained "
            f"with other seeds): " + "; ".join(parts) + ".")


RENDER = {"today": today, "readme": readme}


def render(name: str, text: str) -> str:
    begin, end = _BEGIN.format(name=name), _END.format(name=name)
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"{PAGES[name]}: no '{begin}' ... '{end}' markers")
    return pattern.sub(lambda _: f"{begin}\n{RENDER[name]()}\n{end}", text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    stale = []
    for name, page in PAGES.items():
        text = page.read_text()
        new = render(name, text)
        if new != text:
            stale.append(str(page.relative_to(REPO)))
            if not args.check:
                page.write_text(new)
    if args.check and stale:
        print(f"out of date: {stale}; run {COMMAND}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
