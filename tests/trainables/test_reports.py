"""Worker-group reports reach Tune: each one, in order, even the one queued as the fit returns."""

import pytest

from trainables.trial.reports import ObjectiveReport, forward_reports

pytestmark = pytest.mark.integration  # a real Ray queue actor (the session's Ray)


@pytest.fixture
def queue(ray_session):
    from ray.util.queue import Queue

    q = Queue(actor_options={"num_cpus": 0})
    yield q
    q.shutdown(force=True)


def test_a_report_queued_just_before_fit_returns_is_forwarded(queue):
    # The race Ray's own bridge loses: the last report lands as the fit returns.
    seen = []

    def fit():
        for epoch in range(1, 4):
            queue.put({"epoch": epoch})
        return "fitted"

    assert forward_reports(fit, queue, seen.append) == "fitted"
    assert seen == [{"epoch": 1}, {"epoch": 2}, {"epoch": 3}]
    assert queue.empty()


def test_reports_are_forwarded_while_the_fit_still_runs(queue):
    import threading

    forwarded = threading.Event()

    def fit():
        queue.put({"epoch": 1})
        # Returns only once the first report has reached Tune: forwarding does not wait for the end.
        assert forwarded.wait(timeout=30)

    forward_reports(fit, queue, lambda item: forwarded.set())
    assert forwarded.is_set()


def test_a_fit_error_is_raised_after_its_reports(queue):
    seen = []

    def fit():
        queue.put({"epoch": 1})
        raise RuntimeError("worker group broke")

    with pytest.raises(RuntimeError, match="worker group broke"):
        forward_reports(fit, queue, seen.append)
    assert seen == [{"epoch": 1}]


def test_objective_report_scores_rank_zeros_metrics_and_drops_done(queue):
    def objective(metrics, state):
        state["n"] = state.get("n", 0) + 1
        return {**metrics, "objective": metrics["val_score"], "reports": state["n"]}

    callback = ObjectiveReport(queue, objective)
    callback.after_report(None, [{"val_score": 0.5, "done": True}, {"val_score": 0.1}], None)
    callback.after_report(None, [{"val_score": 0.7}], None)
    assert queue.get(timeout=10) == {"val_score": 0.5, "objective": 0.5, "reports": 1}
    assert queue.get(timeout=10) == {"val_score": 0.7, "objective": 0.7, "reports": 2}


@pytest.fixture
def taken(ray_session):
    from ray.util.queue import Queue

    q = Queue(actor_options={"num_cpus": 0})
    yield q
    q.shutdown(force=True)


def test_the_controller_goes_past_a_report_only_once_tune_took_it(queue, taken):
    # Ray Train keeps one checkpoint: a group that went on before Tune saw its report would
    # replace the checkpoint a stop at that report leaves for the measured run.
    import threading

    callback = ObjectiveReport(queue, None, taken)
    returned = threading.Event()
    thread = threading.Thread(target=lambda: (
        callback.after_report(None, [{"epoch": 1}], None), returned.set()), daemon=True)
    thread.start()
    assert queue.get(timeout=10) == {"epoch": 1}
    assert not returned.wait(timeout=1.0)  # queued, not yet taken
    taken.put(True)
    assert returned.wait(timeout=10)


def test_each_report_tune_took_is_said_and_a_stopped_one_is_not(queue, taken):
    def fit():
        for epoch in range(1, 4):
            queue.put({"epoch": epoch})

    def report(item):  # Tune stops the trial at its second report: `report` raises
        if item["epoch"] == 2:
            raise SystemExit("stopped")

    with pytest.raises(SystemExit):
        forward_reports(fit, queue, report, taken)
    assert taken.qsize() == 1
