"""How a search ends when it does not end well: two kinds of error, told apart by when they come.

* `InputError`: the user's input was refused before any work started (a bad option, a data file
  that does not read, a space that cannot run here, a folder that is not a search). Nothing was
  recorded; the CLI prints its one line and exits 2.
* `SearchFailed`: something broke while the search ran (a stage raised). It names the stage,
  what failed, the search folder, and the file its full traceback was written to; the CLI
  prints that and exits 3. Everything recorded so far stays, and `orchestrator resume` goes on.

An error raised inside a running search is never dressed up as bad input, whatever its class
(a `FileNotFoundError` from a vanished working directory is not the user's typo).
"""

from __future__ import annotations

import traceback
from pathlib import Path


class InputError(ValueError):
    """Bad input, found before any work started: one line says what and how to fix it."""


class SearchFailed(RuntimeError):
    """A stage of a running search raised. `stage` is the stage, `error` what it raised,
    `directory` the search folder, `traceback_file` where the full traceback is."""

    def __init__(self, stage: str, error: BaseException, directory: Path | None,
                 traceback_file: Path | None):
        self.stage, self.error = stage, error
        self.directory, self.traceback_file = directory, traceback_file
        lines = [f"the search failed in its {stage} stage: {type(error).__name__}: {error}"]
        if traceback_file is not None:
            lines.append(f"full traceback: {traceback_file}")
        if directory is not None:
            lines.append(f"what it recorded is kept; once fixed, continue it with: "
                         f"orchestrator resume {directory}")
        super().__init__("\n".join(lines))


def write_traceback(error: BaseException, path: Path) -> Path | None:
    """Append `error`'s traceback to `path`; the path, or None if it could not be written (a
    vanished folder must not hide the error itself)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write("".join(traceback.format_exception(error)) + "\n")
        return path
    except OSError:
        return None
