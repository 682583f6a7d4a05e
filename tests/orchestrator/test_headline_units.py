"""Issue 17 without Ray: lr scaling, the full-run projection, match_baseline, the baseline
option's validation, knob importance and the speedup/payback lines."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from orchestrator import SearchSpec
from orchestrator.baseline import (SEEDS_BEFORE, baseline_config, baseline_epochs, resolved_kind,
                                   with_baseline)
from orchestrator.cli import build_parser, spec_from_args
from orchestrator.importance import importance_lines, knob_importance
from orchestrator.objective import make_objective, projected_time
from orchestrator.report import add_baseline_row, projected_economics
from trainables.config import TrialConfig
from trainables.loop.lr import from_baseline, lr_factor, scaled_lr, schedule_multiplier


def test_lr_follows_the_batch_by_the_named_rule():
    ref = TrialConfig(lr=1e-3, batch_size=128, lr_reference_batch=128)
    assert scaled_lr(ref) == pytest.approx(1e-3)
    big = dict(lr=1e-3, batch_size=512, lr_reference_batch=128)
    assert scaled_lr(TrialConfig(**big)) == pytest.approx(2e-3)  # sqrt is the default
    assert scaled_lr(TrialConfig(**big, lr_scaling="linear")) == pytest.approx(4e-3)
    assert scaled_lr(TrialConfig(**big, lr_scaling="none")) == pytest.approx(1e-3)
    # Accumulation makes the optimizer's batch bigger too.
    assert lr_factor(TrialConfig(batch_size=128, accum_steps=4, lr_scaling="linear")) == 4
    with pytest.raises(ValueError, match="lr_scaling must be one of"):
        TrialConfig(lr_scaling="cubic")


def test_a_trial_at_the_baselines_batch_trains_at_the_baselines_lr():
    # The seeds' baseline: 3e-3 at batch 32, unscaled; the classifier's lr is known at 128.
    seeds = TrialConfig(workload="classifier", batch_size=32, lr_scaling="none").to_dict()
    base = {"workload": "classifier", "epochs": 8}
    anchored = from_baseline(base, seeds)
    assert anchored == {**base, "lr": 3e-3, "lr_reference_batch": 32}
    at = {**anchored, "batch_size": 32}
    assert scaled_lr(TrialConfig(**at)) == pytest.approx(scaled_lr(TrialConfig(**seeds)))
    assert scaled_lr(TrialConfig(**{**at, "batch_size": 128})) == pytest.approx(6e-3)  # sqrt
    # Before: the same trial at batch 32 trained at half the baseline's lr.
    assert scaled_lr(TrialConfig(**base, batch_size=32)) == pytest.approx(1.5e-3)
    # Gradient accumulation counts in the baseline's batch as in a trial's.
    accum = TrialConfig(workload="classifier", batch_size=16, accum_steps=4, lr=1e-3,
                        lr_scaling="none").to_dict()
    assert from_baseline(base, accum) == {**base, "lr": 1e-3, "lr_reference_batch": 64}
    # Where the rule already agrees, or you named where your lr was tuned: as it was.
    agrees = TrialConfig(workload="classifier", batch_size=64).to_dict()
    assert from_baseline(base, agrees) is base
    named = {**base, "lr_reference_batch": 128}
    assert from_baseline(named, seeds) is named
    # A model of your own keeps its lr as given at any batch: nothing to anchor.
    own = {"workload": "custom", "lr": 1e-3}
    assert from_baseline(own, {**own, "batch_size": 32, "lr_scaling": "none"}) is own


def test_scaled_up_constant_schedule_warms_up_and_onecycle_keeps_its_own():
    cfg = TrialConfig(batch_size=512, schedule="constant", lr_scaling="linear")
    f = schedule_multiplier(cfg, 100)
    assert f(0) < f(2) < f(4) == pytest.approx(1.0) and f(50) == 1.0
    down = schedule_multiplier(TrialConfig(batch_size=32, schedule="constant"), 100)
    assert down(0) == 1.0  # a lowered lr needs no warm-up
    one = TrialConfig(batch_size=512, schedule="onecycle")
    from trainables.loop.schedules import lr_multiplier
    assert schedule_multiplier(one, 100)(3) == lr_multiplier("onecycle", 3, 100)


def test_projection_pays_the_warm_up_once():
    m = {"train_time_s": 12.0, "warmup_s": 6.0, "epoch": 3, "epochs_planned": 3, "done": True}
    assert projected_time(m) == 12.0  # a finished trial took what it took
    assert projected_time(m, full_epochs=30) == pytest.approx(6 + 2 * 30)
    # An intermediate report (ASHA) is projected to the plan, warm-up counted once (issue 11.5).
    part = {"train_time_s": 8.0, "warmup_s": 6.0, "epoch": 1, "epochs_planned": 3}
    assert projected_time(part) == pytest.approx(6 + 2 * 3)
    # A compile that costs 20 s up front beats a 3 s/epoch eager loop over a long run only.
    compiled = {"train_time_s": 26.0, "warmup_s": 20.0, "epoch": 3, "epochs_planned": 3,
                "val_score": 0.8}
    eager = {"train_time_s": 9.0, "warmup_s": 0.0, "epoch": 3, "epochs_planned": 3,
             "val_score": 0.8}
    obj = make_objective("weighted", full_epochs=100)
    assert obj(compiled)["objective"] > obj(eager)["objective"]
    short = make_objective("weighted")
    assert short(compiled)["objective"] < short(eager)["objective"]
    assert obj(compiled)["full_run_s"] == pytest.approx(20 + 2 * 100)


def test_match_baseline_ranks_by_time_to_the_baseline_score_then_by_score():
    obj = with_baseline(make_objective("match_baseline", tolerance=0.01),
                        {"val_score": 0.90, "train_time_s": 60.0, "full_run_s": 60.0})
    assert obj.target == pytest.approx(0.89)

    def run(epochs):
        state: dict = {}
        out = {}
        for i, (score, t) in enumerate(epochs, 1):
            out = obj({"val_score": score, "train_time_s": t, "epoch": i,
                       "epochs_planned": len(epochs)}, state)
        return out

    fast = run([(0.5, 5), (0.895, 10), (0.91, 15)])
    slow = run([(0.5, 20), (0.89, 40)])
    never = run([(0.5, 2), (0.85, 4)])
    assert fast["time_to_target_s"] == 10 and fast["speedup_vs_baseline"] == pytest.approx(6)
    assert fast["objective"] > slow["objective"] > never["objective"]
    assert math.isnan(never["speedup_vs_baseline"])
    assert "baseline 0.9000 - 0.01" in obj.formula


def test_baseline_option_is_validated_and_defaults_by_workload(tiny_npz):
    assert resolved_kind(SearchSpec()) == "seeds"
    assert resolved_kind(SearchSpec(model="trainables.models:build_classifier",
                                    data=tiny_npz)) == "base"
    with pytest.raises(ValueError, match="baseline must be one of"):
        SearchSpec(baseline="yesterday")
    with pytest.raises(ValueError, match="needs a baseline"):
        SearchSpec(objective="match_baseline", baseline="none")
    with pytest.raises(ValueError, match="tolerance must be in"):
        SearchSpec(objective="match_baseline", tolerance=-0.1)
    with pytest.raises(ValueError, match="full_epochs must be an integer >= 1"):
        SearchSpec(full_epochs=0)
    seeds = baseline_config("seeds", {"width": 0.5, "lr": 0.01, "precision": "bf16-mixed"})
    assert seeds == {"width": 0.5, "lr": 0.01, **SEEDS_BEFORE}
    assert seeds["loop"] == "legacy" and seeds["batch_size"] == 32
    TrialConfig.from_dict(seeds)  # a valid trial


def test_a_recorded_baseline_is_compared_with_not_run_again(tiny_npz, tmp_path):
    import io
    import json

    from orchestrator.search import Search

    record = {"kind": "seeds", "config": {"batch_size": 32}, "status": "completed",
              "val_score": 0.9, "train_time_s": 120.0, "full_run_s": 120.0}
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(record))
    spec = SearchSpec(data=tiny_npz, objective="match_baseline", baseline=str(path),
                      output_dir=str(tmp_path / "runs"))

    def must_not_run(*args, **kwargs):
        raise AssertionError("a recorded baseline ran again")

    from orchestrator.prepare import load_data, prepare
    from orchestrator.tracking import NullTracker

    out = io.StringIO()
    search = Search(spec, out=out, tracker=NullTracker())  # its baseline stage: no Ray
    search.uses_ray = False  # (no duplicate ledger to start)
    search.ctx = search._context(prepare(spec, load_data(spec), 2, 0))
    search._train_baseline = must_not_run
    search.folder.root.mkdir(parents=True)
    search.run_baseline()
    assert search.ctx.baseline == record
    # Kept with the search, so a resume reads it back.
    assert json.loads(search.folder.baseline.read_text()) == record
    assert "recorded in" in out.getvalue()
    objective = search.objective
    assert objective.target == pytest.approx(0.895) and objective.baseline_s == 120.0
    assert objective == with_baseline(spec.make_objective(), record)

    # Anything else is refused before any work, saying what a baseline may be.
    with pytest.raises(ValueError, match="or the path of a recorded baseline"):
        SearchSpec(data=tiny_npz, baseline=str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        SearchSpec(data=tiny_npz, baseline=str(tmp_path / "bad.json"))
    (tmp_path / "partial.json").write_text(json.dumps({"kind": "seeds", "val_score": 0.9}))
    with pytest.raises(ValueError, match="missing"):
        SearchSpec(data=tiny_npz, baseline=str(tmp_path / "partial.json"))
    (tmp_path / "failed.json").write_text(json.dumps({**record, "status": "failed"}))
    with pytest.raises(ValueError, match="has no result"):
        SearchSpec(data=tiny_npz, baseline=str(tmp_path / "failed.json"))


def test_match_baseline_runs_the_baseline_as_long_as_the_real_run(tiny_npz):
    spec = SearchSpec(data=tiny_npz, epochs=3, objective="match_baseline", full_epochs=12)
    assert baseline_epochs(spec, {}) == 12  # the accuracy of the user's real run
    assert baseline_epochs(SearchSpec(data=tiny_npz, epochs=3, objective="match_baseline"),
                           {}) == 3
    # The other objectives project the baseline's trial-length run to full_epochs instead.
    assert baseline_epochs(SearchSpec(data=tiny_npz, epochs=3, full_epochs=12), {}) == 3


def test_cli_flags_reach_the_spec():
    args = build_parser().parse_args(
        ["search", "--objective", "match_baseline", "--baseline", "base", "--tolerance", "0.01",
         "--full-epochs", "50", "--lr-scaling", "linear", "--set", "width=0.5"])
    spec = spec_from_args(args)
    assert (spec.objective, spec.baseline, spec.tolerance, spec.full_epochs) == \
        ("match_baseline", "base", 0.01, 50)
    assert spec.base == {"width": 0.5, "lr_scaling": "linear"}


def _table(n=12):
    rows = []
    for i in range(n):
        precision = ["fp32", "bf16-mixed"][i % 2]
        width = [0.5, 1.0, 2.0][i % 3]
        t = (20 if precision == "fp32" else 10) + 0.1 * i
        score = 0.5 + 0.1 * width
        rows.append({"trial_id": f"t{i}", "status": "completed", "precision": precision,
                     "width": width, "val_score": score, "full_run_s": t,
                     "train_time_s": t, "objective": score - 0.05 * math.log2(t / 10)})
    return pd.DataFrame(rows)


def test_importance_names_the_knob_that_moved_each_target():
    imp = knob_importance(_table(), ["precision", "width"])
    assert imp.loc["precision", "full_run_s"] > 0.8  # time follows precision only
    assert imp.loc["width", "val_score"] > 0.8  # accuracy follows width only
    assert any("Knob importance" in line for line in importance_lines(imp))
    assert knob_importance(_table(2), ["precision", "width"]).empty  # too few trials


def test_headline_and_payback_lines():
    record = {"val_score": 0.915, "train_time_s": 100.0, "full_run_s": 100.0,
              "trial_id": "base", "status": "completed", "config": {"width": 1.0}}
    best = {"val_score": 0.912, "speedup_vs_baseline": 4.0}
    lines, _ = projected_economics(best, record, 100.0, search_cost_s=300)
    assert lines[0] == "best: 4.00x faster than baseline (0.912 vs 0.915)"
    assert "3.0 baseline runs" in lines[1]
    assert "after 4.0 runs" in lines[2]  # 300 s / (100 - 25) s saved per run
    missed, _ = projected_economics({"val_score": 0.8, "speedup_vs_baseline": math.nan},
                                    record, 100.0, 300)
    assert "did not reach" in missed[0]
    table = add_baseline_row(_table(3), record, ["width"])
    assert list(table["role"]) == ["trial"] * 3 + ["baseline"]
    assert table.iloc[-1]["rank"] == 0


def test_legacy_loop_measures_its_warm_up_so_the_projection_pays_it_once(tiny_npz):
    from tests.trainables.helpers import fit_legacy_local

    final = fit_legacy_local(tiny_npz, loader_workers=0, epochs=2, batch_size=16, lr=0.01,
                             patch_size=12, width=0.25)
    assert 0 < final["warmup_s"] < final["train_time_s"]
    projected = make_objective("weighted", full_epochs=20)(final)["full_run_s"]
    steady = (final["train_time_s"] - final["warmup_s"]) / 2
    assert projected == pytest.approx(final["warmup_s"] + 20 * steady)


def test_a_search_with_no_trial_but_a_baseline_writes_its_results(tmp_path):
    """A second search whose budget earlier searches spent runs no trial: its leaderboard is the
    baseline's row, with no best and an empty front."""
    import io
    from types import SimpleNamespace

    from orchestrator.finish import write_results
    from orchestrator.folder import SearchFolder
    from orchestrator.records import Role
    from orchestrator.screen import ScreenStrategy
    from orchestrator.stages import StageContext
    from orchestrator.tracking import NullTracker
    from orchestrator.trial_book import TrialBook

    record = {"val_score": 0.915, "train_time_s": 100.0, "full_run_s": 100.0, "epochs": 10,
              "trial_id": "base", "status": "completed", "config": {"width": 1.0},
              "curve": [[10, 0.915, 100.0]]}
    objective = with_baseline(make_objective("match_baseline", tolerance=0.01), record)
    book = TrialBook(NullTracker(), out=io.StringIO())
    book.begin(Role.TRIAL, planned=0, epochs=3)
    folder = SearchFolder(tmp_path / "again")
    folder.root.mkdir()
    ctx = StageContext(spec=SearchSpec(name="again", strategy="screen"),
                       prepared=SimpleNamespace(searched={"width": None}, base={}), folder=folder,
                       book=book, tracker=NullTracker(), out=io.StringIO(), fit=None,
                       objective=objective, baseline=record)
    result = write_results(ctx, ScreenStrategy(), measured=None, wall_s=1.0, cost_s=1.0)
    assert result.best is None and list(result.trials["role"]) == ["baseline"]
    assert len(folder.pareto_csv.read_text().splitlines()) == 1  # its header: no front
    assert folder.leaderboard.is_file() and not folder.best_config.is_file()
    # Its economics: the cost of looking, and no speedup to claim.
    assert result.economics["speedup"] is None and result.economics["search_cost_s"] == 1.0
