"""The gradient noise scale estimator against a problem whose answer is known (no Ray)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from trainables.loop.noise import epochs_ratio, gradient_noise_scale


def _regression(noise: float, n: int, seed: int = 0):
    """y = x . w_true + noise; the model sits away from w_true, so its gradient has a signal."""
    gen = torch.Generator().manual_seed(seed)
    d = 8
    w_true = torch.randn(d, generator=gen)
    x = torch.randn(n, d, generator=gen)
    y = x @ w_true + noise * torch.randn(n, generator=gen)
    model = nn.Linear(d, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_((w_true + 0.3 * torch.randn(d, generator=gen)).unsqueeze(0))
    return model, x, y


def _loss(out, batch):
    return ((out.squeeze(1) - batch[1]) ** 2).mean()


def _truth(model, x, y) -> float:
    """tr(Sigma) / |G|^2 from every per-sample gradient of a large sample."""
    w = model.weight.detach().squeeze(0)
    per_sample = 2 * ((x @ w) - y).unsqueeze(1) * x  # d(loss_i)/dw
    g = per_sample.mean(0)
    return float(per_sample.var(0, unbiased=True).sum() / g.pow(2).sum())


@pytest.mark.parametrize("noise", [0.5, 2.0])
def test_estimate_is_close_to_the_true_noise_scale(noise):
    model, x, y = _regression(noise, n=200_000)
    truth = _truth(model, x, y)
    batches = [(x[i:i + 256], y[i:i + 256]) for i in range(0, 256 * 64, 256)]
    est = gradient_noise_scale(model, _loss, batches, small=32, parts=8, big_batches=64)
    assert est == pytest.approx(truth, rel=0.3), (est, truth)


def test_more_label_noise_means_a_bigger_noise_scale_and_weights_are_untouched():
    quiet, xq, yq = _regression(0.2, n=20_000)
    loud, xl, yl = _regression(3.0, n=20_000)
    before = quiet.weight.detach().clone()
    q = gradient_noise_scale(quiet, _loss, [(xq[i:i + 128], yq[i:i + 128])
                                            for i in range(0, 128 * 16, 128)], small=16)
    l_ = gradient_noise_scale(loud, _loss, [(xl[i:i + 128], yl[i:i + 128])
                                            for i in range(0, 128 * 16, 128)], small=16)
    assert l_ > q
    assert torch.equal(quiet.weight, before) and quiet.weight.grad is None


def test_epochs_ratio_follows_the_empirical_model():
    assert epochs_ratio(256, 32, 416) == pytest.approx((1 + 256 / 416) / (1 + 32 / 416))
    assert epochs_ratio(32, 32, 100.0) == 1.0
    assert epochs_ratio(64, 32, math.inf) == 1.0  # all noise: bigger batches are free
    assert epochs_ratio(64, 32, 0.0) == 2.0  # no noise: only steps count
    assert math.isnan(epochs_ratio(64, 32, math.nan))
    # Too few samples for two micro-batches: nothing measured.
    model, x, y = _regression(1.0, n=64)
    assert math.isnan(gradient_noise_scale(model, _loss, [(x[:20], y[:20])], small=16))


def test_a_run_is_converted_epoch_by_epoch_at_its_own_noise_scale():
    from trainables.loop.noise import noise_at, noise_epochs, run_epochs_ratio

    series = [[1, 100.0], [10, 1000.0]]
    assert noise_at(series, 0.5) == 100.0 and noise_at(series, 12) == 1000.0
    assert noise_at(series, 5.5) == pytest.approx(math.sqrt(100.0 * 1000.0))  # log-linear
    # Early epochs (small B_noise) make a big batch cost more than the end point says.
    whole = run_epochs_ratio(256, 32, series, 10)
    assert epochs_ratio(256, 32, 1000.0) < whole < epochs_ratio(256, 32, 100.0)
    assert run_epochs_ratio(256, 32, series, 10) == pytest.approx(
        sum(epochs_ratio(256, 32, noise_at(series, e)) for e in range(1, 11)) / 10)
    assert noise_epochs(15) == {2, 4, 8, 11, 15} and noise_epochs(1) == {1}
