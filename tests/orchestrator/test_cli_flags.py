"""The `search` flags are derived from SearchSpec (orchestrator/spec_flags.py): pinned here, so a
new flag is a deliberate change to SEARCH_FLAGS. No Ray.

Run: python -m pytest -q tests/orchestrator/test_cli_flags.py
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from dataclasses import dataclass, field

import pytest

from orchestrator.cli import build_parser, spec_from_args
from orchestrator.objective import OBJECTIVES
from orchestrator.spec import PLACEMENTS, PROFILE_MODES, SearchSpec
from orchestrator.spec_flags import add_field_flags, field_docs, first_sentence, flag_name
from trainables.config import LR_SCALINGS

# Every option of `orchestrator search`. Adding a SearchSpec field adds its flag here too: the
# README and the docs promise these spellings.
SEARCH_FLAGS = {
    "--spec", "--check", "--wide", "--lr-scaling",  # not fields: a file, two modes, a --set
    # shortcut
    "--name", "--workload", "--model", "--task", "--data", "--space", "--set", "--epochs",
    "--strategy", "--confirm",
    "--trials",
    "--time-budget", "--runs-ahead", "--objective", "--time-weight", "--reference-time", "--target",
    "--baseline", "--baseline-set", "--rerun-baseline", "--tolerance", "--full-epochs", "--seed",
    "--early-stopping",
    "--grace-period", "--reduction-factor", "--warm-start", "--cpus-per-trial",
    "--max-concurrent", "--always-use-worker-group", "--output-dir", "--tracking-uri",
    "--spatial-dims", "--placement", "--profile", "--rerun-duplicates",
}
# SearchSpec fields that are deliberately not flags, and why (metadata {"flag": None}).
NOT_FLAGS: dict[str, str] = {}


def _search() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["search"]


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.option_strings[-1]: a for a in parser._actions if a.option_strings}


def test_the_search_flag_set_is_pinned():
    flags = set(_actions(_search())) - {"--help"}
    assert flags == SEARCH_FLAGS, (f"new: {sorted(flags - SEARCH_FLAGS)}, "
                                   f"gone: {sorted(SEARCH_FLAGS - flags)}")


def test_every_field_is_a_flag_or_listed_as_not_one():
    actions = _actions(_search())
    unflagged = {f.name for f in dataclasses.fields(SearchSpec) if flag_name(f) is None}
    assert unflagged == set(NOT_FLAGS)
    for f in dataclasses.fields(SearchSpec):
        if f.name not in NOT_FLAGS:
            assert actions[flag_name(f)].dest == f.name


def test_every_field_has_a_doc_and_it_is_its_flags_help():
    docs, actions = field_docs(SearchSpec), _actions(_search())
    fields = dataclasses.fields(SearchSpec)
    assert [f.name for f in fields if not docs.get(f.name)] == []
    for f in fields:
        help_ = actions[flag_name(f)].help
        assert help_.removesuffix(f" (default: {f.default})").rstrip(".") == \
            first_sentence(docs[f.name]).rstrip("."), f.name
    assert actions["--trials"].help.endswith("(default: 8)")
    assert first_sentence("Per trial (e.g. lr=0.01, nn.Module). Second one.") == \
        "Per trial (e.g. lr=0.01, nn.Module)."


def test_choices_come_from_the_types_and_agree_with_the_registries():
    from trainables.workloads import WORKLOADS

    actions = _actions(_search())
    assert tuple(actions["--objective"].choices) == OBJECTIVES
    assert tuple(actions["--workload"].choices) == tuple(WORKLOADS)
    assert tuple(actions["--placement"].choices) == PLACEMENTS == ("PACK", "SPREAD")
    assert tuple(actions["--profile"].choices) == PROFILE_MODES == ("on", "off", "compile")
    assert tuple(actions["--spatial-dims"].choices) == (0, 1, 2, 3)
    assert tuple(actions["--lr-scaling"].choices) == LR_SCALINGS


def test_flags_reach_their_fields(tiny_npz):
    args = build_parser().parse_args(
        ["search", "--data", tiny_npz, "--trials", "2", "--time-budget", "60",
         "--max-concurrent", "1", "--reference-time", "5", "--set", "lr=1e-3",
         "--set", "width=0.5", "--lr-scaling", "linear", "--spatial-dims", "2",
         "--warm-start", '[{"width": 0.5}]', "--always-use-worker-group",
         "--runs-ahead", "20"])
    spec = spec_from_args(args)
    assert (spec.num_trials, spec.time_budget_s, spec.max_concurrent_trials,
            spec.reference_time_s, spec.spatial_dims, spec.runs_ahead) == (2, 60.0, 1, 5.0, 2,
                                                                          20.0)
    assert spec.base == {"lr": 1e-3, "width": 0.5, "lr_scaling": "linear"}
    assert spec.warm_start == [{"width": 0.5}] and spec.always_use_worker_group


def test_a_switch_not_given_leaves_the_spec_files_value(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("rerun_duplicates: true\nnum_trials: 3\n")
    spec = spec_from_args(build_parser().parse_args(["search", "--spec", str(path)]))
    assert spec.rerun_duplicates and spec.num_trials == 3
    spec = spec_from_args(build_parser().parse_args(["search", "--spec", str(path),
                                                     "--trials", "5"]))
    assert spec.num_trials == 5


@dataclass(kw_only=True)
class _WithKnob(SearchSpec):
    warmup_batches: int = 4
    """Batches run before timing starts. More text here."""
    mode: typing.Literal["a", "b"] = field(default="a", metadata={"flag": "--knob-mode"})
    """Which mode."""
    quiet: bool = False
    """Say less."""


def test_a_new_field_gets_its_flag_with_type_choices_and_help():
    parser = argparse.ArgumentParser()
    added = add_field_flags(parser, _WithKnob)
    assert added[-3:] == ["--warmup-batches", "--knob-mode", "--quiet"]
    actions = _actions(parser)
    assert actions["--warmup-batches"].help == "Batches run before timing starts (default: 4)"
    assert actions["--warmup-batches"].type is int
    assert tuple(actions["--knob-mode"].choices) == ("a", "b")
    assert actions["--quiet"].default is None  # a spec file's value stands unless given
    args = parser.parse_args(["--warmup-batches", "8", "--knob-mode", "b", "--quiet"])
    assert (args.warmup_batches, args.mode, args.quiet) == (8, "b", True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--knob-mode", "c"])


def test_a_field_of_a_dataclass_made_at_runtime_gets_its_flag():
    made = dataclasses.make_dataclass(
        "Made", [("budget_gb", float | None, field(default=None))], bases=(SearchSpec,),
        kw_only=True)
    parser = argparse.ArgumentParser()
    add_field_flags(parser, made)
    action = _actions(parser)["--budget-gb"]
    assert action.type is float and action.help == ""  # no source: no doc to show
    assert _actions(parser)["--trials"].help.startswith("Trials to run")  # the base's docs


def test_a_field_with_no_string_form_must_say_it_is_not_a_flag():
    made = dataclasses.make_dataclass("Bad", [("handle", list, field(default_factory=list))])
    with pytest.raises(TypeError, match="handle: no flag for type"):
        add_field_flags(argparse.ArgumentParser(), made)
    ok = dataclasses.make_dataclass(
        "Ok", [("handle", list, field(default_factory=list, metadata={"flag": None}))])
    assert add_field_flags(argparse.ArgumentParser(), ok) == []


@pytest.mark.parametrize(("options", "message"), [
    ({"placement": "spread"}, "placement must be one of ['PACK', 'SPREAD'] (got 'spread')"),
    ({"objective": "fastest"}, "objective must be one of ['weighted', 'time_to_target', "),
    ({"workload": "resnet"}, "workload must be one of ['classifier', 'unet3d', 'resnet18', 'unet3d-64'] (got 'resnet')"),
    ({"spatial_dims": True}, "spatial_dims must be 0, 1, 2 or 3 (got True)"),
    ({"spatial_dims": 2.0}, "spatial_dims must be 0, 1, 2 or 3 (got 2.0)"),
    ({"profile": 1}, "profile must be one of ['on', 'off', 'compile'] (got 1)"),
])
def test_a_literal_field_names_its_values(options, message):
    with pytest.raises(ValueError) as err:
        SearchSpec(**options)
    assert str(err.value).startswith(message)
