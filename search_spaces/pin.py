"""Pinned knobs: a value the user fixes (`--set KEY=V`, `base` in a spec) is what runs.

A knob that is both fixed by the user and searched by the space would otherwise be searched
silently, as if the user had said nothing. Pinning removes it from the space (and from the
space's own fixed values), so the user's value is the one validated and trained.
"""

from __future__ import annotations

from typing import Any


def pin(searched: dict, fixed: dict, user_base: dict[str, Any]) -> tuple[dict, dict, list[str]]:
    """(searched, fixed, pinned): the space without the user's knobs, and which ones moved."""
    pinned = sorted(k for k in user_base if k in searched or k in fixed)
    searched = {k: v for k, v in searched.items() if k not in user_base}
    fixed = {k: v for k, v in fixed.items() if k not in user_base}
    return searched, fixed, pinned


def describe_pinned(pinned: list[str], user_base: dict[str, Any]) -> str:
    """The header line: 'pinned: patch_size=64, precision=bf16-mixed (from --set / base)'."""
    values = ", ".join(f"{k}={user_base[k]}" for k in pinned)
    return f"pinned: {values} (from --set / base; not searched)"
