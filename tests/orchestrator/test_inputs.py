"""What the user says is what runs (issue 12): typed fields, exponent numbers, pinned knobs, and
the checks that must refuse a search before Ray starts. All through `search --check`: no Ray."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.cli import main
from orchestrator.plain_yaml import load, load_value
from orchestrator.spec import SearchSpec
from trainables.config import TrialConfig


def check(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["search", "--check", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("text", "value"), [("1e-3", 1e-3), ("2E5", 2e5), ("-1.5e+2", -150.0),
                                             ("3", 3), ("0.5", 0.5), ("[1e-4, 1e-2]", [1e-4, 1e-2]),
                                             ("abc", "abc"), ("1.2.3", "1.2.3"),
                                             ("none", None), ("None", None), ("nonempty", "nonempty")])
def test_yaml_reads_exponent_numbers_as_floats(text, value):
    # `load_value` reads one --set value; `load` (spec files) keeps the word 'none' a word, so
    # `baseline: none` in a spec means no baseline.
    assert load_value(text) == value
    assert load(text) == (text if text in ("none", "None") else value)


def test_exponent_lr_from_set_and_from_a_spec_file(tiny_npz, tmp_path, capsys):
    code, out, err = check(capsys, "--data", tiny_npz, "--set", "lr=1e-3")
    assert code == 0 and all(line.startswith("  note: ") for line in err.splitlines()), err
    spec = tmp_path / "spec.yaml"
    spec.write_text("base: {lr: 1e-3, patch_size: 12}\nspace: {weight_decay: {loguniform: [1e-5, 1e-3]}}\n")
    loaded = SearchSpec.from_file(spec, data=tiny_npz)
    assert loaded.base["lr"] == 1e-3
    assert main(["search", "--check", "--spec", str(spec), "--data", tiny_npz]) == 0


@pytest.mark.parametrize(("options", "message"), [
    ({"time_weight": "abc"}, "time_weight: expected a number, got 'abc'"),
    ({"grace_period": "2"}, "grace_period: expected an integer, got '2'"),
    ({"target": "high"}, "target: expected a number or null, got 'high'"),
    ({"time_budget_s": "60"}, "time_budget_s: expected a number or null"),
    ({"seed": 1.5}, "seed: expected an integer, got 1.5"),
    ({"early_stopping": "yes"}, "early_stopping: expected true or false"),
    ({"base": {"lr": "fast"}}, "lr: expected a number, got 'fast'"),
    ({"base": {"compile": "yes"}}, "compile: expected true or false"),
    ({"spatial_dims": 4}, "spatial_dims must be 0, 1, 2 or 3"),
])
def test_every_spec_field_is_type_checked_with_one_line(options, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(")) as err:
        SearchSpec(**options)
    assert "\n" not in str(err.value)


def test_trial_config_fields_are_type_checked():
    with pytest.raises(ValueError, match="batch_size: expected an integer, got 64.5"):
        TrialConfig(batch_size=64.5)
    assert TrialConfig(lr=1).lr == 1  # an integer is a valid number
    assert TrialConfig(patch_size=None).patch_size is None


def test_pinned_knob_leaves_the_space_and_is_shown(tiny_npz, capsys):
    code, out, err = check(capsys, "--data", tiny_npz, "--set", "patch_size=12",
                           "--set", "width=0.5")
    assert code == 0, err
    assert "'patch_size'" not in out.split("space:")[1].splitlines()[0]
    assert "pinned: patch_size=12, width=0.5" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--set", "patch_size=64"], "knob 'patch_size': [64] larger than"),  # 16-px images
    (["--set", "precision=fp16-mixed"], "fp16-mixed needs a CUDA GPU"),
    (["--set", "workload=transformer"], "workload 'transformer' is unknown"),
    (["--set", "lr=fast"], "lr: expected a number, got 'fast'"),
    (["--warm-start", "[{batch_size: 64"], "--warm-start is not 'seeds' or a JSON list"),
    (["--space", "small", "--set", "batch_size=64", "--set", "width=0.5"],
     "the space searches no knob, so 8 trials"),
    (["--set", "lr"], "--set wants KEY=VALUE"),
])
def test_bad_input_is_refused_before_ray_with_one_line(tiny_npz, capsys, argv, message):
    if "fp16" in message:
        import torch

        if torch.cuda.is_available():
            pytest.skip("fp16-mixed is valid on a GPU machine")
    with pytest.raises(SystemExit) if argv[0:2] == ["--set", "lr"] else _no_raise() as _:
        code, out, err = check(capsys, "--data", tiny_npz, *argv)
    if argv[0:2] == ["--set", "lr"]:
        err = capsys.readouterr().err
    else:
        assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err


class _no_raise:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_space_checks_unet_patch_float_ranges_and_choice_types(tmp_path, capsys):
    def spec(text: str) -> tuple[int, str]:
        path = tmp_path / "s.yaml"
        path.write_text(text)
        code, _, err = check(capsys, "--spec", str(path))
        return code, err

    code, err = spec("workload: unet3d\nspace: {patch_size: [16, 18]}\n")
    assert code == 2 and "unet3d needs multiples of 4 (two poolings), got [18]" in err
    code, err = spec("space: {batch_size: {uniform: [16, 64]}}\n")
    assert code == 2 and "'batch_size' wants an integer; a float range" in err
    code, err = spec("space: {batch_size: [32, big]}\n")
    assert code == 2 and "space knob 'batch_size': expected an integer, got 'big'" in err
    code, err = spec("space: {lr: {uniform: [1e-4, 1e-2]}}\n")  # a float range on a float knob
    assert code == 0, err


def test_single_class_data_is_refused(tmp_path, capsys):
    path = tmp_path / "one.npz"
    np.savez(path, x=np.zeros((40, 8, 8), np.float32), y=np.zeros(40, np.int64))
    code, _, err = check(capsys, "--data", str(path), "--trials", "1", "--space", "small")
    assert code == 2 and "single class" in err, err


def test_spatial_dims_and_patch_none_from_the_cli(tmp_path, capsys):
    from tests.trainables.test_shapes import features_npz, signals_npz

    signals = signals_npz(tmp_path / "sig.npz")
    code, out, err = check(capsys, "--data", signals, "--spatial-dims", "1")
    assert code == 0 and "train (128, 3, 32)" in out and "'patch_size'" in out, err
    code, out, err = check(capsys, "--data", signals, "--spatial-dims", "1",
                           "--set", "patch_size=none")
    assert code == 0 and "pinned: patch_size=None" in out, err
    features = features_npz(tmp_path / "feat.npz")
    code, out, err = check(capsys, "--data", features)
    assert code == 0 and "train (128, 10)" in out and "patch_size" not in out, err
    code, out, err = check(capsys, "--data", features, "--set", "patch_size=8")
    assert code == 2 and "feature vectors (nothing to crop)" in err
    code, out, err = check(capsys, "--data", features, "--spatial-dims", "3")
    assert code == 2 and "cannot be read with spatial_dims=3" in err


def test_the_trials_lr_is_scaled_from_the_baselines(tiny_npz, tmp_path):
    """The seeds' baseline trains lr 3e-3 at batch 32 unscaled: the trials scale from there, so
    a trial at batch 32 trains what the baseline trains (before, at half its lr: at 60 epochs
    no classifier candidate reached the baseline's score). A recorded baseline anchors them as
    the run that recorded it did; the unet3d seeds already agree; a named reference stands."""
    import json

    from orchestrator.prepare import load_data, prepare

    def base_of(**options):
        spec = SearchSpec(data=tiny_npz, objective="match_baseline", full_epochs=4, **options)
        base = prepare(spec, load_data(spec), 2, 0).base
        return base.get("lr"), base.get("lr_reference_batch")

    assert base_of() == (3e-3, 32)
    assert base_of(baseline="base") == (None, None)  # the baseline is the trials' own rule
    assert base_of(baseline="base", baseline_set={"batch_size": 100, "lr_scaling": "none",
                                                  "lr": 1e-3}) == (1e-3, 100)
    assert base_of(base={"lr_reference_batch": 128}) == (None, 128)
    record = tmp_path / "baseline.json"
    record.write_text(json.dumps({
        "kind": "seeds", "status": "completed", "val_score": 0.5, "train_time_s": 10.0,
        "config": {"workload": "classifier", "batch_size": 32, "lr_scaling": "none",
                   "lr": 2e-3, "an_old_field": 1}}))
    assert base_of(baseline=str(record)) == (2e-3, 32)
    unet = SearchSpec(workload="unet3d", objective="match_baseline", full_epochs=4)
    assert prepare(unet, load_data(unet), 2, 0).base.get("lr_reference_batch") is None
