"""The speed profile in the driver, without Ray: `--profile` reaches the spec, a switch the user
pins or the space searches is not profiled (and the header says so), and the picks a trial
reports become leaderboard columns, MLflow tags and the best config, with profile_s kept out of
the trial's fixed cost.

Run: python -m pytest -q tests/orchestrator/test_profile_records.py
"""

from __future__ import annotations

import io

import pytest

from orchestrator.cli import build_parser, spec_from_args
from orchestrator.preflight import check_spec
from orchestrator.result import trials_table
from orchestrator.prepare import profile_switches
from orchestrator.spec import SearchSpec
from tests.orchestrator.test_trial_book import _book, _result, _trial


def test_profile_flag_reaches_the_spec_and_is_validated():
    parse = build_parser().parse_args
    assert spec_from_args(parse(["search"])).profile == "on"  # the default: profile
    assert spec_from_args(parse(["search", "--profile", "off"])).profile == "off"
    assert spec_from_args(parse(["search", "--profile", "compile"])).profile == "compile"
    with pytest.raises(ValueError, match="profile must be one of"):
        SearchSpec(profile="maybe")


def test_off_profiles_nothing_and_a_pinned_or_searched_switch_keeps_its_value():
    assert profile_switches(SearchSpec(profile="off"), {}, {}) == ()
    assert profile_switches(SearchSpec(), {}, {}) == ("channels_last", "cudnn_benchmark")
    pinned = SearchSpec(base={"channels_last": True})
    assert profile_switches(pinned, {}, {"channels_last": True}) == ("cudnn_benchmark",)
    assert "channels_last" not in profile_switches(SearchSpec(), {"channels_last": [1]}, {})
    assert "compile" not in profile_switches(SearchSpec(profile="compile",
                                                        base={"compile": False}), {}, {})


def test_the_header_names_the_profiled_and_the_pinned_switches(tiny_npz, in_tmp):
    out = io.StringIO()
    check_spec(SearchSpec(data=tiny_npz, space="small", base={"channels_last": True},
                          num_trials=1, epochs=1), out)
    line = next(ln for ln in out.getvalue().splitlines() if "profile:" in ln)
    assert "not profiled, your value wins: channels_last" in line
    assert "cudnn_benchmark" not in line  # no cuDNN on this CPU: nothing to time
    out = io.StringIO()
    check_spec(SearchSpec(data=tiny_npz, space="small", num_trials=1, epochs=1), out)
    line = next(ln for ln in out.getvalue().splitlines() if "profile:" in ln)
    assert line.strip().startswith("profile: channels_last picked by timing")
    out = io.StringIO()
    check_spec(SearchSpec(data=tiny_npz, space={}, base={"loop": "legacy"}, num_trials=1,
                          epochs=1), out)
    assert "profile: none (the legacy loop keeps its habits)" in out.getvalue()


def test_picks_become_columns_tags_and_stay_out_of_fixed_cost(tmp_path):
    book, tracker = _book(tmp_path)
    t = _trial("a")
    book.on_trial_start(0, [], t)
    book.on_trial_result(0, [], t, _result(3, status="completed", profile_s=2.0,
                                           eval_time_s=0.5, **{"pick.channels_last": True}))
    book.on_trial_complete(0, [], t)
    rec = book.records["a"]
    assert rec.picks == {"channels_last": True}
    assert tracker.tags["a"] == {"pick.channels_last": "true"}  # MLflow tags of its run
    assert rec.metrics["fixed_cost_s"] == pytest.approx(rec.wall_s - 1.0 - 0.5 - 2.0)
    table = trials_table([rec], ["lr"])
    assert table.loc[0, "pick.channels_last"] == True  # noqa: E712 - a numpy bool
    assert table.loc[0, "profile_s"] == 2.0
