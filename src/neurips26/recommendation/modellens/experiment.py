"""Reproduction: ModelLens on LCDB learning curves (digest: ``modellens``).

Leaderboard = LCDB's 20 scikit-learn learners x the OpenML data sets that have meta-features, 4 metrics,
score_test averaged over LCDB's seeds. The evaluation anchor of a data set is its largest training-set size
that at least 80 % of its learners reached ("largest common anchor"). Splits: (a) new data sets (random 20 %
of the data sets held out, ID unknown at test time), (b) new models (4 learners removed from training, ranked
among themselves on every data set). Baselines: popularity, meta-feature kNN, text-only (MiniLM), pointwise
ablation, family mean, and the run-on-target landmark (each learner's own score at 64 training rows on the
target; reported, not gated).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from neurips26.harness import Run

from .baselines import family_mean_scores, meta_knn_scores, popularity_scores, text_only_scores
from .lcdb_data import LOWER_IS_BETTER, METRICS, lcdb_models, load_lcdb, load_lcdb_datasets
from .modellens import ModelLens, minilm_text_encoder, zscore_groups
from .ranking_metrics import ndcg_at_k, ranking_report

NEW_MODELS = (
    "sklearn.ensemble.ExtraTreesClassifier",
    "SVC_poly",
    "sklearn.naive_bayes.BernoulliNB",
    "sklearn.linear_model.Perceptron",
)
LANDMARK_ANCHOR = 64
METHOD_NAMES = {
    "modellens": "ModelLens (listwise + pairwise)",
    "pointwise": "B5 pointwise ablation",
    "popularity": "B1 popularity",
    "knn": "B2 meta-feature kNN (k=10)",
    "text": "B3 text-only (MiniLM)",
    "landmark": "B4 run on target (64 rows)",
    "family": "family mean",
}


def eval_anchors(df: pd.DataFrame, coverage: float = 0.8) -> pd.Series:
    """Per data set, the largest anchor reached by >= ``coverage`` of its learners (accuracy records)."""
    acc = df[df["metric"] == "accuracy"]
    per = acc.groupby(["openmlid", "anchor"])["learner"].nunique().rename("n").reset_index()
    total = acc.groupby("openmlid")["learner"].nunique()
    per = per[per["n"] >= coverage * per["openmlid"].map(total)]
    return per.groupby("openmlid")["anchor"].max()


def build_leaderboard(min_anchor: int | None, metrics: tuple[str, ...] = METRICS):
    df = load_lcdb(metrics)
    meta = load_lcdb_datasets()
    df = df[df["openmlid"].isin(meta.index)]
    anchor = eval_anchors(df)
    df = df[df["openmlid"].isin(anchor.index)]
    at_eval = df["anchor"].to_numpy() == df["openmlid"].map(anchor).to_numpy()
    landmark = df[df["anchor"] == LANDMARK_ANCHOR]
    if min_anchor is not None:  # smaller power-of-two anchors as their own data sets
        a = df["anchor"].to_numpy()
        power_of_two = (a & (a - 1)) == 0
        below = a <= df["openmlid"].map(anchor).to_numpy()
        train_pool = df[at_eval | ((a >= min_anchor) & power_of_two & below)]
    else:
        train_pool = df[at_eval]
    evaluation = df[at_eval]

    def records(frame: pd.DataFrame) -> pd.DataFrame:
        key = frame["openmlid"].astype(str) + "@" + frame["anchor"].astype(str)
        return pd.DataFrame(
            {
                "model": frame["learner"].to_numpy(),
                "dataset": key.to_numpy(),
                "openmlid": frame["openmlid"].to_numpy(),
                "metric": frame["metric"].to_numpy(),
                "score": frame["score"].to_numpy(),
            }
        )

    train_rec, eval_rec = records(train_pool), records(evaluation)
    keys = pd.concat(
        [train_rec[["dataset", "openmlid"]], eval_rec[["dataset", "openmlid"]]]
    ).drop_duplicates()
    side = meta.drop(columns=["Name"]).reindex(keys["openmlid"].to_numpy())
    side.index = keys["dataset"].to_numpy()
    side["TrainingSetSize"] = [int(k.split("@")[1]) for k in side.index]
    side["description"] = meta["Name"].reindex(keys["openmlid"].to_numpy()).to_numpy()
    return train_rec, eval_rec, side, landmark, anchor


def add_z(rec: pd.DataFrame) -> pd.DataFrame:
    higher = ~rec["metric"].isin(LOWER_IS_BETTER).to_numpy()
    return rec.assign(
        z=zscore_groups(rec["score"].to_numpy(), (rec["dataset"] + "|" + rec["metric"]).to_numpy(), higher)
    )


def evaluate(groups: list[dict], scores: dict[str, list[np.ndarray]], by_metric: dict | None = None):
    """Mean over metrics of the per-metric mean over groups, for every method (``by_metric`` collects the
    per-metric means when given)."""
    out = {}
    for method, per_group in scores.items():
        rows = [{"metric": g["metric"], **ranking_report(g["true"], s, 3)} for g, s in zip(groups, per_group)]
        per_metric = pd.DataFrame(rows).groupby("metric").mean(numeric_only=True)
        out[method] = per_metric.mean().to_dict()
        if by_metric is not None:
            by_metric.setdefault(method, []).append(per_metric)
    return out


def bootstrap_ci(strata: list[tuple[int, str, np.ndarray]], rng: np.random.Generator, n_boot: int = 2000):
    """Paired bootstrap 95 % interval of the mean over splits of the mean over metrics of per-group differences.

    ``strata``: (split, metric, per-group differences); groups are resampled within each stratum."""
    by_split: dict[int, dict[str, np.ndarray]] = {}
    for split, metric, d in strata:
        idx = rng.integers(0, len(d), (n_boot, len(d)))
        by_split.setdefault(split, {})[metric] = d[idx].mean(1)
    stat = np.mean([np.mean(list(per.values()), axis=0) for per in by_split.values()], axis=0)
    return float(np.quantile(stat, 0.025)), float(np.quantile(stat, 0.975))


def standardised_meta(side: pd.DataFrame, train_keys, query_keys) -> tuple[np.ndarray, np.ndarray]:
    cols = [c for c in side.columns if c != "description"]
    X = side[cols].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    X = np.sign(X) * np.log1p(np.abs(X))
    idx = {k: i for i, k in enumerate(side.index)}
    tr = X[[idx[k] for k in train_keys]]
    keep = (np.isfinite(tr).mean(0) >= 0.5) & (np.nanstd(tr, 0) > 0)
    med = np.nanmedian(tr[:, keep], 0)
    tr = np.where(np.isfinite(tr[:, keep]), tr[:, keep], med)
    q = X[[idx[k] for k in query_keys]][:, keep]
    q = np.where(np.isfinite(q), q, med)
    mu, sd = tr.mean(0), tr.std(0) + 1e-12
    return (tr - mu) / sd, (q - mu) / sd


PLATEAU_WINDOW = 5  # epochs over which the best validation loss must have stopped improving


def _record_fit(run: Run, lens: ModelLens, name: str, fits: list[tuple[float, bool, int]]) -> None:
    """Epochs run, whether early stopping fired, and the validation-loss plateau gap of one fit."""
    gap = lens.val_loss_plateau(PLATEAU_WINDOW)
    run.metric(f"epochs_{name}", lens.n_epochs_)
    run.metric(f"early_stopped_{name}", lens.stopped_early_)
    run.metric(f"val_loss_plateau_gap_{name}", gap)
    fits.append((gap, lens.stopped_early_, lens.n_epochs_))


def run(run: Run) -> None:
    torch.manual_seed(run.seed)
    n_splits = run.param("dataset_splits", quick=1, full=5)
    test_share = run.param("test_share", quick=0.2)
    epochs = run.param("epochs", quick=150)
    hidden = run.param("hidden", quick=64)
    list_batch = run.param("list_batch", quick=64)
    pair_batch = run.param("pair_batch", quick=256)
    patience = run.param("patience", quick=10)
    # smaller training anchors as extra "data sets" (the digest's "all anchors") are supported but off: their
    # 4x training cost does not fit the shared CPU budget
    min_anchor = run.param("min_train_anchor", quick=None, full=None)
    model_seeds = run.param("new_model_seeds", quick=1, full=2)
    # explored, not gated: the digest's "all anchors" training set on the first splits (4x the records)
    aug_splits = run.param("multi_anchor_splits", quick=0, full=2)
    aug_anchor = run.param("multi_anchor_min", quick=None, full=256)
    metrics = tuple(run.param("metrics", quick=["accuracy", "logloss"], full=list(METRICS)))
    lens_kw = dict(
        hidden=hidden, epochs=epochs, list_batch=list_batch, pair_batch=pair_batch, patience=patience
    )

    with run.timer("load_lcdb"):
        train_all, eval_all, side, landmark, anchors = build_leaderboard(min_anchor, metrics)
        if aug_splits:
            train_aug, _, side_aug, _, _ = build_leaderboard(aug_anchor, metrics)
            run.metric("n_train_records_multi_anchor", len(train_aug))
    models = lcdb_models()
    learners = sorted(models.index)
    families = models["family"].to_dict()
    run.metric("n_datasets", int(eval_all["openmlid"].nunique()))
    run.metric("n_learners", len(learners))
    # one pool of records at the evaluation anchor; each split trains on the part outside its held-out data sets
    run.metric("n_records_pool", len(train_all))
    run.metric("n_eval_records", len(eval_all))
    run.metric("median_eval_anchor", float(anchors.median()))
    ll = eval_all[eval_all["metric"] == "logloss"].groupby("model")["score"].median()
    hard = ["SVC_linear", "sklearn.linear_model.Perceptron", "sklearn.linear_model.RidgeClassifier"]
    run.metric("median_logloss_hard_label_learners", float(ll.reindex(hard).median()))
    run.metric("median_logloss_probabilistic_learners", float(ll.drop(hard, errors="ignore").median()))

    encode = minilm_text_encoder()
    with run.timer("minilm_vectors"):
        encode(list(dict.fromkeys(side["description"])) + list(models["card"]))
    cand_text = [f"{m.split('.')[-1]}: {models.loc[m, 'card']}" for m in learners]

    eval_z = add_z(eval_all)
    ids = np.array(sorted(eval_all["openmlid"].unique()))
    split_rng = np.random.default_rng(run.seed)
    per_split: list[dict[str, dict[str, float]]] = []
    plateaus: list[tuple[float, bool, int]] = []
    by_metric: dict[str, list[pd.DataFrame]] = {}
    strata: dict[str, list] = {"pointwise": [], "knn": []}
    aug_gains: list[float] = []
    rows = []
    for split in range(n_splits):
        test_ids = set(split_rng.choice(ids, int(round(test_share * len(ids))), replace=False))
        train_rec = train_all[~train_all["openmlid"].isin(test_ids)]
        run.metric(f"n_train_records_split{split}", len(train_rec))
        train_z = add_z(train_rec)
        test = eval_z[eval_z["openmlid"].isin(test_ids)]
        groups = []
        for (dkey, metric), g in test.groupby(["dataset", "metric"]):
            if len(g) >= 2:
                groups.append(
                    {"dataset": dkey, "metric": metric, "models": list(g["model"]), "true": g["z"].to_numpy()}
                )
        train_keys = sorted(train_rec["dataset"].unique())
        test_keys = sorted({g["dataset"] for g in groups})
        fitted = {}
        for name, loss in [("modellens", "ensemble"), ("pointwise", "pointwise")]:
            with run.timer(f"fit_{name}", clock="cpu"):
                fitted[name] = ModelLens(loss=loss, random_state=run.seed + split, **lens_kw).fit(
                    train_rec, side, models
                )
            _record_fit(run, fitted[name], f"{name}_split{split}", plateaus)
        # every method scores all learners for every (test data set, metric); groups pick their candidates
        full_scores = {}
        for name, lens in fitted.items():
            for metric in metrics:
                full_scores[(name, metric)] = pd.DataFrame(
                    lens.score_matrix(side.loc[test_keys], learners, metric),
                    index=test_keys,
                    columns=learners,
                )
        train_meta, test_meta = standardised_meta(side, train_keys, test_keys)
        for metric in metrics:
            full_scores[("knn", metric)] = pd.DataFrame(
                meta_knn_scores(train_z, train_meta, train_keys, test_meta, metric, learners, k=10),
                index=test_keys,
                columns=learners,
            )
            full_scores[("popularity", metric)] = pd.DataFrame(
                np.tile(popularity_scores(train_z, metric, learners), (len(test_keys), 1)),
                index=test_keys,
                columns=learners,
            )
        text = pd.DataFrame(
            text_only_scores(encode, list(side.loc[test_keys, "description"]), cand_text),
            index=test_keys,
            columns=learners,
        )
        lm = landmark.assign(
            s=np.where(landmark["metric"].isin(LOWER_IS_BETTER), -landmark["score"], landmark["score"])
        ).pivot_table(index=["openmlid", "metric"], columns="learner", values="s")
        scores = {k: [] for k in ["modellens", "pointwise", "popularity", "knn", "text", "landmark"]}
        for g in groups:
            for name in ["modellens", "pointwise", "popularity", "knn"]:
                scores[name].append(
                    full_scores[(name, g["metric"])].loc[g["dataset"], g["models"]].to_numpy()
                )
            scores["text"].append(text.loc[g["dataset"], g["models"]].to_numpy())
            oid = int(g["dataset"].split("@")[0])
            row = lm.loc[(oid, g["metric"])] if (oid, g["metric"]) in lm.index else pd.Series(dtype=float)
            v = row.reindex(g["models"]).to_numpy(float)
            scores["landmark"].append(
                np.where(np.isfinite(v), v, np.nanmin(v) - 1 if np.isfinite(v).any() else 0)
            )
        for metric in metrics:  # per-group NDCG@3 differences for the paired bootstrap
            sel = [i for i, g in enumerate(groups) if g["metric"] == metric]
            ndcg = {
                name: np.array([ndcg_at_k(groups[i]["true"], scores[name][i], 3) for i in sel])
                for name in ["modellens", "pointwise", "knn"]
            }
            for base in ["pointwise", "knn"]:
                strata[base].append((split, metric, ndcg["modellens"] - ndcg[base]))
        res = evaluate(groups, scores, by_metric)
        per_split.append(res)
        if split < aug_splits:
            with run.timer("fit_multi_anchor", clock="cpu"):
                lens = ModelLens(loss="ensemble", random_state=run.seed + split, **lens_kw).fit(
                    train_aug[~train_aug["openmlid"].isin(test_ids)], side_aug, models
                )
            mats = {m: lens.score_matrix(side_aug.loc[test_keys], learners, m) for m in metrics}
            col, row = {m: i for i, m in enumerate(learners)}, {k: i for i, k in enumerate(test_keys)}
            aug = [mats[g["metric"]][row[g["dataset"]], [col[m] for m in g["models"]]] for g in groups]
            aug_res = evaluate(groups, {"multi_anchor": aug})["multi_anchor"]
            aug_gains.append(aug_res["ndcg@3"] - res["popularity"]["ndcg@3"])
            rows.append(
                {
                    "split": f"new-dataset {split}",
                    "method": "ModelLens, all anchors >= 256 (explored)",
                    **aug_res,
                }
            )
        for name, vals in res.items():
            rows.append({"split": f"new-dataset {split}", "method": METHOD_NAMES[name], **vals})

    def mean_of(method: str, key: str) -> float:
        return float(np.mean([r[method][key] for r in per_split]))

    for name in ["modellens", "pointwise", "popularity", "knn", "text", "landmark"]:
        for key in ["ndcg@3", "tau_w", "hit@1", "regret@1"]:
            run.metric(f"{key.replace('@', '')}_{name}", mean_of(name, key))
    ml = mean_of("modellens", "ndcg@3")
    run.metric("ndcg3_headroom_popularity", 1.0 - mean_of("popularity", "ndcg@3"))
    for (
        metric
    ) in metrics:  # where metric-awareness could matter: per-metric NDCG@3 of ModelLens and popularity
        for name in ["modellens", "popularity", "knn"]:
            vals = [frame.loc[metric, "ndcg@3"] for frame in by_metric[name] if metric in frame.index]
            run.metric(f"ndcg3_{name}_{metric}", float(np.mean(vals)))
    split_gain = [r["modellens"]["ndcg@3"] - r["popularity"]["ndcg@3"] for r in per_split]
    run.metric("ndcg3_gain_vs_popularity_best_split", float(np.max(split_gain)))
    if aug_gains:
        run.metric("ndcg3_gain_vs_popularity_multi_anchor", float(np.mean(aug_gains)))
        run.metric("ndcg3_gain_vs_popularity_same_splits", float(np.mean(split_gain[: len(aug_gains)])))
    run.check("ndcg3_gain_vs_popularity", ml - mean_of("popularity", "ndcg@3"))
    run.check("ndcg3_gain_vs_text_only", ml - mean_of("text", "ndcg@3"))
    run.metric("ndcg3_gain_vs_pointwise_mean", ml - mean_of("pointwise", "ndcg@3"))
    run.metric("ndcg3_gap_vs_meta_knn_mean", ml - mean_of("knn", "ndcg@3"))
    ci = {base: bootstrap_ci(strata[base], run.rng) for base in ["pointwise", "knn"]}
    for base, (lo, hi) in ci.items():
        run.metric(f"ndcg3_vs_{base}_ci_low", lo)
        run.metric(f"ndcg3_vs_{base}_ci_high", hi)
    # per-split replicates (each split: its own held-out data sets and its own fit seeds), mean over metrics
    split_vs = {
        base: [r["modellens"]["ndcg@3"] - r[base]["ndcg@3"] for r in per_split]
        for base in ["pointwise", "knn"]
    }
    run.metric("ndcg3_gain_vs_pointwise_per_split", split_vs["pointwise"])
    run.metric("ndcg3_gap_vs_meta_knn_per_split", split_vs["knn"])
    if run.full:  # quick's 2 splits are too few replicates: the interval would land on either side by seed
        run.check("ndcg3_gain_vs_pointwise", split_vs["pointwise"])
        run.check("ndcg3_gap_vs_meta_knn", split_vs["knn"])
    run.metric("ndcg3_gap_vs_landmark", ml - mean_of("landmark", "ndcg@3"))
    run.metric("tauw_gap_vs_landmark", mean_of("modellens", "tau_w") - mean_of("landmark", "tau_w"))

    # (b) new models: the 4 held-out learners never appear in training; ranked among themselves everywhere
    new = list(NEW_MODELS)
    seen_rec = train_all[~train_all["model"].isin(new)]
    gaps, tau_ml, tau_fm = [], [], []
    for rep in range(model_seeds):
        with run.timer("fit_new_model", clock="cpu"):
            lens = ModelLens(loss="ensemble", random_state=run.seed + 100 + rep, **lens_kw).fit(
                seen_rec, side, models
            )
        _record_fit(run, lens, f"new_model{rep}", plateaus)
        groups, s_ml, s_fm = [], [], []
        keys = sorted(eval_z["dataset"].unique())
        mats = {
            m: pd.DataFrame(
                lens.score_matrix(side.loc[keys], new, m, new_datasets=False), index=keys, columns=new
            )
            for m in metrics
        }
        for (dkey, metric), g in eval_z.groupby(["dataset", "metric"]):
            gn = g[g["model"].isin(new)]
            if len(gn) < 2:
                continue
            seen = g[~g["model"].isin(new)]
            # family mean uses the seen learners' z on this group (known: the data set is in training)
            higher = np.full(len(seen), metric not in LOWER_IS_BETTER)
            zs = zscore_groups(seen["score"].to_numpy(), np.zeros(len(seen)), higher)
            groups.append({"metric": metric, "true": gn["z"].to_numpy()})
            s_ml.append(mats[metric].loc[dkey, list(gn["model"])].to_numpy())
            s_fm.append(
                family_mean_scores(pd.Series(zs, index=seen["model"].to_numpy()), families, list(gn["model"]))
            )
        res = evaluate(groups, {"modellens": s_ml, "family": s_fm})
        tau_ml.append(res["modellens"]["tau_w"])
        tau_fm.append(res["family"]["tau_w"])
        gaps.append(tau_ml[-1] - tau_fm[-1])
        for name in ["modellens", "family"]:
            rows.append({"split": f"new-model {rep}", "method": METHOD_NAMES[name], **res[name]})
    # precondition: every ranker (ModelLens, pointwise, new-model fits) trained to its validation plateau
    run.metric("val_loss_plateau_gap_max", float(max(f[0] for f in plateaus)))
    run.metric("early_stopped_fits", int(sum(f[1] for f in plateaus)))
    run.metric("n_fits", len(plateaus))
    run.metric("max_epochs_run", int(max(f[2] for f in plateaus)))
    run.check("rankers_trained", float(max(f[0] for f in plateaus)))
    run.metric("tauw_new_model_modellens", float(np.mean(tau_ml)))
    run.metric("tauw_new_model_family_mean", float(np.mean(tau_fm)))
    run.check("tauw_gain_new_models_vs_family_mean", float(np.mean(gaps)))
    run.table(
        rows, name="ranking", caption="Mean over metrics of per-group NDCG@3, weighted tau, Hit@1, regret@1"
    )

    names = ["modellens", "pointwise", "popularity", "knn", "landmark", "text"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, key, label in [(axes[0], "ndcg@3", "NDCG@3"), (axes[1], "tau_w", "weighted tau")]:
        vals = [[r[n][key] for r in per_split] for n in names]
        ax.bar(
            range(len(names)), [np.mean(v) for v in vals], yerr=[np.std(v) for v in vals], color="tab:blue"
        )
        ax.set_xticks(
            range(len(names)), [METHOD_NAMES[n].split(" (")[0] for n in names], rotation=35, ha="right"
        )
        ax.set_ylabel(label + " (new data sets)")
    axes[0].set_ylim(0.5, 1.0)
    fig.tight_layout()
    run.figure(
        fig,
        "ranking_quality",
        caption="new-dataset split: mean (bar) and spread over splits (std) per method",
    )
