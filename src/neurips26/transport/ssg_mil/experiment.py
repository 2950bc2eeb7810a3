"""Reproduction of Sparse Support Grounding MIL (digest ``ssg-mil``; paper text unavailable, method [R]).

Data A (synthetic 32-d feature bags: rare, diverse evidence; heterogeneous nuisance; matchable decoys in both
classes) in the sparse + heterogeneous regime (witness rate about 2-3%) and the dense + homogeneous regime (25%),
400 training and 400 test bags per seed; data B (bags of 40 sklearn digits, positive iff a "7" is present, decoy
"1"). Methods on the same bags: SSG, gated ABMIL, ABMIL, mean pooling, max pooling, and the ablations balanced-OT
SSG and r+-only SSG (no label contrast). Metrics: test bag AUC and instance AUC (mean per-bag AUC over positive
test bags, the witnesses known). The digest's gates are checked literally; "gain" means instance-AUC gain over
gated ABMIL (the grounding targets localisation; bag-AUC gains are reported beside it).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import roc_auc_score

from neurips26.harness import Run

from .bags import MILData, digits_bags, synthetic_bags
from .mil import AttentionMIL, SparseSupportGroundingMIL

NOISE = 1.0  # instance noise norm vs unit-norm cluster centres (0.35 makes every method perfect)
# The digest's rho = 0.5 keeps ~90% of every instance's mass in this embedding space (the pitfall "with rho large,
# all mass is retained"): r- >= r+ for nearly every instance and w = relu(r+ - r-) is almost identically 0. The
# experiment uses the low end of the digest's sweep, rho = 0.1, and full mode reports the sweep {0.1, 0.5, 2}.
RHO = 0.1


def instance_auc(scores: list[np.ndarray], data: MILData) -> float:
    """Mean per-bag instance AUC over positive bags that hold both witnesses and non-witnesses."""
    vals = [
        roc_auc_score(w, s)
        for s, w, y in zip(scores, data.witness, data.y)
        if y == 1 and 0 < w.sum() < len(w)
    ]
    return float(np.mean(vals)) if vals else float("nan")


def _methods(full: bool, seed: int, epochs: int) -> dict:
    kw = {"epochs": epochs, "random_state": seed}
    methods = {
        "SSG (ours)": SparseSupportGroundingMIL(rho=RHO, **kw),
        "gated ABMIL": AttentionMIL("gated", **kw),
        "max pooling": AttentionMIL("max", **kw),
        "mean pooling": AttentionMIL("mean", **kw),
    }
    if full:
        methods["ABMIL"] = AttentionMIL("attention", **kw)
        methods["SSG balanced OT"] = SparseSupportGroundingMIL(transport="balanced", rho=RHO, **kw)
        methods["SSG r+ only"] = SparseSupportGroundingMIL(contrast=False, rho=RHO, **kw)
    return methods


def _decoy_weights(model: SparseSupportGroundingMIL, test: MILData) -> dict[str, float]:
    """Mean grounding strength of decoys and witnesses in positive test bags, with and without the contrast."""
    pos = test.subset(np.flatnonzero(test.y == 1))
    out = {}
    for tag, contrast in (("contrast", True), ("r+ only", False)):
        w = model.grounding(pos.bags, pos.y, contrast=contrast)
        out[f"decoy w ({tag})"] = float(np.mean(np.concatenate([wi[d] for wi, d in zip(w, pos.decoy)])))
        out[f"witness w ({tag})"] = float(np.mean(np.concatenate([wi[v] for wi, v in zip(w, pos.witness)])))
    return out


def _evaluate(run: Run, train: MILData, test: MILData, seed: int, epochs: int, label: str):
    rows, diag = [], {}
    for name, model in _methods(run.full, seed, epochs).items():
        with run.timer(f"fit {name}"):
            model.fit(train.bags, train.y)
        bag = roc_auc_score(test.y, model.decision_function(test.bags))
        inst = instance_auc(model.instance_scores(test.bags), test)
        rows.append({"data": label, "seed": seed, "method": name, "bag AUC": bag, "instance AUC": inst})
        if name == "SSG (ours)":
            diag = _decoy_weights(model, test)
            rows[-1]["instance AUC (attention)"] = instance_auc(
                model.instance_scores(test.bags, "attention"), test
            )
    return rows, diag


def _mean(rows, data, method, col):
    return float(np.mean([r[col] for r in rows if r["data"] == data and r["method"] == method]))


def run(run: Run) -> None:
    n_seeds = run.pick(quick=2, full=5)
    epochs = 20
    regimes = run.pick(quick=["sparse"], full=["sparse", "dense"])
    run.note(
        f"quick mode: data A sparse regime only, {n_seeds} seeds, {epochs} epochs, SSG vs gated ABMIL, max and "
        "mean pooling (the digest's quick protocol); full mode adds the dense regime, digits bags, ABMIL, the "
        "ablations and 5 seeds"
    )
    run.note(f"synthetic instances: unit cluster centres + noise of norm {NOISE}; 400 train / 400 test bags")
    run.expect(
        "partial",
        reason=(
            "Measured in quick mode (sparse regime, 2 seeds): SSG bag AUC 0.68 vs best baseline (max pooling) 0.86 "
            "and SSG instance AUC 0.78 vs gated ABMIL 0.89, so gate 1 fails; only the decoy check holds (decoys get "
            "4.8x more grounding weight with r+ only than with the contrast). Diagnosis: under the digest's KL "
            "relaxation the retained masses are driven by the target-side demand of the supports (the negative "
            "memory holds more nuisance and the decoys at cosine 0.8), so r- >= r+ for most instances including "
            "witnesses (witness mean w 0.035 vs 1/m ~ 0.013); with rho = 0.5 the contrast is ~0 everywhere, and "
            "without the KL(w || attention) term the self-chosen supports collapse (instance AUC 0.22). Our "
            "reconstruction of the unpublished method does not reproduce the claimed gains."
        ),
    )
    rows, diags = [], []
    seeds = run.seeds(n_seeds)
    jobs = [(reg, s) for reg in regimes for s in seeds]
    for regime, s in run.progress(jobs, "data A bags"):
        train = synthetic_bags(400, regime, noise=NOISE, random_state=s, centres_seed=s)
        test = synthetic_bags(400, regime, noise=NOISE, random_state=s + 1, centres_seed=s)
        r, diag = _evaluate(run, train, test, s, epochs, f"A-{regime}")
        rows += r
        if regime == "sparse":
            diags.append(diag)
        run.metric(f"witness rate {regime}", train.witness_rate)
    if run.full:
        s = seeds[0]
        train = synthetic_bags(400, "sparse", noise=NOISE, random_state=s, centres_seed=s)
        test = synthetic_bags(400, "sparse", noise=NOISE, random_state=s + 1, centres_seed=s)
        for rho in run.progress((0.1, 0.5, 2.0), "rho sweep"):
            model = SparseSupportGroundingMIL(rho=rho, epochs=epochs, random_state=s).fit(train.bags, train.y)
            run.metric(f"rho sweep {rho}: instance AUC", instance_auc(model.instance_scores(test.bags), test))
            run.metric(f"rho sweep {rho}: bag AUC", roc_auc_score(test.y, model.decision_function(test.bags)))
        for s in run.progress(seeds, "digits bags"):
            train = digits_bags(400, split="train", random_state=s)
            test = digits_bags(400, split="test", random_state=s)
            rows += _evaluate(run, train, test, s, epochs, "B-digits")[0]

    methods = list(dict.fromkeys(r["method"] for r in rows))
    datas = list(dict.fromkeys(r["data"] for r in rows))
    summary = [
        {
            "data": d,
            "method": m,
            "bag AUC": _mean(rows, d, m, "bag AUC"),
            "instance AUC": _mean(rows, d, m, "instance AUC"),
        }
        for d in datas
        for m in methods
        if any(r["data"] == d and r["method"] == m for r in rows)
    ]
    run.table(summary, name="results", caption="Mean test bag AUC and instance AUC over seeds")
    run.table(rows, name="per_seed", caption="Every seed")
    diag = {k: float(np.mean([d[k] for d in diags])) for k in diags[0]}
    for k, v in diag.items():
        run.metric(f"sparse {k}", v)

    # Gate 1: sparse + heterogeneous
    sp = "A-sparse"
    baselines = [m for m in methods if not m.startswith("SSG")]
    best_bag = max(_mean(rows, sp, m, "bag AUC") for m in baselines)
    ssg_inst = _mean(rows, sp, "SSG (ours)", "instance AUC")
    gain_sparse = ssg_inst - _mean(rows, sp, "gated ABMIL", "instance AUC")
    run.check(
        "sparse: SSG bag AUC - best baseline bag AUC",
        _mean(rows, sp, "SSG (ours)", "bag AUC") - best_bag,
        ">=",
        0.02,
    )
    run.check("sparse: SSG instance AUC - gated ABMIL instance AUC", gain_sparse, ">=", 0.05)
    # Gate 3b: decoys weighted >= 2x more without the label contrast
    ratio = (
        diag["decoy w (r+ only)"] / diag["decoy w (contrast)"] if diag["decoy w (contrast)"] > 0 else np.inf
    )
    run.check(
        "sparse: decoy mean w, r+ only / contrast",
        ratio,
        ">=",
        2.0,
        note=f"witness mean w with contrast {diag['witness w (contrast)']:.4f}",
    )
    if run.full:
        dn = "A-dense"
        gain_dense = _mean(rows, dn, "SSG (ours)", "instance AUC") - _mean(
            rows, dn, "gated ABMIL", "instance AUC"
        )
        run.check("instance-AUC gain over gated ABMIL: sparse - dense", gain_sparse - gain_dense, ">", 0.0)
        gain_bal = _mean(rows, sp, "SSG balanced OT", "instance AUC") - _mean(
            rows, sp, "gated ABMIL", "instance AUC"
        )
        lost = (gain_sparse - gain_bal) / gain_sparse if gain_sparse > 0 else float("nan")
        run.check("balanced OT: fraction of SSG's sparse gain lost", lost, ">=", 0.5)
        dg = "B-digits"
        run.check(
            "digits: SSG bag AUC - gated ABMIL bag AUC",
            _mean(rows, dg, "SSG (ours)", "bag AUC") - _mean(rows, dg, "gated ABMIL", "bag AUC"),
            ">=",
            -0.01,
        )
        run.check(
            "digits: SSG instance AUC - gated ABMIL instance AUC",
            _mean(rows, dg, "SSG (ours)", "instance AUC") - _mean(rows, dg, "gated ABMIL", "instance AUC"),
            ">=",
            0.03,
        )

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.8 / len(methods)
    for ax, col in zip(axes, ("instance AUC", "bag AUC")):
        for j, m in enumerate(methods):
            vals = [
                _mean(rows, d, m, col) if any(r["data"] == d and r["method"] == m for r in rows) else np.nan
                for d in datas
            ]
            ax.bar(np.arange(len(datas)) + j * width, vals, width, label=m)
        ax.set_xticks(np.arange(len(datas)) + 0.4 - width / 2, datas)
        ax.set_ylim(0.4, 1.02)
        ax.set_ylabel(col)
        ax.set_title(f"{col} by regime and method")
    axes[0].legend(fontsize=7, loc="lower left")
    run.figure(
        fig, "instance_auc", caption="Test instance AUC (left) and bag AUC (right) by regime and method"
    )
