"""The keys of "the same configuration" (trainables/identity.py) held against each other: each
ignores what its name says and nothing else, and a coarser key never tells apart what a finer
one calls the same (no Ray)."""

from __future__ import annotations

import itertools

import numpy as np

from trainables.identity import (config_key, key_without, ledger_key, learning_key, model_key,
                                 run_key, step_key, twin_key)

BASE = {"workload": "unet3d", "width": 1.0, "patch_size": 24, "lr": 0.003, "batch_size": 4,
        "precision": "bf16-mixed", "channels_last": True, "epochs": 12, "seed": 0}
# What each change is, and which keys it leaves equal (finest to coarsest).
CHANGES = {
    "channels_last": ({"channels_last": False}, {"run", "twin", "learning", "model"}),
    "precision": ({"precision": "fp32"}, {"twin", "model"}),
    "batch": ({"batch_size": 8}, {"learning", "model"}),
    "epochs": ({"epochs": 20}, {"learning", "model", "step"}),
    # The race's warm-up is planned with a contender's length (a quarter of its plan).
    "warmup": ({"schedule": "wsd", "warmup_epochs": 5.0}, set()),
    "warmup_epochs": ({"warmup_epochs": 3.0}, {"learning", "model", "step"}),
    "width": ({"width": 0.5}, set()),
}
KEYS = {"config": config_key, "run": run_key, "twin": twin_key, "learning": learning_key,
        "model": model_key, "step": step_key}
# Finer -> coarser: equal at the finer grain means equal at the coarser.
ORDER = [("config", "run"), ("run", "twin"), ("run", "learning"), ("twin", "model"),
         ("learning", "model"), ("config", "step")]


def test_each_key_ignores_what_its_name_says_and_nothing_else():
    for name, (change, equal_under) in CHANGES.items():
        changed = {**BASE, **change}
        for key, fn in KEYS.items():
            assert (fn(changed) == fn(BASE)) == (key in equal_under), (name, key)


def test_a_coarser_key_never_tells_apart_what_a_finer_one_calls_the_same():
    configs = [{**BASE, **a, **b} for (a, _), (b, _) in
               itertools.product(CHANGES.values(), repeat=2)]
    for finer, coarser in ORDER:
        for x, y in itertools.product(configs, repeat=2):
            if KEYS[finer](x) == KEYS[finer](y):
                assert KEYS[coarser](x) == KEYS[coarser](y), (finer, coarser, x, y)


def test_keys_are_canonical_whatever_the_order_and_numpy_scalars():
    shuffled = dict(reversed(list(BASE.items())))
    numpy = {**BASE, "batch_size": np.int64(4), "width": np.float64(1.0)}
    for fn in KEYS.values():
        assert fn(shuffled) == fn(BASE) == fn(numpy)
    assert key_without(BASE, {"channels_last"}) == key_without(
        {**BASE, "channels_last": False}, {"channels_last"})
    assert step_key({**BASE, "seed": 5}) == step_key(BASE)  # a step's time has no seed
    assert ledger_key({"lr": 0.1}, 0) != ledger_key({"lr": 0.1}, 1)
    assert ledger_key({"lr": 0.1, "seed": 3}, 0) == ledger_key({"lr": 0.1, "seed": 3}, 9)


def test_a_setting_added_later_keys_at_its_default_as_if_absent():
    # Records made before `warmup_epochs` existed hold no such setting: what earlier searches
    # recorded under a configuration is still found under it.
    later = {**BASE, "warmup_epochs": None}
    for fn in KEYS.values():
        assert fn(later) == fn(BASE)
    assert key_without(later, {"channels_last"}) == key_without(BASE, {"channels_last"})
    assert config_key({**BASE, "warmup_epochs": 3.0}) != config_key(BASE)
