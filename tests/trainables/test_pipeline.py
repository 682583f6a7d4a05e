"""The Ray Data pipeline: exactly-once epochs across a real 2-way shard split (shares cut by the
driver, and Ray Train's split), seeded shuffles, and datasets that every trial shares from the
object store.

Needs Ray (the session fixture) except the seeded-order unit test; run under the Ray lock:
    flock /tmp/ray.lock python -m pytest -q tests/trainables/test_pipeline.py
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from trainables.data.arrays import ArrayData
import trainables.data.pipeline as pipeline
from trainables.data.pipeline import ShardFeed, data_config, equal_shares, group_datasets, \
    to_ray_datasets
from trainables.data.shard_cache import epoch_order

N, BATCH, EPOCHS = 200, 8, 3


def id_data(n: int = N) -> ArrayData:
    """x[i] is filled with i, so every batch says which samples it holds."""
    x = np.repeat(np.arange(n, dtype=np.float32), 16).reshape(n, 1, 4, 4)
    y = np.arange(n) % 5
    return ArrayData(x, y, x[:10], y[:10], 5, source="ids")


def split(datasets: dict, how: str, workers: int = 2) -> list:
    """Each worker's share of the training set as a trial's workers get it: cut by the driver
    (`to_ray_datasets(worker_counts=...)`), or Ray Train's `streaming_split` (its DataConfig,
    behind get_dataset_shard), read by the workers at once."""
    if how == "cut":
        return datasets["shares"][workers]
    return [s["train"] for s in data_config().configure(
        {"train": datasets["train"]}, world_size=workers, worker_handles=None,
        worker_node_ids=None)]


def run_split(datasets: dict, how: str, *, cache: bool, seed: int, shuffle: bool = True,
              workers: int = 2) -> list:
    """Per worker, per epoch, the sample ids it saw, its share read in a thread of its own."""
    shards = split(datasets, how, workers)
    seen: list = [None] * workers
    errors: list = []

    def worker(rank: int) -> None:
        try:
            feed = ShardFeed(shards[rank], batch_size=BATCH, device=torch.device("cpu"),
                             cache=cache, shuffle=shuffle, drop_last=True, seed=seed, rank=rank)
            seen[rank] = [[int(v) for xb, _ in feed(epoch) for v in xb[:, 0, 0, 0]]
                          for epoch in range(1, EPOCHS + 1)]
        except Exception as err:  # surfaced in the main thread
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return seen


def test_epoch_order_is_a_seeded_permutation():
    a = epoch_order(100, seed=1, epoch=2, rank=0)
    assert sorted(a.tolist()) == list(range(100))
    assert torch.equal(a, epoch_order(100, seed=1, epoch=2, rank=0))
    for other in ({"seed": 2, "epoch": 2, "rank": 0}, {"seed": 1, "epoch": 3, "rank": 0},
                  {"seed": 1, "epoch": 2, "rank": 1}):
        assert not torch.equal(a, epoch_order(100, **other))


def test_equal_shares_are_contiguous_and_drop_only_the_remainder():
    assert equal_shares(10, 3) == [slice(0, 3), slice(3, 6), slice(6, 9)]
    assert equal_shares(200, 2) == [slice(0, 100), slice(100, 200)]
    assert equal_shares(5, 1) == [slice(0, 5)]


def test_a_group_reads_its_cut_shares_or_ray_trains_split():
    datasets = {"train": "train", "val": "val", "shares": {2: ["rank0", "rank1"]}}
    assert group_datasets(datasets, 2) == ({}, {"shares": ["rank0", "rank1"], "val": "val"})
    # No shares cut for 4 workers: Ray Train splits the training set for them.
    assert group_datasets(datasets, 4) == ({"train": "train", "val": "val"}, {})


@pytest.fixture(scope="module")
def id_datasets(ray_session):
    # Small blocks, so the split hands each worker several of them.
    return to_ray_datasets(id_data(), block_rows=16, worker_counts=[1, 2])


@pytest.fixture(scope="module")
def id_dataset(id_datasets):
    return id_datasets["train"]


@pytest.mark.integration
def test_shares_are_cut_only_for_worker_groups_and_only_while_they_fit(id_datasets,
                                                                       monkeypatch):
    assert sorted(id_datasets["shares"]) == [2]  # one worker reads the whole training set
    assert [s.count() for s in id_datasets["shares"][2]] == [N // 2, N // 2]
    # Copies past PRESPLIT_SHARE of the object store: none cut, Ray Train splits instead.
    monkeypatch.setattr(pipeline, "PRESPLIT_SHARE", 1e-9)
    assert to_ray_datasets(id_data(), worker_counts=[2, 4])["shares"] == {}


@pytest.mark.integration
@pytest.mark.parametrize("how", ["cut", "ray-train"])
@pytest.mark.parametrize("cache", [True, False], ids=["cached", "streamed"])
def test_two_workers_see_every_sample_once_per_epoch_in_a_seeded_order(id_datasets, cache, how):
    seen = run_split(id_datasets, how, cache=cache, seed=7)
    per_worker = N // 2  # equal split: 100 rows each
    steps = per_worker // BATCH
    for epoch in range(EPOCHS):
        ids = [seen[r][epoch] for r in range(2)]
        assert [len(i) for i in ids] == [steps * BATCH] * 2
        union = ids[0] + ids[1]
        assert len(set(union)) == len(union), "a sample was served twice in one epoch"
        assert set(union) <= set(range(N))
        # drop_last drops at most one partial batch per worker, nothing else.
        assert N - len(union) == 2 * (per_worker - steps * BATCH)
    # Each worker keeps its own samples across epochs (its shard), in a new order every epoch.
    for r in range(2):
        assert seen[r][0] != seen[r][1] and seen[r][1] != seen[r][2]
    assert not set(seen[0][0]) & set(seen[1][1])
    # Same seed: the same order, run after run. Another seed: another order.
    assert run_split(id_datasets, how, cache=cache, seed=7) == seen
    assert run_split(id_datasets, how, cache=cache, seed=8) != seen


@pytest.mark.integration
def test_cached_shard_holds_all_of_this_workers_rows(id_dataset):
    feed = ShardFeed(id_dataset, batch_size=64, device=torch.device("cpu"), cache=True,
                     shuffle=False, drop_last=False)
    batches = list(feed())
    assert [len(y) for _, y in batches] == [64, 64, 64, 8]  # validation keeps the tail
    ids = torch.cat([x[:, 0, 0, 0] for x, _ in batches]).long()
    assert sorted(ids.tolist()) == list(range(N))
    labels = torch.cat([y for _, y in batches])
    assert torch.equal(labels, ids % 5)  # labels stay paired with their images


@pytest.mark.integration
def test_every_trial_shares_the_one_materialized_copy(id_dataset, tmp_path):
    """Datasets reach trials through tune.with_parameters (as in orchestrator.search): every
    trial gets references to the same blocks in the object store, so nothing is re-read."""
    from ray import tune

    def block_ids(ds) -> list[str]:
        return [e.ref.hex() for b in ds.iter_internal_ref_bundles() for e in b.blocks]

    def trial(config, datasets):
        tune.report({"blocks": ",".join(block_ids(datasets["train"]))})

    driver_blocks = block_ids(id_dataset)
    tuner = tune.Tuner(
        tune.with_parameters(trial, datasets={"train": id_dataset}),
        param_space={"i": tune.grid_search([0, 1])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    )
    results = tuner.fit()
    assert len(results) == 2
    for result in results:
        assert result.metrics["blocks"].split(",") == driver_blocks



@pytest.mark.integration
@pytest.mark.parametrize("how", ["cut", "ray-train"])
@pytest.mark.parametrize("cache", [True, False], ids=["cached", "streamed"])
def test_label_volumes_stay_paired_with_their_images_through_a_split(ray_session, cache, how):
    """Segmentation rows: x (1, 8, 8, 8) float, y (1, 8, 8, 8) label volume (uint8 in the
    object store). Each label is derived from its image, so any mispairing shows."""
    from trainables.data.crops import crop_batch

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 1, 8, 8, 8)).astype(np.float32)
    y = (x > 0.3).astype(np.int64)
    ds = to_ray_datasets(ArrayData(x, y, x[:2], y[:2], 2, source="vols"), worker_counts=[2])
    shards = split(ds, how)
    rows, errors = [0, 0], []

    def worker(rank: int) -> None:  # a split is read by its workers at once, as in Train
        try:
            gen = torch.Generator().manual_seed(rank)
            feed = ShardFeed(shards[rank], batch_size=4, device=torch.device("cpu"),
                             cache=cache, seed=3, rank=rank)
            for xb, yb in feed(1):
                assert yb.dtype == torch.uint8 and yb.shape == xb.shape
                assert torch.equal(yb.bool(), xb > 0.3)
                # image and labels get the same window
                xc, yc = crop_batch("segment", xb, yb, 4, gen)
                assert yc.dtype == torch.uint8 and torch.equal(yc.bool(), xc > 0.3)
                rows[rank] += len(xb)
        except Exception as err:  # surfaced in the main thread
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert rows == [20, 20]
