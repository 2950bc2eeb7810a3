"""Tests for MaxSketch (arXiv 2605.15571): closed forms, sketch invariants, estimator accuracy, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from neurips26.harness.testing import assert_quick_verdict
from neurips26.streams import MaxSketch
from neurips26.streams.maxsketch import (
    LogLinearCalibration,
    estimate_from_maxima,
    estimate_noise_scale,
    sphere_coordinate_logsf,
)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def centres(n: int, d: int, seed: int) -> np.ndarray:
    return unit(np.random.default_rng(seed).standard_normal((n, d)))


def noisy_stream(n: int, d: int, sigma: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    u = unit(rng.standard_normal((n, d)))
    labels = np.repeat(np.arange(n), 1 + rng.poisson(4.0, n))
    rng.shuffle(labels)
    return unit(u[labels] + sigma / np.sqrt(d) * rng.standard_normal((labels.size, d))), labels


# --- the null law -----------------------------------------------------------------------------------------------
def test_sphere_tail_closed_forms():
    s = np.linspace(-0.99, 0.99, 41)
    # d = 3: a coordinate of a uniform point on S^2 is uniform on [-1, 1] (Archimedes)
    np.testing.assert_allclose(np.exp(sphere_coordinate_logsf(s, 3)), (1 - s) / 2, rtol=1e-10)
    # d = 2: cos of a uniform angle
    np.testing.assert_allclose(np.exp(sphere_coordinate_logsf(s, 2)), np.arccos(s) / np.pi, rtol=1e-10)
    # the far tail is computed without cancellation (1 - F never formed)
    assert np.isfinite(sphere_coordinate_logsf(np.array([0.9]), 384)).all()
    assert sphere_coordinate_logsf(np.array([0.9]), 384)[0] < -300


def test_sphere_tail_matches_monte_carlo():
    d = 16
    x = unit(np.random.default_rng(0).standard_normal((200_000, d)))[:, 0]
    for s in (0.0, 0.3, 0.6):
        assert np.exp(sphere_coordinate_logsf(np.array([s]), d))[0] == pytest.approx((x > s).mean(), abs=3e-3)


def test_minus_log_cdf_of_maxima_is_exponential_with_rate_n():
    """E_j = -log F_d(S_j) ~ Exponential(n) for isotropic centres (the estimator's premise)."""
    n, d, m = 300, 32, 1024
    sk = MaxSketch(d, m, seed=3).update(centres(n, d, 1))
    e = -np.log1p(-np.exp(sphere_coordinate_logsf(sk.maxima_, d)))
    assert stats.kstest(n * e, "expon").pvalue > 0.01
    assert sk.estimate() == pytest.approx((m - 1) / e.sum())


# --- projections and the sketch state ----------------------------------------------------------------------------
def test_state_is_max_of_brute_force_projections_and_nested():
    d, m = 20, 600
    x = np.random.default_rng(2).standard_normal((50, d))
    sk = MaxSketch(d, m, seed=9).update(x)
    g = np.hstack([sk._directions(c, np.float64) for c in range(3)])
    assert g.shape == (d, m)
    np.testing.assert_allclose(np.linalg.norm(g, axis=0), 1.0)
    np.testing.assert_allclose(sk.maxima_, (unit(x) @ g).max(axis=0), rtol=1e-12)
    np.testing.assert_allclose(sk.project(x), unit(x) @ g, rtol=1e-12)
    small = MaxSketch(d, 256, seed=9).update(x)  # the first m' directions are shared
    np.testing.assert_array_equal(small.maxima_, sk.maxima_[:256])
    assert sk.memory_floats == m


def test_scale_invariance_and_float32():
    x = np.random.default_rng(4).standard_normal((30, 12))
    a = MaxSketch(12, 64, seed=1).update(x)
    b = MaxSketch(12, 64, seed=1).update(5.0 * x)
    np.testing.assert_allclose(a.maxima_, b.maxima_, rtol=1e-12)
    c = MaxSketch(12, 64, seed=1).update(x.astype(np.float32))
    np.testing.assert_allclose(a.maxima_, c.maxima_, atol=1e-6)


def test_merge_of_two_halves_equals_whole():
    x, _ = noisy_stream(200, 24, 0.1, 5)
    whole = MaxSketch(24, 300, seed=2).update(x)
    h = x.shape[0] // 2
    left = MaxSketch(24, 300, seed=2).update(x[:h])
    right = MaxSketch(24, 300, seed=2).update(x[h:])
    merged = left.copy().merge(right)
    np.testing.assert_array_equal(merged.maxima_, whole.maxima_)  # exact: maxima do not depend on batching
    assert merged.n_items_ == whole.n_items_ == x.shape[0]
    assert merged.estimate(0.1) == pytest.approx(whole.estimate(0.1), rel=1e-9)
    # one item at a time gives the same state as one batch
    one_by_one = MaxSketch(24, 300, seed=2)
    for row in x[:20]:
        one_by_one.update(row)
    np.testing.assert_allclose(
        one_by_one.maxima_, MaxSketch(24, 300, seed=2).update(x[:20]).maxima_, atol=1e-12
    )


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    n=st.integers(1, 30),
    reps=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
    perm_seed=st.integers(0, 1000),
)
def test_duplicates_and_order_leave_state_unchanged(n, reps, seed, perm_seed):
    d = 8
    x = np.random.default_rng(seed).standard_normal((n, d))
    base = MaxSketch(d, 40, seed=seed % 97).update(x)
    dup = np.repeat(x, reps, axis=0)
    shuffled = dup[np.random.default_rng(perm_seed).permutation(dup.shape[0])]
    other = MaxSketch(d, 40, seed=seed % 97).update(shuffled)
    np.testing.assert_allclose(other.maxima_, base.maxima_, rtol=0, atol=1e-12)
    assert other.estimate() == pytest.approx(base.estimate(), rel=1e-9)


def test_exact_duplicate_stream_is_counted_right():
    n, d, m = 2000, 64, 1024
    u = centres(n, d, 7)
    rng = np.random.default_rng(8)
    stream = u[rng.permutation(np.repeat(np.arange(n), rng.integers(1, 6, n)))]
    sk = MaxSketch(d, m, seed=11).update(stream)
    dedup = MaxSketch(d, m, seed=11).update(u)
    np.testing.assert_allclose(sk.maxima_, dedup.maxima_, atol=1e-12)
    assert sk.estimate() == pytest.approx(n, rel=0.1)  # relative sd is 1/sqrt(m - 2) ~ 0.031


def test_estimator_unbiased_and_sd_over_seeds():
    n, d, m = 500, 64, 256
    u = centres(n, d, 12)
    est = np.array([MaxSketch(d, m, seed=s).update(u).estimate() for s in range(24)])
    assert abs(est.mean() / n - 1) < 0.05
    assert 0.5 / np.sqrt(m) < est.std() / n < 2.0 / np.sqrt(m)
    mom = MaxSketch(d, m, seed=0).update(u).estimate(method="median_of_means", n_groups=4)
    assert mom == pytest.approx(n, rel=0.3)


def test_noise_correction_removes_the_view_bias():
    d, n, sigma = 128, 1000, 0.1
    x, _ = noisy_stream(n, d, sigma, 21)
    sk = MaxSketch(d, 1024, seed=4).update(x)
    assert sk.estimate(0.0) > 1.2 * n  # the max picks up the noise tail of repeated views
    tau = sigma / np.sqrt(1 + sigma**2)
    assert sk.estimate(tau) == pytest.approx(n, rel=0.1)
    assert sk.estimate(tau, views_model="fixed") < sk.estimate(tau)  # Jensen: fixed r over-corrects
    # a sketch built with a default noise scale uses it
    sk2 = MaxSketch(d, 1024, seed=4, noise_scale=tau).update(x)
    assert sk2.estimate() == pytest.approx(sk.estimate(tau))


def test_estimate_noise_scale_recovers_sigma():
    rng = np.random.default_rng(0)
    d, sigma = 256, 0.2
    u = unit(rng.standard_normal((400, d)))
    a = u + sigma / np.sqrt(d) * rng.standard_normal(u.shape)
    b = u + sigma / np.sqrt(d) * rng.standard_normal(u.shape)
    assert estimate_noise_scale(a, b) == pytest.approx(sigma / np.sqrt(1 + sigma**2), rel=0.03)
    assert estimate_noise_scale(u, u) == 0.0


def test_serialisation_round_trip():
    x, _ = noisy_stream(50, 16, 0.1, 1)
    sk = MaxSketch(16, 300, seed=5, noise_scale=0.05).update(x)
    back = MaxSketch.from_bytes(sk.to_bytes())
    assert back == sk
    assert back.noise_scale == 0.05
    assert back.estimate() == sk.estimate()
    empty = MaxSketch.from_bytes(MaxSketch(16, 8).to_bytes())
    assert empty.is_empty() and empty.estimate() == 0.0
    assert sk != MaxSketch(16, 300, seed=5)


def test_calibration_recovers_power_law():
    n_hat = np.array([100.0, 200.0, 500.0, 1000.0])
    cal = LogLinearCalibration().fit(n_hat, 0.5 * n_hat**0.9)
    assert cal.slope_ == pytest.approx(0.9) and cal.intercept_ == pytest.approx(np.log(0.5))
    assert cal.predict(1e5) == pytest.approx(0.5 * 1e5**0.9)
    np.testing.assert_allclose(cal.predict(n_hat), 0.5 * n_hat**0.9)


# --- bad input ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"dim": 1}, ValueError, "dim"),
        ({"dim": 2.5}, TypeError, "dim"),
        ({"dim": 4, "n_projections": 1}, ValueError, "n_projections"),
        ({"dim": 4, "seed": -1}, ValueError, "seed"),
        ({"dim": 4, "noise_scale": 1.0}, ValueError, "noise_scale"),
        ({"dim": 4, "noise_scale": "a"}, TypeError, "noise_scale"),
    ],
)
def test_constructor_rejects_bad_parameters(kwargs, err, match):
    with pytest.raises(err, match=match):
        MaxSketch(**kwargs)


@pytest.mark.parametrize(
    ("bad", "err"),
    [
        (np.ones((3, 5)), ValueError),  # wrong dim
        (np.array([[1.0, np.nan, 0.0, 1.0]]), ValueError),
        (np.array([[1.0, np.inf, 0.0, 1.0]]), ValueError),
        (np.empty((0, 4)), ValueError),
        (np.zeros((2, 4)), ValueError),
        (np.ones((2, 2, 4)), ValueError),
        (np.array([["a", "b", "c", "d"]]), TypeError),
    ],
)
def test_bad_update_raises_and_leaves_state_intact(bad, err):
    sk = MaxSketch(4, 16, seed=1).update(np.random.default_rng(0).standard_normal((5, 4)))
    before = sk.to_bytes()
    with pytest.raises(err, match="x"):
        sk.update(bad)
    assert sk.to_bytes() == before


def test_merge_rejects_incompatible_sketches():
    sk = MaxSketch(4, 16, seed=1)
    for other, match in (
        (MaxSketch(5, 16, seed=1), "dim"),
        (MaxSketch(4, 32, seed=1), "n_projections"),
        (MaxSketch(4, 16, seed=2), "seed"),
    ):
        with pytest.raises(ValueError, match=match):
            sk.merge(other)
    with pytest.raises(TypeError, match="other"):
        sk.merge(np.zeros(16))  # type: ignore[arg-type]


def test_estimate_rejects_bad_arguments():
    sk = MaxSketch(4, 16, seed=1).update(np.eye(4))
    with pytest.raises(ValueError, match="method"):
        sk.estimate(method="mean")
    with pytest.raises(ValueError, match="views_model"):
        sk.estimate(views_model="zipf")
    with pytest.raises(ValueError, match="noise_scale"):
        sk.estimate(noise_scale=-0.1)
    with pytest.raises(ValueError, match="n_groups"):
        sk.estimate(method="median_of_means", n_groups=100)
    with pytest.raises(ValueError, match="n_items"):
        estimate_from_maxima(sk.maxima_, 4, noise_scale=0.1)
    with pytest.raises(ValueError, match="maxima"):
        estimate_from_maxima(np.full(8, -np.inf), 4)
    with pytest.raises(ValueError, match="maxima"):
        estimate_from_maxima(np.zeros((2, 4)), 4)


def test_from_bytes_rejects_garbage():
    good = MaxSketch(4, 16).to_bytes()
    with pytest.raises(ValueError, match="data"):
        MaxSketch.from_bytes(b"nope")
    with pytest.raises(ValueError, match="data"):
        MaxSketch.from_bytes(good[:-9])
    with pytest.raises(TypeError, match="data"):
        MaxSketch.from_bytes("text")  # type: ignore[arg-type]


def test_helpers_reject_bad_input():
    with pytest.raises(ValueError, match="views_b"):
        estimate_noise_scale(np.ones((3, 4)), np.ones((3, 5)))
    with pytest.raises(ValueError, match="same number of rows"):
        estimate_noise_scale(np.ones((3, 4)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="n_hat"):
        LogLinearCalibration().fit([1.0], [1.0])
    with pytest.raises(ValueError, match="n_hat"):
        LogLinearCalibration().fit([1.0, -2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="increasing"):
        LogLinearCalibration().fit([10.0, 100.0], [100.0, 10.0])
    with pytest.raises(RuntimeError, match="fit"):
        LogLinearCalibration().predict(3.0)


# --- experiment helpers and the reproduction ----------------------------------------------------------------------
def test_hll_helper_equals_datasketch_on_whole_stream():
    datasketch = pytest.importorskip("datasketch")
    from neurips26.streams.maxsketch.experiment import hll_count

    x = np.repeat(np.random.default_rng(0).standard_normal((300, 4)).astype(np.float32), 3, axis=0)
    hll = datasketch.HyperLogLog(p=10)
    for row in x:
        hll.update(row.tobytes())
    assert hll_count(x, 10) == pytest.approx(hll.count())


def test_text_views():
    from neurips26.streams.maxsketch.text_stream import make_view_stream, noisy_view, stdlib_sentences

    sentences = stdlib_sentences()
    assert len(sentences) > 1000 and len(set(sentences)) == len(sentences)
    s = sentences[0]
    assert noisy_view(s, np.random.default_rng(0)) == noisy_view(s, np.random.default_rng(0))
    assert noisy_view(s, np.random.default_rng(0)) != s
    texts, labels = make_view_stream(sentences[:50], np.random.default_rng(1))
    counts = np.bincount(labels)
    assert len(texts) == labels.size and counts.min() >= 3 and counts.max() <= 6


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("maxsketch", tmp_path)
