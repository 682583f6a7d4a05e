"""Every command the README promises runs, at tiny scale; the README's list and this table agree.

A README that promises a command which does not run is a defect. `COMMANDS` maps each command
shape found in the README (`tests/readme_commands.py` says what counts) to the run below that
exercises it, or to the test that already runs it end to end ("covered by FILE::TEST"). A new
README command without an entry fails `test_every_readme_command_has_an_entry`, naming the line
to add. Runs call `orchestrator.cli.main` in this process, on the session's Ray, with one MLflow
store; the built-in data sets are swapped for tiny ones by pre-filling the cache the loaders read
(`ORCHESTRATOR_CACHE`), so `orchestrator search` with no flags runs its real code path.

Run: flock /tmp/ray.lock timeout 900 python -m pytest -q tests/test_readme_commands.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.readme_commands import README, REPO, cli_flags, fenced_blocks, readme_commands
from tests.readme_commands import span_flags

pytestmark = pytest.mark.integration

SERVER = "covered by tests/orchestrator/test_mlflow_tracking.py::" \
         "test_store_that_never_returns_falls_back_to_local_sqlite"
PLACEMENT = "covered by tests/integration/test_placement.py::" \
            "test_pack_uses_one_node_and_spread_uses_two"
JOB = "covered by tests/integration/test_job_submit.py::" \
      "test_submitted_search_succeeds_and_records_mlflow_runs"

PROFILE = "covered by tests/orchestrator/test_profile_records.py::" \
          "test_profile_flag_reaches_the_spec_and_is_validated"

BAD_INPUT = "covered by tests/orchestrator/test_inputs.py::" \
            "test_bad_input_is_refused_before_ray_with_one_line"

# README command shape -> a run in RUNS, or "covered by FILE::TEST".
COMMANDS: dict[str, str] = {
    "orchestrator search": "quickstart",
    "orchestrator search --spec wider.yaml --trials 4": "spec",
    "orchestrator resume OUTPUT_DIR/NAME": "resume",
    "orchestrator train best_config.json": "train",
    "--name": "options",
    "--data": "options",
    "--space": "options",
    "--set KEY=VALUE": "options",
    "--epochs": "options",
    "--trials": "options",
    "--time-budget": "options",
    "--objective": "options",
    "--time-weight": "options",
    "--reference-time": "options",
    "--seed": "options",
    "--cpus-per-trial": "options",
    "--max-concurrent": "options",
    "--output-dir": "options",
    "--placement": "options",
    "--placement PACK": "options",
    "--placement SPREAD": PLACEMENT,
    "--spec": "spec",
    "--target": "time_to_target",
    "--objective time_to_target --target 0.85": "time_to_target",
    "--objective pareto": "pareto",
    "--early-stopping --grace-period 1 --reduction-factor 2": "early_stopping",
    "--warm-start seeds": "warm_seeds",
    "--warm-start '[{\"width\": 0.5, \"batch_size\": 128}]'": "warm_points",
    "--workload unet3d": "unet3d",
    "orchestrator search --workload unet3d --trials 3 --epochs 2": "unet3d",
    "--model module:function --data your.npz": "own_model",
    "--tracking-uri": "options",
    "--tracking-uri http://HOST:5000": SERVER,
    "--tracking-uri http://127.0.0.1:5000": SERVER,
    "python -m orchestrator.tracking.outbox <output_dir>/<name>/mlflow-journal.json "
    "--tracking-uri http://HOST:5000": SERVER,
    "python -m orchestrator search --spec my-search.yaml --trials 16 --epochs 5 --placement "
    "PACK --tracking-uri sqlite:////home/ray/mlflow.db --output-dir /home/ray/runs": JOB,
    "python -m orchestrator search ...": JOB,
    "orchestrator search ...": "quickstart",
    "python -m orchestrator search --spec two-workers.yaml --trials 3 --epochs 1 --tracking-uri "
    "sqlite:///$PWD/mlflow.db --output-dir $PWD/orchestrator_runs":
        "covered by tests/integration/test_job_submit.py::"
        "test_submitted_consecutive_worker_group_trials_all_reach_the_leaderboard",
    "--baseline": "match_baseline",
    "--tolerance": "match_baseline",
    "--full-epochs": "match_baseline",
    "--full-epochs N": "match_baseline",
    "--objective match_baseline --tolerance 0.005": "match_baseline",
    "--objective match_baseline": "match_baseline",
    "--lr-scaling": "match_baseline",
    "--rerun-duplicates": "match_baseline",
    "--set": "options",
    "--warm-start": "warm_seeds",
    "--set KEY=V": "options",
    "--set patch_size=64": BAD_INPUT,
    "--set precision=fp16-mixed": BAD_INPUT,
    "--set workload=": BAD_INPUT,
    "--spatial-dims": "covered by tests/orchestrator/test_inputs.py::"
                      "test_spatial_dims_and_patch_none_from_the_cli",
    "orchestrator search --check ...": "check",
    "orchestrator resume DIR": "resume",
    "--profile": PROFILE,
    "--profile on": PROFILE,
    "--profile off": PROFILE,
    "--profile compile": PROFILE,
    "--set channels_last=true": PROFILE,
}

TINY = ["--trials", "1", "--epochs", "1", "--cpus-per-trial", "1"]  # one in-process trial
# `orchestrator` argv per run, in order ({npz}: a tiny image set; {cwd}: the scratch folder).
RUNS: dict[str, list[str]] = {
    "quickstart": ["search", *TINY],
    "resume": ["resume", "orchestrator_runs/default"],
    "train": ["train", "orchestrator_runs/default/best_config.json", "--epochs", "1"],
    "options": ["search", "--name", "options", "--data", "{npz}", "--space", "small",
                "--set", "patch_size=12", "--set", "lr=0.01", "--epochs", "1", "--trials", "2",
                "--time-budget", "300", "--objective", "weighted", "--time-weight", "0.05",
                "--reference-time", "10", "--seed", "1", "--cpus-per-trial", "1",
                "--max-concurrent", "1", "--output-dir", "orchestrator_runs",
                "--tracking-uri", "sqlite:///{cwd}/mlflow.db", "--placement", "PACK"],
    "spec": ["search", "--spec", "wider.yaml", "--data", "{npz}", *TINY],
    "time_to_target": ["search", "--name", "ttt", "--data", "{npz}", "--objective",
                       "time_to_target", "--target", "0.85", *TINY],
    "pareto": ["search", "--name", "pareto", "--data", "{npz}", "--objective", "pareto", *TINY],
    "early_stopping": ["search", "--name", "asha", "--data", "{npz}", "--early-stopping",
                       "--grace-period", "1", "--reduction-factor", "2", "--trials", "2",
                       "--epochs", "2", "--cpus-per-trial", "1"],
    "warm_seeds": ["search", "--name", "warm-seeds", "--data", "{npz}", "--warm-start", "seeds",
                   *TINY],
    "warm_points": ["search", "--name", "warm-points", "--data", "{npz}", "--warm-start",
                    '[{"width": 0.5, "batch_size": 128}]', *TINY],
    "unet3d": ["search", "--name", "unet3d", "--workload", "unet3d", *TINY],
    "own_model": ["search", "--name", "own", "--model", "examples.bring_your_own:build",
                  "--data", "{npz}", *TINY],
    "match_baseline": ["search", "--name", "match", "--data", "{npz}", "--baseline", "seeds",
                       "--objective", "match_baseline", "--tolerance", "0.005",
                       "--full-epochs", "10", "--lr-scaling", "sqrt", "--rerun-duplicates",
                       *TINY],
    "check": ["search", "--check", "--data", "{npz}", "--name", "check", *TINY],
}


def _text() -> str:
    return README.read_text()


def test_every_readme_command_has_an_entry():
    missing = [c for c in readme_commands(_text(), cli_flags()) if c not in COMMANDS]
    assert not missing, "\n".join(
        f"README command {c!r} has no entry in COMMANDS (tests/test_readme_commands.py): add "
        f"{c!r}: '<a run in RUNS, or covered by FILE::TEST>'" for c in missing)


def test_every_entry_is_still_in_the_readme_and_is_honest():
    flags = cli_flags()
    shapes = readme_commands(_text(), flags)
    stale = [c for c in COMMANDS if c not in shapes]
    assert not stale, f"COMMANDS entries no longer in the README (remove them): {stale}"
    for shape, target in COMMANDS.items():
        if target.startswith("covered by "):
            path, _, name = target.removeprefix("covered by ").partition("::")
            assert f"def {name}(" in (REPO / path).read_text(), f"{shape!r}: {target} is gone"
            continue
        assert target in RUNS, f"{shape!r} maps to {target!r}, which is not in RUNS"
        argv = RUNS[target]
        # The run really uses the shape's subcommand and every option it shows.
        sub = re.search(r"orchestrator (search|resume|train)", shape)
        assert not sub or argv[0] == sub.group(1), f"{shape!r}: run {target!r} is {argv[0]}"
        assert span_flags(shape, flags) <= set(argv), f"{shape!r}: run {target!r} lacks a flag"


@pytest.fixture(scope="module")
def workdir(ray_session, tmp_path_factory):
    """A scratch folder with tiny data: an image .npz, the README's spec file, and the built-in
    sets' cache filled with tiny stand-ins."""
    from tests.conftest import make_npz
    from trainables.data.synthetic import SYNTHETIC_DEFAULTS
    from trainables.data.volumes import synthetic_volumes

    root = tmp_path_factory.mktemp("readme")
    cache = root / "cache"
    cache.mkdir()
    mp = pytest.MonkeyPatch()
    mp.setenv("ORCHESTRATOR_CACHE", str(cache))
    mp.chdir(root)
    # 512 images of 24x24: batch 256 (the spec file's largest) still makes 2 steps, and the
    # default patch (24) fits.
    npz = make_npz(root / "tiny.npz", n=512, n_val=64, size=24)
    import hashlib

    def key(params: dict) -> str:
        return hashlib.sha1(repr(sorted(params.items())).encode()).hexdigest()[:12]

    make_npz(cache / f"synthetic-{key(SYNTHETIC_DEFAULTS)}.npz", n=512, n_val=64, size=24)
    vols = synthetic_volumes(n_train=2, n_val=1, size=32, seed=5)  # the default patch fits
    np.savez(cache / f"volumes-{key({})}.npz", x=vols.x_train, y=vols.y_train,
             x_val=vols.x_val, y_val=vols.y_val, num_classes=vols.num_classes)
    spec = [body for lang, body in fenced_blocks(_text()) if lang == "yaml"]
    assert spec, "the README's spec-file example (a yaml block) is gone"
    (root / "wider.yaml").write_text(spec[0])
    yield {"root": root, "npz": npz}
    mp.undo()


def _run(name: str, workdir: dict) -> int:
    from orchestrator.cli import main

    argv = [a.replace("{npz}", workdir["npz"]).replace("{cwd}", str(workdir["root"]))
            for a in RUNS[name]]
    return main(argv)


def _board(name: str) -> pd.DataFrame:
    return pd.read_csv(Path("orchestrator_runs") / name / "leaderboard.csv")


@pytest.mark.parametrize("name", [n for n in RUNS if n not in ("resume", "train", "check")])
def test_search_commands_run(name, workdir):
    assert _run(name, workdir) == 0
    folder = {"quickstart": "default", "spec": "wider-search", "time_to_target": "ttt",
              "early_stopping": "asha", "own_model": "own",
              "match_baseline": "match"}.get(name, name.replace("_", "-"))
    board = _board(folder)
    assert len(board) >= 1 and board.iloc[0]["status"] in ("completed", "early_stopped")
    if name == "unet3d":
        assert 0 <= board.iloc[0]["val_dice"] <= 1 and "grad_checkpointing" in board


def test_check_command_validates_without_running(workdir):
    assert _run("check", workdir) == 0
    assert not (Path("orchestrator_runs") / "check").exists()  # nothing ran, nothing written


def test_resume_and_train_commands_run(workdir):
    if not (workdir["root"] / "orchestrator_runs" / "default" / "best_config.json").exists():
        assert _run("quickstart", workdir) == 0
    # A driver that died after its last trial: resume finds nothing left to run.
    state = Path("orchestrator_runs/default/search_state.json")
    state.write_text(json.dumps({**json.loads(state.read_text()), "finished": False}))
    assert _run("resume", workdir) == 0
    assert json.loads(state.read_text())["finished"] is True
    assert _run("train", workdir) == 0
    assert len(_board("default-train")) == 1


def test_python_api_snippet_runs(workdir):
    """The README's Python block, with its trial and epoch counts cut to one."""
    code = [body for lang, body in fenced_blocks(_text()) if lang == "python"][0]
    tiny, n = re.subn(r"num_trials=\d+", "num_trials=1, cpus_per_trial=1", code)
    tiny, m = re.subn(r"epochs=\d+", "epochs=1", tiny)
    assert n == m == 1, "the README's Python snippet no longer sets num_trials and epochs"
    scope: dict = {}
    exec(compile(tiny, "README.md (python block)", "exec"), scope)
    assert scope["result"].best is not None and len(_board("mine-train")) == 1


def test_example_runs(workdir):
    sys.path.insert(0, str(REPO))
    from examples.bring_your_own import main

    result = main(n=200, num_trials=1, epochs=1, cpus_per_trial=1)
    assert result.best is not None
