"""The screen's progress: a bar with a count and an ETA on a terminal, a line per round elsewhere.

The default space's screen times about 250 configurations, 4-5 minutes on 2 cores: without a
count a user cannot tell a slow screen from a stuck one. On a terminal tqdm draws the bar (and
removes it when the round ends); where the output is a file or a pipe (a Ray job's log, CI), a
bar would be hundreds of carriage returns, so each round prints one line when it ends.
"""

from __future__ import annotations

import time
from typing import TextIO


class Progress:
    """`with Progress(out, total, label) as bar: ... bar.advance(n)`."""

    def __init__(self, out: TextIO, total: int, label: str):
        self.out, self.total, self.label = out, total, label
        self.done, self.started = 0, time.time()
        self.bar = None
        if total and _is_terminal(out):
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=label, unit="config", file=out,
                            leave=False, dynamic_ncols=True)

    def advance(self, n: int = 1) -> None:
        if n <= 0:
            return
        self.done += n
        if self.bar is not None:
            self.bar.update(n)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.total and exc[0] is None:
            print(f"{self.label}: {self.done} of {self.total} timed in "
                  f"{time.time() - self.started:.1f} s", file=self.out, flush=True)


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False
