"""What a user reads fits where they read it (issue 39): the printed leaderboard in 120 columns
(the knobs that vary, the measures that decide; everything with --wide and in the CSV), and the
screen's progress as one line a round where the output is not a terminal (no Ray)."""

from __future__ import annotations

import io
import math

import pandas as pd

from orchestrator.result import WIDTH, compact
from orchestrator.screen.progress import Progress


def _table(rows: int = 6) -> pd.DataFrame:
    out = []
    for i in range(rows):
        out.append({"rank": i + 1, "trial_id": f"{i:08x}", "status": "early_stopped",
                    "precision": ["fp32", "bf16-mixed"][i % 2], "batch_size": [2, 4, 8][i % 3],
                    "width": [0.5, 1.0][i % 2], "patch_size": 24, "channels_last": bool(i % 2),
                    "planned_epochs": 13, "val_score": 0.9412345, "train_time_s": 17.1234,
                    "time_to_target_s": 17.1234, "speedup_vs_baseline": 2.2481,
                    "predicted_time_to_target_s": 24.8612, "prediction_error": 0.4505,
                    "fixed_cost_s": 0.74, "profile_s": 1.78, "samples_per_s": 56.7,
                    "objective": -17.12, "full_run_s": 15.3, "role": "trial"})
    out.append({**out[0], "rank": 0, "trial_id": "a0d6f_00000", "status": "completed",
                "role": "baseline", "precision": "fp32", "batch_size": 2, "width": 1.0})
    return pd.DataFrame(out)


def test_the_printed_leaderboard_fits_120_columns_and_shows_what_varies():
    text = compact(_table(), ["precision", "batch_size", "width", "patch_size",
                              "channels_last"])
    lines = text.splitlines()
    assert max(map(len, lines)) <= WIDTH, text
    header = lines[0].split()
    assert {"precision", "batch_size", "width", "status", "to_target_s", "speedup",
            "predicted_s"} <= set(header)
    assert "patch_size" not in header  # the same in every row: says nothing
    assert "fixed_cost_s" not in header and "train_s" not in header


def test_the_screens_progress_is_a_line_a_round_off_a_terminal():
    out = io.StringIO()
    with Progress(out, 24, "screen: round 1") as bar:
        for _ in range(24):
            bar.advance()
    assert out.getvalue().count("\n") == 1
    assert out.getvalue().startswith("screen: round 1: 24 of 24 timed in ")


def test_a_row_that_never_reached_the_target_prints_a_dash_beside_a_told_one():
    # A measured run that missed (None), a race's decided trial (its expected time, marked ~)
    # and a measured time: the three the compact table shows side by side.
    table = _table(2)  # and the baseline's row
    table["time_to_target_s"] = pd.Series([None, None, 12.5], dtype=object)
    table["expected_time_to_target_s"] = [None, 9.75, None]
    lines = compact(table, ["precision", "batch_size"]).splitlines()
    at = lines[0].split().index("to_target_s")
    assert [line.split()[at] for line in lines[1:]] == ["-", "~9.75", "12.5"]


def test_a_told_row_shows_its_chance_beside_its_expected_time_the_two_that_rank_it():
    # A race ranks its decided contenders by expected seconds over their chance of reaching the
    # target (orchestrator/records.py `per_chance_s`): a row expected sooner may rank below.
    table = _table(2)
    table["time_to_target_s"] = pd.Series([None, None, 12.5], dtype=object)
    table["expected_time_to_target_s"] = [10.73, 8.144, None]
    table["expected_reach"] = [0.8649, 0.2943, None]
    lines = compact(table, ["precision", "batch_size", "width", "patch_size",
                            "channels_last"]).splitlines()
    assert max(map(len, lines)) <= WIDTH, "\n".join(lines)
    header = lines[0].split()
    at, chance = header.index("to_target_s"), header.index("chance")
    assert [(line.split()[at], line.split()[chance]) for line in lines[1:]] == \
        [("~10.73", "0.8649"), ("~8.144", "0.2943"), ("12.5", "-")]


def test_without_a_target_the_table_shows_training_time_not_an_empty_target_column():
    table = _table(2)  # strategy tune, weighted: nothing has a target
    table["time_to_target_s"] = float("nan")
    table["expected_time_to_target_s"] = float("nan")
    header = compact(table, ["precision", "batch_size"]).splitlines()[0].split()
    assert "train_s" in header and "to_target_s" not in header and "chance" not in header


def _record(tid: str, status: str, objective: float, **metrics) -> "TrialRecord":
    from orchestrator.records import TrialRecord
    from trainables.status import TrialStatus

    return TrialRecord(tid, 1, {"batch_size": 64}, 0.0, 1.0, TrialStatus(status),
                       metrics={"time_to_target_s": math.nan, "objective": objective, **metrics})


def test_the_leaderboard_ranks_decided_contenders_as_the_measure_stage_tries_them():
    """Their objective holds only the score they had when the race stopped them: ranked by
    it, the contender the answer came from sat below slower ones."""
    from orchestrator.result import trials_table

    def told(tid, seconds, reach, score):
        return _record(tid, "decided", -1e6 + 1000 * score,
                       expected_time_to_target_s=seconds, expected_reach=reach)

    told_ = [told("slow", 53.0, 0.9, 0.93), told("answer", 45.5, 0.9, 0.91),
             told("hopeful", 20.0, 0.2, 0.95)]
    sure = _record("sure", "early_stopped", -60.0, time_to_target_s=60.0)
    short = _record("short", "completed", -1e6 + 1000 * 0.94)  # its plan, never at the target
    cut = _record("cut", "pruned", -1e6 + 1000 * 0.99)

    table = trials_table([cut, short, *told_, sure], ["batch_size"])
    assert list(table["trial_id"]) == ["answer", "slow", "sure", "hopeful", "short", "cut"]
    assert list(table["rank"]) == [1, 2, 3, 4, 5, 6]
    assert list(table.columns[:3]) == ["rank", "trial_id", "status"]  # no sorting columns left
