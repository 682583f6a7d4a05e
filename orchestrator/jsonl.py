"""Append-only JSON-lines files that survive a kill mid-write.

A driver killed while appending leaves at most a torn last line; reading skips it (the event it
was writing never happened, as far as the search is concerned) instead of failing the resume.
A torn line anywhere else means the file was damaged by something else: that is an error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def append(path: Path, record: dict[str, Any], default=None) -> None:
    """One line, flushed and fsynced: once this returns, a kill cannot take it back."""
    line = json.dumps(record, default=default) + "\n"
    with path.open("a") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read(path: Path) -> list[dict[str, Any]]:
    """Every whole line of `path` ([] if there is no file); a torn last line is skipped."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as err:
            if number == len(lines):
                break  # a kill mid-write: that event is not on record
            raise ValueError(f"{path}:{number} is not JSON ({err.msg}); the file is damaged"
                             ) from err
    return out
