"""Bad input fails before any trial starts, with one clear line and a non-zero exit code."""

from __future__ import annotations

import pytest

from orchestrator.cli import main
from orchestrator.spec import SearchSpec


def test_spec_defaults_are_valid_and_round_trip():
    spec = SearchSpec()
    assert SearchSpec.from_dict(spec.to_dict()) == spec
    assert spec.resolved_tracking_uri().startswith("sqlite:///")
    from pathlib import Path

    assert spec.resolved_artifact_root() == Path.cwd() / "mlartifacts"  # beside ./mlflow.db
    assert SearchSpec(tracking_uri="sqlite:////data/m.db").resolved_artifact_root().as_posix() \
        == "/data/mlartifacts"
    assert SearchSpec(tracking_uri="http://127.0.0.1:5000").resolved_artifact_root() is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_trials": 0}, "num_trials"),
        ({"epochs": "3"}, "epochs"),
        ({"time_weight": -1.0}, "time_weight"),
        ({"time_budget_s": 0}, "time_budget_s"),
        ({"runs_ahead": 0}, "runs_ahead must be > 0"),
        ({"runs_ahead": -2.5}, "runs_ahead must be > 0"),
        ({"name": "bad name/with slash"}, "name"),
        ({"data": "/no/such/file.npz"}, "does not exist"),
        ({"base": {"lr": -1}}, "lr must be > 0"),
        ({"base": {"learning_rate": 0.1}}, "unknown trial setting"),
        ({"objective": "time_to_target"}, "needs a target"),
        ({"objective": "time_to_target", "target": 1.5}, "target accuracy"),
        ({"objective": "pareto", "early_stopping": True}, "needs a scalar objective"),
        ({"early_stopping": True, "grace_period": 3, "epochs": 3}, "grace_period"),
        ({"reduction_factor": 1}, "reduction_factor"),
        ({"warm_start": "everything"}, "warm_start"),
        ({"workload": "resnet"}, "workload must be one of"),
        ({"model": "no_such_module:build", "data": __file__}, "cannot import module"),
        ({"model": "search_spaces:default_space"}, "needs its own data"),
        ({"placement": "spread"}, "placement must be one of"),
    ],
)
def test_spec_validation(options, message):
    with pytest.raises(ValueError, match=message):
        SearchSpec(**options)


def test_spec_file_is_loaded_safely(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("name: s1\nnum_trials: 3\nspace:\n  width: [0.5, 1.0]\nbase:\n  lr: 0.01\n")
    spec = SearchSpec.from_file(good, epochs=2)
    assert (spec.name, spec.num_trials, spec.epochs, spec.base) == ("s1", 3, 2, {"lr": 0.01})

    evil = tmp_path / "evil.yaml"
    evil.write_text("name: !!python/object/apply:os.system ['echo hacked']\n")
    with pytest.raises(ValueError, match="malformed"):
        SearchSpec.from_file(evil)

    typo = tmp_path / "typo.yaml"
    typo.write_text("num_trails: 3\n")
    with pytest.raises(ValueError, match="unknown spec option"):
        SearchSpec.from_file(typo)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "--trails", "3"], "unrecognized arguments: --trails"),
        (["search", "--trials", "three"], "invalid int value"),
        (["search", "--data", "/no/such.npz"], "does not exist"),
        (["search", "--set", "lr"], "KEY=VALUE"),
        (["search", "--time-weight", "-0.5"], "time_weight must be >= 0"),
        (["search", "--space", "nope"], "unknown space"),
        (["search", "--placement", "STRICT_SPREAD"], "invalid choice"),
        (["train", "/no/such/best_config.json"], "does not exist"),
        (["resume", "/tmp"], "not a search folder"),
        (["search", "--warm-start", "[{\"width\": 3.0}]"], "outside the space"),
        (["search", "--objective", "fastest"], "invalid choice"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(argv, message, capsys, in_tmp):
    with pytest.raises(SystemExit) as exit_info:
        code = main(argv)
        raise SystemExit(code)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1, err
    assert not (in_tmp / "mlflow.db").exists()  # nothing started, nothing recorded


def test_cli_malformed_data_file_is_reported_before_ray(tmp_path, capsys, in_tmp):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"this is not a zip file")
    assert main(["search", "--data", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not a readable .npz" in err


def test_cli_placement_flag_reaches_the_spec():
    from orchestrator.cli import build_parser, spec_from_args

    args = build_parser().parse_args(["search", "--placement", "SPREAD"])
    assert spec_from_args(args).placement == "SPREAD"
    assert SearchSpec().placement == "PACK"


def test_the_objective_defaults_to_the_question_its_strategy_answers(tmp_path):
    """Strategy screen predicts the time to the baseline's accuracy, so `--strategy screen`
    alone asks match_baseline (the README's first command gives no --objective); strategy tune
    keeps the weighted objective, and an objective given explicitly stands, or is refused."""
    from orchestrator.cli import build_parser, spec_from_args

    parser = build_parser()
    assert spec_from_args(parser.parse_args(["search"])).objective == "weighted"
    screen = spec_from_args(parser.parse_args(["search", "--strategy", "screen"]))
    assert screen.objective == "match_baseline" and screen.make_objective().needs_baseline
    assert SearchSpec.from_dict(screen.to_dict()) == screen
    assert spec_from_args(parser.parse_args(
        ["search", "--objective", "pareto"])).objective == "pareto"
    with pytest.raises(ValueError, match="its objective is match_baseline .* not 'weighted'"):
        SearchSpec(strategy="screen", objective="weighted")
    with pytest.raises(ValueError, match="objective must be one of"):
        SearchSpec(objective="fastest")
    written = tmp_path / "screen.yaml"
    written.write_text("strategy: screen\nfull_epochs: 4\n")
    assert SearchSpec.from_file(written).objective == "match_baseline"
    assert SearchSpec.from_file(written, objective="match_baseline").full_epochs == 4


def test_rerun_duplicates_flag_reaches_the_spec_and_is_validated():
    from orchestrator.cli import build_parser, spec_from_args
    from orchestrator.spec import SearchSpec

    parser = build_parser()
    assert spec_from_args(parser.parse_args(["search"])).rerun_duplicates is False
    assert spec_from_args(parser.parse_args(["search", "--rerun-duplicates"])).rerun_duplicates
    with pytest.raises(ValueError, match="rerun_duplicates: expected true or false"):
        SearchSpec(rerun_duplicates="yes")


def test_cli_exit_codes_tell_bad_input_from_a_failed_search(monkeypatch, capsys, in_tmp):
    """2: refused before any work (InputError); 3: a running search failed (SearchFailed);
    any other error from a running search is not dressed up as bad input."""
    import orchestrator.cli as cli
    from orchestrator.errors import InputError, SearchFailed

    def fails_with(error: BaseException):
        def run_search(spec, **kwargs):
            raise error
        return run_search

    monkeypatch.setattr(cli, "run_search", fails_with(InputError("unknown space 'nope'")))
    assert main(["search"]) == 2
    assert capsys.readouterr().err == "orchestrator: error: unknown space 'nope'\n"
    failed = SearchFailed("trials", RuntimeError("boom"), in_tmp / "orchestrator_runs/default",
                          in_tmp / "traceback.txt")
    monkeypatch.setattr(cli, "run_search", fails_with(failed))
    assert main(["search"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("orchestrator: the search failed in its trials stage: RuntimeError: "
                          "boom\n") and "orchestrator resume " in err
    for error in (ValueError("a bug"), FileNotFoundError("gone")):
        monkeypatch.setattr(cli, "run_search", fails_with(error))
        with pytest.raises(type(error)):
            main(["search"])
    monkeypatch.setattr(cli, "run_search", fails_with(KeyboardInterrupt()))
    assert main(["search"]) == 130


def test_cli_check_refuses_a_malformed_data_file_with_exit_2(tmp_path, capsys, in_tmp):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"this is not a zip file")
    assert main(["search", "--check", "--data", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("orchestrator: error: ") and "not a readable .npz" in err


def test_a_search_that_hands_over_a_measured_answer_exits_0_even_with_no_ranked_trial():
    # Under the race every confirmation may end `decided` (not ranked): the answer is the
    # measured run in best_config.json, and the command succeeded.
    import pandas as pd

    from orchestrator.cli import exit_code
    from orchestrator.result import SearchResult

    def result(best, best_config):
        return SearchResult("s", pd.DataFrame(), best, best_config, ".", None, "l.csv", "p.csv",
                            "sqlite://", "s", None, "f", 1.0)

    assert exit_code(result(None, {"batch_size": 8})) == 0
    assert exit_code(result({"trial_id": "a"}, {"batch_size": 8})) == 0
    assert exit_code(result(None, None)) == 1
