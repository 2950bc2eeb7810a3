"""ModelLens: ranking metrics against brute force / scikit-learn / scipy, z-normalisation against scipy, the
ListMLE loss against the Plackett-Luce likelihood written out, the recommender on a leaderboard whose best model
is known by construction (new data sets and a new model), bad input on every entry point, the LCDB loader, and
the quick verdict."""

from __future__ import annotations

import importlib.util
import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import ndcg_score

from neurips26.harness.testing import assert_quick_verdict
from neurips26.recommendation import (
    ModelLens,
    hit_at_1,
    load_lcdb,
    ndcg_at_k,
    regret_at_1,
    weighted_tau,
    zscore_groups,
)
from neurips26.recommendation.modellens.modellens import family_from_name, name_tokens

# --- ranking metrics ------------------------------------------------------------------------------------------


def brute_weighted_tau(x: np.ndarray, y: np.ndarray) -> float:
    """Vigna's weighted tau, tie-free case, written out over all pairs: hyperbolic weights 1/(r+1) on the rank
    r of each element by decreasing x (0 = best), additive over the pair."""
    r = np.empty(len(x), int)
    r[np.argsort(-x)] = np.arange(len(x))
    num = den = 0.0
    for i, j in itertools.combinations(range(len(x)), 2):
        w = 1.0 / (r[i] + 1) + 1.0 / (r[j] + 1)
        num += w * np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])
        den += w
    return num / den


distinct = st.lists(st.integers(-1000, 1000), min_size=2, max_size=9, unique=True)


@settings(max_examples=40, deadline=None)
@given(distinct, st.randoms(use_true_random=False))
def test_weighted_tau_matches_the_pairwise_definition(values, rnd):
    true = np.asarray(values, float)
    pred = true.copy()
    rnd.shuffle(pred)  # a permutation: distinct predicted scores
    assert weighted_tau(true, pred) == pytest.approx(brute_weighted_tau(true, pred), abs=1e-12)


def test_weighted_tau_weights_swaps_at_the_true_top_more():
    true = np.arange(6, 0, -1, dtype=float)  # candidate 0 is the best
    top_swap = np.array([5, 6, 4, 3, 2, 1], float)
    bottom_swap = np.array([6, 5, 4, 3, 1, 2], float)
    assert weighted_tau(true, true) == pytest.approx(1.0)
    assert weighted_tau(true, -true) == pytest.approx(-1.0)
    assert weighted_tau(true, top_swap) < weighted_tau(true, bottom_swap) < 1.0
    assert weighted_tau(true, np.zeros(6)) == 0.0  # a constant ranking carries no order


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=2, max_size=10),
    st.lists(st.integers(0, 3), min_size=10, max_size=10),
    st.integers(1, 10),
)
def test_ndcg_matches_scikit_learn_including_ties(true, pred_levels, k):
    true = np.asarray(true)
    pred = np.asarray(pred_levels[: len(true)], float)  # few levels: many ties in the prediction
    span = true.max() - true.min()
    gains = np.exp2((true - true.min()) / span) - 1 if span > 0 else np.ones_like(true)
    if gains.sum() == 0:
        return
    expected = ndcg_score(gains[None], pred[None], k=k)  # linear gains given explicitly, ties averaged
    assert ndcg_at_k(true, pred, k) == pytest.approx(expected, abs=1e-12)


def test_ndcg_known_values():
    true = np.array([3.0, 2.0, 1.0, 0.0])  # gains 2^r - 1 with r = 1, 2/3, 1/3, 0
    g = np.exp2(np.array([1, 2 / 3, 1 / 3, 0])) - 1
    assert ndcg_at_k(true, true, 3) == pytest.approx(1.0)
    worst = np.array([0.0, 1.0, 2.0, 3.0])  # ranks 0, 1, 2, 3 as 4th, 3rd, 2nd, 1st
    dcg = g[3] / 1 + g[2] / math.log2(3) + g[1] / 2
    ideal = g[0] + g[1] / math.log2(3) + g[2] / 2
    assert ndcg_at_k(true, worst, 3) == pytest.approx(dcg / ideal)


def test_hit_and_regret_at_1_by_hand():
    true = np.array([0.9, 0.7, 0.5])
    assert hit_at_1(true, [3, 2, 1]) == 1.0
    assert regret_at_1(true, [3, 2, 1]) == 0.0
    assert hit_at_1(true, [1, 3, 2]) == 0.0
    assert regret_at_1(true, [1, 3, 2]) == pytest.approx(1 - 0.5)  # (0.7 - 0.5) / (0.9 - 0.5) kept
    assert hit_at_1(true, [2, 2, 1]) == 0.5  # a tie at the top counts fractionally
    assert regret_at_1(true, [1, 2, 3]) == pytest.approx(1.0)


@pytest.mark.parametrize("fn", [ndcg_at_k, weighted_tau, hit_at_1, regret_at_1])
def test_ranking_metrics_reject_bad_input(fn):
    with pytest.raises(ValueError, match="one length"):
        fn([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="at least 2"):
        fn([1.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        fn([1.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="1-D"):
        fn([[1.0, 2.0]], [[1.0, 2.0]])


def test_ndcg_rejects_bad_k():
    for k in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            ndcg_at_k([1.0, 2.0], [1.0, 2.0], k)


# --- z-normalisation --------------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(-100, 100, allow_nan=False)), min_size=1, max_size=30))
def test_zscore_groups_matches_scipy_per_group(pairs):
    groups = np.array([g for g, _ in pairs])
    y = np.array([v for _, v in pairs])
    higher = groups != 2  # group 2 is a loss: flipped
    z = zscore_groups(y, groups, higher, alpha=3.0)
    for g in np.unique(groups):
        sel = groups == g
        vals = y[sel]
        if np.ptp(vals) <= 1e-12 * max(1.0, abs(vals.mean())):
            assert np.all(z[sel] == 0)
            continue
        expected = np.clip(stats.zscore(vals, ddof=0) * (1 if g != 2 else -1), -3, 3)
        np.testing.assert_allclose(z[sel], expected, atol=1e-7)


def test_zscore_groups_bad_input():
    with pytest.raises(ValueError, match="one length"):
        zscore_groups([1.0, 2.0], ["a"])
    with pytest.raises(ValueError, match="finite"):
        zscore_groups([1.0, np.inf], ["a", "a"])
    with pytest.raises(ValueError, match="alpha"):
        zscore_groups([1.0, 2.0], ["a", "a"], alpha=0)


# --- the ListMLE loss ---------------------------------------------------------------------------------------------


def test_listwise_loss_is_the_plackett_luce_negative_log_likelihood():
    """One group of 4 sorted by true z and one of 2 (padded): the loss is the mean over groups of the mean over
    positions of -log P(item at position i is chosen first among the rest), scores divided by tau."""
    lens = ModelLens(tau=2.0)
    s = torch.tensor([1.0, 0.5, 2.0, -1.0, 0.3, 0.9])
    idx = torch.tensor([[0, 1, 2, 3], [4, 5, -1, -1]])
    z_hat = torch.zeros(6)
    t_z = torch.zeros(6)
    got = float(lens._listwise(s, z_hat, idx, t_z))

    def nll(scores):
        scores = np.asarray(scores) / 2.0
        return np.mean([-(scores[i] - np.log(np.exp(scores[i:]).sum())) for i in range(len(scores))])

    expected = 0.5 * (nll([1.0, 0.5, 2.0, -1.0]) + nll([0.3, 0.9]))
    assert got == pytest.approx(expected, rel=1e-6)


# --- the recommender on a leaderboard with a known answer ----------------------------------------------------

FAMILIES = {"tree_a": "tree", "tree_b": "tree", "linear_a": "linear", "linear_b": "linear", "knn_a": "knn"}


def synthetic_leaderboard(n_datasets=60, seed=0):
    """Trees win where 'nonlinearity' > 0, linear models where it is < 0, '_a' beats '_b' within a family."""
    rng = np.random.default_rng(seed)
    rows, side = [], {}
    for d in range(n_datasets):
        x = rng.uniform(-1, 1)
        x = x if abs(x) > 0.2 else np.sign(x) * 0.2 + x  # keep the winner clear of the boundary
        side[f"d{d}"] = {"nonlinearity": x, "rows": rng.integers(100, 10000)}
        for m, fam in FAMILIES.items():
            base = {"tree": x, "linear": -x, "knn": 0.0}[fam] + (0.3 if m.endswith("_a") else 0.0)
            rows.append({"model": m, "dataset": f"d{d}", "metric": "accuracy", "score": 0.7 + 0.1 * base})
            rows.append({"model": m, "dataset": f"d{d}", "metric": "logloss", "score": 0.5 - 0.1 * base})
    rec = pd.DataFrame(rows)
    side = pd.DataFrame(side).T.astype(float)
    models = pd.DataFrame({"family": FAMILIES}).rename_axis("model")
    return rec, side, models


FAST = dict(hidden=32, epochs=40, patience=40, list_batch=16, pair_batch=128, text_encoder=None)


@pytest.fixture(scope="module")
def fitted():
    rec, side, models = synthetic_leaderboard()
    train = rec[rec["dataset"].isin([f"d{i}" for i in range(40)])]
    lens = ModelLens(random_state=0, **FAST).fit(train, side, models)
    return lens, rec, side, models


@pytest.mark.slow  # shares a module fixture that fits for a few seconds
def test_ranks_new_datasets_by_their_meta_features(fitted):
    """Cold start: 20 data sets never seen in training, each given only its meta-features. The true winner is
    tree_a where nonlinearity > 0 and linear_a where it is < 0 (popularity can only be right about half the time)."""
    lens, rec, side, _ = fitted
    hits = {"accuracy": 0, "logloss": 0}
    for d in range(40, 60):
        x = side.loc[f"d{d}", "nonlinearity"]
        best = "tree_a" if x > 0 else "linear_a"
        for metric in hits:
            ranking = lens.rank(side.loc[f"d{d}"].to_dict(), list(FAMILIES), metric)
            hits[metric] += ranking["model"].iloc[0] == best
            assert list(ranking["rank"]) == [1, 2, 3, 4, 5]
            assert ranking["score"].is_monotonic_decreasing
    assert hits["accuracy"] >= 18 and hits["logloss"] >= 18, hits


@pytest.mark.slow  # shares a module fixture that fits for a few seconds
def test_metric_direction_is_learned_from_lower_is_better(fitted):
    """logloss is a loss: the model ranked first for it is the one with the LOWEST logloss."""
    lens, rec, side, _ = fitted
    s_acc = lens.score_matrix(side.loc[["d45", "d50"]], list(FAMILIES), "accuracy")
    s_ll = lens.score_matrix(side.loc[["d45", "d50"]], list(FAMILIES), "logloss")
    assert np.array_equal(s_acc.argmax(1), s_ll.argmax(1))


@pytest.mark.slow  # shares a module fixture that fits for a few seconds
def test_a_new_model_is_scored_from_its_side_information(fitted):
    """A model absent from the records, given only its family, ranks with its family on every new data set."""
    lens, _, side, _ = fitted
    new = pd.DataFrame({"family": {"tree_new": "tree"}}).rename_axis("model")
    with pytest.raises(ValueError, match="unknown candidates"):
        lens.rank(side.loc["d41"].to_dict(), ["tree_new", "linear_b"], "accuracy")
    agree = 0
    for d in range(40, 60):
        x = side.loc[f"d{d}", "nonlinearity"]
        r = lens.rank(side.loc[f"d{d}"].to_dict(), ["tree_new", "linear_b"], "accuracy", models=new)
        agree += (r["model"].iloc[0] == "tree_new") == (x > 0)
    assert agree >= 16


@pytest.mark.slow  # shares a module fixture that fits for a few seconds
def test_fit_is_deterministic_and_top_k(fitted):
    lens, rec, side, models = fitted
    train = rec[rec["dataset"].isin([f"d{i}" for i in range(40)])]
    one, two = (ModelLens(random_state=3, **{**FAST, "epochs": 3}).fit(train, side, models) for _ in range(2))
    q = side.loc[["d41", "d55"]]
    np.testing.assert_array_equal(
        one.score_matrix(q, list(FAMILIES), "accuracy"), two.score_matrix(q, list(FAMILIES), "accuracy")
    )
    assert len(lens.rank("d3", list(FAMILIES), "accuracy", top_k=2)) == 2


def test_defaults_fit_with_a_user_text_encoder_and_one_metric():
    """The defaults (paper widths, early stopping) on a small leaderboard with descriptions and a callable
    encoder; the metric may be omitted when the records hold one."""
    rec, side, models = synthetic_leaderboard(30, seed=1)
    rec = rec[rec["metric"] == "accuracy"]
    side = side.assign(description=[f"table {i}" for i in range(len(side))])

    def encoder(texts):
        return np.asarray([[len(t), t.count("1"), 1.0] for t in texts], float)

    lens = ModelLens(epochs=5, text_encoder=encoder).fit(rec, side, models)
    ranking = lens.rank({"description": "a new table", "nonlinearity": 0.8}, list(FAMILIES))
    assert set(ranking["model"]) == set(FAMILIES)


# --- bad input -------------------------------------------------------------------------------------------------


def test_fit_rejects_bad_records():
    rec, side, models = synthetic_leaderboard(10)
    fast = ModelLens(**FAST)
    with pytest.raises(ValueError, match="lack the columns"):
        fast.fit(rec.drop(columns="score"))
    with pytest.raises(ValueError, match="must not be empty"):
        fast.fit(rec.iloc[:0])
    with pytest.raises(ValueError, match="finite"):
        fast.fit(rec.assign(score=np.where(np.arange(len(rec)) == 3, np.nan, rec["score"])))
    with pytest.raises(TypeError, match="numeric"):
        fast.fit(rec.assign(score="high"))
    with pytest.raises(ValueError, match="duplicate"):
        fast.fit(pd.concat([rec, rec.iloc[:1]]))
    with pytest.raises(ValueError, match="two or more models"):
        fast.fit(rec.drop_duplicates(["dataset", "metric"]))
    with pytest.raises(TypeError, match="DataFrame"):
        fast.fit(rec, datasets=[1, 2])
    with pytest.raises(TypeError, match="DataFrame"):
        fast.fit(rec, models={"tree_a": "tree"})
    with pytest.raises(ValueError, match="size"):
        fast.fit(rec, models=models.assign(size=-1.0))


@pytest.mark.parametrize(
    "param, value, match",
    [
        ("loss", "hinge", "loss must be one of"),
        ("id_dropout", 1.0, "id_dropout must be in"),
        ("epochs", 0, "epochs must be an integer >= 1"),
        ("hidden", 2.5, "hidden must be an integer"),
        ("tau", 0.0, "tau must be in"),
        ("lr", "fast", "lr must be a number"),
        ("validation_fraction", -0.1, "validation_fraction must be in"),
        ("text_encoder", "bert", "text_encoder must be"),
        ("patience", -1, "patience must be an integer >= 0"),
    ],
)
def test_fit_rejects_bad_parameters(param, value, match):
    rec, _, _ = synthetic_leaderboard(6)
    with pytest.raises((ValueError, TypeError), match=match):
        ModelLens(**{**FAST, param: value}).fit(rec)


@pytest.mark.slow  # shares a module fixture that fits for a few seconds
def test_rank_rejects_bad_input(fitted):
    lens, _, side, _ = fitted
    query = side.loc["d41"].to_dict()
    with pytest.raises(RuntimeError, match="not fitted"):
        ModelLens().rank(query, ["tree_a"], "accuracy")
    with pytest.raises(ValueError, match="unknown candidates"):
        lens.rank(query, ["tree_a", "gpt"], "accuracy")
    with pytest.raises(ValueError, match="at least one"):
        lens.rank(query, [], "accuracy")
    with pytest.raises(ValueError, match="repeat"):
        lens.rank(query, ["tree_a", "tree_a"], "accuracy")
    with pytest.raises(TypeError, match="sequence of model names"):
        lens.rank(query, "tree_a", "accuracy")
    with pytest.raises(ValueError, match="metric 'f1' was not in the records"):
        lens.rank(query, ["tree_a"], "f1")
    with pytest.raises(ValueError, match="metric must be given"):
        lens.rank(query, ["tree_a"])
    with pytest.raises(ValueError, match="task 'regression'"):
        lens.rank(query, ["tree_a"], "accuracy", "regression")
    with pytest.raises(ValueError, match="not a fitted data set"):
        lens.rank("d999", ["tree_a"], "accuracy")
    with pytest.raises(TypeError, match="dataset must be"):
        lens.rank(3.0, ["tree_a"], "accuracy")
    with pytest.raises(ValueError, match="finite or NaN"):
        lens.rank({**query, "nonlinearity": np.inf}, ["tree_a"], "accuracy")
    with pytest.raises(ValueError, match="top_k"):
        lens.rank(query, ["tree_a"], "accuracy", top_k=0)


# --- names and LCDB ----------------------------------------------------------------------------------------------


def test_name_tokens_and_family():
    assert name_tokens("sklearn.ensemble.ExtraTreesClassifier") == [
        "sklearn",
        "ensemble",
        "extra",
        "trees",
        "classifier",
    ]
    assert name_tokens("SVC_rbf") == ["svc", "rbf"]
    assert family_from_name("sklearn.tree.DecisionTreeClassifier") == "tree"
    assert family_from_name("llama-3-8b") == "llama"


def test_load_lcdb_records():
    if importlib.util.find_spec("lcdb") is None:  # never imported: its __init__ needs openml
        pytest.skip("the PyPI package lcdb is not installed")
    acc = load_lcdb(("accuracy",))
    assert {"openmlid", "learner", "anchor", "metric", "score", "n_seeds"} <= set(acc.columns)
    assert acc["learner"].nunique() == 20
    assert acc["score"].between(0, 1).all()
    assert not acc.duplicated(["openmlid", "learner", "anchor"]).any()
    with pytest.raises(ValueError, match="metrics must be among"):
        load_lcdb(("rmse",))
    with pytest.raises(ValueError, match="at least one"):
        load_lcdb(())


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("modellens", tmp_path)


def test_val_loss_plateau_by_hand_and_early_stopping():
    rec, side, models = synthetic_leaderboard(n_datasets=30)
    lens = ModelLens(random_state=0, **{**FAST, "epochs": 4, "patience": 0}).fit(rec, side, models)
    # the oracle: the formula on a history written by hand
    lens.history_ = [{"epoch": i, "val_loss": v} for i, v in enumerate([5.0, 4.0, 3.0, 2.5, 2.4, 2.45])]
    assert lens.val_loss_plateau(2) == pytest.approx((2.5 - 2.4) / 2.4)
    assert lens.val_loss_plateau(1) == 0.0  # no improvement in the last epoch
    assert lens.val_loss_plateau(6) == math.inf  # too short a history to judge
    lens.history_ = [{"epoch": 0, "train_loss": 1.0}]
    assert math.isnan(lens.val_loss_plateau(1))
    with pytest.raises(ValueError, match="window"):
        lens.val_loss_plateau(0)
    # patience 0: training stops at the first epoch without improvement, and then the plateau gap is zero
    stopped = ModelLens(random_state=0, **{**FAST, "epochs": 200, "patience": 0}).fit(rec, side, models)
    assert stopped.stopped_early_ and stopped.n_epochs_ < 200
    assert stopped.val_loss_plateau(1) == 0.0


def test_string_meta_feature_is_rejected_naming_it(fitted):
    lens, _, side, _ = fitted
    q = side.loc["d41"].to_dict()
    with pytest.raises(ValueError, match="nonlinearity"):
        lens.rank({**q, "nonlinearity": "big"}, list(FAMILIES), "accuracy")
    ok = lens.rank({**q, "nonlinearity": None}, list(FAMILIES), "accuracy")  # None: missing, imputed
    assert len(ok) == len(FAMILIES)


def test_data_sets_without_meta_features_are_named_in_a_warning():
    rec, side, models = synthetic_leaderboard()
    train = rec[rec["dataset"].isin([f"d{i}" for i in range(12)])]
    fast = {**FAST, "epochs": 2, "patience": 2}
    with pytest.warns(UserWarning, match=r"2 of 12 data sets .* no meta-feature values \(e\.g\. d0, d1\)"):
        ModelLens(random_state=0, **fast).fit(train, side.drop(index=["d0", "d1"]), models)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every data set described: no warning
        ModelLens(random_state=0, **fast).fit(train, side, models)
