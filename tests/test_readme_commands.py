"""Every command README.md and docs/*.md promise runs, at tiny scale; the pages and this table
agree.

A page that promises a command which does not run is a defect. `COMMANDS` maps each command
shape found in README.md or a docs/ page (`tests/readme_commands.py` says what counts) to the run
below that exercises it, or to the test that already runs it end to end ("covered by
FILE::TEST"). A new command without an entry fails `test_every_documented_command_has_an_entry`,
naming the line to add; an entry whose shape is on no page any more fails too.

Runs call `orchestrator.cli.main` in this process, on the session's Ray, in one scratch folder
with one MLflow store; the built-in data sets are swapped for tiny ones by pre-filling the cache
the loaders read (`ORCHESTRATOR_CACHE`), so `orchestrator search` with no flags runs its real
code path (seeds baseline, speed profile). To stay fast, one run carries every shape that
exercises the same path, and a run skips the baseline (`--baseline none`) and the profile
(`--profile off`) unless they are what it is about. The table checks (no Ray) are in the fast
tier; the runs are `integration`.

Run: flock /tmp/ray.lock .venv/bin/python -m pytest -q tests/test_readme_commands.py
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.readme_commands import REPO, cli_flags, documented_commands, documents, fenced_blocks
from tests.readme_commands import span_flags

SERVER = "covered by tests/orchestrator/test_mlflow_tracking.py::" \
         "test_store_that_never_returns_falls_back_to_local_sqlite"
PLACEMENT = "covered by tests/integration/test_placement.py::" \
            "test_spread_puts_a_2_worker_trial_on_two_nodes"
JOB = "covered by tests/integration/test_cluster_rehearsal.py::" \
      "test_every_trial_runs_on_the_worker_node_and_its_records_come_from_there"
BAD_INPUT = "covered by tests/orchestrator/test_inputs.py::" \
            "test_bad_input_is_refused_before_ray_with_one_line"
YOUR_TASK = "covered by tests/integration/test_your_task.py::" \
            "test_the_your_task_example_runs_through_the_api_and_the_cli"
HISTORY = "covered by tests/integration/test_recurring_search.py::" \
          "test_a_baseline_from_history_trains_no_baseline"
ASKED_AGAIN = "covered by tests/integration/test_recurring_search.py::test_asked_again_" \
              "where_the_machines_speed_moved_nothing_timed_at_the_old_speed_is_reused"
RACE = "covered by tests/integration/test_screen_search.py::" \
       "test_screen_predict_confirm_then_a_second_search_starts_from_the_first"

# Command shape on a page -> a run in RUNS, or "covered by FILE::TEST".
COMMANDS: dict[str, str] = {
    # README.md
    "orchestrator search --workload unet3d --space compact --strategy screen --full-epochs 16 "
    "--trials 4": "quickstart",
    "--full-epochs 16": "quickstart",  # docs/benchmarks.md: the first command's length
    # docs/benchmarks.md: the first command as it was until 2026-12-06, at 8 epochs
    "orchestrator search --workload unet3d --space compact --strategy screen --full-epochs 8 "
    "--trials 4": "quickstart",
    "orchestrator search": "tune",
    "orchestrator search --strategy screen --full-epochs 15": "screen",
    "orchestrator resume DIR": "resume",
    "--objective match_baseline": "own_match",
    # docs/screen.md
    "--baseline seeds": "screen",
    "--baseline base": "own_match",
    "--strategy screen": "screen",
    "--model module:function --data your.npz": "own_match",
    "--model module:function": "own_match",
    "--trials": "options",
    "--placement PACK": "options",
    "python -m orchestrator search --spec my-search.yaml --tracking-uri "
    "sqlite:////home/ray/mlflow.db --output-dir /home/ray/runs": JOB,
    # docs/reference.md: the generated tables (every option and flag) and the prose
    "orchestrator resume": "resume",
    "orchestrator resume OUTPUT_DIR/NAME": "resume",
    "orchestrator train": "train",
    "orchestrator train best_config.json": "train",
    "orchestrator search --check ...": "check",
    "--check": "check",
    "orchestrator search --spec wider.yaml --trials 4": "spec",
    "--spec": "spec",
    "--name": "options",
    "--workload": "options",
    "--model": "own_match",
    "--data": "options",
    "--space": "options",
    "--set": "options",
    "--set KEY=VALUE": "options",
    "--set KEY=V": "options",
    "--set lr_scaling=...": "options",
    "--lr-scaling": "own_match",
    "--epochs": "options",
    "--strategy": "options",
    "--time-budget": "options",
    "--objective": "options",
    "--time-weight": "options",
    "--reference-time": "options",
    "--target": "unet3d",
    "--target 0.85": "unet3d",
    "--baseline": "own_match",
    "--tolerance": "own_match",
    "--objective match_baseline --tolerance 0.005": "own_match",
    "--full-epochs": "own_match",
    "--full-epochs N": "own_match",
    "--seed": "options",
    "--early-stopping": "options",
    "--grace-period": "options",
    "--reduction-factor": "options",
    "--early-stopping --grace-period 1 --reduction-factor 2": "options",
    "--warm-start": "options",
    "--warm-start seeds": "options",
    "--warm-start '[{\"width\": 0.5, \"batch_size\": 128}]'": "spec",
    "--cpus-per-trial": "options",
    "--max-concurrent": "options",
    "--always-use-worker-group": "spec",
    "--output-dir": "options",
    "--tracking-uri": "options",
    "--spatial-dims": "covered by tests/orchestrator/test_inputs.py::"
                      "test_spatial_dims_and_patch_none_from_the_cli",
    "--placement": "options",
    "--profile": "options",
    "--rerun-duplicates": "own_match",
    "--rerun-baseline": "screen",
    "--confirm": "screen",
    "--task": YOUR_TASK,
    "--task module:Class": YOUR_TASK,
    "--baseline-set": YOUR_TASK,
    "--baseline-set batch_size=100": YOUR_TASK,
    "--baseline-set KEY=VALUE": YOUR_TASK,
    "--baseline runs:/RUN_ID": HISTORY,
    "--baseline history.csv": HISTORY,
    "orchestrator search --strategy screen --full-epochs 8 --baseline runs:/RUN_ID": HISTORY,
    "orchestrator search --workload unet3d --space compact --strategy screen --full-epochs 32 "
    "--trials 4 --tolerance 0.01 --seed 1 --baseline runs:/RUN_ID": HISTORY,  # benchmarks.md
    # benchmarks.md: the first command asked again in its folder, at the same speed and not
    "orchestrator search --workload unet3d --space compact --strategy screen --full-epochs 8 "
    "--trials 4 --output-dir DIR/runs --tracking-uri sqlite:///DIR/mlflow.db": ASKED_AGAIN,
    "--confirm race": RACE,  # the default
    "orchestrator search --workload unet3d --space compact --strategy screen --full-epochs 32 "
    "--trials 4 --confirm race": RACE,  # benchmarks.md: a 32-epoch search's cost, split
    "--confirm full": "screen",
    "--runs-ahead": "covered by tests/orchestrator/test_bets.py::"
                    "test_a_bet_that_cannot_pay_back_within_the_searchs_own_payback_is_not_raced",
    "--runs-ahead N": "covered by tests/orchestrator/test_bets.py::"
                      "test_a_bet_that_cannot_pay_back_within_the_searchs_own_payback_is_not_raced",
    "--wide": "own_match",
    "--set patch_size=64": BAD_INPUT,
    "--set precision=fp16-mixed": BAD_INPUT,
    "--set workload=": BAD_INPUT,
    "--workload unet3d": "unet3d",
    "orchestrator search --workload unet3d --trials 3 --epochs 2": "unet3d",
    # docs/trials.md (the speed profile) and docs/benchmarks.md
    "--profile on": "own_match",
    "--profile off": "spec",
    "--profile compile": "options",
    "--set channels_last=true": "spec",
    "python -m orchestrator search --name measure --trials 2 --epochs 1 --baseline none":
        "options",
    "python -m orchestrator search --name measure-compile --profile compile --trials 1 "
    "--epochs 1 --baseline none": "options",
    "--epochs 15": "options",  # benchmarks/search_efficiency.py's --epochs, spelled as ours
    # docs/benchmarks.md, the H100 section: the same searches, run there on a GPU node
    "orchestrator search --trials 8 --epochs 3": "tune",
    "orchestrator search --strategy screen --objective match_baseline --full-epochs 8 "
    "--trials 3": "screen",
    # ... and the H200 section's, the same search with its trials' epochs spelled out
    "orchestrator search --strategy screen --objective match_baseline --full-epochs 8 "
    "--epochs 8 --trials 3": "screen",
    # docs/screen.md and docs/benchmarks.md: a second search with a raised budget looks further
    "--trials 12": "covered by tests/integration/test_screen_search.py::"
                   "test_screen_predict_confirm_then_a_second_search_starts_from_the_first",
    # docs/cluster.md
    "python -m orchestrator search --spec my-search.yaml --trials 16 --epochs 5 --placement "
    "PACK --tracking-uri sqlite:////home/ray/mlflow.db --output-dir /home/ray/runs": JOB,
    "python -m orchestrator search ...": JOB,
    "orchestrator search ...": "tune",
    # A 2-worker group sent with `ray job submit` (groups in a row reuse no trial actor:
    # tests/trainables/test_trainable.py).
    "python -m orchestrator search --spec two-workers.yaml --trials 3 --epochs 1 --tracking-uri "
    "sqlite:///$PWD/mlflow.db --output-dir $PWD/orchestrator_runs": JOB,
    "python -m orchestrator resume /home/ray/runs/NAME": "resume",
    "--placement SPREAD": PLACEMENT,
    "--tracking-uri http://127.0.0.1:5000": SERVER,
    # docs/records.md
    "--tracking-uri http://HOST:5000": SERVER,
    "python -m orchestrator.tracking.outbox <output_dir>/<name>/mlflow-journal.json "
    "--tracking-uri http://HOST:5000": SERVER,
}

# Code on the pages that is not a command, and the test that runs it as written.
CODE: dict[str, str] = {
    "README.md, the Python API block": "covered by tests/integration/test_in_memory.py::"
                                       "test_the_readme_python_api_snippet_runs",
    "examples/bring_your_own.py": "covered by tests/integration/test_in_memory.py::"
                                  "test_the_bring_your_own_example_runs",
    "examples/your_task.py": YOUR_TASK,
}

TINY = ["--trials", "1", "--epochs", "1", "--cpus-per-trial", "1"]  # one in-process trial
QUICK = ["--baseline", "none", "--profile", "off"]  # where neither is what the run is about
# `orchestrator` argv per run, in order ({npz}: a tiny image set; {cwd}: the scratch folder).
RUNS: dict[str, list[str]] = {
    # The first README command's search as it is (strategy screen on the compact space, seeds
    # baseline, profile on) at 1 epoch, with a tolerance that the one confirmation meets.
    "quickstart": ["search", "--name", "first", "--workload", "unet3d", "--space", "compact",
                   "--strategy", "screen", "--full-epochs", "1", "--trials", "1",
                   "--tolerance", "0.5", "--cpus-per-trial", "1"],
    # `orchestrator search` with no flag: strategy tune, the weighted objective, one tiny trial.
    "tune": ["search", *TINY],
    "resume": ["resume", "orchestrator_runs/default"],
    "train": ["train", "orchestrator_runs/default/best_config.json", "--name", "default-train",
              "--epochs", "1", "--output-dir", "orchestrator_runs",
              "--tracking-uri", "sqlite:///{cwd}/mlflow.db"],
    # Every generic option, the weighted objective with ASHA, warm-start seeds, and a profile
    # asked to time compile that has nothing to time (compile is pinned: no 30 s CPU compile).
    "options": ["search", "--name", "options", "--workload", "classifier", "--data", "{npz}",
                "--space", "small", "--set", "patch_size=12", "--set", "lr=0.01",
                "--set", "compile=false", "--strategy", "tune", "--epochs", "2", "--trials", "2",
                "--time-budget", "300", "--objective", "weighted", "--time-weight", "0.05",
                "--reference-time", "10", "--seed", "1", "--early-stopping", "--grace-period",
                "1", "--reduction-factor", "2", "--warm-start", "seeds",
                "--cpus-per-trial", "1", "--max-concurrent", "1", "--output-dir",
                "orchestrator_runs", "--tracking-uri", "sqlite:///{cwd}/mlflow.db",
                "--placement", "PACK", "--baseline", "none", "--profile", "compile"],
    # The spec file from docs/reference.md, the pareto objective, a warm-start point, and a
    # single-worker trial through a Ray Train worker group.
    "spec": ["search", "--spec", "wider.yaml", "--data", "{npz}", "--objective", "pareto",
             "--warm-start", '[{"width": 0.5, "batch_size": 128}]', "--always-use-worker-group",
             "--set", "channels_last=true", *TINY, *QUICK],
    # The 3D workload, ranked by time to a target Dice.
    "unet3d": ["search", "--name", "unet3d", "--workload", "unet3d", "--objective",
               "time_to_target", "--target", "0.85", *TINY, *QUICK],
    # Your own model from module:function, matched against your `base` as the baseline. The
    # knobs are pinned, so the trial is the baseline's config (with the profile's picks) and
    # reaches its score within the tolerance at epoch 1: `early_stopped`, never `pruned`.
    "own_match": ["search", "--name", "own", "--model", "examples.bring_your_own:build",
                  "--data", "{npz}", "--space", "small", "--set", "batch_size=64",
                  "--set", "width=0.5", "--baseline", "base", "--objective", "match_baseline",
                  "--tolerance", "0.05", "--full-epochs", "1", "--lr-scaling", "sqrt",
                  "--rerun-duplicates", "--profile", "on", "--wide", *TINY],
    "check": ["search", "--check", "--data", "{npz}", "--name", "check", *TINY],
    # docs/screen.md: strategy screen with the seeds baseline at a fixed length (2 epochs
    # here): screen 4 combinations (and switch variants), predict, confirm at most 3. (One is
    # not enough to test: on this data the thinnest model at the biggest batch, often predicted
    # fastest, may fall behind the baseline's curve and be cut; that is a right answer too.)
    "screen": ["search", "--name", "screen", "--data", "{npz}", "--space", "small",
               "--set", "patch_size=12", "--strategy", "screen", "--objective",
               "match_baseline", "--full-epochs", "2", "--epochs", "2", "--tolerance", "0.05",
               "--baseline", "seeds", "--rerun-baseline", "--confirm", "full", "--trials", "3",
               "--cpus-per-trial", "1"],
}
FOLDERS = {"tune": "default", "spec": "wider-search"}  # else the run's --name


def test_every_documented_command_has_an_entry():
    found = documented_commands(cli_flags())
    missing = [c for c in found if c not in COMMANDS]
    assert not missing, "\n".join(
        f"{', '.join(found[c])}: command {c!r} has no entry in COMMANDS "
        f"(tests/test_readme_commands.py): add {c!r}: "
        "'<a run in RUNS, or covered by FILE::TEST>'" for c in missing)


def test_every_entry_is_still_documented_and_is_honest():
    flags = cli_flags()
    shapes = documented_commands(flags)
    stale = [c for c in COMMANDS if c not in shapes]
    assert not stale, f"COMMANDS entries on no page any more (remove them): {stale}"
    for shape, target in [*COMMANDS.items(), *CODE.items()]:
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
    unused = set(RUNS) - set(COMMANDS.values())
    assert not unused, f"RUNS that no documented command needs (remove them): {unused}"


def _spec_file() -> str:
    """The spec-file example (the first yaml block of the pages)."""
    for page in documents():
        for lang, body in fenced_blocks(page.read_text()):
            if lang == "yaml":
                return body
    raise AssertionError("the spec-file example (a yaml block in README.md or docs/) is gone")


def _cache_key(params: dict) -> str:
    return hashlib.sha1(repr(sorted(params.items())).encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def workdir(ray_session, tmp_path_factory):
    """A scratch folder with tiny data: an image .npz, the docs' spec file, and the built-in
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
    make_npz(cache / f"synthetic-{_cache_key(SYNTHETIC_DEFAULTS)}.npz", n=512, n_val=64, size=24)
    vols = synthetic_volumes(n_train=2, n_val=1, size=32, seed=5)  # the default patch fits
    np.savez(cache / f"volumes-{_cache_key({})}.npz", x=vols.x_train, y=vols.y_train,
             x_val=vols.x_val, y_val=vols.y_val, num_classes=vols.num_classes)
    (root / "wider.yaml").write_text(_spec_file())
    yield {"root": root, "npz": npz}
    mp.undo()


def _run(name: str, workdir: dict) -> int:
    from orchestrator.cli import main

    argv = [a.replace("{npz}", workdir["npz"]).replace("{cwd}", str(workdir["root"]))
            for a in RUNS[name]]
    return main(argv)


def _board(name: str) -> pd.DataFrame:
    return pd.read_csv(Path("orchestrator_runs") / name / "leaderboard.csv")


def _folder(run: str) -> str:
    argv = RUNS[run]
    return FOLDERS.get(run) or argv[argv.index("--name") + 1]


@pytest.mark.integration
@pytest.mark.parametrize("name", [n for n in RUNS if n not in ("resume", "train", "check")])
def test_search_commands_run(name, workdir):
    assert _run(name, workdir) == 0
    board = _board(_folder(name))
    trials = board[board["role"] == "trial"]
    assert len(trials) >= 1 and trials.iloc[0]["status"] in ("completed", "early_stopped")
    baseline = board[board["role"] == "baseline"]
    assert len(baseline) == (0 if "none" in RUNS[name] else 1)  # quickstart: seeds; own: base
    if name == "unet3d":
        assert 0 <= trials.iloc[0]["val_dice"] <= 1 and "grad_checkpointing" in board
    if name == "quickstart":  # a confirmation of the screen's, with its prediction
        assert trials.iloc[0]["predicted_time_to_target_s"] > 0
        assert (Path("orchestrator_runs") / "first" / "screen.json").exists()
    if name == "spec":  # the warm-start point, through a worker group, in the file's space
        assert trials.iloc[0]["batch_size"] == 128 and trials.iloc[0]["width"] == 0.5


@pytest.mark.integration
def test_check_command_validates_without_running(workdir):
    assert _run("check", workdir) == 0
    assert not (Path("orchestrator_runs") / "check").exists()  # nothing ran, nothing written


@pytest.mark.integration
def test_resume_and_train_commands_run(workdir):
    if not (workdir["root"] / "orchestrator_runs" / "default" / "best_config.json").exists():
        assert _run("tune", workdir) == 0
    # A driver that died while writing the results: resume runs the finish stage again only.
    state = Path("orchestrator_runs/default/search_state.json")
    was = json.loads(state.read_text())
    stages = [s for s in was["stages_done"] if s != "finish"]
    state.write_text(json.dumps({**was, "finished": False, "stages_done": stages}))
    assert _run("resume", workdir) == 0
    assert json.loads(state.read_text())["finished"] is True
    assert len(_board("default").query("role == 'baseline'")) == 1  # not run again
    assert _run("train", workdir) == 0
    assert len(_board("default-train")) == 1
