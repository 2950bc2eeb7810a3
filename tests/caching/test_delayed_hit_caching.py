"""Tests for the delayed-hit caching simulator, policies, comparator and traces."""

from __future__ import annotations

import itertools
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.caching.delayed_hit_caching import (
    LAFTPL,
    LFU,
    LRU,
    LRUMAD,
    UCBDH,
    BestStatic,
    Marker,
    best_static_latency,
    best_static_set,
    make_trace,
    shadow_losses,
    shadow_value,
    simulate,
    static_regret,
)
from neurips26.harness.testing import assert_quick_verdict

ALL = [LRU(), LFU(), Marker(), LRUMAD(), UCBDH(), LAFTPL(), UCBDH(restart_every=7), LAFTPL(restart_every=5)]

# the 10-request hand example: K = 1, Z = 3
HAND = [0, 0, 1, 0, 0, 1, 1, 0, 2, 0]


def test_hand_example_lru_latency_accounting():
    # t0 miss 0 (3, due 3); t1 delayed hit (2); t2 miss 1 (3, due 5); t3 0 admitted -> hit; t4 hit;
    # t5 1 admitted, 0 evicted -> hit; t6 hit; t7 miss 0 (3, due 10); t8 miss 2 (3); t9 delayed hit (1)
    res = simulate(HAND, LRU(), 1, 3)
    assert res.latency.tolist() == [3, 2, 3, 0, 0, 0, 0, 3, 3, 1]
    assert res.total_latency == 15
    assert (res.n_hits, res.n_delayed_hits, res.n_misses, res.n_admissions) == (4, 2, 4, 2)


def test_hand_example_shadow_losses_and_best_static():
    assert shadow_losses(HAND, 3).tolist() == [3, 2, 3, 3, 2, 3, 2, 3, 3, 1]
    # savings (cold start): item 0: 14 - 5 = 9, item 1: 8 - 3 = 5, item 2: 0
    assert best_static_set(HAND, 1, 3).tolist() == [0]
    assert best_static_latency(HAND, 1, 3) == 25 - 9
    assert best_static_latency(HAND, 1, 3, preloaded=True) == 25 - 14
    assert simulate(HAND, BestStatic(), 1, 3).total_latency == 16
    assert simulate(HAND, BestStatic(preloaded=True), 1, 3).total_latency == 11


def test_per_item_latencies_and_zero_latency():
    z = np.array([1, 4, 0])
    res = simulate([1, 1, 2, 0, 1, 2, 0], LRU(), 1, z)
    # t0 miss 1 (4, due 4); t1 dh 3; t2 miss 2 (0, admitted before t3); t3 miss 0 (1, due 4);
    # t4: 0 and 1 complete together, processed by increasing id (0 evicts 2, then 1 evicts 0) -> hit;
    # t5 miss 2 (0, admitted before t6, evicting 1); t6 miss 0 (1)
    assert res.latency.tolist() == [4, 3, 0, 1, 0, 0, 1]


def _lru_reference(trace, k):
    cache: OrderedDict[int, None] = OrderedDict()
    hits = 0
    for i in trace:
        if i in cache:
            cache.move_to_end(i)
            hits += 1
        else:
            cache[i] = None
            if len(cache) > k:
                cache.popitem(last=False)
    return hits


def test_zero_latency_lru_is_classic_lru():
    tr = make_trace("S1", 5000, n_items=200, random_state=3).requests
    assert simulate(tr, LRU(), 20, 0).n_hits == _lru_reference(tr.tolist(), 20)


def test_zero_latency_lru_matches_libcachesim():
    lcs = pytest.importorskip("libcachesim")
    tr = make_trace("S1", 5000, n_items=200, random_state=4).requests
    cache, req, hits = lcs.LRU(cache_size=20), lcs.Request(), 0
    for i in tr.tolist():
        req.obj_id, req.obj_size = i, 1
        hits += bool(cache.get(req))
    assert simulate(tr, LRU(), 20, 0).n_hits == hits


def test_best_static_set_is_optimal_by_brute_force():
    rng = np.random.default_rng(0)
    tr = rng.choice(6, size=400, p=[0.3, 0.25, 0.2, 0.1, 0.1, 0.05])
    z = np.array([2, 9, 4, 12, 1, 6])
    for preloaded in (False, True):
        brute = min(
            simulate(tr, BestStatic(items=s, preloaded=preloaded), 2, z).total_latency
            for s in itertools.combinations(range(6), 2)
        )
        assert best_static_latency(tr, 2, z, preloaded=preloaded) == brute
        assert simulate(tr, BestStatic(preloaded=preloaded), 2, z).total_latency == brute


def test_static_regret_prefixes_match_direct_computation():
    tr = make_trace("S2", 3000, n_items=100, capacity=5, random_state=1)
    res = simulate(tr.requests, UCBDH(), 5, tr.fetch_latency)
    reg = static_regret(res, tr.requests, 5, tr.fetch_latency, [1000, 3000])
    direct = simulate(tr.requests[:1000], UCBDH(), 5, tr.fetch_latency).total_latency - best_static_latency(
        tr.requests[:1000], 5, tr.fetch_latency
    )
    assert reg[0] == direct  # UCB-DH is anytime: a prefix run equals the prefix of the long run


@pytest.mark.parametrize("lam,z", [(0.02, 20), (0.1, 5), (0.01, 50)])
def test_shadow_value_formula_matches_simulation(lam, z):
    rng = np.random.default_rng(7)
    n = 600_000
    req = np.where(rng.random(n) < lam, 0, 1)
    sim = shadow_losses(req, np.array([z, 0]))[req == 0].sum() / n
    assert sim == pytest.approx(float(shadow_value(lam, z)), rel=0.03)


def test_shadow_value_continuous_limit_and_ordering():
    # the slotted and continuous formulas agree when a fetch spans many slots at low rate
    assert shadow_value(1e-4, 2000) == pytest.approx(shadow_value(1e-4, 2000, discrete=False), rel=1e-3)
    # shadow-value order differs from frequency order when latencies differ (the point of S2)
    assert shadow_value(0.01, 50) > shadow_value(0.02, 5)


def test_adversarial_cycle_defeats_lru_but_not_learners():
    tr = make_trace("S4", 20_000, n_items=30, capacity=5, fetch_latency=10, random_state=0)
    best = best_static_latency(tr.requests, 5, tr.fetch_latency)
    lru = simulate(tr.requests, LRU(), 5, tr.fetch_latency)
    assert lru.n_hits == 0  # every burst is a full miss episode
    for pol in (UCBDH(), LAFTPL()):
        assert simulate(tr.requests, pol, 5, tr.fetch_latency, random_state=0).total_latency < 1.2 * best
    assert lru.total_latency > 4 * best


def test_restart_adapts_on_piecewise_trace():
    tr = make_trace("S3", 40_000, n_items=300, capacity=20, random_state=2)
    plain = simulate(tr.requests, UCBDH(), 20, tr.fetch_latency).total_latency
    restarted = simulate(tr.requests, UCBDH(restart_every=2000), 20, tr.fetch_latency).total_latency
    assert restarted < plain


def test_marker_is_reproducible_and_seed_dependent():
    tr = make_trace("S1", 5000, n_items=100, capacity=10, random_state=0).requests
    a = simulate(tr, Marker(), 10, 5, random_state=1).latency
    b = simulate(tr, Marker(), 10, 5, random_state=1).latency
    c = simulate(tr, Marker(), 10, 5, random_state=2).latency
    assert np.array_equal(a, b) and not np.array_equal(a, c)


@settings(max_examples=25, deadline=None)
@given(
    trace=st.lists(st.integers(0, 7), min_size=1, max_size=80),
    k=st.integers(1, 4),
    zs=st.lists(st.integers(0, 6), min_size=8, max_size=8),
    which=st.integers(0, len(ALL) - 1),
)
def test_latency_accounting_invariants(trace, k, zs, which):
    z = np.array(zs)
    tr = np.array(trace)
    res = simulate(tr, ALL[which], k, z, random_state=0)
    lat = res.latency
    assert res.n_hits + res.n_delayed_hits + res.n_misses == len(tr)
    assert np.all(lat >= 0) and np.all(lat <= z[tr])
    assert res.n_misses >= len(np.unique(tr[z[tr] > 0]))  # every item misses on its first request
    # the first request of each item costs its full fetch latency
    _, first_idx = np.unique(tr, return_index=True)
    assert np.array_equal(lat[first_idx], z[tr[first_idx]])


@settings(max_examples=20, deadline=None)
@given(trace=st.lists(st.integers(0, 5), min_size=1, max_size=60), z=st.integers(0, 5))
def test_cache_holding_everything_pays_first_episodes_only(trace, z):
    tr = np.array(trace)
    expected = best_static_latency(tr, 6, z)  # all items fit: only first miss episodes remain
    assert simulate(tr, LRU(), 6, z).total_latency == expected
    assert simulate(tr, LFU(), 6, z).total_latency == expected


# ---------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "trace,match",
    [
        ([0, -1, 2], "trace"),
        ([0.5, 1.0], "trace"),
        ([], "trace"),
        ([[0, 1]], "trace"),
        ([True, False], "trace"),
    ],
)
def test_bad_trace_raises(trace, match):
    with pytest.raises(ValueError, match=match):
        simulate(trace, LRU(), 2, 3)
    with pytest.raises(ValueError, match=match):
        shadow_losses(trace, 3)


@pytest.mark.parametrize("capacity", [0, -3, 2.5, True, None])
def test_bad_capacity_raises(capacity):
    with pytest.raises(ValueError, match="capacity"):
        simulate([0, 1], LRU(), capacity, 3)
    with pytest.raises(ValueError, match="capacity"):
        best_static_set([0, 1], capacity, 3)


@pytest.mark.parametrize("latency", [-1, 2.5, np.nan, [1, -2], [1], "3"])
def test_bad_fetch_latency_raises(latency):
    with pytest.raises(ValueError, match="fetch_latency"):
        simulate([0, 1], LRU(), 1, latency)


@pytest.mark.parametrize(
    "policy,match",
    [
        ("belady", "policy"),
        (UCBDH(c=-1.0), "c must"),
        (UCBDH(restart_every=0), "restart_every"),
        (LAFTPL(burst=float("inf")), "burst"),
        (LRUMAD(ewma=2.0), "ewma"),
        (BestStatic(items=(0, 0)), "items"),
        (BestStatic(items=(-1,)), "items"),
    ],
)
def test_bad_policy_raises(policy, match):
    with pytest.raises(ValueError, match=match):
        simulate([0, 1, 2], policy, 1, 2)


def test_other_bad_inputs_raise():
    with pytest.raises(ValueError, match="random_state"):
        simulate([0, 1], Marker(), 1, 2, random_state=-1)
    with pytest.raises(ValueError, match="capacity"):
        simulate([0, 1, 2], BestStatic(items=(0, 1)), 1, 2)
    res = simulate([0, 1, 2], LRU(), 1, 2)
    with pytest.raises(ValueError, match="horizons"):
        static_regret(res, [0, 1, 2], 1, 2, [0, 4])
    with pytest.raises(ValueError, match="trace"):
        static_regret(res, [0, 1], 1, 2, [1])
    with pytest.raises(ValueError, match="rate"):
        shadow_value(1.5, 3)
    with pytest.raises(ValueError, match="fetch_latency"):
        shadow_value(0.5, -3)
    with pytest.raises(ValueError, match="kind"):
        make_trace("S9", 10)
    with pytest.raises(ValueError, match="n_requests"):
        make_trace("S1", 0)
    with pytest.raises(ValueError, match="capacity"):
        make_trace("S4", 10, n_items=5, capacity=5)


def test_traces_have_the_digest_structure():
    s2 = make_trace("S2", 1000, random_state=0)
    assert set(np.unique(s2.fetch_latency)) == {5, 50} and len(s2.fetch_latency) == 1000
    s3 = make_trace("S3", 8000, random_state=0)
    assert s3.change_points.tolist() == [1000 * i for i in range(1, 8)]
    s4 = make_trace("S4", 5000, capacity=50, fetch_latency=20, random_state=0)
    assert len(np.unique(s4.requests)) == 51 and np.all(s4.requests[:20] == s4.requests[0])
    s5 = make_trace("S5", 3000, random_state=0)
    assert s5.requests.min() >= 0 and s5.requests.max() < 1000


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("delayed-hit-caching", tmp_path)
