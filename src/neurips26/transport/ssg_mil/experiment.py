"""Reproduction of Sparse Support Grounding MIL (digest ``ssg-mil``; paper text unavailable, method [R]).

Data A (synthetic 32-d feature bags: rare, diverse evidence; heterogeneous nuisance; matchable decoys in both
classes) in the sparse + heterogeneous regime (witness rate about 2-3%) and the dense + homogeneous regime (25%);
data B (bags of 40 sklearn digits, positive iff a "7" is present, decoy "1"). Methods on the same bags: SSG in
the digest's form (unclipped retained masses, rho = 0.5, w = relu(r+ - r-) weighting the instance loss, lambda =
0.5), gated ABMIL, ABMIL, mean and max pooling, and the trained ablations "r+ only" (no label contrast) and
"balanced OT". Full mode adds the reconstructions a MIL practitioner would try (an attention alignment KL, a
tempered contrast, a lambda ramp, a log-ratio contrast, no instance-head warm-up) and the digest's rho sweep.

Metrics: test bag AUC, and instance AUC = mean per-bag AUC over positive test bags against the known witnesses
(SSG localises with its instance head, gated ABMIL with its attention). Every replicate draws its own train and
test bags and model seeds. The digest's gates are on means over seeds; the per-replicate values are recorded.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import roc_auc_score

from neurips26.harness import Run

from .bags import MILData, digits_bags, synthetic_bags
from .mil import AttentionMIL, SparseSupportGroundingMIL

NOISE = 1.0  # instance noise norm vs unit-norm cluster centres (0.35 makes every method perfect)
SHIFTED_DECOY_COSINE = 0.9  # test bags whose decoys sit closer to the evidence than in training (0.8)
SSG = "SSG (ours)"
RPLUS = "SSG r+ only"
BASELINES = ("gated ABMIL", "max pooling", "mean pooling")
RECONSTRUCTIONS = {  # name -> (metric key, SparseSupportGroundingMIL keyword changes from the headline)
    "SSG + KL(w || attention)": ("kl_alignment", {"align_weight": 1.0}),
    "SSG tempered contrast": ("tempered_contrast", {"contrast": "softmax", "temperature": 0.25}),
    "SSG lambda ramp": ("lambda_ramp", {"ramp_epochs": 5}),
    "SSG log-ratio contrast": ("log_ratio_contrast", {"contrast": "log_ratio"}),
    "SSG no instance warm-up": ("no_instance_warmup", {"warmup_instance_head": False}),
    "SSG rho = 0.1": ("rho_0_1", {"rho": 0.1}),
    "SSG rho = 2": ("rho_2", {"rho": 2.0}),
}


def instance_auc(scores: list[np.ndarray], data: MILData) -> float:
    """Mean per-bag instance AUC over positive bags that hold both witnesses and non-witnesses.

    Each bag's AUC is the Mann-Whitney statistic (ties count one half), computed from ranks.
    """
    vals = []
    for s, w, y in zip(scores, data.witness, data.y):
        n_pos = int(w.sum())
        if y != 1 or not 0 < n_pos < len(w):
            continue
        ranks = rankdata(s)  # average ranks: ties count one half
        vals.append((ranks[w].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * (len(w) - n_pos)))
    return float(np.mean(vals)) if vals else float("nan")


def _decoy_weight(model: SparseSupportGroundingMIL, pos: MILData) -> dict[str, float]:
    """Mean grounding strength of decoys and of witnesses over positive test bags with a grounding signal.

    Bags whose weights are all 0 (no instance grounded) are left out, so that a contrast that silences whole
    bags does not look as if it silenced decoys.
    """
    w = model.grounding(pos.bags, pos.y)
    live = [i for i, wi in enumerate(w) if wi.sum() > 0]
    if not live:
        return {"decoy": float("nan"), "witness": float("nan"), "live_bags": 0.0, "norm_error": 0.0}
    dec = np.concatenate([w[i][pos.decoy[i]] for i in live])
    wit = np.concatenate([w[i][pos.witness[i]] for i in live])
    return {
        "decoy": float(dec.mean()),
        "witness": float(wit.mean()),
        "live_bags": len(live) / len(w),
        "norm_error": float(max(abs(w[i].sum() - 1.0) for i in live)),
    }


def _mass_diagnostics(model: SparseSupportGroundingMIL, pos: MILData) -> dict[str, float]:
    """How well the retained masses separate witnesses from the rest (positive test bags, pooled)."""
    r_plus, r_minus = model.retained_masses(pos.bags, pos.y)
    rp, rm = np.concatenate(r_plus), np.concatenate(r_minus)
    wit = np.concatenate(pos.witness)
    tiny = np.finfo(float).tiny
    clipped = np.maximum(np.minimum(rp, 1.0) - np.minimum(rm, 1.0), 0.0)  # the old, clipped contrast
    return {
        "auc_log_ratio": float(roc_auc_score(wit, np.log(rp + tiny) - np.log(rm + tiny))),
        "auc_difference": float(roc_auc_score(wit, np.maximum(rp - rm, 0.0))),
        "auc_clipped_difference": float(roc_auc_score(wit, clipped)),
        "witness_r_plus": float(rp[wit].mean()),
        "witness_r_minus": float(rm[wit].mean()),
        "witness_share_above_one": float(np.mean((rp[wit] > 1) & (rm[wit] > 1))),
    }


def _fit_eval(run: Run, name: str, model, train: MILData, test: MILData) -> dict:
    with run.timer(f"fit {name}"):
        model.fit(train.bags, train.y)
    return {
        "method": name,
        "bag AUC": float(roc_auc_score(test.y, model.decision_function(test.bags))),
        "instance AUC": instance_auc(model.instance_scores(test.bags), test),
    }


def _replicate(
    run: Run,
    train: MILData,
    test: MILData,
    seed: int,
    label: str,
    kw: dict,
    ssg_kw: dict,
    extra: bool,
    shifted: MILData | None = None,
) -> tuple:
    """Every method on one train/test draw; returns table rows and the SSG diagnostics.

    ``shifted``: test bags whose decoys differ from training's (same bags otherwise), scored with the models
    trained here (no refit): localisation and grounding under a decoy shift."""
    methods = {
        SSG: SparseSupportGroundingMIL(**kw, **ssg_kw, random_state=seed),
        RPLUS: SparseSupportGroundingMIL(contrast="none", **kw, **ssg_kw, random_state=seed),
        "gated ABMIL": AttentionMIL("gated", **kw, random_state=seed),
        "max pooling": AttentionMIL("max", **kw, random_state=seed),
        "mean pooling": AttentionMIL("mean", **kw, random_state=seed),
    }
    if extra:
        methods["ABMIL"] = AttentionMIL("attention", **kw, random_state=seed)
        methods["SSG balanced OT"] = SparseSupportGroundingMIL(
            transport="balanced", **kw, **ssg_kw, random_state=seed
        )
    rows, diag = [], {}
    pos = test.subset(np.flatnonzero(test.y == 1))
    for name, model in methods.items():
        row = _fit_eval(run, name, model, train, test)
        rows.append({"data": label, "seed": seed, **row})
        if name in (SSG, RPLUS):
            dw = _decoy_weight(model, pos)
            diag[name] = dw
            rows[-1]["decoy w"] = dw["decoy"]
            rows[-1]["witness w"] = dw["witness"]
            rows[-1]["instance AUC (attention)"] = instance_auc(
                model.instance_scores(test.bags, "attention"), test
            )
        if name == SSG:
            diag["masses"] = _mass_diagnostics(model, pos)
        if shifted is not None and name in (SSG, RPLUS, "gated ABMIL"):
            diag[f"shifted {name}"] = {
                "instance AUC": instance_auc(model.instance_scores(shifted.bags), shifted)
            }
            if name != "gated ABMIL":
                diag[f"shifted {name}"] |= _decoy_weight(
                    model, shifted.subset(np.flatnonzero(shifted.y == 1))
                )
    return rows, diag


def _by(rows: list[dict], data: str, method: str, col: str) -> list[float]:
    return [r[col] for r in rows if r["data"] == data and r["method"] == method]


def _mean(rows, data, method, col) -> float:
    return float(np.mean(_by(rows, data, method, col)))


def run(run: Run) -> None:
    n_rep = run.param("replicates", quick=2, full=5)
    n_train = run.param("train_bags", quick=200, full=400)
    n_test = run.param("test_bags", quick=200, full=400)
    epochs = run.param("epochs", quick=20)
    warmup = run.param("warmup_epochs", quick=5)
    lr = run.param(
        "lr", quick=5e-3, full=2e-3
    )  # quick: half the bags, so a larger step to learn in 20 epochs
    rho = run.param("rho", quick=0.5)
    run.param("noise", quick=NOISE)
    regimes = run.pick(quick=["sparse"], full=["sparse", "dense"])
    kw = {"epochs": epochs, "lr": lr}
    ssg_kw = {"rho": rho, "warmup_epochs": warmup}
    seeds = run.seeds(n_rep)

    rows, diags = [], []
    jobs = [(reg, s) for reg in regimes for s in seeds]
    for regime, s in run.progress(jobs, "data A bags"):
        train = synthetic_bags(n_train, regime, noise=NOISE, random_state=s, centres_seed=s)
        test = synthetic_bags(n_test, regime, noise=NOISE, random_state=s + 1, centres_seed=s)
        shifted = None
        if regime == "sparse":
            shifted = synthetic_bags(
                n_test,
                regime,
                noise=NOISE,
                random_state=s + 1,
                centres_seed=s,
                decoy_cosine=SHIFTED_DECOY_COSINE,
            )
        r, diag = _replicate(run, train, test, s, f"A-{regime}", kw, ssg_kw, run.full, shifted)
        rows += r
        if regime == "sparse":
            diags.append(diag)
            run.metric("witness_rate_sparse", train.witness_rate)
    sp = "A-sparse"

    if run.full:  # the reconstructions, the rho sweep and data B
        for s in run.progress(seeds, "reconstructions"):
            train = synthetic_bags(n_train, "sparse", noise=NOISE, random_state=s, centres_seed=s)
            test = synthetic_bags(n_test, "sparse", noise=NOISE, random_state=s + 1, centres_seed=s)
            for name, (_, change) in RECONSTRUCTIONS.items():
                model = SparseSupportGroundingMIL(**(kw | ssg_kw | change), random_state=s)
                rows.append({"data": sp, "seed": s, **_fit_eval(run, name, model, train, test)})
        for s in run.progress(seeds, "digits bags"):
            train = digits_bags(400, split="train", random_state=s)
            test = digits_bags(400, split="test", random_state=s)
            for name, model in {
                SSG: SparseSupportGroundingMIL(**(kw | ssg_kw), random_state=s),
                "gated ABMIL": AttentionMIL("gated", **kw, random_state=s),
                "max pooling": AttentionMIL("max", **kw, random_state=s),
                "mean pooling": AttentionMIL("mean", **kw, random_state=s),
            }.items():
                rows.append({"data": "B-digits", "seed": s, **_fit_eval(run, name, model, train, test)})

    methods = list(dict.fromkeys(r["method"] for r in rows))
    datas = list(dict.fromkeys(r["data"] for r in rows))
    summary = []
    for d in datas:
        gated_inst = _mean(rows, d, "gated ABMIL", "instance AUC")
        for m in methods:
            if not _by(rows, d, m, "bag AUC"):
                continue
            summary.append(
                {
                    "data": d,
                    "method": m,
                    "bag AUC": _mean(rows, d, m, "bag AUC"),
                    "instance AUC": _mean(rows, d, m, "instance AUC"),
                    "instance AUC - gated ABMIL": _mean(rows, d, m, "instance AUC") - gated_inst,
                    "replicates": len(_by(rows, d, m, "bag AUC")),
                }
            )
    run.table(summary, name="results", caption="Mean test bag AUC and instance AUC over the replicates")
    run.table(rows, name="per_replicate", caption="Every replicate (its own train/test bags and model seeds)")

    # gate 1: sparse + heterogeneous, per replicate against the baseline with the best mean bag AUC
    best = max(BASELINES, key=lambda m: _mean(rows, sp, m, "bag AUC"))
    ssg_bag, best_bag = _by(rows, sp, SSG, "bag AUC"), _by(rows, sp, best, "bag AUC")
    ssg_inst, gated_inst = _by(rows, sp, SSG, "instance AUC"), _by(rows, sp, "gated ABMIL", "instance AUC")
    inst_gain = [a - b for a, b in zip(ssg_inst, gated_inst)]
    run.metric("best_baseline_sparse", best)
    run.metric("ssg_bag_auc_sparse", float(np.mean(ssg_bag)))
    run.metric("best_baseline_bag_auc_sparse", float(np.mean(best_bag)))
    run.metric("gated_bag_auc_sparse", _mean(rows, sp, "gated ABMIL", "bag AUC"))
    run.metric(
        "ssg_bag_auc_minus_gated_sparse",
        _mean(rows, sp, SSG, "bag AUC") - _mean(rows, sp, "gated ABMIL", "bag AUC"),
    )
    run.metric("ssg_instance_auc_sparse", float(np.mean(ssg_inst)))
    run.metric("gated_instance_auc_sparse", float(np.mean(gated_inst)))
    run.metric("max_pooling_instance_auc_sparse", _mean(rows, sp, "max pooling", "instance AUC"))
    run.metric("mean_pooling_instance_auc_sparse", _mean(rows, sp, "mean pooling", "instance AUC"))
    run.metric("rplus_instance_auc_sparse", _mean(rows, sp, RPLUS, "instance AUC"))
    run.metric("rplus_bag_auc_sparse", _mean(rows, sp, RPLUS, "bag AUC"))
    # the digest's gates are on means over seeds; the per-replicate values are recorded beside them
    bag_gain = [a - b for a, b in zip(ssg_bag, best_bag)]
    run.metric("bag_gain_per_replicate", bag_gain)
    run.metric("bag_gain_min", float(np.min(bag_gain)))
    run.metric("bag_gain_max", float(np.max(bag_gain)))
    run.metric("instance_gain_per_replicate", inst_gain)
    run.metric("instance_gain_min", float(np.min(inst_gain)))
    run.metric("instance_gain_max", float(np.max(inst_gain)))
    run.check("sparse_bag_auc_gain_vs_best_baseline", float(np.mean(bag_gain)))
    # full mode only: quick's 2 replicates straddle the bar on some seeds and clear it on others (claims.toml)
    if run.full:  # the digest's mean over 5 replicates
        run.check("sparse_instance_auc_gain_vs_gated", float(np.mean(inst_gain)))

    # gate 3b: decoy weight of the trained r+-only model over that of the trained contrast model
    ratios = [d[RPLUS]["decoy"] / d[SSG]["decoy"] if d[SSG]["decoy"] > 0 else float("nan") for d in diags]
    decoy_contrast = float(np.mean([d[SSG]["decoy"] for d in diags]))
    decoy_ratio = (
        float(np.mean([d[RPLUS]["decoy"] for d in diags])) / decoy_contrast
        if decoy_contrast > 0
        else float("nan")
    )
    for key, name in (("contrast", SSG), ("rplus", RPLUS)):
        run.metric(f"decoy_w_{key}", float(np.mean([d[name]["decoy"] for d in diags])))
        run.metric(f"witness_w_{key}", float(np.mean([d[name]["witness"] for d in diags])))
        run.metric(
            f"decoy_to_witness_w_{key}",
            float(np.mean([d[name]["decoy"] / d[name]["witness"] for d in diags])),
        )
        run.metric(f"grounded_bag_share_{key}", float(np.mean([d[name]["live_bags"] for d in diags])))
    for key in diags[0]["masses"]:
        run.metric(f"masses_{key}", float(np.mean([d["masses"][key] for d in diags])))
    run.metric("decoy_ratio_per_replicate", ratios)
    # grounding on test bags whose decoys differ from training's (cosine to the evidence 0.9, not 0.8)
    run.metric("shifted_decoy_cosine", SHIFTED_DECOY_COSINE)
    sh = lambda name, key: float(np.mean([d[f"shifted {name}"][key] for d in diags]))  # noqa: E731
    run.metric("shifted_decoy_instance_auc_ssg", sh(SSG, "instance AUC"))
    run.metric("shifted_decoy_instance_auc_gated", sh("gated ABMIL", "instance AUC"))
    run.metric(
        "shifted_decoy_instance_gain_per_replicate",
        [d[f"shifted {SSG}"]["instance AUC"] - d["shifted gated ABMIL"]["instance AUC"] for d in diags],
    )
    run.metric("shifted_decoy_instance_gain", sh(SSG, "instance AUC") - sh("gated ABMIL", "instance AUC"))
    run.metric(
        "shifted_decoy_to_witness_w_contrast",
        float(np.mean([d[f"shifted {SSG}"]["decoy"] / d[f"shifted {SSG}"]["witness"] for d in diags])),
    )
    run.metric(
        "shifted_decoy_to_witness_w_rplus",
        float(np.mean([d[f"shifted {RPLUS}"]["decoy"] / d[f"shifted {RPLUS}"]["witness"] for d in diags])),
    )
    run.metric("shifted_decoy_ratio_rplus_vs_contrast", sh(RPLUS, "decoy") / sh(SSG, "decoy"))
    run.check("decoy_weight_ratio_rplus_vs_contrast", decoy_ratio)
    # grounding weights are a distribution over each grounded bag (holds by construction)
    run.check(
        "grounding_weights_normalised", max(d[name]["norm_error"] for d in diags for name in (SSG, RPLUS))
    )

    if run.full:
        dn = "A-dense"
        gain_dense = _mean(rows, dn, SSG, "instance AUC") - _mean(rows, dn, "gated ABMIL", "instance AUC")
        gain_sparse = float(np.mean(inst_gain))
        run.metric("instance_gain_sparse", gain_sparse)
        run.metric("instance_gain_dense", gain_dense)
        run.check("regime_gain_sparse_minus_dense", gain_sparse - gain_dense)
        gain_bal = _mean(rows, sp, "SSG balanced OT", "instance AUC") - _mean(
            rows, sp, "gated ABMIL", "instance AUC"
        )
        run.metric("instance_gain_balanced_ot", gain_bal)
        lost = (gain_sparse - gain_bal) / gain_sparse if gain_sparse > 0 else float("nan")
        run.check("ssg_instance_gain_every_replicate", inst_gain)
        run.check("balanced_ot_gain_lost_fraction", lost)
        for name, (key, _) in RECONSTRUCTIONS.items():
            run.metric(
                f"recon_{key}_instance_gain",
                _mean(rows, sp, name, "instance AUC") - float(np.mean(gated_inst)),
            )
            run.metric(
                f"recon_{key}_bag_gain_vs_best", _mean(rows, sp, name, "bag AUC") - float(np.mean(best_bag))
            )
        dg = "B-digits"
        run.metric("digits_ssg_bag_auc", _mean(rows, dg, SSG, "bag AUC"))
        run.metric("digits_gated_bag_auc", _mean(rows, dg, "gated ABMIL", "bag AUC"))
        run.metric("digits_ssg_instance_auc", _mean(rows, dg, SSG, "instance AUC"))
        run.metric("digits_gated_instance_auc", _mean(rows, dg, "gated ABMIL", "instance AUC"))
        for col, key in (("bag AUC", "bag"), ("instance AUC", "instance")):
            run.metric(
                f"digits_{key}_gain_per_replicate",
                [a - b for a, b in zip(_by(rows, dg, SSG, col), _by(rows, dg, "gated ABMIL", col))],
            )
        run.check(
            "digits_bag_auc_gap_vs_gated",
            _mean(rows, dg, SSG, "bag AUC") - _mean(rows, dg, "gated ABMIL", "bag AUC"),
        )
        run.check(
            "digits_instance_auc_gain_vs_gated",
            _mean(rows, dg, SSG, "instance AUC") - _mean(rows, dg, "gated ABMIL", "instance AUC"),
        )

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.8 / len(methods)
    for ax, col in zip(axes, ("instance AUC", "bag AUC")):
        for j, m in enumerate(methods):
            vals = [_mean(rows, d, m, col) if _by(rows, d, m, col) else np.nan for d in datas]
            ax.bar(np.arange(len(datas)) + j * width, vals, width, label=m)
        ax.set_xticks(np.arange(len(datas)) + 0.4 - width / 2, datas)
        ax.set_ylim(0.4, 1.02)
        ax.set_ylabel(col)
        ax.set_title(f"{col} by data set and method")
    axes[0].legend(fontsize=6, loc="lower left")
    run.figure(
        fig, "instance_auc", caption="Test instance AUC (left) and bag AUC (right) by data set and method"
    )
