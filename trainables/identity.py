"""When two configurations are the same: one home for every key, each named for what it ignores.

A configuration is a flat mapping of trial settings (trainables/config.py). Searches compare
them at several grains, coarse to fine:

    model_key     the same model: ignores speed-only switches, the batch (and accumulation),
                  the length (`epochs`, `warmup_epochs`) and the precision. Width, patch, lr,
                  schedule... decide.
    learning_key  the same model at the same precision: ignores speed-only switches, the batch
                  and the length. What a miss rules out (a run that learns no more).
    twin_key      the same run at any precision: ignores speed-only switches and precision.
                  Twins' learning curves agree epoch for epoch (orchestrator/evidence.py).
    run_key       the same run: ignores speed-only switches only. Equal keys train the same
                  weights, epoch for epoch, at other speeds.
    config_key    the same configuration: ignores nothing.

Each coarser key is a function of the finer ones: two configurations with equal `config_key`
have equal keys at every grain (tests/trainables/test_identity.py holds them to it). A key is
a canonical string (sorted JSON, numpy scalars as their values), so it is a dict key, a
journal field and a file line alike. A setting added after searches began recording
(`ADDED_LATER`) keys at its default as if absent: what earlier searches recorded under a
configuration is still found under it.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from trainables.config import SPEED_ONLY, STATISTICAL

PRECISION = "precision"
LENGTH = "epochs"
# The length's own settings: a schedule's warm-up in epochs is planned with its length (the race
# warms a contender up over a quarter of its plan, which its batch sets).
LENGTH_SETTINGS = frozenset({LENGTH, "warmup_epochs"})
# Settings added since searches began recording, at their defaults: a record made before one was
# added is the configuration with it at its default.
ADDED_LATER = {"warmup_epochs": None}


def canonical(values: dict[str, Any]) -> str:
    """`values` as one canonical string: sorted keys, numpy scalars as plain values."""
    return json.dumps({k: _plain(v) for k, v in values.items()}, sort_keys=True, default=str)


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") and not isinstance(value, str) else value


def without(config: dict[str, Any], ignored: Collection[str]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in ignored}


# -- the settings each grain keeps ----------------------------------------------------------
def as_recorded(config: dict[str, Any]) -> dict[str, Any]:
    """`config` without the settings added later that it holds at their defaults."""
    return {k: v for k, v in config.items()
            if k not in ADDED_LATER or _plain(v) != ADDED_LATER[k]}


def run_of(config: dict[str, Any]) -> dict[str, Any]:
    """What `config` trains, its speed-only switches aside."""
    return without(as_recorded(config), SPEED_ONLY)


def learning_of(config: dict[str, Any]) -> dict[str, Any]:
    """The settings that decide what is learned per sample: its run, batch and length aside."""
    return without(as_recorded(config), SPEED_ONLY | STATISTICAL | LENGTH_SETTINGS)


def model_of(config: dict[str, Any]) -> dict[str, Any]:
    """The model `config` trains (width, patch, lr, ...): its learning settings, precision
    aside."""
    return without(learning_of(config), {PRECISION})


# -- the keys ---------------------------------------------------------------------------------
def config_key(config: dict[str, Any]) -> str:
    """The same configuration: every setting."""
    return canonical(as_recorded(config))


def run_key(config: dict[str, Any]) -> str:
    """The same run at other speed switches."""
    return canonical(run_of(config))


def twin_key(config: dict[str, Any]) -> str:
    """The same run at any precision and speed switches."""
    return canonical(without(run_of(config), {PRECISION}))


def learning_key(config: dict[str, Any]) -> str:
    """The same model at the same precision, at any batch and length."""
    return canonical(learning_of(config))


def model_key(config: dict[str, Any]) -> str:
    """The same model, at any precision, batch and length."""
    return canonical(model_of(config))


def step_key(config: dict[str, Any]) -> str:
    """The same step: every setting but the run's length and seed, which a step's time does not
    depend on (a search's clock is one step's time: orchestrator/history_baseline.py)."""
    return key_without(config, LENGTH_SETTINGS | {"seed"})


def key_without(config: dict[str, Any], ignored: Collection[str]) -> str:
    """The configuration but the `ignored` settings (the screen groups candidates that differ
    only in the switches it times: a config and its variants share this key)."""
    return canonical(without(as_recorded(config), ignored))


def ledger_key(knobs: dict[str, Any], base_seed: int) -> str:
    """A sampled configuration and the seed it trains with: what a duplicate repeats."""
    return canonical({"knobs": canonical(knobs), "seed": _plain(knobs.get("seed", base_seed))})
