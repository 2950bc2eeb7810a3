"""Tests for the Kontoyiannis H_K estimator, the entropy-rate filter and the collapse-loop trigram LM."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.harness import time_repeats
from neurips26.harness.testing import assert_quick_verdict
from neurips26.streams.hk_entropy_filter import (
    EntropyRateFilter,
    TrigramLM,
    entropy_from_match_lengths,
    entropy_rate,
    match_lengths,
    naive_match_lengths,
    stdlib_docstrings,
    tokenize,
)
from neurips26.streams.hk_entropy_filter import hk_estimator as hk
from neurips26.streams.hk_entropy_filter.experiment import (
    MIXING_REL_SE_MAX,
    markov_entropy_rate,
    occupation_rate_rel_se,
    random_markov_sources,
    row_entropies,
    sample_markov,
    spectral_gap,
    stationary_distribution,
)

TEXT = (
    "Return a new list containing all items from the iterable in ascending order. A custom key function "
    "can be supplied to customize the sort order, and the reverse flag can be set to request the result "
    "in descending order. The sort is stable: it never changes the relative order of elements that compare "
    "equal, which is helpful for sorting in multiple passes, for example by department and then by salary."
)


# --- estimator: exact agreement with the naive reference ----------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=60), st.integers(2, 12))
def test_match_lengths_equal_naive_reference(xs, window):
    x = np.array(xs)
    assert np.array_equal(match_lengths(x), naive_match_lengths(x))
    assert np.array_equal(match_lengths(x, window=window), naive_match_lengths(x, window=window))


def test_match_lengths_hand_example():
    # "aaabab": Lambda_1 = 1; i=2: "aa" capped by the past length 1 -> 2; i=3: "ab" unseen -> 2
    assert match_lengths(list("aaabab")).tolist() == [1, 2, 2, 1, 3, 2]
    assert naive_match_lengths(list("aaabab")).tolist() == [1, 2, 2, 1, 3, 2]


def test_numpy_fallback_equals_pydivsufsort_backend(monkeypatch):
    pytest.importorskip("pydivsufsort")
    rng = np.random.default_rng(1)
    for alphabet in (1, 2, 5, 50):
        x = rng.integers(0, alphabet, 700)
        expected = naive_match_lengths(x[:300])
        for backend in ("numpy", "pydivsufsort", "auto"):
            assert np.array_equal(match_lengths(x[:300], backend=backend), expected)
        fast = match_lengths(x, backend="pydivsufsort")
        assert np.array_equal(match_lengths(x, backend="numpy"), fast)
        monkeypatch.setattr(hk, "_pds", None)  # not installed: "auto" falls back to numpy
        assert np.array_equal(match_lengths(x), fast)
        with pytest.raises(ImportError, match="pydivsufsort"):
            match_lengths(x, backend="pydivsufsort")
        monkeypatch.undo()


def brute_force_lpf(x: list) -> list[int]:
    """LPF[i] = max over j < i of the common prefix length of x[i:] and x[j:] (overlaps allowed), by scanning."""
    out = []
    for i in range(len(x)):
        best = 0
        for j in range(i):
            k = 0
            while i + k < len(x) and x[j + k] == x[i + k]:
                k += 1
            best = max(best, k)
        out.append(best)
    return out


@pytest.mark.parametrize("path", ["compiled", "python", "pydivsufsort_lpf"])
def test_lpf_from_suffix_array_equals_brute_force(path, monkeypatch):
    """The default path (pydivsufsort's suffix array, then the Crochemore-Ilie pass: compiled, the same code
    as plain Python, or pydivsufsort's own LPF without numba) against a brute-force scan on random strings,
    including alphabets that need 1, 2 and 4 bytes a token."""
    pds = pytest.importorskip("pydivsufsort")
    if path == "compiled":
        pytest.importorskip("numba")
    elif path == "python":
        monkeypatch.setattr(hk, "_compiled_lpf_kernel", lambda: hk._lpf_from_suffix_array)
    else:
        monkeypatch.setattr(hk, "_compiled_lpf_kernel", lambda: None)
    rng = np.random.default_rng(21)
    for trial in range(150):
        n = int(rng.integers(2, 70))
        alphabet = int(rng.choice([1, 2, 3, 6]))
        ids = rng.integers(0, alphabet, n)
        if trial % 5 == 4:  # wide alphabets: the text is passed as uint16 / uint32
            ids = ids * int(rng.choice([300, 70_000]))
        expected = brute_force_lpf(ids.tolist())
        assert hk._longest_previous_factor(ids, "pydivsufsort").tolist() == expected
        assert match_lengths(ids).tolist() == [min(v, i) + 1 for i, v in enumerate(expected)]
    x = rng.integers(0, 3, 5000)
    assert np.array_equal(hk._longest_previous_factor(x, "pydivsufsort"), pds.longest_previous_factor(x))


def test_inverse_log2_weights_cached_and_uncached(monkeypatch):
    rng = np.random.default_rng(22)
    monkeypatch.setattr(hk, "_INVERSE_LOG2", np.empty(0))
    for cached in (True, False):
        if not cached:
            monkeypatch.setattr(hk, "_INVERSE_LOG2_CACHED", 10)
        for n in (2, 50, 3000, 40, 3001):
            lam = rng.integers(1, 9, n)
            direct = n / sum(int(lam[i - 1]) / np.log2(i) for i in range(2, n + 1))
            assert entropy_from_match_lengths(lam) == pytest.approx(direct, rel=1e-12)
    assert not hk._INVERSE_LOG2.flags.writeable


def test_numpy_lpf_matches_pydivsufsort_peer():
    pds = pytest.importorskip("pydivsufsort")
    rng = np.random.default_rng(2)
    x = rng.integers(0, 4, 20_000)
    ids = np.unique(x, return_inverse=True)[1].astype(np.int64)
    assert np.array_equal(
        hk._longest_previous_factor_numpy(ids), np.asarray(pds.longest_previous_factor(ids))
    )


@pytest.mark.slow
def test_pydivsufsort_backend_is_fast_at_1e6_tokens():
    pytest.importorskip("pydivsufsort")
    x = np.minimum(np.random.default_rng(0).zipf(1.3, 1_000_000), 5000)
    t_pds = time_repeats(lambda: match_lengths(x, backend="pydivsufsort"), repeat=2)["min"]
    t_ours = time_repeats(lambda: match_lengths(x, backend="numpy"), repeat=1, warmup=0)["min"]
    assert t_pds < t_ours  # the peer is the default because it is faster (4-6x here)


@pytest.mark.parametrize("window", [None, 3, 9])
def test_batched_diagonal_path_equals_naive(window):
    rng = np.random.default_rng(3)
    docs = [rng.integers(0, int(rng.integers(1, 5)), int(rng.integers(2, 50))) for _ in range(80)]
    ids = [np.unique(d, return_inverse=True)[1] for d in docs]
    for d, lam in zip(docs, hk._many_match_lengths(ids, window, short=30)):
        assert np.array_equal(lam, naive_match_lengths(d, window=window))


@pytest.mark.parametrize("variant,window", [("increasing", None), ("bagrow", None), ("window", 16)])
def test_entropy_rate_fast_equals_naive(variant, window):
    words = tokenize(TEXT)
    fast = entropy_rate(words, variant=variant, window=window)
    assert fast == pytest.approx(entropy_rate(words, variant=variant, window=window, method="naive"), abs=0)


def test_string_input_equals_tokens_and_char_unit():
    assert entropy_rate(TEXT) == entropy_rate(tokenize(TEXT))
    assert entropy_rate(TEXT, unit="char") == entropy_rate(list(TEXT))
    assert tokenize("Hello, World_1 x") == ["hello", "world_1", "x"]


# --- estimator: known entropy rates -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "P",
    [
        np.array([[0.5, 0.5], [0.5, 0.5]]),  # fair coin, H = 1
        np.full((4, 4), 0.25),  # uniform on 4 symbols, H = 2
        np.array([[0.9, 0.1], [0.3, 0.7]]),
        np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25], [0.3, 0.3, 0.4]]),
    ],
)
def test_known_markov_sources(P):
    h = markov_entropy_rate(P)
    x = sample_markov(P, 20_000, np.random.default_rng(4))
    assert abs(entropy_rate(x, variant="bagrow") / h - 1) <= 0.08
    assert 0.78 <= entropy_rate(x) / h <= 1.02  # the increasing variant is biased low (documented)
    assert 0.75 <= entropy_rate(x, variant="window", window=512) / h <= 1.02  # also biased low


def test_sample_markov_follows_the_chain():
    """The prefix-scan sampler equals the step-by-step walk on the same draws, and its transitions follow P."""
    P = np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25], [0.3, 0.3, 0.4]])
    for n in (1, 2, 7, 5000):
        rng = np.random.default_rng(n)
        cum = np.cumsum(P, axis=1)
        nxt = (rng.random(n)[:, None, None] > cum[None, :, :-1]).sum(axis=2)
        s, walk = int(rng.integers(3)), []
        for t in range(n):
            walk.append(s)
            s = int(nxt[t, s])
        assert np.array_equal(sample_markov(P, n, np.random.default_rng(n)), walk)
    x = sample_markov(P, 60_000, np.random.default_rng(0))
    counts = np.zeros((3, 3))
    np.add.at(counts, (x[:-1], x[1:]), 1)
    np.testing.assert_allclose(counts / counts.sum(1, keepdims=True), P, atol=0.015)


def test_markov_entropy_rate_closed_form():
    assert markov_entropy_rate(np.full((4, 4), 0.25)) == pytest.approx(2.0)
    P = np.array([[0.9, 0.1], [0.3, 0.7]])
    pi = np.array([0.75, 0.25])
    h = -(pi * (P * np.log2(P)).sum(1)).sum()
    assert markov_entropy_rate(P) == pytest.approx(h)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=2, max_size=40), st.sampled_from([1, 7, 2**40]))
def test_token_ids_depend_only_on_equality_of_tokens(xs, scale):
    # the dense lookup (small value range) and the sort (wide range) give np.unique's ids; relabelling the
    # tokens by any increasing map changes nothing
    x = np.asarray(xs, dtype=np.int64)
    expected = np.unique(x, return_inverse=True)[1].ravel()
    assert np.array_equal(hk._as_ids(x * scale + 5), expected)
    assert np.array_equal(match_lengths(x * scale), naive_match_lengths(list(xs)))


def test_mixing_helpers_closed_form_and_generator_rejects_slow_chains():
    eps = 1e-3
    P = np.array([[1 - eps, eps], [2 * eps, 1 - 2 * eps]])  # eigenvalues 1 and 1 - 3 eps
    assert spectral_gap(P) == pytest.approx(3 * eps)
    np.testing.assert_allclose(stationary_distribution(P), [2 / 3, 1 / 3])
    n = 20_000
    for P, h in random_markov_sources(10, np.random.default_rng(0), path_tokens=n):
        assert occupation_rate_rel_se(P, n) <= MIXING_REL_SE_MAX
        assert h == pytest.approx(markov_entropy_rate(P))


def test_occupation_rate_rel_se_closed_forms():
    """Two states: sigma^2 = Var_pi(h) (1 + lambda) / (1 - lambda), lambda = 1 - a - b. Four states: the
    autocovariance sum Var_pi(h) + 2 sum_k Cov_pi(h(X_0), h(X_k)) by matrix powers, and a simulation."""
    a, b, n = 0.1, 0.3, 5000
    P = np.array([[1 - a, a], [b, 1 - b]])
    pi = np.array([b, a]) / (a + b)
    h = np.array([-(a * np.log2(a) + (1 - a) * np.log2(1 - a)), -(b * np.log2(b) + (1 - b) * np.log2(1 - b))])
    lam = 1 - a - b
    var_h = pi @ h**2 - (pi @ h) ** 2
    expected = np.sqrt(var_h * (1 + lam) / (1 - lam) / n) / (pi @ h)
    assert occupation_rate_rel_se(P, n) == pytest.approx(expected, rel=1e-9)
    np.testing.assert_allclose(row_entropies(P), h)
    # the reviewer's kind of chain: two near-closed classes with different entropies
    P = np.array([[0.97, 0.03, 0, 0], [0.02, 0.98, 0, 0], [0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5]]) + 1e-3
    P /= P.sum(axis=1, keepdims=True)
    pi, h = stationary_distribution(P), row_entropies(P)
    f = h - pi @ h
    sigma2, Pk = pi @ f**2, np.eye(4)
    for _ in range(20_000):
        Pk = Pk @ P
        sigma2 += 2 * pi @ (f * (Pk @ f))
    assert occupation_rate_rel_se(P, n) == pytest.approx(np.sqrt(sigma2 / n) / (pi @ h), rel=1e-6)
    assert occupation_rate_rel_se(P, 20_000) > 10 * MIXING_REL_SE_MAX  # such a chain is redrawn
    rng = np.random.default_rng(23)
    dev = [
        np.bincount(sample_markov(P, 50_000, rng), minlength=4) / 50_000 @ h / (pi @ h) - 1 for _ in range(60)
    ]
    assert np.std(dev) == pytest.approx(occupation_rate_rel_se(P, 50_000), rel=0.35)
    uniform_rows = np.array([[0.9, 0.1, 0.0], [0.0, 0.9, 0.1], [0.1, 0.0, 0.9]])  # slow, but every h_s equal
    assert occupation_rate_rel_se(uniform_rows, 100) == pytest.approx(0.0, abs=1e-9)


def test_periodic_sequence_has_tiny_entropy():
    assert entropy_rate([0, 1, 2] * 2000, variant="bagrow") < 0.05


# --- monotonicity -------------------------------------------------------------------------------------------
def test_duplication_lowers_and_shuffling_raises():
    words = tokenize(TEXT * 3)
    rng = np.random.default_rng(5)
    assert entropy_rate(words + words) < entropy_rate(words)
    shuffled = [entropy_rate([words[i] for i in rng.permutation(len(words))]) for _ in range(5)]
    assert np.mean(shuffled) > entropy_rate(words)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=20, max_size=120))
def test_duplication_never_raises_bagrow(xs):
    assert entropy_rate(xs + xs, variant="bagrow") < entropy_rate(xs, variant="bagrow") + 1e-12


# --- bad input ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "x,err,match",
    [
        ([], ValueError, "empty"),
        ("", ValueError, "at least 2"),
        ([7], ValueError, "at least 2"),
        (42, TypeError, "x must be"),
        (None, TypeError, "x must be"),
        ({1: 2}, TypeError, "x must be"),
        (np.zeros((3, 3), dtype=int), ValueError, "1-D"),
        (np.array([0.5, 1.5, 0.5]), TypeError, "integer"),
        ([[1], [2], [3]], TypeError, "hashable"),
    ],
)
def test_entropy_rate_bad_input(x, err, match):
    with pytest.raises(err, match=match):
        entropy_rate(x)


def test_entropy_from_match_lengths_formulas_and_bad_input():
    lam = np.array([1, 1, 2, 3, 1, 4])
    n = lam.size
    assert entropy_from_match_lengths(lam, "bagrow") == pytest.approx(n * np.log2(n) / lam.sum())
    assert entropy_from_match_lengths(lam) == pytest.approx(
        n / np.sum(lam[1:] / np.log2(np.arange(2, n + 1)))
    )
    assert entropy_from_match_lengths(lam, "window", 2) == pytest.approx(1.0 / lam[2:].mean())
    with pytest.raises(ValueError, match="lam"):
        entropy_from_match_lengths(np.array([1]))
    with pytest.raises(ValueError, match="lam"):
        entropy_from_match_lengths(np.array([1, 0, 2]))
    with pytest.raises(ValueError, match="lam"):
        entropy_from_match_lengths(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="variant"):
        entropy_from_match_lengths(lam, "lz")


def test_entropy_rate_bad_parameters():
    x = list(range(10))
    with pytest.raises(ValueError, match="variant"):
        entropy_rate(x, variant="lz")
    with pytest.raises(ValueError, match="window"):
        entropy_rate(x, variant="window")
    with pytest.raises(ValueError, match="window"):
        entropy_rate(x, variant="window", window=1)
    with pytest.raises(ValueError, match="window"):
        entropy_rate(x, window=4)
    with pytest.raises(ValueError, match="window"):
        entropy_rate(x, variant="window", window=10)
    with pytest.raises(ValueError, match="unit"):
        entropy_rate("a b c", unit="byte")
    with pytest.raises(ValueError, match="method"):
        entropy_rate(x, method="fft")
    with pytest.raises(ValueError, match="window"):
        match_lengths(x, window=0)
    with pytest.raises(ValueError, match="backend"):
        match_lengths(x, backend="sais")
    with pytest.raises(ValueError, match="unit"):
        naive_match_lengths(x, unit="sentence")
    with pytest.raises(TypeError, match="text"):
        tokenize(123)


# --- the filter ---------------------------------------------------------------------------------------------
def _docs(rng, n=40):
    vocab = tokenize(TEXT)
    out = []
    for _ in range(n):
        length = int(rng.integers(40, 90))
        period = int(rng.integers(2, 40))  # small period -> repetitive, low H_K
        base = [vocab[i] for i in rng.integers(0, len(vocab), period)]
        out.append(" ".join((base * (length // period + 1))[:length]))
    return out


def test_filter_keeps_top_fraction_by_hk():
    docs = _docs(np.random.default_rng(6))
    f = EntropyRateFilter(keep_fraction=0.25, length_adjust=False)
    kept = f.fit_transform(docs)
    assert len(kept) == 10
    h = np.array([entropy_rate(d) for d in docs])
    np.testing.assert_allclose(f.scores_, h)
    assert set(f.selected_) == set(np.argsort(-h, kind="stable")[:10])
    assert kept == [docs[i] for i in sorted(f.selected_)]
    assert f.transform(docs) == kept  # no ties in this pool


def test_filter_length_adjustment_removes_length_trend():
    rng = np.random.default_rng(7)
    docs = [rng.integers(0, 50, int(n)) for n in rng.integers(20, 400, 60)]
    f = EntropyRateFilter(keep_fraction=0.5).fit(docs)
    lengths = np.log2([d.size for d in docs])
    assert np.corrcoef(f.scores_, lengths)[0, 1] > 0.5  # the raw estimate is length-biased
    assert abs(np.corrcoef(f.ranking_scores_, lengths)[0, 1]) < 1e-8


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 30), st.floats(0.01, 1.0))
def test_filter_kept_count(n_docs, q):
    rng = np.random.default_rng(n_docs)
    docs = [rng.integers(0, 5, 30) for _ in range(n_docs)]
    kept = EntropyRateFilter(keep_fraction=q).fit_transform(docs)
    assert len(kept) == max(1, int(round(q * n_docs)))


def test_filter_bad_input():
    with pytest.raises(ValueError, match="keep_fraction"):
        EntropyRateFilter(keep_fraction=0).fit(["a b c"])
    with pytest.raises(ValueError, match="keep_fraction"):
        EntropyRateFilter(keep_fraction=1.5).fit(["a b c"])
    with pytest.raises(ValueError, match="keep_fraction"):
        EntropyRateFilter(keep_fraction=True).fit(["a b c"])
    with pytest.raises(ValueError, match="window"):
        EntropyRateFilter(variant="window").fit(["a b c"])
    with pytest.raises(ValueError, match="unit"):
        EntropyRateFilter(unit="line").fit(["a b c"])
    with pytest.raises(ValueError, match="empty"):
        EntropyRateFilter().fit([])
    with pytest.raises(TypeError, match="documents"):
        EntropyRateFilter().fit("a single string")
    with pytest.raises(TypeError, match="documents"):
        EntropyRateFilter().fit(17)
    with pytest.raises(ValueError, match=r"documents\[1\]"):
        EntropyRateFilter(on_short="raise").fit(["a b c", "x"])
    with pytest.raises(TypeError, match=r"documents\[1\]"):
        EntropyRateFilter().fit(["a b c", 3.5])
    with pytest.raises(ValueError, match="on_short"):
        EntropyRateFilter(on_short="skip").fit(["a b c"])
    with pytest.raises(ValueError, match="length_adjust"):
        EntropyRateFilter(length_adjust="yes").fit(["a b c"])
    with pytest.raises(ValueError, match="2 tokens"):
        with pytest.warns(UserWarning):
            EntropyRateFilter().fit(["x", ""])
    with pytest.raises(ValueError, match="not fitted"):
        EntropyRateFilter().transform(["a b c"])
    with pytest.raises(ValueError, match="not fitted"):
        EntropyRateFilter().score_samples(["a b c"])


def test_short_documents_are_dropped_with_a_warning_not_an_error():
    """The reviewed defect: one document of fewer than 2 tokens made the filter raise for the whole pool."""
    docs = _docs(np.random.default_rng(9), n=20) + ["lonely", ""]
    f = EntropyRateFilter(keep_fraction=0.5)
    with pytest.warns(UserWarning, match="2 of 22 documents"):
        kept = f.fit_transform(docs)
    assert len(kept) == 10 and "lonely" not in kept and "" not in kept
    assert f.n_short_ == 2 and np.isnan(f.scores_[-2:]).all() and np.isfinite(f.scores_[:-2]).all()
    np.testing.assert_allclose(f.scores_[:-2], [entropy_rate(d) for d in docs[:-2]])
    with pytest.warns(UserWarning):
        assert "lonely" not in f.transform(docs)


def test_filter_is_a_scikit_learn_transformer():
    from sklearn.base import clone
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.pipeline import make_pipeline
    from sklearn.utils.estimator_checks import (
        check_get_params_invariance,
        check_no_attributes_set_in_init,
        check_parameters_default_constructible,
        check_set_params,
    )

    f = EntropyRateFilter(keep_fraction=0.3, variant="bagrow")
    g = clone(f)
    assert g.get_params() == f.get_params() and g is not f
    assert g.set_params(keep_fraction=0.6).keep_fraction == 0.6
    assert "keep_fraction=0.3" in repr(f)
    for check in (check_no_attributes_set_in_init, check_get_params_invariance, check_set_params):
        check("EntropyRateFilter", EntropyRateFilter())
    check_parameters_default_constructible("EntropyRateFilter", EntropyRateFilter())
    docs = _docs(np.random.default_rng(10))
    pipe = make_pipeline(EntropyRateFilter(keep_fraction=0.5), CountVectorizer()).fit(docs)
    assert pipe[-1].transform(docs).shape[0] == len(docs)  # the vectorizer was fitted on the kept half
    assert len(pipe[0].selected_) == 20
    scores = EntropyRateFilter().fit(docs).score_samples(docs)
    assert scores.shape == (40,) and np.isfinite(scores).all()


# --- the trigram LM -----------------------------------------------------------------------------------------
def test_trigram_lm_distributions_are_normalized_and_deterministic():
    rng = np.random.default_rng(8)
    docs = [rng.integers(1, 30, int(rng.integers(5, 40))) for _ in range(50)]
    lm = TrigramLM(30, top_k=5).fit(docs)
    for table in (lm.trigram_, lm.bigram_):
        ctx = table.lookup // 30
        sums = np.bincount(np.unique(ctx, return_inverse=True)[1], weights=np.exp(table.logp))
        np.testing.assert_allclose(sums, 1.0)
    a = lm.sample(np.full(20, 30), 3)
    b = lm.sample(np.full(20, 30), 3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert all(x.min() >= 1 and x.max() < 30 for x in a)
    lp = lm.mean_logprob(a)
    assert lp.shape == (20,) and np.all(np.isfinite(lp)) and np.all(lp <= 0)


def test_trigram_lm_greedy_reproduces_a_deterministic_corpus():
    doc = np.array([1, 2, 3, 4] * 10)
    lm = TrigramLM(5, top_k=1).fit([doc])
    assert np.array_equal(lm.sample(np.array([40]), 0)[0], doc)


def test_trigram_lm_sampling_matches_tempered_topk():
    doc = np.array([1, 1, 2, 1, 1, 3] * 200)  # after (1, 1): 2 or 3 with equal counts
    lm = TrigramLM(4, top_k=2, temperature=0.5, backoff_candidates=0).fit([doc])
    out = np.concatenate(lm.sample(np.full(4000, 3), 9))
    third = out[2::3]
    assert abs(np.mean(third == 2) - 0.5) < 0.03


def test_trigram_lm_bad_input():
    with pytest.raises(ValueError, match="vocab_size"):
        TrigramLM(1).fit([np.array([1, 1])])
    with pytest.raises(ValueError, match="discount"):
        TrigramLM(5, discount=1.0).fit([np.array([1, 2])])
    with pytest.raises(ValueError, match="top_k"):
        TrigramLM(5, top_k=0).fit([np.array([1, 2])])
    with pytest.raises(ValueError, match="temperature"):
        TrigramLM(5, temperature=0).fit([np.array([1, 2])])
    with pytest.raises(ValueError, match="backoff_candidates"):
        TrigramLM(5, backoff_candidates=-1).fit([np.array([1, 2])])
    with pytest.raises(ValueError, match="docs"):
        TrigramLM(5).fit([])
    with pytest.raises(ValueError, match="token ids"):
        TrigramLM(5).fit([np.array([1, 7])])
    with pytest.raises(ValueError, match="token ids"):
        TrigramLM(5).fit([np.array([0, 1])])
    lm = TrigramLM(5).fit([np.array([1, 2, 3])])
    with pytest.raises(ValueError, match="lengths"):
        lm.sample(np.array([0]))


def test_stdlib_corpus_is_deterministic_and_bounded():
    a = stdlib_docstrings(max_chars=20_000)
    assert a == stdlib_docstrings(max_chars=20_000)
    assert 20_000 <= sum(map(len, a)) < 40_000
    with pytest.raises(ValueError, match="max_chars"):
        stdlib_docstrings(max_chars=0)


def test_field_package_exports():
    from neurips26.streams import EntropyRateFilter as F
    from neurips26.streams import entropy_rate as e

    assert F is EntropyRateFilter and e is entropy_rate


def test_pool_metrics_equal_brute_force():
    from neurips26.streams.hk_entropy_filter.experiment import pool_metrics

    rng = np.random.default_rng(11)
    pool = [rng.integers(1, 12, int(rng.integers(3, 30))) for _ in range(25)]
    m = pool_metrics(pool, 12)
    trigrams = {tuple(d[i : i + 3]) for d in pool for i in range(d.size - 2)}
    assert m["unique_trigrams"] == len(trigrams)
    assert m["vocabulary"] == len({int(t) for d in pool for t in d})
    rep = [1 - len({tuple(d[i : i + 3]) for i in range(d.size - 2)}) / (d.size - 2) for d in pool]
    assert m["repetition"] == pytest.approx(np.mean(rep))


def test_select_keeps_the_same_count_for_every_filter():
    from neurips26.streams.hk_entropy_filter.experiment import FILTERS, select

    rng = np.random.default_rng(12)
    docs = [rng.integers(1, 40, int(rng.integers(20, 60))) for _ in range(50)]
    lm = TrigramLM(40).fit(docs)
    words = np.array(["<s>"] + [f"w{i}" for i in range(1, 40)])
    for name in FILTERS:
        kept = select(name, docs, lm, words, 0.5, np.random.default_rng(0))
        assert len(kept) == (50 if name == "none" else 25)
    low = select("logprob-low", docs, lm, words, 0.5, np.random.default_rng(0))
    lp = lm.mean_logprob(docs)
    assert max(lm.mean_logprob(low)) <= np.sort(lp)[24] + 1e-12  # the most surprising half
    with pytest.raises(ValueError, match="filter"):
        select("perplexity", docs, lm, words, 0.5, np.random.default_rng(0))


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("hk-entropy-filter", tmp_path)
