"""BIP identity provisioning: exact collision counting, impostor thresholds, the allocator's hard guarantees
(checked exhaustively in float64), incremental enrolment, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.harness.testing import assert_quick_verdict
from neurips26.representation import provision_identities
from neurips26.representation.bip_gapgen import (
    IdentityProvisioner,
    count_collisions,
    density_realisability,
    impostor_threshold,
    knn_cosines,
    real_subspace,
    realisability,
    synthetic_gallery,
    uniform_sphere,
)


@pytest.fixture(scope="module")
def gallery():
    return synthetic_gallery(1500, 32, signal_dim=14, alpha=0.6, noise=0.02, random_state=0)


def brute_max(A, B):
    return (A @ B.T).max() if len(A) and len(B) else -np.inf


def brute_count(A, B, t):
    return int(np.count_nonzero(A @ B.T >= t))


def brute_count_self(A, t):
    G = A @ A.T
    return int(np.count_nonzero(np.triu(G >= t, k=1)))


# --- geometry ----------------------------------------------------------------------------------------------
def test_impostor_threshold_equals_numpy_quantile(gallery):
    R = gallery[:700]
    G = R @ R.T
    brute = np.quantile(G[np.triu_indices(len(R), 1)], 1 - 1e-3)
    assert impostor_threshold(R, 1e-3) == pytest.approx(brute, abs=1e-6)


def test_impostor_threshold_small_tiles_and_ann_agree_with_numpy(gallery):
    R = gallery[:900]
    G = R @ R.T
    pairs = G[np.triu_indices(len(R), 1)]
    for far in (1e-2, 1e-3, 1e-4):
        brute = np.quantile(pairs, 1 - far)
        # tiles of a few rows each: the running top list must still be exact
        assert impostor_threshold(R, far, max_block_bytes=4 * 900 * 8 * 3) == pytest.approx(brute, abs=1e-6)
    pytest.importorskip("faiss")
    for far in (1e-2, 1e-3):
        brute = np.quantile(pairs, 1 - far)
        assert impostor_threshold(R, far, method="ann") == pytest.approx(brute, abs=1e-4)


def test_impostor_threshold_large_gallery_uses_exact_pairs(gallery):
    R = gallery[:1000]  # > 200k pairs: the sampled lower bound path
    G = R @ R.T
    brute = np.quantile(G[np.triu_indices(len(R), 1)], 1 - 1e-4)
    assert impostor_threshold(R, 1e-4) == pytest.approx(brute, abs=1e-6)


@pytest.mark.parametrize("use_basis", [False, True])
def test_count_collisions_matches_brute_force(gallery, use_basis):
    rng = np.random.default_rng(1)
    sub = real_subspace(gallery, 0.9)
    A = gallery[:400]
    B = gallery[400:900]
    basis = sub.basis if use_basis else None
    for t in (0.2, 0.4, 0.6):
        assert count_collisions(A, B, t, basis=basis, block=97) == brute_count(A, B, t)
        assert count_collisions(A, None, t, basis=basis, block=97) == brute_count_self(A, t)
    # ties at the threshold count as collisions
    X = rng.standard_normal((5, 8))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    assert count_collisions(X, X, 1.0 - 1e-12) == 5


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), t=st.floats(-0.5, 0.9), n=st.integers(1, 60))
def test_count_collisions_property(seed, t, n):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 6))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    assert count_collisions(X, None, t, block=7) == brute_count_self(X, t)


def test_real_subspace_and_realisability(gallery):
    sub = real_subspace(gallery, 0.95)
    P = sub.basis
    np.testing.assert_allclose(P.T @ P, np.eye(sub.dim), atol=1e-10)
    assert sub.explained >= 0.95
    assert 1 <= sub.effective_rank <= gallery.shape[1]
    r = realisability(gallery, P)
    assert np.mean(r) == pytest.approx(sub.explained, rel=1e-9)  # energy kept = mean in-subspace energy
    u = realisability(uniform_sphere(4000, 32, random_state=0), P)
    assert np.mean(u) == pytest.approx(sub.dim / 32, abs=0.02)  # uniform directions: q / d on average


def test_knn_cosines_match_brute_force(gallery):
    X, G = gallery[:50], gallery[100:400]
    S = X @ G.T
    for k in (1, 3, 10):
        want = np.sort(S, axis=1)[:, -k]
        np.testing.assert_allclose(knn_cosines(X, G, k, block=7), want, atol=1e-6)


def test_density_realisability_scores_reals_one_and_can_fail_inside_the_subspace(gallery):
    R, H = gallery[:1000], gallery[1000:1400]
    sub = real_subspace(R, 0.95)
    P = sub.basis
    # held-out reals against themselves: exactly the coverage share inside, relative score 1
    assert density_realisability(H, H, R, k=5) == pytest.approx(1.0)
    # a fresh draw of reals scores about 1, directions uniform on the sphere about 0
    more = synthetic_gallery(1500, 32, signal_dim=14, alpha=0.6, noise=0.02, random_state=0)[1400:]
    assert density_realisability(more, H, R, k=5) > 0.8
    assert density_realisability(uniform_sphere(400, 32, random_state=1), H, R, k=5) < 0.2
    # points exactly in span(P) but in its least-populated direction: subspace energy 1, density score ~0
    rng = np.random.default_rng(0)
    corner = P[:, -1][None, :] + 0.05 * rng.standard_normal((300, sub.dim)) @ P.T
    corner /= np.linalg.norm(corner, axis=1, keepdims=True)
    np.testing.assert_allclose(realisability(corner, P), 1.0, atol=1e-9)
    assert density_realisability(corner, H, R, k=5) < 0.2
    # an independent oracle of the score: brute-force k-th cosines and the held-out quantile
    S_h, S_x = np.sort(H @ R.T, axis=1)[:, -5], np.sort(more @ R.T, axis=1)[:, -5]
    cut = np.quantile(S_h, 0.05)
    assert density_realisability(more, H, R, k=5) == pytest.approx(
        np.mean(S_x >= cut) / np.mean(S_h >= cut), abs=0.01
    )


# --- the allocator ----------------------------------------------------------------------------------------
def test_provision_has_zero_collisions_exhaustive(gallery):
    R = gallery[:1200]
    tau = impostor_threshold(R, 1e-3)
    est = IdentityProvisioner(0.02, tau_c=tau, variance_kept=0.95, batch_size=256, random_state=0).fit(R)
    V = est.provision(1500)
    assert V.shape == (1500, 32)
    np.testing.assert_allclose(np.linalg.norm(V, axis=1), 1.0, atol=1e-12)
    assert brute_max(V, R) < tau - 0.02
    G = V @ V.T
    np.fill_diagonal(G, -1)
    assert G.max() < tau
    # virtuals live in the real subspace (lambda -> inf limit)
    np.testing.assert_allclose(realisability(V, est.basis_), 1.0, atol=1e-9)
    # naive sampling from the same model collides with the gallery at this count
    naive = est.sample_naive(1500, random_state=0)
    assert brute_count(naive, R, tau) > 0


def test_incremental_enrolment_and_existing(gallery):
    R, later = gallery[:800], gallery[800:1000]
    tau = impostor_threshold(R, 1e-3)
    est = IdentityProvisioner(0.03, tau_c=tau, variance_kept=0.95, batch_size=200, random_state=1).fit(R)
    V1 = est.provision(400)
    est.enroll(later)
    assert est.n_gallery_ == 1000
    V2 = est.provision(400)
    assert est.identities_.shape == (800, 32)
    assert brute_max(V2, later) < tau - 0.03  # later batches respect the newly enrolled reals
    allv = est.identities_
    G = allv @ allv.T
    np.fill_diagonal(G, -1)
    assert G.max() < tau and brute_max(allv, R) < tau - 0.03
    # the functional form with ``existing``
    V3 = provision_identities(R, 300, 0.03, existing=allv, tau_c=tau, variance_kept=0.95, random_state=2)
    assert brute_max(V3, allv) < tau and brute_max(V3, R) < tau - 0.03
    G3 = V3 @ V3.T
    np.fill_diagonal(G3, -1)
    assert G3.max() < tau
    assert V1.shape == (400, 32)


def test_rejection_mode_and_budget(gallery):
    R = gallery[:800]
    tau = impostor_threshold(R, 1e-3)
    rej = IdentityProvisioner(0.02, tau_c=tau, variance_kept=0.95, n_steps=0, random_state=0).fit(R)
    V = rej.provision(10**6, max_candidates=500)
    assert len(V) <= 500 and rej.history_[-1].n_candidates == 500
    assert brute_max(V, R) < tau - 0.02


def test_ann_threshold_in_the_estimator(gallery):
    pytest.importorskip("faiss")
    R = gallery[:800]
    exact = IdentityProvisioner(0.02, far=1e-3).fit(R)
    ann = IdentityProvisioner(0.02, far=1e-3, threshold_method="ann").fit(R)
    assert ann.tau_c_ == pytest.approx(exact.tau_c_, abs=1e-4)
    V = ann.provision(100)
    assert brute_max(V, R) < ann.tau_c_ - 0.02


def test_deterministic_given_seed(gallery):
    R = gallery[:600]
    a = provision_identities(R, 200, 0.02, far=1e-3, random_state=5, batch_size=128)
    b = provision_identities(R, 200, 0.02, far=1e-3, random_state=5, batch_size=128)
    np.testing.assert_array_equal(a, b)


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 1000), margin=st.floats(0.005, 0.04))
def test_no_collisions_property(gallery, seed, margin):
    R = gallery[:400]
    tau = impostor_threshold(R, 1e-3)
    V = provision_identities(R, 100, margin, tau_c=tau, random_state=seed, batch_size=64, variance_kept=0.95)
    assert brute_max(V, R) < tau - margin
    G = V @ V.T
    np.fill_diagonal(G, -1)
    assert G.max() < tau


# --- bad input -----------------------------------------------------------------------------------------------
def test_bad_input_provision(gallery):
    R = gallery[:300]
    with pytest.raises(ValueError, match="unit"):
        provision_identities(R * 1.1, 10, 0.02)
    bad = R.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        provision_identities(bad, 10, 0.02)
    for m in (0.0, 2.0, -0.1, 3.0, float("nan")):
        with pytest.raises(ValueError, match="margin"):
            provision_identities(R, 10, m)
    with pytest.raises(ValueError, match="n_new"):
        provision_identities(R, -1, 0.02)
    with pytest.raises(ValueError, match="far"):
        provision_identities(R, 10, 0.02, far=1.5)
    with pytest.raises(ValueError, match="gallery"):
        provision_identities(R[0], 10, 0.02)
    with pytest.raises(ValueError, match="existing"):
        provision_identities(R, 10, 0.02, existing=np.ones((2, 5)) / np.sqrt(5))
    with pytest.raises(ValueError, match="batch_size"):
        provision_identities(R, 10, 0.02, batch_size=0)
    with pytest.raises(ValueError, match="threshold_method"):
        provision_identities(R, 10, 0.02, threshold_method="lsh")
    with pytest.raises(TypeError, match="gallery"):
        provision_identities("faces", 10, 0.02)


def test_bad_input_estimator_and_helpers(gallery):
    R = gallery[:300]
    est = IdentityProvisioner(0.02, far=1e-2).fit(R)
    with pytest.raises(ValueError, match="reals"):
        est.enroll(np.ones((2, 7)) / np.sqrt(7))
    with pytest.raises(ValueError, match="max_candidates"):
        est.provision(5, max_candidates=0)
    with pytest.raises(ValueError, match="n"):
        est.sample_naive(-3)
    with pytest.raises(ValueError, match="threshold"):
        count_collisions(R, None, 1.5)
    with pytest.raises(ValueError, match="Y"):
        count_collisions(R, R[:, :5] / np.linalg.norm(R[:, :5], axis=1, keepdims=True), 0.5)
    with pytest.raises(ValueError, match="far"):
        impostor_threshold(R, 0.0)
    with pytest.raises(ValueError, match="method"):
        impostor_threshold(R, 1e-3, method="lsh")
    with pytest.raises(ValueError, match="max_block_bytes"):
        impostor_threshold(R, 1e-3, max_block_bytes=0)
    with pytest.raises(ValueError, match="ann_k"):
        impostor_threshold(R, 1e-3, method="ann", ann_k=0)
    with pytest.raises(ValueError, match="k must"):
        knn_cosines(R[:5], R[5:10], k=6)
    with pytest.raises(ValueError, match="gallery"):
        knn_cosines(R[:5], R[5:10, :4] / np.linalg.norm(R[5:10, :4], axis=1, keepdims=True))
    with pytest.raises(ValueError, match="coverage"):
        density_realisability(R[:5], R[5:10], R[10:], coverage=1.0)
    with pytest.raises(ValueError, match="variance_kept"):
        real_subspace(R, 1.5)
    with pytest.raises(ValueError, match="basis"):
        realisability(R, np.eye(5))
    with pytest.raises(ValueError, match="d"):
        uniform_sphere(5, 1)
    with pytest.raises(ValueError, match="signal_dim"):
        synthetic_gallery(10, 8, signal_dim=9)


@pytest.mark.slow
def test_throughput_trials_time_both_methods_over_the_same_candidates(gallery):
    from neurips26.representation.bip_gapgen.experiment import TRIAL_CANDIDATES, _timed_trials

    R, V = gallery[:1000], gallery[1000:]  # any pool of earlier virtuals will do
    tau = impostor_threshold(R, 1e-3)
    trials = _timed_trials(R, V, tau, seed=0)
    assert set(trials) == {"repulsion", "rejection"}
    for got, per_s, per_scan, n_candidates in trials.values():
        assert n_candidates == TRIAL_CANDIDATES  # the same work on both sides
        assert 0 < len(got) <= TRIAL_CANDIDATES and per_s > 0 and 0 < per_scan <= 1
        assert count_collisions(got, R, tau) == 0 and count_collisions(got, V, tau) == 0


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("bip-gapgen", tmp_path)
