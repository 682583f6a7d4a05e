"""The Pareto front of accuracy against time: trials no other trial beats on both."""

from __future__ import annotations

from collections.abc import Sequence


def pareto_mask(scores: Sequence[float], times: Sequence[float]) -> list[bool]:
    """True where no other point has score >= and time <= with at least one strictly better."""
    points = list(zip(scores, times))
    mask = []
    for i, (s_i, t_i) in enumerate(points):
        dominated = any(
            s_j >= s_i and t_j <= t_i and (s_j > s_i or t_j < t_i)
            for j, (s_j, t_j) in enumerate(points) if j != i
        )
        mask.append(not dominated)
    return mask
