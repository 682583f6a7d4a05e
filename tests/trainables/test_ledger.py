"""The ledger of configurations already run (the plain class; the Ray actor wraps it as is)."""

from __future__ import annotations

from trainables.identity import ledger_key
from trainables.trial.ledger import Ledger, duplicate_report


def test_key_is_knobs_and_seed_in_any_order():
    assert ledger_key({"lr": 0.1, "width": 0.5}, 0) == ledger_key({"width": 0.5, "lr": 0.1}, 0)
    assert ledger_key({"lr": 0.1}, 0) != ledger_key({"lr": 0.1}, 1)
    assert ledger_key({"lr": 0.1}, 0) != ledger_key({"lr": 0.2}, 0)
    # A searched seed is the seed.
    assert ledger_key({"lr": 0.1, "seed": 3}, 0) != ledger_key({"lr": 0.1, "seed": 4}, 0)


def test_first_asker_trains_a_concurrent_twin_waits_then_gets_the_result():
    ledger = Ledger()
    assert ledger.claim("k", "t1") is None
    assert ledger.claim("k", "t1") is None  # the same trial, restarted, trains on
    assert ledger.claim("k", "t2") == {"wait": "t1"}
    result = {"trial_id": "t1", "number": 1, "status": "completed", "epochs": 2,
              "metrics": {"val_score": 0.9, "objective": 0.8}}
    ledger.record("k", result)
    assert ledger.claim("k", "t2") == result
    assert ledger.size() == 1


def test_released_claim_lets_the_next_trial_train():
    ledger = Ledger()
    ledger.claim("k", "t1")
    ledger.release("k", "t2")  # not its claim: nothing changes
    assert ledger.claim("k", "t3") == {"wait": "t1"}
    ledger.release("k", "t1")  # t1 failed: its configuration is not known
    assert ledger.claim("k", "t3") is None


def test_first_result_stands():
    ledger = Ledger()
    ledger.record("k", {"n": 1})
    ledger.record("k", {"n": 2})
    assert ledger.claim("k", "t9") == {"n": 1}


def test_duplicate_report_carries_the_first_runs_metrics():
    report = duplicate_report({"trial_id": "t1", "number": 1, "status": "completed",
                               "epochs": 2, "metrics": {"val_score": 0.9, "objective": 0.8}})
    assert report["status"] == "duplicate" and report["epoch"] == 2
    assert report["val_score"] == 0.9 and report["objective"] == 0.8
    assert "same knobs and seed as trial 1 (t1)" in report["reason"]


def test_the_ledger_actors_process_imports_no_torch():
    """Each search starts the ledger as an actor of its own, a fresh process that imports this
    module: with torch in its imports it cost 2.5 s of CPU a search instead of ~1 s."""
    import subprocess
    import sys

    code = ("import sys, trainables.trial.ledger; "
            "print(sorted(m for m in ('torch', 'ray', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "torch" not in out, out
