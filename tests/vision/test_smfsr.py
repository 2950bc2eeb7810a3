"""SMFSR: the SplitMeanFlow loss, Euler sampling and the one-step map on a Gaussian toy whose exact flow is known
in closed form; the degradation chain against scikit-image; the Frechet distance against its 1-D closed form;
the estimator's bad input; the quick verdict."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.filters import gaussian
from skimage.transform import downscale_local_mean

from neurips26.harness.testing import assert_quick_verdict
from neurips26.vision.smfsr import (
    FlowSR,
    IntervalVelocityNet,
    degrade,
    degrade_mean,
    euler_sample,
    frechet_distance,
    splitmeanflow_loss,
    train_flow_matching,
    train_splitmeanflow,
)

MU, SIGMA = 1.5, 0.4  # toy data x ~ N(MU, SIGMA^2) per pixel; noise eps ~ N(0, 1)


def _s(t):
    # the rectified path's marginal flow between N(0, 1) and N(MU, SIGMA^2): z_t = t MU + s(t) z0 with
    # s(t) = sqrt(t^2 SIGMA^2 + (1 - t)^2) (the std of t x + (1 - t) eps); curved paths, endpoint map MU + SIGMA z0
    return torch.sqrt(t**2 * SIGMA**2 + (1 - t) ** 2)


class ExactAverageVelocity(torch.nn.Module):
    """u(z, a, b) of the toy flow in closed form (plus an optional error that grows with b - a)."""

    def __init__(self, error: float = 0.0) -> None:
        super().__init__()
        self.error = error

    def forward(self, z, a, b, cond):
        a4, b4 = a.view(-1, 1, 1, 1), b.view(-1, 1, 1, 1)
        z0 = (z - a4 * MU) / _s(a4)
        ds = (a4 * SIGMA**2 - (1 - a4)) / _s(a4)  # s'(a), the limit a = b
        gap = b4 - a4
        slope = torch.where(gap.abs() > 0, (_s(b4) - _s(a4)) / torch.where(gap.abs() > 0, gap, 1.0), ds)
        return MU + slope * z0 + self.error * gap**2

    def velocity(self, z, t, cond):
        return self(z, t, t, cond)


def test_splitmeanflow_loss_vanishes_on_the_exact_flow_only():
    gen = torch.Generator().manual_seed(0)
    x = MU + SIGMA * torch.randn(512, 1, 2, 2, generator=gen)
    cond = torch.zeros(512, 1, 1, 1)
    exact = ExactAverageVelocity()
    assert splitmeanflow_loss(exact, exact, x, cond, torch.Generator().manual_seed(1)).item() < 1e-10
    wrong = ExactAverageVelocity(error=0.5)  # violates interval additivity
    assert splitmeanflow_loss(wrong, exact, x, cond, torch.Generator().manual_seed(1)).item() > 1e-3


def test_euler_sampling_of_the_exact_velocity_converges_to_the_transport_map():
    eps = torch.randn(64, 1, 2, 2, generator=torch.Generator().manual_seed(2))
    cond = torch.zeros(64, 1, 1, 1)
    fine = euler_sample(ExactAverageVelocity(), eps, cond, 400)
    torch.testing.assert_close(fine, MU + SIGMA * eps, atol=5e-3, rtol=0)
    # one Euler step follows v(eps, 0) = MU - eps: every sample collapses to the mean (why 1-NFE needs u, not v)
    torch.testing.assert_close(euler_sample(ExactAverageVelocity(), eps, cond, 1), torch.full_like(eps, MU))
    one_step = eps + ExactAverageVelocity()(eps, torch.zeros(64), torch.ones(64), cond)
    torch.testing.assert_close(one_step, MU + SIGMA * eps, atol=1e-5, rtol=1e-5)


def test_splitmeanflow_loss_has_a_stop_gradient_target():
    torch.manual_seed(0)
    student, teacher = IntervalVelocityNet(2, width=16, blocks=1), IntervalVelocityNet(2, width=16, blocks=1)
    x, cond = torch.randn(8, 1, 2, 2), torch.randn(8, 1, 1, 1)
    loss = splitmeanflow_loss(
        student, teacher, x, cond, torch.Generator().manual_seed(0), boundary_fraction=0.0
    )
    loss.backward()
    assert all(p.grad is None for p in teacher.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in student.parameters())


@pytest.mark.slow
def test_trained_one_step_student_learns_the_toy_transport_map():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(3)
    x = MU + SIGMA * torch.randn(1024, 1, 1, 1, generator=gen)
    cond = torch.zeros(1024, 1, 1, 1)
    teacher = IntervalVelocityNet(1, width=64, blocks=2)
    train_flow_matching(teacher, x, cond, epochs=25, batch_size=128, lr=3e-3)
    student = IntervalVelocityNet(1, width=64, blocks=2)
    student.load_state_dict(teacher.state_dict())
    train_splitmeanflow(student, teacher, x, cond, epochs=15, batch_size=128, lr=1e-3)
    eps = torch.linspace(-2, 2, 41).view(-1, 1, 1, 1)
    with torch.no_grad():
        one_step = eps + student(eps, torch.zeros(41), torch.ones(41), cond[:41])
        teacher_one = euler_sample(teacher, eps, cond[:41], 1)
    exact = MU + SIGMA * eps
    err_student = (one_step - exact).abs().mean().item()
    assert err_student < 0.2  # the identity map errs by about 1.5 on this range
    assert (
        teacher_one - exact
    ).abs().mean().item() > 2 * err_student  # 1-step Euler collapses towards the mean


def test_degradation_matches_scikit_image():
    rng = np.random.default_rng(0)
    hr = rng.uniform(-1, 1, (3, 1, 8, 8))
    ref = np.stack(
        [downscale_local_mean(gaussian(h[0], sigma=0.75, mode="reflect", preserve_range=True), 2) for h in hr]
    )[:, None]
    np.testing.assert_allclose(degrade_mean(hr), ref, atol=1e-5)
    lr = degrade(hr, rng=1, sigma_range=(0.75, 0.75), noise_range=(0.0, 0.0), levels=4)
    levels = np.array([-1, -1 / 3, 1 / 3, 1])
    assert lr.shape == (3, 1, 4, 4)
    np.testing.assert_allclose(
        lr, levels[np.abs(np.clip(ref, -1, 1)[..., None] - levels).argmin(-1)], atol=1e-6
    )
    noisy = degrade(hr, rng=2)
    assert np.abs(np.unique(noisy)[:, None] - levels[None]).min(1).max() < 1e-6  # only the 4 levels occur


def test_frechet_distance_matches_the_one_dimensional_closed_form():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, (500, 1)), rng.normal(2, 3, (400, 1))
    ref = (a.mean() - b.mean()) ** 2 + (a.std(ddof=1) - b.std(ddof=1)) ** 2
    assert frechet_distance(a, b) == pytest.approx(ref, rel=1e-8)
    c = rng.normal(size=(300, 4))
    assert frechet_distance(c, c) == pytest.approx(0.0, abs=1e-6)


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="hr"):
        degrade(np.zeros((2, 8, 8)))
    with pytest.raises(ValueError, match="NaN"):
        degrade(np.full((1, 1, 8, 8), np.nan))
    with pytest.raises(ValueError, match="scale"):
        degrade_mean(np.zeros((1, 1, 7, 7)))
    with pytest.raises(ValueError, match="features"):
        frechet_distance(np.zeros((5, 2)), np.zeros((5, 3)))
    with pytest.raises(ValueError, match="boundary_fraction"):
        FlowSR(boundary_fraction=1.5)
    with pytest.raises(ValueError, match="gan_epochs"):
        FlowSR(gan_epochs=-1)
    with pytest.raises(ValueError, match="width"):
        FlowSR(width=0)
    with pytest.raises(RuntimeError, match="not fitted"):
        FlowSR().predict(np.zeros((1, 1, 4, 4), np.float32))
    with pytest.raises(ValueError, match="pair up"):
        FlowSR().fit(np.zeros((3, 1, 8, 8), np.float32), np.zeros((2, 1, 4, 4), np.float32))
    with pytest.raises(ValueError, match="lr_images"):
        FlowSR().fit(np.zeros((3, 1, 8, 8), np.float32), np.full((3, 1, 4, 4), np.nan, np.float32))
    with pytest.raises(ValueError, match="steps"):
        euler_sample(IntervalVelocityNet(2), torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 1, 1), 0)
    with pytest.raises(ValueError, match="target"):
        FlowSR(target="latent")
    with pytest.raises(ValueError, match="parametrization"):
        FlowSR(parametrization="eps")
    with pytest.raises(ValueError, match="hr values must lie in"):  # 8-bit images not rescaled
        FlowSR().fit(np.full((3, 1, 8, 8), 200.0, np.float32), np.zeros((3, 1, 4, 4), np.float32))
    with pytest.raises(ValueError, match="losses"):
        train_flow_matching(
            IntervalVelocityNet(2), torch.zeros(2, 1, 2, 2), torch.zeros(2, 1, 1, 1), losses=()
        )


def test_predict_refuses_inputs_unlike_the_training_inputs():
    rng = np.random.default_rng(0)
    hr = rng.uniform(-1, 1, (16, 1, 8, 8)).astype(np.float32)
    lr = degrade_mean(hr)
    model = FlowSR(width=8, blocks=1, teacher_epochs=1, student_epochs=1, batch_size=8).fit(hr, lr)
    out = model.predict(lr[:3])
    assert out.shape == (3, 1, 8, 8) and np.abs(out).max() <= 1  # clipped to the data range
    assert len(model.teacher_losses_) == len(model.student_losses_) == 1
    for bad in (lr[:3, :, :2, :2], hr[:3], np.repeat(lr[:3], 3, axis=1)):  # smaller, HR-sized, 3 channels
        with pytest.raises(ValueError, match="lr_images must be"):
            model.predict(bad)
    with pytest.raises(ValueError, match="lr_images values"):
        model.predict(lr[:3] * 255)
    with pytest.raises(ValueError, match="seed"):
        model.predict(lr[:3], seed=-1)
    with pytest.raises(ValueError, match="n_samples"):
        model.predict(lr[:3], n_samples=0)


def test_data_prediction_one_step_output_is_the_network_output():
    from neurips26.vision.smfsr.flows import _DataPrediction

    torch.manual_seed(0)
    net = _DataPrediction(IntervalVelocityNet(4, width=16, blocks=1))
    eps, cond = torch.randn(5, 1, 4, 4), torch.randn(5, 1, 2, 2)
    zeros, ones = torch.zeros(5), torch.ones(5)
    torch.testing.assert_close(eps + net(eps, zeros, ones, cond), net.net(eps, zeros, ones, cond))
    t = torch.full((5,), 0.3)
    z = torch.randn(5, 1, 4, 4)  # at b = a: the rectified path's velocity (x_hat - z_t) / (1 - t)
    torch.testing.assert_close(net.velocity(z, t, cond), (net.net(z, t, t, cond) - z) / 0.7)


def _camera_pairs(size: int = 16):
    """The bundled cameraman in [-1, 1], LR = 2x box down: random training patches from the left half, the
    right half cut into tiles for testing."""
    from skimage import data

    img = data.camera().astype(np.float32) / 127.5 - 1

    def lr_of(hr):
        return np.stack([downscale_local_mean(h[0], 2) for h in hr])[:, None].astype(np.float32)

    rng = np.random.default_rng(0)
    ii, jj = rng.integers(0, 512 - size + 1, 1500), rng.integers(0, 256 - size + 1, 1500)
    hr = np.stack([img[i : i + size, j : j + size] for i, j in zip(ii, jj)])[:, None]
    right = img[:, 256:]
    tiles = (
        right.reshape(512 // size, size, 256 // size, size).transpose(0, 2, 1, 3).reshape(-1, 1, size, size)
    )
    return hr, lr_of(hr), tiles, lr_of(tiles)


@pytest.mark.slow
def test_default_flowsr_comes_near_bicubic_on_the_cameraman():
    # a regression guard, not the property the project asks for: the defaults do NOT yet match bicubic on this
    # held-out half of the cameraman. Measured (2026-12-06): bicubic 28.51 dB, one sample 27.19 dB, the mean of
    # 2 / 4 / 8 / 16 samples 27.79 / 28.13 / 28.31 / 28.39 dB. A sample of a posterior sampler scores below the
    # posterior mean by construction (an exact sampler's squared error is twice the posterior variance), so the
    # one-sample gap is expected; the mean of 16 samples stays just below bicubic. Bicubic is nearly the best
    # estimate here: a conv net regressed on the residual with MSE (30 epochs) gains only 0.17 dB over it, and
    # a conv velocity net in FlowSR (20 + 20 epochs) gives 26.95 / 28.41 dB (one / mean of 16), so no sampler's
    # single draw can match bicubic on this image. (The experiment's image-target net is about 20 dB below.)
    from neurips26.vision.smfsr import upsample_condition

    hr, lr, hr_test, lr_test = _camera_pairs()
    model = FlowSR().fit(hr, lr)
    out = model.predict(lr_test)
    mean_16 = model.predict(lr_test, n_samples=16, seed=1).mean(0)
    bicubic = upsample_condition(torch.tensor(lr_test), 16).clamp(-1, 1).numpy()

    def psnr_db(a):
        return 10 * np.log10(4 / np.mean((a - hr_test) ** 2))

    assert psnr_db(out) >= psnr_db(bicubic) - 2.0
    assert psnr_db(mean_16) >= psnr_db(bicubic) - 0.5
    assert psnr_db(mean_16) > psnr_db(out)


@pytest.mark.slow
def test_flowsr_fit_predict_on_digits():
    from sklearn.datasets import load_digits

    X = (load_digits().images[:300] / 8.0 - 1).astype(np.float32)[:, None]
    LR = degrade(X, rng=0)
    model = FlowSR(width=64, blocks=1, teacher_epochs=2, student_epochs=2, gan_epochs=1).fit(X, LR)
    out = model.predict(LR[:5])
    many = model.predict(LR[:5], n_samples=3, seed=1)
    assert out.shape == (5, 1, 8, 8) and many.shape == (3, 5, 1, 8, 8)
    assert np.isfinite(many).all() and many.std(0).mean() > 0  # noise-started: draws differ
    with pytest.raises(ValueError, match="lr_images must be"):
        model.predict(X[:5])  # HR-sized input where LR is expected used to pass silently
    with pytest.raises(ValueError, match="lr_images must be"):
        model.predict(LR[:5, :, :2])


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("smfsr", tmp_path)
