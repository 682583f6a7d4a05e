"""The trial book without Ray: every trial Tune hands it ends in exactly one row with a true
status. Tune's trials are stood in for by objects with the attributes the book reads."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

from orchestrator.records import Role
from orchestrator.trial_book import TrialBook
from orchestrator.tracking import NullTracker


class RecordingTracker(NullTracker):
    """The null tracker, keeping what it was told."""

    def __init__(self):
        self.started: list[str] = []
        self.ended: dict[str, tuple[str, dict, str | None]] = {}

    def start_trial(self, trial_id, params, config=None, role="trial", tags=None):
        self.started.append(trial_id)
        self.roles = getattr(self, "roles", {}) | {trial_id: (role, dict(tags or {}))}

    def end_trial(self, trial_id, status, metrics, reason=None, tags=None):
        self.ended[trial_id] = (status, dict(metrics), reason)
        self.tags = getattr(self, "tags", {}) | {trial_id: dict(tags or {})}


def _trial(tid, status="RUNNING", error_file=None, error_msg=None, **config):
    return SimpleNamespace(trial_id=tid, config=config or {"lr": 0.1}, status=status,
                           error_file=error_file, error_msg=error_msg)


def _result(epoch, status="running", **metrics):
    return {"epoch": epoch, "status": status, "val_score": 0.5, "train_time_s": 1.0,
            "objective": 0.4, **metrics}


def _book(tmp_path=None):
    tracker = RecordingTracker()
    journal = tmp_path / "trials.jsonl" if tmp_path else None
    book = TrialBook(tracker, out=io.StringIO(), journal=journal)
    book.begin(Role.TRIAL, planned=4, epochs=3)
    return book, tracker


def test_completed_trial_is_one_row_with_its_metrics(tmp_path):
    book, tracker = _book(tmp_path)
    t = _trial("a")
    book.on_trial_start(0, [], t)
    book.on_trial_result(0, [], t, _result(3, status="completed"))
    book.on_trial_complete(0, [], t)
    book.on_experiment_end([t])
    rec = book.records["a"]
    assert (rec.status, rec.epochs, rec.metrics["val_score"]) == ("completed", 3, 0.5)
    assert tracker.ended["a"][0] == "completed"
    lines = (tmp_path / "trials.jsonl").read_text().splitlines()
    # A line when it starts, one when it ends.
    assert [json.loads(line)["status"] for line in lines] == ["running", "completed"]


def test_error_before_first_report_gets_a_failed_row_with_rays_reason(tmp_path):
    book, tracker = _book(tmp_path)
    error = tmp_path / "error.txt"
    error.write_text("Traceback (most recent call last):\n  ...\nRuntimeError: no model\n")
    t = _trial("b", status="ERROR", error_file=str(error))
    book.on_trial_error(0, [], t)  # Tune never called on_trial_start for it
    rec = book.records["b"]
    assert (rec.status, rec.reason) == ("failed", "RuntimeError: no model")
    assert tracker.started == ["b"] and tracker.ended["b"][0] == "failed"


def test_experiment_end_settles_trials_no_callback_closed():
    book, tracker = _book()
    cut = _trial("cut")  # running when the time budget ran out: Tune stops it silently
    book.on_trial_start(0, [], cut)
    book.on_trial_result(0, [], cut, _result(1))
    never_seen = _trial("lost", status="ERROR", error_msg="actor could not be reused")
    book.on_experiment_end([cut, never_seen])
    assert book.records["cut"].status == "pruned"
    assert book.records["cut"].metrics["val_score"] == 0.5  # its last report stays
    assert book.records["lost"].status == "failed"
    assert book.records["lost"].reason == "actor could not be reused"
    assert {tid: e[0] for tid, e in tracker.ended.items()} == {"cut": "pruned", "lost": "failed"}
    assert not [r for r in book.records.values() if r.status == "running"]


def test_close_open_ends_only_open_records_and_a_signal_makes_them_interrupted():
    book, tracker = _book()
    done, open_ = _trial("done"), _trial("open")
    for t in (done, open_):
        book.on_trial_start(0, [], t)
    book.on_trial_result(0, [], done, _result(3, status="completed"))
    book.on_trial_complete(0, [], done)
    book.stopping = True  # what the first Ctrl-C sets
    book.on_experiment_end([done, open_])
    book.close_open()  # a second close finds nothing open: one ending line per trial
    assert book.records["done"].status == "completed"
    assert book.records["open"].status == "interrupted" and book.records["open"].finished
    ends = [ln for ln in book.out.getvalue().splitlines() if " after " in ln]
    assert len(ends) == 2 and "[trial 2/4 open] interrupted after" in ends[1]


def test_scheduler_stop_while_running_is_pruned():
    book, _ = _book()
    t = _trial("asha")
    book.on_trial_start(0, [], t)
    book.on_trial_result(0, [], t, _result(1))
    book.on_trial_complete(0, [], t)
    assert book.records["asha"].status == "pruned"


def test_summary_counts_trials_by_status():
    book, _ = _book()
    for tid, status in [("a", "completed"), ("b", "completed"), ("c", "infeasible")]:
        t = _trial(tid)
        book.on_trial_start(0, [], t)
        book.on_trial_result(0, [], t, _result(3, status=status))
        book.on_trial_complete(0, [], t)
    book.on_trial_error(0, [], _trial("d", status="ERROR", error_msg="boom"))
    assert book.summary() == "4 trials: 2 completed, 1 failed, 1 infeasible"
    assert _book()[0].summary() == "0 trials"


def test_journal_reloads_finished_trials_for_a_resume(tmp_path):
    book, _ = _book(tmp_path)
    t = _trial("a")
    book.on_trial_start(0, [], t)
    book.on_trial_result(0, [], t, _result(3, status="completed"))
    book.on_trial_complete(0, [], t)
    again, tracker = _book(tmp_path)
    assert again.records["a"].status == "completed"
    again.on_trial_start(0, [], t)  # Tune restored it as unfinished: the record stands
    again.on_experiment_end([t])
    assert again.records["a"].status == "completed" and tracker.started == []


def test_a_trial_a_signal_cut_is_run_anew_on_resume_but_a_budget_cut_stays(tmp_path):
    book, _ = _book(tmp_path)
    budget = _trial("budget")
    book.on_trial_start(0, [], budget)
    book.on_trial_result(0, [], budget, _result(1))
    book.on_experiment_end([budget])  # the time budget ran out: pruned, a result of the search
    cut = _trial("cut")
    book.on_trial_start(0, [], cut)
    book.on_trial_result(0, [], cut, _result(1))
    book.stopping = True
    book.on_experiment_end([cut])
    lines = (tmp_path / "trials.jsonl").read_text().splitlines()
    assert [json.loads(line)["status"] for line in lines] == \
        ["running", "pruned", "running", "interrupted"]
    again, _ = _book(tmp_path)
    # Cut by the signal: not finished for a resume, so a new trial takes its place.
    assert set(again.records) == {"budget"} and again.cut_short == ["cut"]


def test_a_baseline_trial_is_labelled_tagged_and_not_counted_as_a_trial(tmp_path):
    book, tracker = _book(tmp_path)
    book.begin(Role.BASELINE, planned=1, epochs=5, base={"loop": "legacy"})
    b = _trial("b0", lr=0.1)
    book.on_trial_start(0, [], b)
    book.on_trial_result(0, [], b, _result(5, status="completed"))
    book.on_trial_complete(0, [], b)
    book.begin(Role.TRIAL, planned=2, epochs=3)
    t = _trial("t1")
    book.on_trial_start(0, [], t)
    assert tracker.roles["b0"] == ("baseline", {"baseline": "true"})
    assert tracker.roles["t1"] == ("trial", {})
    out = book.out.getvalue()
    assert "[baseline b0] epoch 5/5" in out and "[trial 1/2 t1] start" in out
    assert book.summary() == "1 trial: 1 running"
    assert [r.trial_id for r in book.finished(Role.BASELINE)] == ["b0"]
    again, _ = _book(tmp_path)  # the journal keeps the role
    assert again.records["b0"].role == Role.BASELINE


def test_a_retried_attempt_is_the_same_trial():
    book, tracker = _book()
    t = _trial("r")
    book.on_trial_start(0, [], t)
    first_start = book.records["r"].started
    book.on_trial_start(0, [], t)  # Tune's retry after a failed attempt
    assert tracker.started == ["r"] and book.records["r"].started == first_start
    assert "retry" in book.out.getvalue()


def test_an_epoch_that_skipped_validation_is_no_point_of_the_curve_nor_of_mlflows_val_charts():
    logged: list[dict] = []

    class Tracker(RecordingTracker):
        def log_epoch(self, trial_id, metrics, step):
            logged.append(dict(metrics))

    book = TrialBook(Tracker(), out=io.StringIO())
    book.begin(Role.TRIAL, planned=1, epochs=3)
    t = _trial("a")
    book.on_trial_start(0, [], t)
    # Epoch 1 did not validate: it repeats the (initial) metrics of "epoch 0".
    book.on_trial_result(0, [], t, _result(1, val_score=0.0, val_epoch=0, train_loss=0.9))
    book.on_trial_result(0, [], t, _result(2, val_score=0.7, val_epoch=2, train_loss=0.4))
    rec = book.records["a"]
    assert [e for e, _, _ in rec.curve] == [2]
    assert rec.losses == [[1, 0.9], [2, 0.4]]
    assert "val_score" not in logged[0] and logged[0]["train_loss"] == 0.9
    assert logged[1]["val_score"] == 0.7
    printed = book.out.getvalue().splitlines()
    assert "epoch 1/3  not validated  loss 0.900" in printed[1], printed
    assert "epoch 2/3  acc 0.700  loss 0.400" in printed[2], printed


def test_a_predicted_trial_is_judged_by_its_prediction_and_by_the_one_re_timed_at_its_start():
    from orchestrator.screen.predict import Prediction
    from orchestrator.trial_book import prediction_metrics

    pred = Prediction({"batch_size": 8, "workers": 1}, 100.0, 1.0, 10, 8, predicted_time_s=10.0,
                      predicted_speedup=3.0, step_s=0.01, steps_to_target=800)
    rec = SimpleNamespace(prediction=pred.to_dict(),
                          metrics={"time_to_target_s": 12.0, "start_step_s": 0.0125})
    out = prediction_metrics(rec)
    assert out["prediction_error"] == (10.0 - 12.0) / 12.0
    # Its own step took 0.0125 s where the screen read 0.01: 800 steps, 2 s more.
    assert out["predicted_at_start_s"] == 12.0 and out["start_prediction_error"] == 0.0
    # Two workers: the start's timing has no all-reduce, the screen's has; not compared.
    two = Prediction(**{**pred.to_dict(), "config": {"batch_size": 8, "workers": 2}})
    out = prediction_metrics(SimpleNamespace(prediction=two.to_dict(), metrics=rec.metrics))
    assert "predicted_at_start_s" not in out and "prediction_error" in out
    # A prediction recorded before step_s was (an older search's journal) has no re-timing.
    old = {k: v for k, v in pred.to_dict().items() if k not in ("step_s", "steps_to_target")}
    assert "predicted_at_start_s" not in prediction_metrics(
        SimpleNamespace(prediction=old, metrics=rec.metrics))
