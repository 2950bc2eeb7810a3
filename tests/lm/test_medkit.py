"""Tests for MedKIT: relation algebra, world invariants, probe families, integration strategies."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.harness.testing import assert_quick_verdict
from neurips26.lm.medkit import (
    FAMILIES,
    FT_STRATEGIES,
    RELATIONS,
    BM25Retriever,
    ClinicalWorld,
    Comparison,
    IntegrationConfig,
    ProbeClassifier,
    compose,
    evaluate_families,
    flip,
    integrate,
    leaked_probes,
    pretrain,
    pretraining_items,
    probe_set,
    update_items,
)
from neurips26.lm.medkit.integrate import update_blind_accuracy

SUP, INF, ND = RELATIONS


def test_relation_algebra_table():
    # written out by hand from the spec: swap flips strict relations; "no difference" is equality in an order
    # with ties, so it carries the other hop over; mixed strict directions are undefined
    assert [flip(r) for r in RELATIONS] == [INF, SUP, ND]
    expected = {
        (SUP, SUP): SUP,
        (INF, INF): INF,
        (SUP, ND): SUP,
        (ND, SUP): SUP,
        (INF, ND): INF,
        (ND, INF): INF,
    }
    expected[(ND, ND)] = ND
    for a, b in itertools.product(RELATIONS, RELATIONS):
        assert compose(a, b) == expected.get((a, b))
    with pytest.raises(ValueError, match="relation"):
        flip("better")
    with pytest.raises(ValueError, match="relation"):
        compose(SUP, "better")


@pytest.mark.parametrize(
    "eff", [{"a": 3, "b": 2, "c": 1}, {"a": 2, "b": 2, "c": 1}, {"a": 1, "b": 1, "c": 1}]
)
def test_composition_agrees_with_a_latent_order(eff):
    # independent oracle: an efficacy order with ties (equal values: "no difference")
    def rel(x, y):
        return SUP if eff[x] > eff[y] else INF if eff[x] < eff[y] else ND

    for x, y, z in itertools.permutations("abc"):
        c = compose(rel(x, y), rel(y, z))
        if c is not None:
            assert c == rel(x, z)


@pytest.fixture(scope="module")
def world():
    return ClinicalWorld.generate(n_base=120, n_updates=40, conflict_share=0.3, reupdate_share=0.2, seed=3)


def test_world_schema_and_chronology(world):
    assert len(world.base) == 120
    dates = [u.date for u in world.updates]
    assert dates == sorted(dates)
    n_events = round(40 * 1.2)
    assert len(world.updates) == n_events
    for u in world.updates:
        assert u.closed_answer_m == flip(u.answer)
        assert u.comparison.regimen in u.ground_truth and u.answer in u.ground_truth
        assert len(u.closed_questions) == 3 and u.locality_answer in RELATIONS
        if u.conflicting_edit and u.comparison in world.base and u is world.latest_updates()[0]:
            assert u.answer != world.base[u.comparison]


def test_latest_update_wins_and_swap_consistency(world):
    kb = world.state()
    last = {}
    for u in world.updates:
        last[u.comparison] = u.answer
    assert any(sum(u.comparison == c for u in world.updates) > 1 for c in last)  # revisions exist
    for c, r in last.items():
        assert world.relation(c, kb) == r
        assert world.relation(c.swapped(), kb) == flip(r)
    # the state before the first revision still holds the earlier answer
    first = world.updates[0]
    assert world.relation(first.comparison, world.state(upto=first.date)) == first.answer
    # conflicting updates really overturn the base fact; revisions never return to it
    for u in world.updates:
        if u.comparison in world.base and u.conflicting_edit:
            assert u.answer != world.base[u.comparison]


def test_probe_families_and_labels(world):
    probes = probe_set(world, seed=0)
    assert set(FAMILIES) <= set(probes) and all(probes[f] for f in FAMILIES)
    kb = world.state()
    for e in probes["relational"]:
        assert RELATIONS[e.label] == flip(world.relation(e.comparison, kb))
    for e in probes["lexical"]:
        assert e.template.startswith("test-")
    touched = {c.pair for c in world.updated_keys()}
    # compositional labels: recomputed from the two hops named in the text; one hop is an update, the other a
    # base "no difference" fact no update touches, so the label is the updated relation
    assert probes["compositional"]
    for e in probes["compositional"]:
        a, b, cl = e.comparison.regimen, e.comparison.comparator, e.comparison.cluster
        middle = e.text.split()[1]
        hops = [Comparison(a, middle, *cl), Comparison(middle, b, *cl)]
        updated = [h for h in hops if h.pair in touched]
        tie = [h for h in hops if h.pair not in touched]
        assert len(updated) == 1 and len(tie) == 1
        assert world.relation(tie[0], world.base) == ND
        assert RELATIONS[e.label] == world.relation(updated[0], kb)
        assert e.comparison.pair not in touched
    # operational labels by brute force: the option that beats (best) or loses to (worst) both others
    assert probes["operational"]
    for e in probes["operational"]:
        goal = "best" if "best" in e.text else "worst"
        want = SUP if goal == "best" else INF
        winners = [
            i
            for i, o in enumerate(e.options)
            if all(
                world.relation(Comparison(o, p, *e.comparison.cluster), kb) == want
                for p in e.options
                if p != o
            )
        ]
        assert winners == [e.label]
        assert e.options[e.label] in e.comparison.pair  # the answer is one of the update's two regimens
        assert all(o in e.text for o in e.options)
    assert all(e.comparison.pair not in touched for e in probes["locality"])


def test_no_test_probe_leaks_into_training_streams(world):
    probes = probe_set(world, seed=0)
    rng = np.random.default_rng(0)
    pre = pretraining_items(world, rng)
    assert leaked_probes(pre, probes) == 0
    for s in FT_STRATEGIES:
        stream = update_items(world, s, rng, replay=pre)
        assert leaked_probes(stream, probes) == 0
        updated = {c.pair for c in world.updated_keys()}
        assert not any(e.template.startswith("test-") for e in stream if e.comparison.pair in updated)
    # and the check does catch a leak
    assert leaked_probes(probes["lexical"][:3], probes) == 3


def test_use_probes_need_the_update(world):
    probes = probe_set(world, seed=0)
    touched = {c.pair for c in world.updated_keys()}
    checked = 0
    # where the update overturned a base fact, the update-blind rule gives the old (now wrong) answer
    for e in probes["compositional"]:
        m, cl = e.options[0], e.comparison.cluster
        hops = [Comparison(e.comparison.regimen, m, *cl), Comparison(m, e.comparison.comparator, *cl)]
        (updated,) = [h for h in hops if h.pair in touched]
        if world.relation(updated, world.base) is not None:
            assert world.update_blind_label(e) != e.label
            checked += 1
    assert checked > 0
    for fam in ("compositional", "operational"):
        assert 0.0 <= update_blind_accuracy(world, probes[fam]) <= 0.6


def test_bm25_retrieves_the_update(world):
    pytest.importorskip("rank_bm25")
    r = BM25Retriever(world)
    ups = world.latest_updates()
    hits = sum(
        u.comparison.regimen in r(u.closed_questions[0])
        and u.comparison.comparator in r(u.closed_questions[0])
        for u in ups
    )
    assert hits / len(ups) >= 0.9


def test_bad_input():
    with pytest.raises(ValueError, match="n_base"):
        ClinicalWorld.generate(n_base=2)
    with pytest.raises(ValueError, match="n_base"):  # the world cannot hold 5000 facts: raise, never truncate
        ClinicalWorld.generate(n_base=5000, n_conditions=1, drugs_per_cluster=4)
    with pytest.raises(ValueError, match="tie_share"):
        ClinicalWorld.generate(tie_share=-0.1)
    with pytest.raises(ValueError, match="conflict_share"):
        ClinicalWorld.generate(conflict_share=1.5)
    with pytest.raises(ValueError, match="drugs_per_cluster"):
        ClinicalWorld.generate(drugs_per_cluster=2)
    w = ClinicalWorld.generate(n_base=20, n_updates=4, seed=0)
    c = w.base_facts()[0]
    with pytest.raises(ValueError, match="family"):
        w.render("poetry", c, w.state())
    with pytest.raises(ValueError, match="middle"):
        w.render("compositional", c, w.state())
    with pytest.raises(ValueError, match="middle"):
        w.render("operational", c, w.state())
    with pytest.raises(ValueError, match="compositional"):
        w.update_blind_label(w.render("original", c, w.state()))
    with pytest.raises(ValueError, match="pretrain_epochs"):
        IntegrationConfig(pretrain_epochs=0)
    with pytest.raises(ValueError, match="context_share"):
        IntegrationConfig(context_share=1.0)
    with pytest.raises(ValueError, match="d_model"):
        ProbeClassifier(10, d_model=0)
    with pytest.raises(ValueError, match="strategy"):
        update_items(w, "rome", np.random.default_rng(0))


def test_a_world_from_your_own_records_matches_the_generated_one():
    """Rebuilt from its facts and dated updates alone, a generated world has the same state, conflicts and probes."""
    w = ClinicalWorld.generate(n_base=60, n_updates=20, seed=3)
    triples = [(u.comparison, u.answer, u.date) for u in w.updates]
    own = ClinicalWorld.from_records(w.base, triples[::-1], synonyms=w.synonyms)  # any order: sorted by date
    assert own.state() == w.state()
    assert [u.conflicting_edit for u in own.updates] == [u.conflicting_edit for u in w.updates]
    assert [u.closed_questions for u in own.updates] == [u.closed_questions for u in w.updates]
    assert {f: [e.label for e in v] for f, v in probe_set(own).items()} == {
        f: [e.label for e in v] for f, v in probe_set(w).items()
    }


def test_from_records_orientation_and_conflicts():
    base = {
        ("a", "b", "x", "induction", "overall survival"): SUP,
        ("b", "c", "x", "induction", "overall survival"): ND,
    }
    w = ClinicalWorld.from_records(
        base,
        [
            (("b", "a", "x", "induction", "overall survival"), SUP, "2020-01-01"),  # swapped: overturns a > b
            (("a", "c", "x", "induction", "overall survival"), INF, "2019-05-05"),  # a new comparison
            (("a", "b", "x", "induction", "overall survival"), INF, "2021-01-01"),  # restates the 2020 result
        ],
    )
    assert [u.date for u in w.updates] == ["2019-05-05", "2020-01-01", "2021-01-01"]
    assert [u.conflicting_edit for u in w.updates] == [False, True, False]
    assert w.relation(Comparison("a", "b", "x", "induction", "overall survival"), w.state()) == INF
    assert w.synonyms["a"] == ["a"] and w.synonyms["overall survival"] == ["OS"]


def test_from_records_bad_input():
    good = {
        ("a", "b", "x", "induction", "overall survival"): SUP,
        ("a", "c", "x", "induction", "overall survival"): ND,
    }
    up = [(("a", "b", "x", "induction", "overall survival"), INF, "2020-01-01")]
    for kwargs, match in [
        (dict(base={("a", "b", "x", "weekly", "overall survival"): SUP}), "context"),
        (dict(base={("a", "b", "x", "induction", "mood"): SUP}), "endpoint"),
        (dict(base={("a", "b", "x", "induction", "overall survival"): "better"}), "relation"),
        (dict(base={("a", "a", "x", "induction", "overall survival"): SUP}), "regimen"),
        (dict(base={("a", "b"): SUP}), "5-tuple"),
        (dict(base={**good, ("b", "a", "x", "induction", "overall survival"): SUP}), "twice"),
        (dict(base=dict(list(good.items())[:1])), "at least two"),
        (dict(updates=[]), "at least one"),
        (dict(updates=[(up[0][0], INF, "June 2020")]), "ISO date"),
        (dict(updates=[(up[0][0], INF)]), "triples"),
        (dict(synonyms={"a": []}), "synonyms"),
    ]:
        args = dict(base=good, updates=up) | kwargs
        with pytest.raises(ValueError, match=match):
            ClinicalWorld.from_records(**args)


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 10_000))
def test_world_invariants_property(seed):
    w = ClinicalWorld.generate(n_base=30, n_updates=10, seed=seed)
    kb = w.state()
    assert all(w.relation(c.swapped(), kb) == flip(r) for c, r in kb.items())
    assert all(u.closed_answer_m == flip(u.answer) for u in w.updates)


@pytest.mark.slow
def test_integration_fits_updates_and_keeps_shapes():
    w = ClinicalWorld.generate(n_base=30, n_updates=8, seed=1)
    cfg = IntegrationConfig(pretrain_epochs=3, ft_epochs=100)
    model, enc, items = pretrain(w, cfg)
    probes = probe_set(w, seed=1)
    edited = integrate(model, enc, w, "ft_q1", cfg)
    acc = evaluate_families(edited, enc, probes)
    assert acc["original"] == 1.0  # edit success: training stops only once every update is fitted
    assert set(acc) >= set(FAMILIES)
    with pytest.raises(ValueError, match="strategy"):
        integrate(model, enc, w, "none", cfg)
    with pytest.raises(ValueError, match="order"):
        integrate(model, enc, w, "ft_q1", cfg, order="random")


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("medkit", tmp_path)
