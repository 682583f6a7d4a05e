"""Search spaces are checked without Ray running: contents, parsing, and feasibility errors."""

from __future__ import annotations

import pytest
from ray import tune

from search_spaces import SpaceContext, check_space, resolve_space
from search_spaces.parse import parse_space

CPU = SpaceContext(use_gpu=False, cpus_per_trial=2, image_size=32)
GPU = SpaceContext(use_gpu=True, gpus_per_trial=4, cpus_per_trial=16, image_size=32)


def test_default_space_covers_the_five_knobs_and_passes_its_own_checks():
    searched, fixed = resolve_space("default", CPU)
    assert set(searched) == {"precision", "batch_size", "workers", "patch_size", "width"}
    assert fixed == {}
    check_space(searched, {}, CPU)


def test_default_space_offers_fp16_only_on_gpu():
    cpu, _ = resolve_space("default", CPU)
    gpu, _ = resolve_space("default", GPU)
    assert "fp16-mixed" not in cpu["precision"].categories
    assert "fp16-mixed" in gpu["precision"].categories
    assert max(cpu["workers"].categories) == 2 and max(gpu["workers"].categories) == 4


@pytest.mark.parametrize("workload", ["classifier", "unet3d"])
def test_default_space_searches_bf16_only_where_it_runs_natively(workload):
    """A CPU without avx512_bf16/AMX runs bf16 slower than fp32: no precision knob at all there
    (fp32 is the default), bf16 beside fp32 on one with them, and on a GPU always."""
    old_cpu = SpaceContext(native_bf16=False, workload=workload)
    searched, fixed = resolve_space("default", old_cpu)
    assert "precision" not in searched and "precision" not in fixed
    check_space(searched, {}, old_cpu)
    new_cpu, _ = resolve_space("default", SpaceContext(workload=workload))
    assert new_cpu["precision"].categories == ["fp32", "bf16-mixed"]
    gpu, _ = resolve_space("default", SpaceContext(use_gpu=True, native_bf16=False,
                                                   workload=workload))
    assert "bf16-mixed" in gpu["precision"].categories


@pytest.mark.parametrize(("workload", "knobs", "combinations"), [
    ("classifier", {"precision", "batch_size", "width"}, 16),
    ("unet3d", {"precision", "batch_size", "width", "patch_size"}, 24),
])
def test_compact_space_is_few_combinations_for_the_screen(workload, knobs, combinations):
    """Strategy screen times every combination: the compact space keeps the seeds' first knobs
    at few values (the default space has 248 on a 2-core CPU), and, as the default space does,
    bf16 only where it runs natively."""
    from orchestrator.screen.screening import candidates

    ctx = SpaceContext(workload=workload, image_size=64 if workload == "unet3d" else 32)
    searched, fixed = resolve_space("compact", ctx)
    assert set(searched) == knobs and fixed == {}
    check_space(searched, {}, ctx)
    assert len(candidates(searched, {})) == combinations
    default, _ = resolve_space("default", ctx)
    assert len(candidates(default, {})) > 5 * combinations
    old_cpu, _ = resolve_space("compact", SpaceContext(workload=workload, native_bf16=False))
    assert "precision" not in old_cpu and len(candidates(old_cpu, {})) == combinations // 2


def test_default_space_bounds_patch_size_by_the_images():
    searched, _ = resolve_space("default", SpaceContext(image_size=20))
    assert max(searched["patch_size"].categories) == 20


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"patch_size": tune.choice([16, 64])}, "patch_size"),
        ({"precision": tune.choice(["fp32", "fp16-mixed"])}, "fp16-mixed needs a CUDA GPU"),
        ({"workers": tune.choice([1, 4])}, "knob 'workers'"),
        ({"batch_size": tune.choice([1, 64]), "workers": tune.choice([1, 2])}, "batch_size"),
        ({"learning_rate": tune.choice([0.1])}, "unknown knob"),
        ({"precision": tune.choice(["fp64"])}, "precision must be one of"),
    ],
)
def test_infeasible_spaces_are_refused_naming_the_knob(space, message):
    with pytest.raises(ValueError, match=message):
        check_space(space, {}, CPU)


def test_fixed_settings_are_checked_too():
    with pytest.raises(ValueError, match="patch_size"):
        check_space({}, {"patch_size": 48}, CPU)


def test_written_space_forms():
    searched, fixed = parse_space({
        "precision": ["fp32", "bf16-mixed"],
        "lr": {"loguniform": [1e-4, 1e-2]},
        "accum_steps": {"randint": [1, 4]},
        "width": {"uniform": [0.5, 2.0]},
        "epochs": 2,
    })
    assert fixed == {"epochs": 2}
    assert searched["precision"].categories == ["fp32", "bf16-mixed"]
    assert (searched["accum_steps"].lower, searched["accum_steps"].upper) == (1, 5)
    assert searched["lr"].lower == pytest.approx(1e-4)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"width": {"uniform": [2.0, 1.0]}}, "empty range"),
        ({"width": {"choice": []}}, "non-empty list"),
        ({"lr": {"loguniform": [0, 1]}}, "low > 0"),
        ({"lr": {"normal": [0, 1]}}, "write one of"),
        ({"accum_steps": {"randint": [1.5, 3]}}, "integers"),
    ],
)
def test_malformed_written_spaces_are_refused(raw, message):
    with pytest.raises(ValueError, match=message):
        parse_space(raw)


def test_user_space_by_module_path_and_unknown_names():
    searched, _ = resolve_space("search_spaces.default:small_space", CPU)
    assert set(searched) == {"batch_size", "width"}
    with pytest.raises(ValueError, match="unknown space"):
        resolve_space("nope", CPU)
    with pytest.raises(ValueError, match="cannot import module"):
        resolve_space("no_such_module:space", CPU)


def test_pipeline_space_turns_the_data_pipeline_knobs():
    searched, fixed = resolve_space("pipeline", CPU)
    assert set(searched) == {"cache_shard", "prefetch_batches", "batch_size"}
    check_space(searched, {}, CPU)


@pytest.mark.parametrize("native", [False, True])
def test_a_search_reads_bf16_support_from_the_drivers_cpu(monkeypatch, native):
    from orchestrator import prepare as prepare_module
    from orchestrator.spec import SearchSpec
    from trainables.workloads import workload_data

    monkeypatch.setattr(prepare_module, "cpu_model", lambda: ("a CPU", native))
    prepared = prepare_module.prepare(SearchSpec(), workload_data("classifier", None), 2, 0)
    assert ("precision" in prepared.searched) is native
