"""The files a resume reads: torn journal lines, the trial journal, the persisted outbox, the
seeded Optuna study, and paths that work from any directory."""

from __future__ import annotations

import json

import pytest
from ray import tune

from orchestrator import jsonl
from orchestrator.folder import SearchFolder, portable_spec
from orchestrator.tune.history import seeded_storage
from orchestrator.records import TrialRecord, read_journal


def test_a_torn_last_line_is_skipped_and_a_torn_middle_line_is_an_error(tmp_path):
    path = tmp_path / "j.jsonl"
    jsonl.append(path, {"a": 1})
    jsonl.append(path, {"a": 2})
    with path.open("a") as f:
        f.write('{"a": 3, "b"')  # a kill mid-write
    assert jsonl.read(path) == [{"a": 1}, {"a": 2}]
    path.write_text('{"a": 1}\n{"a"\n{"a": 3}\n')
    with pytest.raises(ValueError, match="j.jsonl:2 is not JSON"):
        jsonl.read(path)
    assert jsonl.read(tmp_path / "missing.jsonl") == []


def _line(trial_id, ended=None, status="running", **metrics):
    return json.dumps({"trial_id": trial_id, "number": 1, "knobs": {"width": 0.5},
                       "started": 1.0, "ended": ended, "status": status, "metrics": metrics})


def test_journal_last_line_wins_and_cut_short_trials_are_found(tmp_path):
    path = tmp_path / "trials.jsonl"
    path.write_text("\n".join([
        _line("a"), _line("a", ended=5.0, status="completed", objective=0.7),
        _line("b"),  # started, never ended: cut short
        _line("c"), _line("c", ended=3.0, status="discarded"),  # settled by an earlier resume
    ]) + "\n" + _line("d")[:30])  # torn: as if never written
    finished, cut_short = read_journal(path)
    assert list(finished) == ["a"] and finished["a"].metrics == {"objective": 0.7}
    assert cut_short == ["b"]


def test_seeded_study_holds_finished_trials_with_their_states(tmp_path):
    import optuna

    space = {"width": tune.choice([0.5, 1.0]), "batch_size": tune.choice([16, 32])}
    records = [
        TrialRecord("a", 1, {"width": 0.5, "batch_size": 16}, 0, 1, "completed",
                    metrics={"objective": 0.8}),
        TrialRecord("b", 2, {"width": 1.0, "batch_size": 32}, 0, 1, "pruned",
                    metrics={"objective": 0.1}),
        TrialRecord("c", 3, {"width": 1.0, "batch_size": 16}, 0, 1, "infeasible"),
        TrialRecord("d", 4, {"width": 3.0, "batch_size": 16}, 0, 1, "completed",
                    metrics={"objective": 0.9}),  # outside today's space: skipped
    ]
    storage = seeded_storage(records, space, "objective", "max", "s")
    study = optuna.load_study(study_name="s", storage=storage)
    states = [(t.params, t.state.name, t.values, t.system_attrs.get("constraints:runs"))
              for t in study.trials]
    # Told as TruthfulOptunaSearch told them: an infeasible trial is a violated constraint.
    assert states == [({"width": 0.5, "batch_size": 16}, "COMPLETE", [0.8], 0.0),
                      ({"width": 1.0, "batch_size": 32}, "PRUNED", None, None),
                      ({"width": 1.0, "batch_size": 16}, "COMPLETE", [-1e9], 1.0)]
    pareto = seeded_storage(records[:1], space, ["val_score", "train_time_s"], ["max", "min"],
                            "p")
    # A Pareto record without one of its values is not told as complete.
    assert optuna.load_study(study_name="p", storage=pareto).trials[0].state.name == "FAIL"


def test_state_paths_are_absolute_so_resume_works_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.npz").write_bytes(b"")
    spec = portable_spec({"data": "d.npz", "space": "default", "warm_start": None},
                         tmp_path / "runs")
    assert spec["data"] == str(tmp_path / "d.npz")
    from orchestrator.spec import SearchSpec
    uri = SearchSpec(tracking_uri="sqlite:///m.db").resolved_tracking_uri()
    assert uri == f"sqlite:///{tmp_path / 'm.db'}"
    assert spec["space"] == "default" and spec["output_dir"] == str(tmp_path / "runs")


def test_folder_state_is_updated_in_place_and_a_fresh_start_forgets_history(tmp_path):
    folder = SearchFolder.of(tmp_path, "s")
    folder.root.mkdir()
    folder.write_state(finished=False, parent_run_id="p")
    folder.write_state(finished=True)
    assert folder.read_state() == {"finished": True, "parent_run_id": "p"}
    jsonl.append(folder.journal, {"trial_id": "a"})
    jsonl.append(folder.outbox, {"written": 0})
    folder.start_fresh()
    assert not folder.journal.exists() and not folder.outbox.exists()
    assert not folder.state.exists()
