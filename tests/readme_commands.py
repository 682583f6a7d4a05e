"""Find every `orchestrator ...` command shape that README.md and docs/*.md promise (used by
tests/test_readme_commands.py; no Ray here).

A command shape is
* a line of a fenced shell block that runs `orchestrator` (`.venv/bin/orchestrator search`,
  `python -m orchestrator search ...`, `python -m orchestrator.tracking.outbox ...`), joined over
  backslash continuations and cut at `&&`, `;`, `|` and `#`;
* an inline code span that is such a command (`orchestrator resume OUTPUT_DIR/NAME`);
* an inline code span that starts with an option of `orchestrator search`, `resume` or `train`
  (`--objective pareto`, `--early-stopping --grace-period 1 --reduction-factor 2`, `--name`),
  every `--option` in it being one of theirs (`--epochs 10 --patch-size 32` is a benchmark
  script's, not ours).
Each is keyed by its text with whitespace collapsed and any `.venv/bin/` style path dropped.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def documents() -> list[Path]:
    """The pages whose commands must run: the README and every page in docs/."""
    return [README, *sorted((REPO / "docs").glob("*.md"))]


_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+(?:\n[^`\n]+)?)`")  # a code span may wrap onto a second line
# `orchestrator SUBCOMMAND ...` (any path before it), or `python -m orchestrator[.module] ...`.
_COMMAND = re.compile(r"(?:^|\s|/)((?:python -m )?orchestrator [a-z].*"
                      r"|python -m orchestrator\.[\w.]+ .*)$")


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block."""
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(text)]


def cli_flags() -> set[str]:
    """Every option string of the `orchestrator` subcommands."""
    from orchestrator.cli import build_parser

    flags: set[str] = set()
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                for a in sub._actions:
                    flags.update(s for s in a.option_strings if s.startswith("--"))
    return flags - {"--help"}


def _as_command(piece: str) -> str | None:
    found = _COMMAND.search(" ".join(piece.split()))
    return found.group(1).strip() if found else None


def _is_our_option(span: str, flags: set[str]) -> bool:
    first = span.split(" ")[0].split("=")[0]
    options = {w.split("=")[0] for w in span.split(" ") if w.startswith("--")}
    return first in flags and options <= flags


def readme_commands(text: str, flags: set[str]) -> list[str]:
    """Every command shape in a markdown text, in order of appearance, without repeats."""
    found: list[str] = []

    def add(shape: str | None) -> None:
        if shape and shape not in found:
            found.append(shape)

    for lang, body in fenced_blocks(text):
        if lang not in ("bash", "sh", "shell", ""):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0]
            for piece in re.split(r"&&|;|\|", line):
                add(_as_command(piece))
    prose = _FENCE.sub("", text)
    for span in _SPAN.findall(prose):
        span = " ".join(span.split())
        add(span if _is_our_option(span, flags) else _as_command(span))
    return found


def documented_commands(flags: set[str]) -> dict[str, list[str]]:
    """Every command shape of README.md and docs/*.md -> the pages that show it."""
    where: dict[str, list[str]] = {}
    for page in documents():
        for shape in readme_commands(page.read_text(), flags):
            where.setdefault(shape, []).append(str(page.relative_to(REPO)))
    return where


def span_flags(shape: str, flags: set[str]) -> set[str]:
    """The `orchestrator` options a command shape uses."""
    try:
        words = shlex.split(shape)
    except ValueError:
        words = shape.split()
    return {w.split("=")[0] for w in words if w.split("=")[0] in flags}
