"""Stop a real CLI search anywhere, then run the `orchestrator resume DIR` it printed: the search the
user started ends whole (issue 20). The three stops (Ctrl-C in the baseline, `kill -9` in the
second trial, SIGTERM while the results are written) are played by
tests/integration/cli_stories.py: the last one stops the first one's resume. Each test asserts
on its own.

Whichever it was, after the resume: every planned trial ran exactly once, the baseline has one
row and one MLflow run (a finished baseline is not run again), every trial printed one ending
line per run, and no MLflow run is left RUNNING.
"""

from __future__ import annotations

import csv
import json
import signal

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.cli_stories import NAME, TRIALS, Story

pytestmark = pytest.mark.integration

DUMP_MARKS = ("Traceback", "*** SIGINT", "*** SIGTERM", "Stack trace", ".cc:", "terminate called")


def _story(cli_stories: dict, name: str) -> Story:
    story = cli_stories[name].result()
    assert story.resume_code == 0, story.resumed
    return story


def _ending_lines(output: str, trial_id: str) -> list[str]:
    return [ln for ln in output.splitlines() if f"{trial_id}]" in ln and " after " in ln
            and " wall" in ln]


def _assert_whole(story: Story) -> dict:
    """The search ended whole; returns the leaderboard rows by role."""
    folder = story.folder
    assert json.loads((folder / "search_state.json").read_text())["finished"] is True
    rows = list(csv.DictReader((folder / "leaderboard.csv").open()))
    by_role = {role: [r for r in rows if r["role"] == role] for role in ("trial", "baseline")}
    assert len(by_role["trial"]) == TRIALS and len(by_role["baseline"]) == 1, rows
    client = MlflowClient(story.store)
    runs = client.search_runs([client.get_experiment_by_name(NAME).experiment_id])
    parents = [r for r in runs if r.data.tags.get("orchestrator.role") == "search"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert "interrupted" not in parents[0].data.tags
    assert not [r for r in runs if r.info.status == "RUNNING"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    ids = [c.data.tags["orchestrator.trial_id"] for c in children]
    assert len(ids) == len(set(ids)) == TRIALS + 1, ids  # every trial once, the baseline once
    baseline_runs = [c for c in children if c.data.tags.get("baseline") == "true"]
    assert len(baseline_runs) == 1 and baseline_runs[0].data.tags["orchestrator.role"] \
        == "baseline" and baseline_runs[0].info.status == "FINISHED"
    assert {r["trial_id"] for r in rows} == set(ids)
    return by_role


def test_ctrl_c_in_the_baseline_then_resume_runs_the_whole_search(cli_stories):
    story = _story(cli_stories, "ctrl_c")
    stop = story.stops[0]
    out, folder = stop.output, story.folder
    assert stop.code == 130, out
    assert f"orchestrator resume {folder}" in out and "Tuner.restore" not in out
    assert not [m for m in DUMP_MARKS if m in out], out
    assert "[trial " not in out  # the search's trials had not started
    stopped = [ln for ln in out.splitlines() if ln.startswith("[baseline ") and " after " in ln]
    assert len(stopped) == 1 and " interrupted after " in stopped[0], out  # one ending line
    assert stop.state["finished"] is False
    assert "baseline" not in stop.state.get("stages_done", [])
    parent = next(r for r in stop.runs if r.data.tags.get("orchestrator.role") == "search")
    assert parent.data.tags.get("interrupted") == "true" and parent.info.status == "KILLED"
    assert {r.data.tags.get("status") for r in stop.runs if r.data.tags.get("baseline")} \
        == {"interrupted"}

    resumed = story.stops[1].output  # its resume trains all; the next test stops it in finish
    assert "resuming:" in resumed and "[baseline " in resumed  # the cut baseline runs again
    by_role = _assert_whole(story)
    for row in by_role["trial"] + by_role["baseline"]:
        assert len(_ending_lines(resumed, row["trial_id"])) == 1, resumed


def test_kill_9_in_the_second_trial_then_resume_keeps_what_finished(cli_stories):
    story = _story(cli_stories, "kill_9")
    stop = story.stops[0]
    assert stop.code == -signal.SIGKILL, stop.output
    first = [ln for ln in stop.output.splitlines()
             if ln.startswith(f"[trial 1/{TRIALS} ") and " after " in ln]
    assert len(first) == 1, stop.output
    first_id = first[0].split()[2].rstrip("]")

    resumed = story.resumed
    assert "1 trial(s) already finished" in resumed, resumed
    assert "[baseline " not in resumed  # a finished baseline is not run again
    assert f"{first_id}] start" not in resumed  # nor is a finished trial
    by_role = _assert_whole(story)
    assert first_id in {r["trial_id"] for r in by_role["trial"]}


def test_a_stop_while_results_are_written_is_finished_by_resume(cli_stories):
    story = _story(cli_stories, "ctrl_c")
    stop = story.stops[1]  # the resume of the Ctrl-C, stopped once its leaderboard was written
    out = stop.output
    assert stop.code == 130, out
    assert f"orchestrator resume {story.folder}" in out and f"{TRIALS} trials: " in out
    assert not [m for m in DUMP_MARKS if m in out], out
    assert stop.state["finished"] is False
    assert stop.state["stages_done"] == ["baseline", "tune"]

    resumed = story.resumed
    assert " start" not in resumed  # nothing trains again: only the results are written
    assert "only the results are left to write (no Ray needed)" in resumed, resumed
    _assert_whole(story)
