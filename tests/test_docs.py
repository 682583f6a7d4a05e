"""The documentation agrees with the code: docs/reference.md's generated sections are what
docs/reference.py writes from it, every page link resolves, and the README stays a page a
newcomer reads in five minutes. No Ray.

Run: .venv/bin/python -m pytest -q tests/test_docs.py
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250


def _docs_script(name: str, folder: str = "docs"):
    """FOLDER/NAME.py, loaded as a module (docs/ and benchmarks/ are not packages)."""
    spec = importlib.util.spec_from_file_location(f"{folder}_{name}",
                                                  REPO / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _generator():
    return _docs_script("reference")


def test_reference_md_is_what_the_generator_writes():
    generator = _generator()
    text = generator.REFERENCE.read_text()
    assert generator.render(text) == text, (
        f"docs/reference.md differs from what the code says: run {generator.COMMAND} and "
        "commit the result")


def test_the_generated_tables_name_every_option_objective_and_status():
    import dataclasses

    from orchestrator.objective import OBJECTIVES
    from orchestrator.spec import SearchSpec
    from orchestrator.spec_flags import flag_name
    from trainables.status import TrialStatus

    text = (REPO / "docs" / "reference.md").read_text()
    for f in dataclasses.fields(SearchSpec):
        assert f"| `{f.name}` | `{flag_name(f)}" in text, f.name
    for name in OBJECTIVES:
        assert f"#### `{name}`" in text, name
    for status in TrialStatus:
        assert f"| `{status.value}` |" in text, status


def test_readme_is_at_most_250_lines():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): it is the newcomer's "
        "page; move reference material to docs/")


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to '-'."""
    out = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_every_local_link_in_the_readme_and_docs_resolves():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in _LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def _figures():
    return _docs_script("figures")


def test_the_pages_quote_the_benchmarks_results():
    """docs/benchmarks.md's table of today's figures and the README's line are what
    docs/figures.py writes from benchmarks/results/*.json: a figure is never typed by hand."""
    figures = _figures()
    for name, page in figures.PAGES.items():
        text = page.read_text()
        assert figures.render(name, text) == text, (
            f"{page.relative_to(REPO)}: the '{name}' figures differ from the results: run "
            f"{figures.COMMAND} and commit the result")


def test_a_repeat_whose_answer_missed_is_said_and_counts_as_no_speedup():
    """A headline median over the repeats whose answer held says over how many; the speedup
    target counts a repeat without a speedup (its answer, retrained with other seeds, missed the
    target) as none, not as absent (2026-12-05: 3.28x over 2 of 3 repeats, 2.98x over 3)."""
    figures = _figures()
    held = {"median": 3.275, "min": 2.98, "max": 3.57, "n": 2, "values": [2.98, 3.57, None]}
    assert figures._median(held) == "3.27 (2.98-3.57; 2 of 3 repeats)"
    every = {"median": 3.1, "min": 3.0, "max": 3.2, "n": 3, "values": [3.0, 3.1, 3.2]}
    assert figures._median(every) == "3.10 (3.00-3.20)"
    once = {"median": 4.76, "min": 4.76, "max": 4.76, "n": 1, "values": [4.76]}
    assert figures._median(once) == "4.76 (one run)"  # no spread to show
    missed_once = {"median": None, "min": None, "max": None, "n": 0, "values": [None]}
    assert figures._median(missed_once) == "-"

    headline = _docs_script("headline", folder="benchmarks")
    blank = dict.fromkeys(["search_cost_baseline_runs", "payback_runs", "vs_reference",
                           "prediction_error", "hit_rate", "false_cuts"])
    assert headline.met({**blank, "speedup": held})["speedup"] is False  # median(2.98, 3.57, 0)
    two_held = {**held, "values": [3.1, 3.57, None], "min": 3.1, "median": 3.335}
    assert headline.met({**blank, "speedup": two_held})["speedup"] is True  # median 3.1
    assert headline.met({**blank, "speedup": every})["speedup"] is True
    assert headline.met({**blank, "speedup": {**held, "n": 0, "median": None,
                                              "values": [None] * 3}})["speedup"] is None


def test_the_readmes_leaderboard_fits_120_columns():
    """The leaderboard the README's example output shows (the lines under `Leaderboard`, as
    the search prints them) fits a 120-column terminal; `--wide` prints every column."""
    readme = (REPO / "README.md").read_text()
    tables = []
    for block in re.findall(r"^```text\n(.*?)^```", readme, re.S | re.M):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("Leaderboard"):
                rows = []
                for row in lines[i + 1:]:
                    if not row.startswith((" ", "rank")):
                        break
                    rows.append(row)
                tables.append(rows)
    assert tables and all(len(t) >= 2 for t in tables), "the README shows no leaderboard"
    wide = [row for t in tables for row in t if len(row) > 120]
    assert not wide, f"{len(wide)} rows over 120 columns, the first: {wide[0]!r}"
