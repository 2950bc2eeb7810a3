"""convMMD: the unbiased weighted MMD, zero-noise reduction, the sieves, the EB posterior means, bad input."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import multivariate_normal
from sklearn.exceptions import NotFittedError

from neurips26.harness.testing import assert_quick_verdict
from neurips26.inference import ConvMMDDeconvolver
from neurips26.inference.convmmd_deconv import (
    grid_posterior_mean,
    mmd2_unbiased,
    multiscale_bandwidths,
    npmle_grid,
)
from neurips26.inference.convmmd_deconv.flows import AffineCoupling, ElementwiseRQSpline, SplineFlow
from neurips26.inference.convmmd_deconv.noise import sample_noise


def _kernel(a, b, kernel, bws):
    if kernel == "laplace":
        return np.mean([np.exp(-np.abs(a - b).sum() / s) for s in bws])
    return np.mean([np.exp(-((a - b) ** 2).sum() / (2 * s**2)) for s in bws])


def _brute_mmd2(X, Y, kernel, bws, pi=None, groups=None):
    n, m = len(X), len(Y)
    if pi is None:
        pi, groups = np.ones(1), np.zeros(m, int)
    counts = np.bincount(groups, minlength=len(pi))
    xx = sum(_kernel(X[i], X[j], kernel, bws) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    yy = 0.0
    for i in range(m):
        for j in range(m):
            if i == j:
                continue
            a, b = groups[i], groups[j]
            w = (
                pi[a] * pi[b] / (counts[a] * (counts[a] - 1))
                if a == b
                else pi[a] * pi[b] / (counts[a] * counts[b])
            )
            yy += w * _kernel(Y[i], Y[j], kernel, bws)
    xy = (
        sum(
            pi[groups[j]] / counts[groups[j]] * _kernel(X[i], Y[j], kernel, bws)
            for i in range(n)
            for j in range(m)
        )
        / n
    )
    return xx + yy - 2 * xy


@pytest.mark.parametrize("kernel", ["laplace", "gaussian"])
@pytest.mark.parametrize("weighted", [False, True])
def test_mmd_matches_brute_force(kernel, weighted):
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(7, 2)), rng.normal(0.5, 1.2, size=(9, 2))
    bws = [0.3, 1.0, 2.5]
    if weighted:
        pi, groups = np.array([0.2, 0.5, 0.3]), np.array([0, 0, 1, 1, 1, 2, 2, 2, 2])
        got = mmd2_unbiased(X, Y, kernel=kernel, bandwidths=bws, group_weights=pi, groups=groups)
        want = _brute_mmd2(X, Y, kernel, bws, pi, groups)
    else:
        got = mmd2_unbiased(X, Y, kernel=kernel, bandwidths=bws)
        want = _brute_mmd2(X, Y, kernel, bws)
    assert isinstance(got, float)
    assert got == pytest.approx(want, rel=1e-10, abs=1e-12)


def _gauss_mix_mmd2(pi_p, mu_p, s_p, pi_q, mu_q, s_q, h):
    """Population MMD^2 between two 1-D Gaussian mixtures under the Gaussian kernel of bandwidth h."""

    def e(pa, ma, sa, pb, mb, sb):
        v = h**2 + sa[:, None] ** 2 + sb[None] ** 2
        return (
            pa[:, None] * pb[None] * h / np.sqrt(v) * np.exp(-((ma[:, None] - mb[None]) ** 2) / (2 * v))
        ).sum()

    return (
        e(pi_p, mu_p, s_p, pi_p, mu_p, s_p)
        + e(pi_q, mu_q, s_q, pi_q, mu_q, s_q)
        - 2 * e(pi_p, mu_p, s_p, pi_q, mu_q, s_q)
    )


def test_weighted_mmd_is_unbiased_and_the_naive_weighting_is_not():
    """Mean of the estimator over many replicates equals the closed-form population MMD^2."""
    rng = np.random.default_rng(1)
    h = 0.7
    pi_p, mu_p, s_p = np.array([1.0]), np.array([0.0]), np.array([1.0])
    pi_q, mu_q, s_q = np.array([0.3, 0.7]), np.array([-1.0, 1.5]), np.array([0.4, 0.6])
    truth = _gauss_mix_mmd2(pi_p, mu_p, s_p, pi_q, mu_q, s_q, h)
    reps, n, m = 1500, 4, 3
    X = torch.as_tensor(rng.normal(size=(reps, n, 1)))
    eps = rng.normal(size=(reps, 2, m))
    Y = torch.as_tensor((mu_q[None, :, None] + s_q[None, :, None] * eps).reshape(reps, 2 * m, 1))
    groups = torch.arange(2).repeat_interleave(m)
    est, naive = np.empty(reps), np.empty(reps)
    for r in range(reps):
        est[r] = float(
            mmd2_unbiased(
                X[r],
                Y[r],
                kernel="gaussian",
                bandwidths=h,
                group_weights=torch.as_tensor(pi_q),
                groups=groups,
            )
        )
        # naive weighting w_i w_j on every off-diagonal pair (no m / (m - 1) correction)
        w = pi_q[groups.numpy()] / m
        K = np.exp(-((Y[r].numpy() - Y[r].numpy().T) ** 2) / (2 * h**2))
        Kx = np.exp(-((X[r].numpy() - X[r].numpy().T) ** 2) / (2 * h**2))
        Kxy = np.exp(-((X[r].numpy() - Y[r].numpy().T) ** 2) / (2 * h**2))
        W = np.outer(w, w)
        np.fill_diagonal(W, 0)
        naive[r] = (Kx.sum() - n) / (n * (n - 1)) + (W * K).sum() - 2 * (Kxy * w).sum() / n
    se = est.std() / np.sqrt(reps)
    assert abs(est.mean() - truth) < 4 * se
    assert abs(naive.mean() - truth) > 8 * se  # the correction matters: the test can fail
    assert (est < 0).any()  # the unbiased estimate can be negative


def test_multiscale_bandwidths_formula():
    rng = np.random.default_rng(2)
    A = rng.normal(size=(50, 3))
    d = np.sqrt(((A[:, None] - A[None]) ** 2).sum(-1))[np.triu_indices(50, 1)]
    want = np.quantile(d, np.linspace(0.1, 0.9, 5)) / (np.log10(100) * np.sqrt(3))
    np.testing.assert_allclose(multiscale_bandwidths(A, 5), want)


@pytest.mark.parametrize("family", ["gaussian", "laplace"])
def test_noise_has_the_stated_sd_and_zero_sd_gives_zero(family):
    gen = torch.Generator().manual_seed(0)
    sd = torch.full((200_000, 1), 0.7, dtype=torch.float64)
    eps = sample_noise(sd, family, gen)
    assert float(eps.std()) == pytest.approx(0.7, rel=0.01)
    assert torch.equal(
        sample_noise(torch.zeros(5, 2, dtype=torch.float64), family, gen),
        torch.zeros(5, 2, dtype=torch.float64),
    )


def _two_gaussians(n, rng):
    c = rng.random(n) < 0.5
    return np.where(c, rng.normal(-2, 0.5, n), rng.normal(2, 0.5, n))


def test_zero_noise_is_plain_mmd_fitting_and_known_noise_deconvolves():
    rng = np.random.default_rng(3)
    Z = _two_gaussians(2000, rng)
    kw = dict(n_components=4, n_steps=150, batch_size=256, samples_per_component=16, random_state=0)
    clean = ConvMMDDeconvolver(**kw).fit(Z, 0.0)  # zero noise: plain MMD fit of a clean sample
    grid = np.linspace(-5, 5, 1001)
    true = 0.5 * multivariate_normal(-2, 0.25).pdf(grid) + 0.5 * multivariate_normal(2, 0.25).pdf(grid)
    assert np.trapezoid((clean.density(grid) - true) ** 2, grid) < 0.01
    X = Z + rng.normal(0, 1.0, Z.shape)
    plain = ConvMMDDeconvolver(**kw).fit(X, 0.0)  # ignores the noise: fits the law of X
    deconv = ConvMMDDeconvolver(**kw).fit(X, 1.0)
    v_plain, v_deconv = plain.sample(20000, 0).var(), deconv.sample(20000, 0).var()
    assert v_plain == pytest.approx(X.var(), rel=0.1)
    assert v_deconv == pytest.approx(Z.var(), rel=0.1)


@pytest.fixture(scope="module")
def fitted_2d():
    rng = np.random.default_rng(4)
    Z = np.r_[rng.normal([-2, 0], 0.5, (600, 2)), rng.normal([2, 1], 0.7, (600, 2))]
    X = Z + rng.normal(0, 0.5, Z.shape)
    return ConvMMDDeconvolver(n_components=3, n_steps=60, batch_size=256, random_state=0).fit(X, 0.5), X


def test_gmm_density_sampling_and_logpdf(fitted_2d):
    est, _ = fitted_2d
    Z = est.sample(5, random_state=0)
    want = sum(
        w * multivariate_normal(m, c).pdf(Z)
        for w, m, c in zip(est.weights_, est.means_, est.covariances_, strict=True)
    )
    np.testing.assert_allclose(est.density(Z), want, rtol=1e-10)
    assert est.sample(1000, random_state=1).shape == (1000, 2)
    np.testing.assert_array_equal(est.sample(3, 7), est.sample(3, 7))


def test_closed_form_posterior_mean_matches_importance_sampling(fitted_2d):
    est, X = fitted_2d
    x, sd = X[:20], np.full((20, 2), 0.5)
    exact = est._gmm_gaussian_posterior_mean(x, sd)
    mc = est._importance_posterior_mean(x, sd, 40000, np.random.RandomState(0))
    np.testing.assert_allclose(mc, exact, atol=0.03)


def test_closed_form_posterior_mean_matches_quadrature_1d():
    rng = np.random.default_rng(5)
    X = _two_gaussians(1500, rng) + rng.normal(0, 0.8, 1500)
    est = ConvMMDDeconvolver(n_components=3, n_steps=40, batch_size=256, random_state=0).fit(X, 0.8)
    sd = rng.uniform(0.5, 1.0, 50)
    grid = np.linspace(-10, 10, 8001)
    quad = grid_posterior_mean(X[:50], sd, "gaussian", grid, est.density(grid))
    np.testing.assert_allclose(est.denoise(X[:50], sd)[:, 0], quad, atol=1e-6)


def test_grid_posterior_mean_normal_normal_closed_form():
    grid = np.linspace(-10, 10, 4001)
    prior = multivariate_normal(0, 1).pdf(grid)
    x, sd = np.array([-2.0, 0.3, 1.7]), np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(
        grid_posterior_mean(x, sd, "gaussian", grid, prior), x / (1 + sd**2), atol=1e-8
    )


def test_npmle_raises_likelihood_and_recovers_two_atoms():
    rng = np.random.default_rng(6)
    Z = np.where(rng.random(3000) < 0.3, -2.0, 2.0)
    sd = rng.uniform(0.5, 1.0, 3000)
    X = Z + sd * rng.normal(size=3000)
    grid = np.linspace(-4, 4, 81)
    p = npmle_grid(X, sd, "gaussian", grid)
    assert p.sum() == pytest.approx(1.0)
    assert p[grid < 0].sum() == pytest.approx(0.3, abs=0.03)
    L = np.exp(-0.5 * ((X[:, None] - grid[None]) / sd[:, None]) ** 2) / sd[:, None]
    assert np.log(L @ p).sum() > np.log(L @ np.full(81, 1 / 81)).sum()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.1, 3.0))
def test_spline_and_coupling_invert_with_consistent_logdet(seed, scale):
    torch.manual_seed(seed)
    spline = ElementwiseRQSpline(2, 8, tail_bound=3.0)
    coupling = AffineCoupling(2, 8, parity=0)
    with torch.no_grad():
        for p in list(spline.parameters()) + list(coupling.parameters()):
            p.normal_(0, scale)
    x = torch.randn(64, 2, dtype=torch.float64) * 2
    for layer in (spline, coupling):
        y, ld = layer(x)
        x_back, ld_inv = layer.inverse(y)
        np.testing.assert_allclose(x_back.detach().numpy(), x.numpy(), atol=1e-7)
        np.testing.assert_allclose(ld_inv.numpy(), -ld.detach().numpy(), atol=1e-6)
    # element-wise spline log-derivative against autograd
    xr = x.clone().requires_grad_(True)
    y, ld = spline(xr)
    grads = (
        torch.autograd.grad(y[:, 0].sum(), xr, retain_graph=True)[0][:, 0]
        * torch.autograd.grad(y[:, 1].sum(), xr)[0][:, 1]
    )
    np.testing.assert_allclose(ld.detach().numpy(), torch.log(grads).numpy(), atol=1e-8)


def test_flow_density_integrates_to_one_and_flow_fit_runs():
    torch.manual_seed(0)
    flow = SplineFlow(1, torch.zeros(1), torch.ones(1), n_blocks=2, n_bins=6)
    with torch.no_grad():
        for p in flow.parameters():
            p.add_(0.5 * torch.randn_like(p))
    grid = torch.linspace(-15, 15, 6001, dtype=torch.float64)[:, None]
    mass = np.trapezoid(np.exp(flow.log_prob(grid).numpy()), grid[:, 0].numpy())
    assert mass == pytest.approx(1.0, abs=1e-3)
    rng = np.random.default_rng(7)
    X = _two_gaussians(800, rng) + rng.laplace(0, 0.5, 800)
    est = ConvMMDDeconvolver(
        "flow", noise="laplace", n_steps=20, batch_size=128, n_model_samples=128, random_state=0
    ).fit(X, 0.7)
    assert est.sample(10, 0).shape == (10, 1)
    assert np.isfinite(est.denoise(X[:5], 0.7)).all()


# --- bad input ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"model": "vae"}, "model"),
        ({"noise": "cauchy"}, "noise"),
        ({"kernel": "rbf"}, "kernel"),
        ({"n_components": 0}, "n_components"),
        ({"batch_size": 1}, "batch_size"),
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"warmup_fraction": 1.0}, "warmup_fraction"),
        ({"min_scale": 0.0}, "min_scale"),
        ({"n_steps": 2.5}, "n_steps"),
        ({"samples_per_component": 1}, "samples_per_component"),
    ],
)
def test_bad_parameters_raise(kwargs, param):
    with pytest.raises(ValueError, match=param):
        ConvMMDDeconvolver(**kwargs).fit(np.arange(10.0), 0.1)


def test_bad_fit_inputs_raise():
    est = ConvMMDDeconvolver(n_steps=2)
    with pytest.raises(ValueError, match="X"):
        est.fit(np.array([0.0, np.nan, 1.0]), 0.1)
    with pytest.raises(ValueError, match="X"):
        est.fit(np.empty((0, 1)), 0.1)
    with pytest.raises(ValueError, match="noise_sd"):
        est.fit(np.arange(5.0), -0.1)
    with pytest.raises(ValueError, match="noise_sd"):
        est.fit(np.arange(5.0), np.ones(3))


def test_bad_method_inputs_raise(fitted_2d):
    est, X = fitted_2d
    with pytest.raises(NotFittedError):
        ConvMMDDeconvolver().sample(3)
    with pytest.raises(ValueError, match="n_samples"):
        est.sample(0)
    with pytest.raises(ValueError, match="Z"):
        est.density(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="noise_sd"):
        est.denoise(X[:3], 0.0)
    with pytest.raises(ValueError, match="n_draws"):
        est.denoise(X[:3], 0.5, n_draws=1)


def test_bad_function_inputs_raise():
    X = np.zeros((4, 1))
    with pytest.raises(ValueError, match="kernel"):
        mmd2_unbiased(X, X, kernel="rbf")
    with pytest.raises(ValueError, match="bandwidths"):
        mmd2_unbiased(X, X, bandwidths=[-1.0])
    with pytest.raises(ValueError, match="group_weights"):
        mmd2_unbiased(X, X, group_weights=[0.5, 0.6], groups=[0, 0, 1, 1])
    with pytest.raises(ValueError, match="groups"):
        mmd2_unbiased(X, X, group_weights=[0.5, 0.5], groups=[0, 0, 0, 1])
    with pytest.raises(ValueError, match="X"):
        mmd2_unbiased(np.zeros((1, 1)), X)
    with pytest.raises(ValueError, match="n_bandwidths"):
        multiscale_bandwidths(np.random.default_rng(0).normal(size=(5, 1)), 0)
    with pytest.raises(ValueError, match="noise_sd"):
        npmle_grid(np.ones(3), 0.0, "gaussian", np.linspace(0, 1, 5))
    with pytest.raises(ValueError, match="prior"):
        grid_posterior_mean(np.ones(3), 1.0, "gaussian", np.linspace(0, 1, 5), -np.ones(5))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_mmd_is_invariant_to_joint_row_permutation(seed):
    rng = np.random.default_rng(seed)
    X, Y = rng.normal(size=(6, 2)), rng.normal(size=(8, 2))
    pi, groups = np.array([0.25, 0.75]), np.repeat([0, 1], 4)
    perm = rng.permutation(8)
    a = mmd2_unbiased(X, Y, group_weights=pi, groups=groups, bandwidths=[0.5, 1.0])
    b = mmd2_unbiased(X[::-1], Y[perm], group_weights=pi, groups=groups[perm], bandwidths=[0.5, 1.0])
    assert a == pytest.approx(b, abs=1e-12)
    # one group with weight 1 is the ordinary U-statistic
    c = mmd2_unbiased(X, Y, group_weights=[1.0], groups=np.zeros(8, int), bandwidths=[0.5, 1.0])
    assert c == pytest.approx(mmd2_unbiased(X, Y, bandwidths=[0.5, 1.0]), abs=1e-12)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("convmmd-deconv", tmp_path)
