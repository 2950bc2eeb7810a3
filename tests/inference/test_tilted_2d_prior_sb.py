"""Tilted 2D prior vs SB lift: IPF exactness and the I-projection property, exact KL against brute force, the
single-correction-field identity, Monte Carlo TV against quadrature, POT cross-check, bad input, verdict."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from neurips26.harness.testing import assert_quick_verdict
from neurips26.inference.tilted_2d_prior_sb import (
    GaussianTilt,
    ar1_slice_covariance,
    correction_field,
    edm_sigma_schedule,
    gaussian_kl,
    gaussian_sb_lift,
    ipf_ladder,
    ratio_tilt,
    scalar_field_kl,
    scalar_field_kl_mc,
    squared_exponential_pixel_cov,
    tilt_kl,
    tv_mc,
)


def family(n, rho, d=1, var=0.5):
    S = np.eye(1) if d == 1 else squared_exponential_pixel_cov(2, 1.0)
    ref = GaussianTilt.reference(0.0, ar1_slice_covariance(n, rho, S), S.shape[0])
    m = np.repeat(np.sin(np.arange(1, n + 1))[:, None], S.shape[0], 1)
    T = np.broadcast_to(var * np.eye(S.shape[0]), (n, S.shape[0], S.shape[0])).copy()
    return ref, m, T


def brute_kl(m0, C0, m1, C1):
    k = len(m0)
    P1 = np.linalg.inv(C1)
    dm = m1 - m0
    return 0.5 * (np.trace(P1 @ C0) - k + dm @ P1 @ dm + np.linalg.slogdet(C1)[1] - np.linalg.slogdet(C0)[1])


# --- the family ------------------------------------------------------------------------------------------
def test_edm_schedule_matches_karras_formula():
    s = edm_sigma_schedule(5, 0.002, 80.0, 7.0)
    k = np.arange(5) / 4
    np.testing.assert_allclose(s, (80 ** (1 / 7) + k * (0.002 ** (1 / 7) - 80 ** (1 / 7))) ** 7)
    assert s[0] == pytest.approx(80.0) and s[-1] == pytest.approx(0.002) and np.all(np.diff(s) < 0)


def test_reference_covariance_is_ar1_kron():
    S = squared_exponential_pixel_cov(2, 1.0)
    assert (
        S.shape == (4, 4) and S[0, 1] == pytest.approx(np.exp(-0.5)) and S[0, 3] == pytest.approx(np.exp(-1))
    )
    C = ar1_slice_covariance(3, 0.4, S)
    np.testing.assert_allclose(C[4:8, 0:4], 0.4 * S)
    np.testing.assert_allclose(C[8:12, 0:4], 0.16 * S)
    ref = GaussianTilt.reference(0.0, C, 4)
    np.testing.assert_allclose(ref.covariance, C, atol=1e-12)
    np.testing.assert_allclose(ref.mean, 0.0)


# --- the SB lift ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d, rho", [(1, 0.1), (1, 0.8), (4, 0.4)])
def test_ipf_matches_every_slice_marginal(d, rho):
    ref, m, T = family(12, rho, d)
    star, info = gaussian_sb_lift(ref, m, T, tol=1e-12, log=True)
    assert info["converged"] and info["marginal_error"] <= 1e-12
    mm, CC = star.slice_marginals()
    np.testing.assert_allclose(mm, m, atol=1e-12)
    np.testing.assert_allclose(CC, T, atol=1e-12)
    # product form: the precision differs from the reference's only in the diagonal blocks
    off = star.precision - ref.precision
    off[np.kron(np.eye(12), np.ones((d, d))) > 0] = 0
    assert np.abs(off).max() == 0.0


def test_sb_lift_is_the_i_projection_pythagoras():
    # for any Q with the same slice marginals: KL(Q||P0) = KL(Q||P*) + KL(P*||P0) (Csiszar), so P* minimizes
    ref, m, T = family(6, 0.5)
    star = gaussian_sb_lift(ref, m, T)
    rng = np.random.default_rng(0)
    for trial in range(3):
        R = ar1_slice_covariance(6, [0.0, -0.3, 0.7][trial], np.eye(1)) * 0.5  # marginal variances 0.5
        if trial == 2:
            W = rng.normal(size=(6, 6)) * 0.2
            R = R + W @ W.T
            R = 0.5 * R / np.sqrt(np.outer(np.diag(R), np.diag(R)))
        mq = m.ravel()
        lhs = brute_kl(mq, R, ref.mean, ref.covariance)
        rhs = brute_kl(mq, R, star.mean, star.covariance) + brute_kl(
            star.mean, star.covariance, ref.mean, ref.covariance
        )
        assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-10)
        assert lhs >= brute_kl(star.mean, star.covariance, ref.mean, ref.covariance)


def test_sb_lift_agrees_with_pot_sinkhorn_on_a_grid():
    ot = pytest.importorskip("ot")
    ref, m, T = family(2, 0.6)
    star = gaussian_sb_lift(ref, m, T)
    g = np.linspace(-6, 6, 161)
    X = np.stack(np.meshgrid(g, g, indexing="ij"), -1)
    p0 = stats.multivariate_normal(ref.mean, ref.covariance).pdf(X)
    a = stats.norm(m[0, 0], np.sqrt(0.5)).pdf(g)
    b = stats.norm(m[1, 0], np.sqrt(0.5)).pdf(g)
    # entropic OT with cost -log p0 and reg 1: the plan diag(u) P0 diag(v) is the discrete I-projection of P0
    plan = ot.sinkhorn(
        a / a.sum(), b / b.sum(), -np.log(p0 / p0.sum()), reg=1.0, numItermax=3000, stopThr=1e-11
    )
    mean = np.array([plan.sum(1) @ g, plan.sum(0) @ g])
    cross = g @ plan @ g - mean[0] * mean[1]
    np.testing.assert_allclose(mean, star.mean, atol=1e-6)
    assert cross == pytest.approx(star.covariance[0, 1], abs=1e-4)


def test_naive_ratio_tilt_is_the_first_parallel_ipf_step():
    ref, m, T = family(10, 0.3)
    naive = ratio_tilt(ref, m, T, smoothing=0.0)
    first = ipf_ladder(ref, m, T, 1, order="parallel")[0]
    np.testing.assert_allclose(naive.A, first.A, atol=1e-12)
    np.testing.assert_allclose(naive.b, first.b, atol=1e-12)
    # with independent slices the naive tilt is already the lift
    ref0, m0, T0 = family(5, 0.0)
    assert tilt_kl(ratio_tilt(ref0, m0, T0), gaussian_sb_lift(ref0, m0, T0)) < 1e-20


def _tilted_start(n=6, rho=0.4, d=1):
    """A non-reference tilt: the reference after one sequential IPF sweep."""
    ref, m, T = family(n, rho, d=d, var=0.5 if d == 1 else 0.1)  # d = 4: below S's smallest eigenvalue
    return ref, m, T, ipf_ladder(ref, m, T, 1)[0]


def test_ratio_tilt_of_a_tilted_law_needs_an_explicit_choice():
    ref, m, T, tilted = _tilted_start()
    with pytest.raises(ValueError, match="potentials"):
        ratio_tilt(tilted, m, T)
    with pytest.raises(ValueError, match="potentials"):
        ratio_tilt(ref, m, T, potentials="compose")
    # the untilted reference needs no choice, and both choices agree on it
    a, b, c = (
        ratio_tilt(ref, m, T, 0.1),
        ratio_tilt(ref, m, T, 0.1, potentials="add"),
        ratio_tilt(ref, m, T, 0.1, potentials="replace"),
    )
    np.testing.assert_allclose(a.A, b.A, atol=1e-13)
    np.testing.assert_allclose(a.A, c.A, atol=1e-13)
    np.testing.assert_allclose(a.b, b.b, atol=1e-13)


@pytest.mark.parametrize("d", [1, 4])
def test_ratio_tilt_replace_discards_the_potentials(d):
    """'replace': the spec's psi_i = log N(m_i, T_i + s^2) - log N(m0_i, C0_ii + s^2) on the untilted P_0."""
    ref, m, T, tilted = _tilted_start(d=d)
    s = 0.2
    out = ratio_tilt(tilted, m, T, s, potentials="replace")
    n = m.shape[0]
    C0 = np.linalg.inv(ref.ref_precision).reshape(n, d, n, d)
    for i in range(n):
        Pt = np.linalg.inv(T[i] + s**2 * np.eye(d))
        P0 = np.linalg.inv(C0[i, :, i, :] + s**2 * np.eye(d))
        np.testing.assert_allclose(out.A[i], Pt - P0, atol=1e-12)
        np.testing.assert_allclose(out.b[i], Pt @ m[i], atol=1e-12)  # the reference mean is 0
    # the tilt's own potentials are gone: the result is the ratio tilt of P_0
    assert tilt_kl(out, ratio_tilt(ref, m, T, s)) < 1e-20


@pytest.mark.parametrize("d", [1, 4])
def test_ratio_tilt_add_is_one_parallel_ipf_step_from_the_tilt(d):
    ref, m, T, tilted = _tilted_start(d=d)
    out = ratio_tilt(tilted, m, T, 0.0, potentials="add")
    step = ipf_ladder(tilted, m, T, 1, order="parallel")[0]
    np.testing.assert_allclose(out.A, step.A, atol=1e-10)
    np.testing.assert_allclose(out.b, step.b, atol=1e-10)
    # the SB lift already has the target marginals: adding its ratio tilt changes nothing
    star = gaussian_sb_lift(ref, m, T)
    again = ratio_tilt(star, m, T, 0.0, potentials="add")
    np.testing.assert_allclose(again.A, star.A, atol=1e-9)
    np.testing.assert_allclose(again.b, star.b, atol=1e-9)


def test_smoothed_tilt_closed_form_d4():
    ref, m, T = family(3, 0.2, d=4)
    pi = ratio_tilt(ref, m, T, smoothing=0.1)
    S = squared_exponential_pixel_cov(2, 1.0)
    e = 0.01 * np.eye(4)
    np.testing.assert_allclose(pi.A[1], np.linalg.inv(T[1] + e) - np.linalg.inv(S + e), atol=1e-12)
    np.testing.assert_allclose(pi.b[1], np.linalg.inv(T[1] + e) @ m[1], atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(rho=st.floats(0.05, 0.85), n=st.integers(2, 10))
def test_sequential_ladder_decreases_reverse_kl(rho, n):
    ref, m, T = family(n, rho)
    star = gaussian_sb_lift(ref, m, T)
    rev = np.array([tilt_kl(star, t) for t in ipf_ladder(ref, m, T, 8)])
    big = rev > 1e-12
    assert np.all(np.diff(rev[big]) < 0)


# --- divergences and the correction field ------------------------------------------------------------------
def test_gaussian_kl_matches_brute_force_and_1d_formula():
    rng = np.random.default_rng(1)
    for _ in range(5):
        W0, W1 = rng.normal(size=(2, 5, 5))
        C0, C1 = W0 @ W0.T + np.eye(5), W1 @ W1.T + np.eye(5)
        m0, m1 = rng.normal(size=(2, 5))
        assert gaussian_kl(m0, C0, m1, C1) == pytest.approx(brute_kl(m0, C0, m1, C1), rel=1e-10)
    kl = gaussian_kl([0.3], [[2.0]], [1.0], [[0.5]])
    assert kl == pytest.approx(np.log(np.sqrt(0.5) / np.sqrt(2.0)) + (2.0 + 0.49) / (2 * 0.5) - 0.5)
    assert gaussian_kl(m0, C0, m0, C0) == 0.0


@pytest.mark.parametrize("d", [1, 4])
def test_tilt_kl_equals_moment_form_kl_both_directions(d):
    ref, m, T = family(8, 0.3, d)
    star = gaussian_sb_lift(ref, m, T)
    pi = ratio_tilt(ref, m, T, smoothing=0.2)
    fwd = gaussian_kl(pi.mean, pi.covariance, star.mean, star.covariance)
    rev = gaussian_kl(star.mean, star.covariance, pi.mean, pi.covariance)
    assert tilt_kl(pi, star) == pytest.approx(fwd, rel=1e-9)
    assert tilt_kl(star, pi) == pytest.approx(rev, rel=1e-9)
    assert tilt_kl(pi, star) != pytest.approx(tilt_kl(star, pi), rel=1e-6)  # the directions differ


def test_small_kl_is_accurate_where_naive_formula_cancels():
    ref, m, T = family(16, 1e-4)
    star = gaussian_sb_lift(ref, m, T)
    pi = ratio_tilt(ref, m, T, smoothing=1e-4)
    kl = tilt_kl(pi, star)
    assert 0 < kl < 1e-6
    assert kl == pytest.approx(gaussian_kl(pi.mean, pi.covariance, star.mean, star.covariance), rel=1e-5)
    # the asymptotic constant KL / (N sigma^2) stays in the range the experiment's grid shows
    assert 0.05 < kl / (16 * 1e-8) < 0.3


def test_correction_field_is_log_density_ratio():
    ref, m, T = family(5, 0.3)
    star = gaussian_sb_lift(ref, m, T)
    pi = ratio_tilt(ref, m, T, smoothing=0.3)
    delta = correction_field(pi, star)
    X = star.sample(7, random_state=0)
    np.testing.assert_allclose(delta(X), pi.potential(X) - star.potential(X), atol=1e-12)
    log_ratio = stats.multivariate_normal(pi.mean, pi.covariance).logpdf(X) - stats.multivariate_normal(
        star.mean, star.covariance
    ).logpdf(X)
    terms = scalar_field_kl(pi, star)
    np.testing.assert_allclose(log_ratio, delta(X) - terms["log_E_star_exp_delta"], atol=1e-9)


@settings(max_examples=20, deadline=None)
@given(rho=st.floats(0.0, 0.7), sigma=st.floats(0.0, 0.5), n=st.integers(1, 12))
def test_scalar_field_identity_closed_form(rho, sigma, n):
    ref, m, T = family(n, rho)
    star = gaussian_sb_lift(ref, m, T)
    pi = ratio_tilt(ref, m, T, smoothing=sigma)
    kl = tilt_kl(pi, star)
    assert kl >= 0
    assert scalar_field_kl(pi, star)["kl"] == pytest.approx(kl, rel=1e-6, abs=1e-11)


def test_scalar_field_identity_monte_carlo():
    ref, m, T = family(16, 0.1)
    star = gaussian_sb_lift(ref, m, T)
    pi = ratio_tilt(ref, m, T, smoothing=0.1)
    kl = tilt_kl(pi, star)
    assert scalar_field_kl_mc(pi, star, 50_000, random_state=0) == pytest.approx(kl, rel=0.03)
    # independent sampling is unbiased but far noisier at small KL; on a large KL it is still close
    pi_far = ratio_tilt(ref, m, T, smoothing=1.0)
    kl_far = tilt_kl(pi_far, star)
    assert scalar_field_kl_mc(pi_far, star, 50_000, coupled=False, random_state=1) == pytest.approx(
        kl_far, rel=0.1
    )


def test_tv_monte_carlo_matches_quadrature():
    # one slice: P* is the target itself, Pi is the smoothed ratio tilt; both 1-D Gaussians
    ref, m, T = family(1, 0.0)
    star = gaussian_sb_lift(ref, m, T)
    pi = ratio_tilt(ref, m, T, smoothing=0.5)
    f = stats.norm(pi.mean[0], np.sqrt(pi.covariance[0, 0])).pdf
    g = stats.norm(star.mean[0], np.sqrt(star.covariance[0, 0])).pdf
    tv = 0.5 * integrate.quad(lambda x: abs(f(x) - g(x)), -12, 12, limit=200)[0]
    assert tv_mc(pi, star, 200_000, random_state=0) == pytest.approx(tv, rel=0.02)
    assert tv <= np.sqrt(tilt_kl(pi, star) / 2)


# --- bad input -----------------------------------------------------------------------------------------------
def test_bad_inputs_raise_named_errors():
    ref, m, T = family(4, 0.3)
    star = gaussian_sb_lift(ref, m, T)
    with pytest.raises(ValueError, match="n_levels"):
        edm_sigma_schedule(1)
    with pytest.raises(ValueError, match="sigma_min"):
        edm_sigma_schedule(5, sigma_min=1.0, sigma_max=0.5)
    with pytest.raises(ValueError, match="lengthscale"):
        squared_exponential_pixel_cov(2, -1.0)
    with pytest.raises(ValueError, match="rho"):
        ar1_slice_covariance(4, 1.0, np.eye(1))
    with pytest.raises(TypeError, match="rho"):
        ar1_slice_covariance(4, "0.3", np.eye(1))
    with pytest.raises(ValueError, match="slice_cov"):
        ar1_slice_covariance(4, 0.3, -np.eye(2))
    with pytest.raises(ValueError, match="ref_cov"):
        GaussianTilt.reference(0.0, np.array([[1.0, 2.0], [2.0, 1.0]]), 1)
    with pytest.raises(ValueError, match="slice_dim"):
        GaussianTilt.reference(0.0, np.eye(3), 2)
    with pytest.raises(ValueError, match="normalizable"):
        ref.with_potentials(np.full((4, 1, 1), -5.0), np.zeros((4, 1)))
    one_bad = np.zeros((4, 1, 1))
    one_bad[2] = -50.0
    with pytest.raises(ValueError, match=r"A\[2\]"):  # the error names the slice to weaken
        ref.with_potentials(one_bad, np.zeros((4, 1)))
    with pytest.raises(ValueError, match="target_means"):
        gaussian_sb_lift(ref, m[:3], T)
    with pytest.raises(ValueError, match="target_means"):
        gaussian_sb_lift(ref, np.full_like(m, np.nan), T)
    with pytest.raises(ValueError, match="target_covs"):
        gaussian_sb_lift(ref, m, -T)
    with pytest.raises(ValueError, match="tol"):
        gaussian_sb_lift(ref, m, T, tol=0.0)
    with pytest.raises(ValueError, match="order"):
        gaussian_sb_lift(ref, m, T, order="random")
    with pytest.raises(TypeError, match="reference"):
        gaussian_sb_lift(np.eye(4), m, T)
    with pytest.raises(ValueError, match="n_sweeps"):
        ipf_ladder(ref, m, T, 0)
    with pytest.raises(ValueError, match="smoothing"):
        ratio_tilt(ref, m, T, smoothing=-0.1)
    with pytest.raises(ValueError, match="cov1"):
        gaussian_kl([0.0], [[1.0]], [0.0], [[-1.0]])
    with pytest.raises(ValueError, match="mean0"):
        gaussian_kl([np.inf], [[1.0]], [0.0], [[1.0]])
    other, mo, To = family(5, 0.3)
    with pytest.raises(ValueError, match="same reference"):
        tilt_kl(star, gaussian_sb_lift(other, mo, To))
    with pytest.raises(TypeError, match="lift"):
        correction_field(star, "P*")
    with pytest.raises(ValueError, match="n_samples"):
        scalar_field_kl_mc(star, star, 1)
    with pytest.raises(ValueError, match="batch_size"):
        tv_mc(star, star, 10, batch_size=0)
    with pytest.raises(ValueError, match="X"):
        star.potential(np.zeros((3, 5)))


def test_failed_iteration_of_parallel_ipf_reports_non_normalizable():
    ref, m, T = family(32, 0.8)
    with pytest.raises(ValueError, match="normalizable"):
        ipf_ladder(ref, m, T, 10, order="parallel")
    with pytest.raises(ValueError, match="normalizable"):
        gaussian_sb_lift(ref, m, T, order="parallel")
    assert len(ipf_ladder(ref, m, T, 10, order="sequential")) == 10
    # the parallel cycle does converge when the slices are weakly coupled
    ref, m, T = family(16, 0.2)
    lift, info = gaussian_sb_lift(ref, m, T, order="parallel", log=True)
    assert info["converged"] and tilt_kl(lift, gaussian_sb_lift(ref, m, T)) < 1e-18


def test_ladder_gate_counts_increases_above_the_floor():
    from neurips26.inference.tilted_2d_prior_sb.experiment import _monotone_violations

    assert _monotone_violations(np.array([1.0, 0.5, 0.6, 0.1, 1e-12, 3e-12])) == 1
    assert _monotone_violations(np.array([1.0, 0.1, 1e-11, 2e-11, 1e-20])) == 0


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    result = assert_quick_verdict("tilted-2d-prior-sb", tmp_path)
    assert result["verdict"] == "reproduced"
