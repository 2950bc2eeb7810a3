"""Geospatial FM audit: concentration indices against closed forms and brute force, bootstrap against a loop
and scipy, the auditor against a hand-made table with planted disagreements, the harness contract."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.linear_model import LogisticRegression

from neurips26.evaluation import (
    AliasTable,
    EvaluationHarness,
    ResultsAuditor,
    benchmark_concentration,
    bootstrap_ci,
    gini,
    hhi,
    normalize_protocol,
    pretraining_uniqueness,
    read_results_csv,
    release_rates,
    synthetic_eo_benchmark,
    synthetic_literature,
    top_k_share,
)
from neurips26.evaluation.gfm_audit import (
    PROTOCOLS,
    PCABackbone,
    RandomConvBackbone,
    SoftmaxProbe,
    TinyCNNBackbone,
    concentration_bootstrap,
    concentration_intervals,
    evaluate_probe,
    fixed_split,
    kendall_tau_min,
)
from neurips26.harness.testing import assert_quick_verdict


def brute_gini(c):
    c = np.asarray(c, float)
    return sum(abs(a - b) for a in c for b in c) / (2 * len(c) ** 2 * c.mean())


# --- concentration -------------------------------------------------------------------------------------------


def test_closed_forms_uniform_and_one_benchmark():
    assert gini([5] * 8) == pytest.approx(0.0, abs=1e-12)
    assert hhi([5] * 8) == pytest.approx(1 / 8)
    assert top_k_share([5] * 8, 3) == pytest.approx(3 / 8)
    one = [0] * 9 + [12]  # one benchmark takes every evaluation of 10
    assert gini(one) == pytest.approx(9 / 10)
    assert hhi(one) == pytest.approx(1.0)
    assert top_k_share(one, 3) == pytest.approx(1.0)


def test_corpus_concentration_closed_forms():
    uniform = {f"p{i}": [f"B{j}" for j in range(6)] for i in range(5)}
    c = benchmark_concentration(uniform, n_boot=50)
    assert (c.gini, c.hhi, c.top3_share, c.n_benchmarks, c.n_evaluations) == pytest.approx(
        (0, 1 / 6, 0.5, 6, 30)
    )
    one = {f"p{i}": ["EuroSAT"] for i in range(7)}
    c = benchmark_concentration(one, categories=["EuroSAT", "BigEarthNet", "fMoW", "UCMerced"], n_boot=50)
    assert (
        c.gini == pytest.approx(3 / 4) and c.hhi == pytest.approx(1.0) and c.top3_share == pytest.approx(1.0)
    )
    assert c.ci["hhi"] == pytest.approx((1.0, 1.0))  # every resample is the same corpus


def test_aliases_count_once_per_paper():
    corpus = {
        "a": ["RESISC-45", "NWPU-RESISC45", "EuroSAT"],
        "b": ["resisc45", "fMoW"],
        "c": ["fMoW-Sentinel"],
    }
    from neurips26.evaluation.gfm_audit import DEFAULT_BENCHMARK_ALIASES

    c = benchmark_concentration(corpus, canonical=DEFAULT_BENCHMARK_ALIASES.canonical, n_boot=0)
    assert c.counts == {"EuroSAT": 1, "NWPU-RESISC45": 2, "fMoW": 1, "fMoW-Sentinel": 1}
    assert c.overlap_with_top10 == {"a": 1.0, "b": 1.0, "c": 1.0}


@settings(max_examples=40)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=25).filter(lambda v: sum(v) > 0))
def test_gini_and_hhi_properties(counts):
    k = len(counts)
    g = gini(counts)
    assert g == pytest.approx(brute_gini(counts), abs=1e-12)
    assert -1e-12 <= g <= (k - 1) / k + 1e-12
    assert gini([3 * c for c in counts[::-1]]) == pytest.approx(g, abs=1e-12)  # scale and order free
    h = hhi(counts)
    s = np.asarray(counts) / sum(counts)
    assert h == pytest.approx(float(np.sum(s**2)))
    assert 1 / k - 1e-12 <= h <= 1 + 1e-12
    assert top_k_share(counts, k) == pytest.approx(1.0)


def test_bootstrap_ci_equals_a_loop_and_scipy():
    rng = np.random.default_rng(3)
    x = list(rng.exponential(size=40))
    lo, hi = bootstrap_ci(x, np.mean, n_boot=400, random_state=7, method="percentile")
    idx = np.random.default_rng(7).integers(0, 40, size=(400, 40))
    boots = [np.mean([x[i] for i in row]) for row in idx]
    assert (lo, hi) == pytest.approx((np.quantile(boots, 0.025), np.quantile(boots, 0.975)))
    blo, bhi = bootstrap_ci(x, np.mean, n_boot=400, random_state=7, method="basic")
    assert (blo, bhi) == pytest.approx((2 * np.mean(x) - hi, 2 * np.mean(x) - lo))
    ref = stats.bootstrap((np.array(x),), np.mean, n_resamples=20000, method="percentile", random_state=1)
    lo2, hi2 = bootstrap_ci(x, np.mean, n_boot=20000, random_state=2, method="percentile")
    assert lo2 == pytest.approx(ref.confidence_interval.low, abs=0.03)
    assert hi2 == pytest.approx(ref.confidence_interval.high, abs=0.03)
    ref = stats.bootstrap((np.array(x),), np.mean, n_resamples=20000, method="basic", random_state=1)
    lo3, hi3 = bootstrap_ci(x, np.mean, n_boot=20000, random_state=2, method="basic")
    assert (lo3, hi3) == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high), abs=0.03)


def test_vectorised_paper_bootstrap_matches_generic_bootstrap():
    rng = np.random.default_rng(0)
    inc = (rng.random((60, 12)) < np.linspace(0.9, 0.1, 12)).astype(float)
    est, boots = concentration_bootstrap(inc, 4000, random_state=0)
    assert est["gini"] == pytest.approx(gini(inc.sum(0)))
    rows = list(inc)
    for name, fn in (("gini", gini), ("hhi", hhi)):
        lo, hi = bootstrap_ci(
            rows, lambda r, fn=fn: fn(np.sum(r, axis=0)), 4000, random_state=1, method="percentile"
        )
        q = np.quantile(boots[name], [0.025, 0.975])
        assert q == pytest.approx([lo, hi], abs=0.01)
    ci = concentration_intervals(inc, 4000, random_state=0, method="basic")
    assert ci["hhi"] == pytest.approx(tuple(2 * est["hhi"] - np.quantile(boots["hhi"], [0.975, 0.025])))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: gini([]), "counts"),
        (lambda: gini([1, -1]), "counts"),
        (lambda: hhi([0, 0]), "counts"),
        (lambda: top_k_share([1, 2], 0), "k"),
        (lambda: bootstrap_ci([1, 2], np.mean, n_boot=1), "n_boot"),
        (lambda: bootstrap_ci([1, 2], np.mean, level=1.5), "level"),
        (lambda: bootstrap_ci([1, 2], np.mean, method="bca"), "method"),
        (lambda: bootstrap_ci([], np.mean), "units"),
        (lambda: benchmark_concentration({}), "benchmarks_per_paper"),
        (lambda: benchmark_concentration({"p": []}), "no benchmark"),
        (lambda: benchmark_concentration({"p": ["A"]}, n_boot=1), "n_boot"),
        (lambda: concentration_bootstrap(np.zeros((3, 2))), "incidence"),
    ],
)
def test_concentration_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_concentration_rejects_a_string_as_benchmark_list():
    with pytest.raises(TypeError, match="list of names"):
        benchmark_concentration({"p": "EuroSAT"})


# --- protocol normalisation and aliases ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Linear probing", "linear"),
        ("frozen encoder", "linear"),
        ("LP", "linear"),
        ("frozen backbone + linear head", "linear"),
        ("fine-tuning", "finetune"),
        ("Full FT", "finetune"),
        ("end-to-end finetuning", "finetune"),
        ("k-NN eval", "knn"),
        ("nearest neighbour", "knn"),
        ("10-shot linear probe", "fewshot"),
        ("zero-shot", "zeroshot"),
        ("LoRA", "other"),
        ("standard protocol", "unknown"),
        ("", "unknown"),
        (None, "unknown"),
        (float("nan"), "unknown"),
        (42, "unknown"),
    ],
)
def test_normalize_protocol(text, expected):
    assert normalize_protocol(text) == expected


@settings(max_examples=60)
@given(st.one_of(st.text(max_size=30), st.none(), st.floats(), st.integers()))
def test_normalize_protocol_never_crashes(text):
    assert normalize_protocol(text) in PROTOCOLS


def test_alias_table():
    t = AliasTable({"NWPU-RESISC45": ["RESISC-45"], "fMoW": ["fMoW-RGB"], "fMoW-Sentinel": ["fmow s2"]})
    assert t.canonical(" resisc 45 ") == "NWPU-RESISC45"
    assert t.canonical("FMOW-rgb") == "fMoW" and t.canonical("fMoW Sentinel") == "fMoW-Sentinel"
    assert t.canonical("Other") == "Other" and t.canonical("") is None and t.canonical(None) is None
    assert AliasTable({"A": ["x"]}, strict=True).canonical("y") is None
    with pytest.raises(ValueError, match="maps to both"):
        AliasTable({"A": ["x"], "B": ["X"]})
    with pytest.raises(TypeError, match="list of names"):
        AliasTable({"A": "x"})


# --- the auditor on a hand-made table ----------------------------------------------------------------------------


def hand_table():
    r = []

    def add(paper, model, bench, value, strategy="linear probing", metric="accuracy", **kw):
        r.append(
            dict(
                paper=paper,
                model=model,
                benchmark=bench,
                metric=metric,
                value=value,
                eval_strategy=strategy,
                **kw,
            )
        )

    add("p1", "M1", "EuroSAT", 92.0)  # key 1: 92 vs 80 (fraction scale) -> flagged strict
    add("p2", "M1", "Euro-SAT", 0.80, metric="OA")
    add("p1", "M1", "RESISC-45", 85.0)  # key 2: 85 vs 88 via aliases -> kept, not flagged
    add("p3", "M1", "NWPU-RESISC45", 88.0, strategy="frozen encoder")
    add("p1", "M2", "EuroSAT", 70.0)  # key 3: p1 reports two different values -> dropped (duplicate)
    add("p1", "M2", "EuroSAT", 75.0)
    add("p2", "M2", "EuroSAT", 90.0)
    add("p2", "M3", "EuroSAT", 91.0)  # key 4: a few-shot row -> dropped (restricted samples)
    add("p3", "M3", "EuroSAT", 60.0, train_samples="10%")
    add("p2", "M4", "EuroSAT", 91.0)  # key 5: only one paper -> dropped
    add("p1", "ImageNet-supervised ResNet-50", "EuroSAT", 60.0)  # baseline -> dropped
    add("p2", "ImageNet-supervised ResNet-50", "EuroSAT", 85.0)
    add("p1", "M1", "DOTA", 40.0, metric="mAP")  # detection -> dropped
    add("p2", "M1", "DOTA", 70.0, metric="mAP")
    add("p1", "M5", "fMoW", 60.0)  # copied number counts once: key single-paper -> dropped
    add("p2", "M5", "fMoW", 75.0, provenance="copied")
    add("p1", "M6", "fMoW", 60.0)  # key 6: linear 60 / 62 vs finetune 75: loose only
    add("p2", "M6", "fMoW", 62.0)
    add("p3", "M6", "fMoW", 75.0, strategy="fine-tuning")
    add("p4", "M6", "fMoW", 75.5, strategy="Full FT")
    add("p1", "M6", "fMoW-Sentinel", 50.0)  # fMoW-Sentinel is NOT fMoW: its own (single-paper) key
    add("p1", "M7", "BigEarthNet", "n/a")  # unparsable value -> dropped row
    return pd.DataFrame(r)


def test_strict_auditor_finds_exactly_the_planted_disagreement():
    rep = ResultsAuditor("strict").audit(hand_table())
    got = {(k.model, k.benchmark, k.eval_strategy) for k in rep.keys.itertuples()}
    assert got == {
        ("M1", "EuroSAT", "linear"),
        ("M1", "NWPU-RESISC45", "linear"),
        ("M6", "fMoW", "linear"),
        ("M6", "fMoW", "finetune"),
    }
    flagged = rep.disagreements
    assert len(flagged) == 1 and flagged.loc[0, "model"] == "M1" and flagged.loc[0, "benchmark"] == "EuroSAT"
    assert flagged.loc[0, "spread"] == pytest.approx(12.0)
    assert flagged.loc[0, "std"] == pytest.approx(np.std([92, 80], ddof=1))
    d = rep.dropped
    assert (d["baseline_rows"], d["detection_rows"], d["copied_rows"], d["rows_without_value"]) == (
        2,
        2,
        1,
        1,
    )
    assert (d["keys_intra_paper_duplicates"], d["keys_restricted_samples"]) == (1, 1)
    assert rep.count_at(2.0) == 3


def test_loose_key_flags_the_protocol_mixture():
    rep = ResultsAuditor("loose").audit(hand_table())
    flagged = {(k.model, k.benchmark) for k in rep.disagreements.itertuples()}
    assert flagged == {("M1", "EuroSAT"), ("M6", "fMoW")}
    row = rep.keys[(rep.keys.model == "M6") & (rep.keys.benchmark == "fMoW")].iloc[0]
    assert row["spread"] == pytest.approx(15.5) and row["n_papers"] == 4


def test_auditor_finds_the_planted_truth_of_a_noise_free_literature():
    lit = synthetic_literature(n_papers=80, seed=5, noise_sd=0.0)
    models = AliasTable({f"GFM-{i:02d}": [f"GFM {i:02d}"] for i in range(30)})
    rep = ResultsAuditor("strict", model_aliases=models, benchmark_aliases=AliasTable(lit.benchmark_aliases))
    found = {
        (k.model, k.benchmark, k.metric, k.eval_strategy)
        for k in rep.audit(lit.results).disagreements.itertuples()
    }
    assert len(lit.truth["strict"]) > 5
    assert found == lit.truth["strict"]


def test_read_results_csv_survives_messy_strings(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text(
        "Paper,Model,Benchmark,Metric,Value,Eval_Strategy\n"
        'p1,M1,EuroSAT,acc,91.5,"Linear probing, frozen"\n'
        "p2,M1,eurosat,Accuracy,n/a,???\n"
        "p3,M1,EuroSAT,OA,0.79,\n"
    )
    table = read_results_csv(path)
    rep = ResultsAuditor("loose").audit(table)
    assert rep.dropped["rows_without_value"] == 1
    assert rep.keys.loc[0, "spread"] == pytest.approx(91.5 - 79.0)
    bad = tmp_path / "bad.csv"
    bad.write_text("paper,model,metric,value\np1,M1,acc,1\n")
    with pytest.raises(ValueError, match="benchmark"):
        read_results_csv(bad)
    with pytest.raises(ValueError, match="path"):
        read_results_csv(tmp_path / "missing.csv")


@pytest.mark.parametrize(
    "kwargs, match",
    [({"key": "medium"}, "key"), ({"threshold": -1}, "threshold"), ({"min_papers": 1}, "min_papers")],
)
def test_auditor_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ResultsAuditor(**kwargs)


def test_auditor_bad_tables():
    with pytest.raises(TypeError, match="DataFrame"):
        ResultsAuditor().audit([{"paper": "p"}])
    with pytest.raises(ValueError, match="value"):
        ResultsAuditor().audit(
            pd.DataFrame({"paper": ["p"], "model": ["m"], "benchmark": ["b"], "metric": ["a"]})
        )
    with pytest.raises(TypeError, match="model_aliases"):
        ResultsAuditor(model_aliases={"A": ["a"]})
    empty = ResultsAuditor().audit(pd.DataFrame(columns=["paper", "model", "benchmark", "metric", "value"]))
    assert empty.keys.empty and empty.disagreements.empty


def _rows(*rows):
    cols = ["paper", "model", "benchmark", "metric", "value", "eval_strategy", "provenance"]
    return pd.DataFrame([dict(zip(cols, r, strict=True)) for r in rows])


@pytest.mark.parametrize(
    "table, dropped",
    [
        (_rows(("p1", "Random init ViT-B", "EuroSAT", "acc", 50, "linear", "rerun")), {"baseline_rows": 1}),
        (_rows(("p1", "M1", "EuroSAT", "acc", "n/a", "linear", "rerun")), {"rows_without_value": 1}),
        (_rows(("p1", "M1", "DOTA", "mAP", 40, "linear", "rerun")), {"detection_rows": 1}),
        (_rows(("p1", "M1", "EuroSAT", "acc", 40, "linear", "copied")), {"copied_rows": 1}),
        (
            pd.DataFrame(
                {c: pd.Series([], dtype="string") for c in ["paper", "model", "benchmark", "metric", "value"]}
            ),
            {},
        ),
    ],
)
def test_audit_of_a_table_whose_rows_are_all_filtered_is_empty(table, dropped):
    for key in ("strict", "loose"):
        rep = ResultsAuditor(key).audit(table)
        assert rep.keys.empty and rep.disagreements.empty and rep.count_at(10) == 0
        for name, n in dropped.items():
            assert rep.dropped[name] == n


def test_self_supervised_models_are_not_baselines():
    a = ResultsAuditor()
    for name in [
        "DINO-MC (self-supervised)",
        "Self_Supervised ViT",
        "semi-supervised MAE",
        "unsupervised X",
        "GFM-03",
    ]:
        assert not a.is_baseline(name), name
    for name in [
        "Supervised ViT-B",
        "ImageNet-supervised ResNet-50",
        "fully-supervised ResNet",
        "Random init ViT-B",
        "Random_init_ViT-B",
        "RANDOMINIT",
        "RandomForest",
        "SVM",
        "k-NN",
    ]:
        assert a.is_baseline(name), name
    rep = a.audit(
        _rows(
            ("p1", "DINO-MC (self-supervised)", "EuroSAT", "acc", 90, "fine-tuning", "rerun"),
            ("p2", "DINO-MC (self-supervised)", "Euro-SAT", "OA", 70, "Full FT", "rerun"),
            ("p1", "Supervised ViT-B", "EuroSAT", "acc", 80, "fine-tuning", "rerun"),
            ("p2", "Supervised ViT-B", "EuroSAT", "acc", 60, "fine-tuning", "rerun"),
        )
    )
    assert rep.dropped["baseline_rows"] == 2
    assert list(rep.disagreements["model"]) == ["DINO-MC (self-supervised)"]
    assert rep.disagreements.loc[0, "spread"] == pytest.approx(20.0)


def test_unlisted_names_differing_in_case_or_punctuation_are_one_name():
    table = _rows(
        ("p1", "Prithvi", "So2Sat", "OA", 61.2, "linear probe", "rerun"),
        ("p2", "prithvi", "so2sat", "acc", 48.0, "frozen encoder", "rerun"),
        ("p3", "PRITHVI", "SO2SAT dataset", "acc", 55.0, "LP", "rerun"),
        ("p1", "SatMAE", "EuroSAT", "acc", 90.0, "linear", "rerun"),
        ("p3", "Sat-MAE", "eurosat", "acc", 80.0, "linear", "rerun"),
    )
    rep = ResultsAuditor().audit(table)
    got = {(k.model, k.benchmark): (k.n_papers, k.spread) for k in rep.keys.itertuples()}
    # the most frequent spelling wins (ties: the shortest, then alphabetical); a table's canonical name always
    assert got.keys() == {("PRITHVI", "So2Sat"), ("SatMAE", "EuroSAT")}
    assert got[("PRITHVI", "So2Sat")][0] == 3
    assert got[("PRITHVI", "So2Sat")][1] == pytest.approx(61.2 - 48.0)
    assert got[("SatMAE", "EuroSAT")][1] == pytest.approx(10.0)
    # as typed: the 13-point disagreement is split over three single-paper keys
    assert ResultsAuditor(fold_unlisted=False).audit(table).keys.empty
    # the fold never merges different names
    assert (
        len(
            ResultsAuditor()
            .audit(
                _rows(
                    ("p1", "M1", "fMoW", "acc", 60.0, "linear", "rerun"),
                    ("p2", "M1", "fMoW-Sentinel", "acc", 80.0, "linear", "rerun"),
                )
            )
            .keys
        )
        == 0
    )


def test_fold_spellings():
    from neurips26.evaluation.gfm_audit.audit import fold_spellings

    out = fold_spellings(
        ["so2sat", "So2Sat", "so2sat", "SO2SAT dataset", "fMoW", "fmow-sentinel"], preferred=["FMOW"]
    )
    assert out == {
        "so2sat": "so2sat",
        "So2Sat": "so2sat",
        "SO2SAT dataset": "so2sat",
        "fMoW": "FMOW",
        "fmow-sentinel": "fmow-sentinel",
    }


def test_concentration_and_uniqueness_fold_unlisted_spellings():
    per_paper = {
        "p1": ["So2Sat", "EuroSAT"],
        "p2": ["so2sat", "Euro-SAT"],
        "p3": ["SO2SAT dataset", "BigEarthNet"],
    }
    c = benchmark_concentration(per_paper, n_boot=0)
    assert c.n_benchmarks == 3 and c.n_evaluations == 6
    assert sorted(c.counts.values()) == [1, 2, 3] and c.counts["EuroSAT"] == 2
    assert benchmark_concentration(per_paper, n_boot=0, fold_unlisted=False).n_benchmarks == 5
    # categories give the preferred spelling and no phantom zero category
    c2 = benchmark_concentration(
        per_paper, n_boot=0, categories=["So2Sat", "EuroSAT", "BigEarthNet", "UCMerced"]
    )
    assert c2.counts == {"BigEarthNet": 1, "EuroSAT": 2, "So2Sat": 3, "UCMerced": 0}
    pre = {
        "a": ["SSL4EO-S12", "MillionAID"],
        "b": ["ssl4eo_s12", "Million-AID"],
        "c": ["SeCo", "EUROSAT"],  # a mis-listed downstream benchmark in another spelling
        "d": ["seco dataset", "Sentinel-2"],
        "f": ["Landsat 8 dataset", "SENTINEL_2 imagery"],  # sensors only: no pretraining data
        "e": ["GeoPile"],
    }
    u = pretraining_uniqueness(pre, downstream_benchmarks=["Euro-SAT"])
    assert u.n_with_data == 5 and u.unique == ["e"]
    assert pretraining_uniqueness(pre, downstream_benchmarks=["Euro-SAT"], fold_unlisted=False).n_unique == 5


def test_auditor_recovers_the_planted_truth_from_held_out_spellings_with_default_tables():
    from neurips26.evaluation.gfm_audit.experiment import _respelled, _strict_scores

    lit = synthetic_literature(n_papers=80, seed=5, noise_sd=0.0)
    tables = dict(
        model_aliases=AliasTable({f"GFM-{i:02d}": [f"GFM {i:02d}"] for i in range(30)}),
        benchmark_aliases=AliasTable(lit.benchmark_aliases),
    )
    results, _, model_names, bench_names = _respelled(lit, 5, tables)
    assert (results["model"] != lit.results["model"]).mean() > 0.5
    sc = _strict_scores(lit, results, model_names, bench_names)
    assert sc["found"] == lit.truth["strict"]
    assert _strict_scores(lit, results, model_names, bench_names, fold_unlisted=False)["recall"] < 0.9


def test_ranking_change_is_never_decided_by_a_float_tie():
    from neurips26.evaluation.gfm_audit.experiment import _ranking_differs

    a = np.array([80.0, 75.0, 75.0])
    tie = np.array([0.1, 0.2, 0.3, 0.4, 0.5]) * 100
    m1, m2 = tie.mean(), tie[::-1].mean()  # one value, summed in two orders
    assert not _ranking_differs(a, np.array([80.0, 75.0, 75.0 + 1e-12]))
    assert not _ranking_differs(np.array([80.0, m1, m2]), np.array([80.0, m2, m1]))
    assert _ranking_differs(a, np.array([75.0, 80.0, 75.0]))  # a real swap
    assert not _ranking_differs(a, np.array([81.0, 70.0, 72.0]))  # a tie broken either way is no change


def test_pretraining_uniqueness_hand_made():
    table = AliasTable({"SSL4EO-S12": ["SSL4EO S12"], "MillionAID": ["Million-AID"]})
    pre = {
        "a": ["SSL4EO-S12", "Sentinel-2", "MillionAID"],
        "b": ["Million-AID", "SSL4EO S12", "EuroSAT"],  # same set as a (alias, order, mis-listed benchmark)
        "c": ["SSL4EO-S12"],
        "d": ["Landsat 8"],  # sensor only: no extractable pretraining data
        "e": ["GeoPile", "GeoPile"],
    }
    u = pretraining_uniqueness(pre, aliases=table, downstream_benchmarks=["EuroSAT"])
    assert u.n_with_data == 4 and u.unique == ["c", "e"]
    assert u.sets["a"] == u.sets["b"] == ("MillionAID", "SSL4EO-S12")
    with pytest.raises(TypeError, match="list of names"):
        pretraining_uniqueness({"a": "SSL4EO"})


def test_release_rates():
    rec = pd.DataFrame({"code": [True, "yes", 0, False], "weights": [1, "no", False, True]})
    assert release_rates(rec) == {"code": 0.5, "weights": 0.5, "no_weights": 0.5, "neither": 0.25}
    with pytest.raises(ValueError, match="weights"):
        release_rates(pd.DataFrame({"code": [1]}))


def test_literature_generator_closed_form_and_bad_input():
    lit = synthetic_literature(n_papers=20, seed=0)
    s = lit.expected_shares
    assert s.sum() == pytest.approx(1.0)
    assert lit.closed_form()["hhi"] == pytest.approx(float(np.sum(s**2)))
    with pytest.raises(ValueError, match="n_papers"):
        synthetic_literature(n_papers=1)
    with pytest.raises(ValueError, match="deviation_rate"):
        synthetic_literature(deviation_rate=1.5)


# --- the harness ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_bench():
    return synthetic_eo_benchmark(300, n_classes=4, noise=0.3, seed=1, task_seed=3)


def test_eo_patches_shape_and_determinism(small_bench):
    X, y = small_bench
    assert X.shape == (300, 13, 16, 16) and X.dtype == np.float32 and set(np.unique(y)) == {0, 1, 2, 3}
    X2, y2 = synthetic_eo_benchmark(300, n_classes=4, noise=0.3, seed=1, task_seed=3)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    with pytest.raises(ValueError, match="noise"):
        synthetic_eo_benchmark(10, noise=-1)
    with pytest.raises(ValueError, match="n must"):
        synthetic_eo_benchmark(1)


def test_softmax_probe_matches_logistic_regression():
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 2.5, (4, 6))
    y = rng.integers(0, 4, 800)
    F = centres[y] + rng.normal(size=(800, 6))
    tr, te = slice(0, 600), slice(600, None)
    ref = LogisticRegression(max_iter=2000).fit(F[tr], y[tr]).score(F[te], y[te]) * 100
    accs = evaluate_probe(F[tr], y[tr], F[te], y[te], "linear", seeds=[0, 1, 2])
    assert len(accs) == 3 and all(abs(a - ref) <= 2.0 for a in accs)
    assert evaluate_probe(F[tr], y[tr], F[te], y[te], "finetune", seeds=[0])[0] >= ref - 3
    knn = evaluate_probe(F[tr], y[tr], F[te], y[te], "knn", seeds=[0, 1])
    assert knn[0] == knn[1]
    with pytest.raises(ValueError, match="protocol"):
        evaluate_probe(F[tr], y[tr], F[te], y[te], "svm")
    with pytest.raises(ValueError, match="hidden"):
        SoftmaxProbe(hidden=-1)
    with pytest.raises(ValueError, match="epochs"):
        SoftmaxProbe(epochs=0)
    with pytest.raises(ValueError, match="min_steps"):
        SoftmaxProbe(min_steps=-1)


def test_linear_probe_trains_to_logistic_regression_on_a_small_set():
    """250 rows is one 128-row batch per epoch: the step floor, not the epoch count, must train the head."""
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(X))
    tr, te = order[:250], order[250:]
    scaled = StandardScaler().fit(X[tr])
    ref = (
        LogisticRegression(max_iter=2000)
        .fit(scaled.transform(X[tr]), y[tr])
        .score(scaled.transform(X[te]), y[te])
    )
    acc = (SoftmaxProbe(seeds=[0]).fit(X[tr], y[tr]).predict(X[te]) == y[te]).mean()
    assert acc >= ref - 0.02


@pytest.mark.slow
def test_harness_table_schema_std_and_determinism(small_bench):
    X, y = small_bench
    backbones = {"PCA": PCABackbone(8), "RandomConv": RandomConvBackbone(8)}
    h = EvaluationHarness("linear", seeds=[0, 1, 2])
    t1 = h.run(backbones, {"bench": (X, y)})
    t2 = h.run(backbones, {"bench": (X, y)})
    pd.testing.assert_frame_equal(t1, t2)
    for row in t1.itertuples():
        assert row.std == pytest.approx(np.std(row.seed_values, ddof=1))
        assert row.value == pytest.approx(np.mean(row.seed_values)) and row.n_seeds == 3
    assert set(t1["provenance"]) == {"rerun"}
    rep = ResultsAuditor("strict", baseline_patterns=()).audit(t1.drop(columns="seed_values"))
    assert rep.dropped["rows_without_value"] == 0
    sp = h.split(len(y))
    assert len(np.intersect1d(sp.train, sp.test)) == 0 and len(sp.train) + len(sp.test) == len(y)


@pytest.mark.slow
def test_tiny_cnn_pretrains_once(small_bench):
    X, y = small_bench
    bb = TinyCNNBackbone((X[:100], y[:100]), width=4, epochs=1)
    f1 = bb.fit(X).transform(X[:5])
    f2 = bb.fit(X[:10]).transform(X[:5])  # a pre-trained backbone is not refitted per benchmark
    np.testing.assert_array_equal(f1, f2)
    assert f1.shape == (5, 8)
    with pytest.raises(ValueError, match="labels"):
        TinyCNNBackbone((X[:10], y[:5]))
    with pytest.raises(ValueError, match="patches"):
        PCABackbone(4).fit(np.zeros((3, 4)))


def test_harness_bad_input(small_bench):
    X, y = small_bench
    with pytest.raises(ValueError, match="protocol"):
        EvaluationHarness("lora")
    with pytest.raises(ValueError, match="seeds"):
        EvaluationHarness(seeds=[0])
    with pytest.raises(ValueError, match="test_fraction"):
        EvaluationHarness(test_fraction=1.0)
    with pytest.raises(ValueError, match="non-empty"):
        EvaluationHarness().run({}, {"b": (X, y)})
    with pytest.raises(ValueError, match="labels"):
        EvaluationHarness().run({"PCA": PCABackbone(4)}, {"b": (X, y[:10])})
    with pytest.raises(ValueError, match="n_components"):
        PCABackbone(0)
    with pytest.raises(ValueError, match="test_fraction"):
        fixed_split(10, 0.0)


def test_kendall_tau_min_against_scipy():
    scores = {
        "linear": {"a": 1, "b": 2, "c": 3},
        "knn": {"a": 3, "b": 2, "c": 1},
        "ft": {"a": 1, "b": 3, "c": 2},
    }
    ref = min(
        stats.kendalltau([scores[p][m] for m in "abc"], [scores[q][m] for m in "abc"]).statistic
        for p, q in itertools.combinations(scores, 2)
    )
    assert kendall_tau_min(scores) == pytest.approx(ref) and math.isclose(ref, -1.0)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("gfm-audit", tmp_path)
