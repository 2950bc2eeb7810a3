"""MulTaBench: the target-aware text encoder (exact frozen pipeline, LoRA placement, no leakage), the curation
rule against hand-computed decisions, the seeded tables, bad input, and the quick verdict."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from neurips26.harness.testing import assert_quick_verdict
from neurips26.multimodal import TargetAwareTextEncoder, curation_rule, make_text_table
from neurips26.multimodal.multabench.synthetic import BAD, GOOD

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def table():
    X, y, info = make_text_table(60, kind="task_aware", seed=3)
    return X, y, info


@pytest.fixture(scope="module")
def tuned(table):
    X, y, _ = table
    enc = TargetAwareTextEncoder(4, tuned_layers=1, epochs=1, batch_size=16, random_state=0)
    return enc.fit(X[["description"]].iloc[:40], y[:40])


# --- the encoder ---------------------------------------------------------------------------------------------
def test_frozen_embeddings_equal_sentence_transformers(table):
    """Oracle: the sentence-transformers all-MiniLM-L6-v2 pipeline (tokenise, 6 layers, mean pool, normalise)."""
    from neurips26.data.text_embeddings import encode_minilm

    X, _, _ = table
    texts = X[["description"]].iloc[:12]
    ours = TargetAwareTextEncoder(4, tune=False).fit(texts).embed(texts)
    reference = encode_minilm([f"description: {t}" for t in texts["description"]])
    np.testing.assert_allclose(ours, reference, atol=2e-5)


def test_lora_sits_on_the_top_layers_only_with_the_formula_parameter_count(tuned):
    # LoRA(r) on a d_in x d_out linear adds r (d_in + d_out) weights; MiniLM: d = 384, FFN 1536
    d, ffn, r = 384, 1536, tuned.lora_r
    per_layer = r * (4 * (d + d) + 2 * (d + ffn))
    lora = {n: p for n, p in tuned.bert_.named_parameters() if "lora_" in n}
    assert sum(p.numel() for p in lora.values()) == per_layer * tuned.tuned_layers
    assert all(".layer.5." in n for n in lora)  # tuned_layers=1: only the last of the 6 layers


def test_tuning_leaves_the_shared_frozen_model_unchanged(table, tuned):
    X, _, _ = table
    texts = X[["description"]].iloc[40:52]
    before = TargetAwareTextEncoder(4, tune=False).fit(texts).embed(texts)
    TargetAwareTextEncoder(4, tuned_layers=1, epochs=1, random_state=1).fit(X[["description"]], table[1])
    after = TargetAwareTextEncoder(4, tune=False).fit(texts).embed(texts)
    np.testing.assert_array_equal(before, after)
    assert not np.allclose(tuned.embed(texts), before, atol=1e-4)  # the tuned encoder did move


def test_rows_are_embedded_independently_and_pca_is_fitted_on_training_rows(table, tuned):
    X, _, _ = table
    train, test = X[["description"]].iloc[:40], X[["description"]].iloc[40:]
    together = tuned.transform(pd.concat([test, train]))
    np.testing.assert_allclose(together[: len(test)], tuned.transform(test), atol=1e-5)
    # PCA centres on the training rows: their components have zero mean, the held-out rows' do not need to
    np.testing.assert_allclose(tuned.transform(train).mean(0), 0.0, atol=1e-5)
    assert tuned.transform(test).shape == (20, 4)
    assert list(tuned.get_feature_names_out()) == [f"description_pc{k}" for k in range(4)]


def test_held_out_labels_never_reach_the_encoder(table):
    """Fitting on the training rows only: shuffling the labels of rows outside the fit changes nothing."""
    X, y, _ = table
    text = X[["description"]]
    a = TargetAwareTextEncoder(4, tuned_layers=1, epochs=1, random_state=0).fit(text.iloc[:40], y[:40])
    y2 = y.copy()
    y2[40:] = 1 - y2[40:]
    b = TargetAwareTextEncoder(4, tuned_layers=1, epochs=1, random_state=0).fit(text.iloc[:40], y2[:40])
    np.testing.assert_array_equal(a.transform(text.iloc[40:]), b.transform(text.iloc[40:]))


def test_regression_targets_use_training_quantile_bins():
    X, y, _ = make_text_table(50, target="regression", seed=1)
    enc = TargetAwareTextEncoder(3, tuned_layers=1, epochs=1, n_bins=5, random_state=0)
    enc.fit(X[["description"]].iloc[:30], y[:30])
    assert enc.target_type_ == "regression"
    np.testing.assert_allclose(enc.bin_edges_, np.quantile(y[:30], [0.2, 0.4, 0.6, 0.8]))
    assert enc.head_.out_features == 5


def test_regression_bins_default_follows_the_sample_size():
    """Oracle: the documented rule clip((n - round(0.15 n)) // 50, 2, 20) and numpy's training-row quantiles."""
    X, y, _ = make_text_table(200, target="regression", seed=2)
    text = X[["description"]]
    for n in (60, 200):  # 2 and 3 bins
        enc = TargetAwareTextEncoder(3, tuned_layers=1, epochs=1, random_state=0).fit(text.iloc[:n], y[:n])
        bins = min(20, max(2, (n - round(0.15 * n)) // 50))
        assert enc.n_bins_ == bins and enc.head_.out_features == bins
        np.testing.assert_allclose(enc.bin_edges_, np.quantile(y[:n], np.arange(1, bins) / bins))
    assert TargetAwareTextEncoder().get_params()["n_bins"] == "auto"


def test_nan_label_is_rejected_not_a_class(table):
    X, y, _ = table
    text = X[["description"]]
    bad = y.astype(float)
    bad[3] = np.nan
    for task in ("auto", "classification"):
        with pytest.raises(ValueError, match="y must be finite: it holds 1 NaN"):
            TargetAwareTextEncoder(4, task=task, tuned_layers=1, epochs=1).fit(text, bad)
    labels = np.array(["a", "b"] * (len(text) // 2), dtype=object)
    labels[0] = None
    with pytest.raises(ValueError, match="y must be finite"):
        TargetAwareTextEncoder(4, tuned_layers=1, epochs=1).fit(text, labels)


def test_bootstrap_auc_matches_sklearn_with_ties():
    """Oracle: sklearn's roc_auc_score on each resample (the experiment's vectorised Mann-Whitney AUC)."""
    from sklearn.metrics import roc_auc_score

    from neurips26.multimodal.multabench.experiment import _auc_rows

    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, size=(40, 30))
    s = np.round(rng.normal(size=(40, 30)), 1)  # rounded: many tied scores
    got = _auc_rows(y, s)
    want = [roc_auc_score(yy, ss) for yy, ss in zip(y, s)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_curation_tie_distance_is_the_closest_margin_to_delta():
    from neurips26.multimodal.multabench.experiment import _min_distance_to_delta

    dec = curation_rule(
        {"a": _row(0.70, 0.60, 0.7015, 0.75), "b": _row(0.5, 0.5, 0.6, 0.6)}, delta=0.001, rho=1
    )
    # margins: a 0.0015 / 0.0485, b 0.1 / 0.0; the closest to delta = 0.001 is a's 0.0015 or b's 0.0
    assert _min_distance_to_delta([dec], 0.001) == pytest.approx(0.0005, abs=1e-12)


def test_works_inside_a_column_transformer_pipeline(table):
    X, y, _ = table
    pre = ColumnTransformer(
        [("text", TargetAwareTextEncoder(4, tune=False), ["description"]), ("num", "passthrough", ["num_0"])]
    )
    model = make_pipeline(pre, LogisticRegression()).fit(X.iloc[:40], y[:40])
    assert model.predict_proba(X.iloc[40:]).shape == (20, 2)
    assert clone(TargetAwareTextEncoder(7)).get_params()["n_components"] == 7


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_components": 0}, "n_components"),
        ({"tuned_layers": 7}, "tuned_layers"),
        ({"n_bins": 1}, "n_bins"),
        ({"n_bins": "many"}, "n_bins"),
        ({"task": "ranking"}, "task"),
        ({"lora_dropout": 1.0}, "lora_dropout"),
        ({"validation_fraction": 0.6}, "validation_fraction"),
        ({"lr": -1.0}, "lr"),
        ({"lora_alpha": float("nan")}, "lora_alpha"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"max_length": 4}, "max_length"),
        ({"epochs": 0}, "epochs"),
    ],
)
def test_bad_parameters_are_rejected(table, kwargs, match):
    X, y, _ = table
    with pytest.raises(ValueError, match=match):
        TargetAwareTextEncoder(**kwargs).fit(X[["description"]], y)


def test_bad_input_is_rejected(table, tuned):
    X, y, _ = table
    text = X[["description"]]
    with pytest.raises(TypeError, match="tune"):
        TargetAwareTextEncoder(tune="yes").fit(text, y)
    with pytest.raises(ValueError, match="y is required"):
        TargetAwareTextEncoder(4).fit(text)
    with pytest.raises(ValueError, match="y must be 1-D"):
        TargetAwareTextEncoder(4).fit(text, y[:10])
    with pytest.raises(ValueError, match="two classes"):
        TargetAwareTextEncoder(4, task="classification").fit(text, np.zeros(len(text)))
    with pytest.raises(ValueError, match="finite"):
        TargetAwareTextEncoder(4, task="regression").fit(text, np.full(len(text), np.nan))
    with pytest.raises(ValueError, match="n_components"):
        TargetAwareTextEncoder(30, tune=False).fit(text.iloc[:10])
    with pytest.raises(TypeError, match="non-text columns"):
        TargetAwareTextEncoder(4, tune=False).fit(X[["num_0"]])
    with pytest.raises(ValueError, match="at least one row"):
        TargetAwareTextEncoder(4, tune=False).fit(text.iloc[:0])
    with pytest.raises(ValueError, match="columns"):
        tuned.transform(X[["description"]].rename(columns={"description": "notes"}))
    with pytest.raises(ValueError, match="text columns"):
        tuned.transform(np.array([["a", "b"]], dtype=object))


# --- the curation rule ---------------------------------------------------------------------------------------
def _row(tab, text, frozen, tar):
    return {"tab_only": tab, "text_only": text, "joint_frozen": frozen, "joint_tar": tar}


def test_curation_rule_matches_hand_computed_decisions():
    scores = {
        "a": _row(0.70, 0.60, 0.72, 0.75),  # joint signal 0.02, task awareness 0.03
        "b": _row(0.70, 0.71, 0.7105, 0.7200),  # joint 0.0005 < delta, task 0.0095
        "c": _row(0.70, 0.60, 0.701, 0.701),  # joint 0.001 == delta (admitted), task 0.0 (not)
        "d": _row(0.70, 0.60, 0.69, 0.80),  # joint -0.01, task 0.11
    }
    dec = curation_rule(scores, delta=0.001, rho=2)
    assert (dec.n_joint_signal, dec.n_task_aware) == (2, 3)
    assert dec.joint_signal and dec.task_awareness and dec.admitted
    dec3 = curation_rule(scores, delta=0.001, rho=3)
    assert not dec3.joint_signal and dec3.task_awareness and not dec3.admitted
    assert dec.per_learner["a"]["task_awareness_margin"] == pytest.approx(0.03)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(*[st.floats(0, 1)] * 4), min_size=1, max_size=6),
    st.floats(0, 0.05),
    st.floats(0, 0.5),
)
def test_curation_is_monotone_in_the_tar_score(rows, delta, bump):
    scores = {f"l{i}": _row(*r) for i, r in enumerate(rows)}
    better = {k: {**v, "joint_tar": v["joint_tar"] + bump} for k, v in scores.items()}
    rho = max(1, len(rows) // 2)
    before, after = curation_rule(scores, delta=delta, rho=rho), curation_rule(better, delta=delta, rho=rho)
    assert after.n_task_aware >= before.n_task_aware
    assert after.n_joint_signal == before.n_joint_signal
    assert after.admitted >= before.admitted


def test_curation_rule_rejects_bad_input():
    ok = {"a": _row(0.7, 0.6, 0.72, 0.75)}
    with pytest.raises(ValueError, match="scores"):
        curation_rule({})
    with pytest.raises(ValueError, match="rho"):
        curation_rule(ok, rho=2)
    with pytest.raises(ValueError, match="delta"):
        curation_rule(ok, rho=1, delta=-0.1)
    with pytest.raises(ValueError, match="lacks the conditions"):
        curation_rule({"a": {"tab_only": 0.5}}, rho=1)
    with pytest.raises(ValueError, match="finite"):
        curation_rule({"a": _row(0.7, float("nan"), 0.7, 0.7)}, rho=1)


# --- the tables ----------------------------------------------------------------------------------------------
def test_tables_plant_the_condition_and_topic_as_specified():
    X, y, info = make_text_table(200, kind="task_aware", seed=5)
    Xc, yc, infoc = make_text_table(200, kind="control", seed=5)
    assert "topic" in X and "topic" not in Xc
    assert list(X["description"]) == list(Xc["description"])  # same rows and texts, different targets
    for text, c in zip(X["description"], info["condition"]):
        bank = GOOD if c > 0 else BAD
        assert sum(s in text for s in bank) == 1 and not any(s in text for s in (BAD if c > 0 else GOOD))
    # the planted signal moves the label: the condition on the task-aware table, the topic group on the control
    assert y[info["condition"] > 0].mean() > y[info["condition"] < 0].mean() + 0.3
    assert yc[infoc["group"] > 0].mean() > yc[infoc["group"] < 0].mean() + 0.3
    np.testing.assert_array_equal(make_text_table(200, kind="task_aware", seed=5)[1], y)


def test_table_generator_rejects_bad_input():
    with pytest.raises(ValueError, match="kind"):
        make_text_table(50, kind="other")
    with pytest.raises(ValueError, match="target"):
        make_text_table(50, target="multiclass")
    with pytest.raises(ValueError, match="n must"):
        make_text_table(5)
    with pytest.raises(ValueError, match="n_topic_sentences"):
        make_text_table(50, n_topic_sentences=(3, 2))


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("multabench", tmp_path)
