"""Reproduction (reconstructed paper): observability-gated alignment beats uniform alignment on source-partitioned
multimodal data with a planted low-observability relation, cuts negative transfer on weakly observed relations,
does not over-suppress on the clean twin, and its o_r tracks the benefit of aligning r (digest: ``obsalign``).

Data A: the digest's generator (6 sources, availability {all}, {all}, {0,1}, {0,1}, {0}, {1,2}, skewed class
coverage; the small source 5 is the only bridge for (1, 2) on classes 8 and 9 and, in the planted version, draws
modality 2 through a different mixing). Methods: local-only, FedAvg fusion with zero-imputation (no alignment),
uniform alignment + global prototype transfer, bridge-count gating, ObsAlign; all share the schedule.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import spearmanr

from neurips26.harness import Run

from .data import make_bundled_sources, make_planted_sources
from .federation import ObsAlign
from .sketch import compute_sketch

METHODS = {
    "local_only": dict(gate="none", local_only=True),
    "fedavg_no_alignment": dict(gate="none"),
    "uniform_alignment": dict(gate="uniform"),
    "bridge_gating": dict(gate="bridge"),
    "obsalign": dict(gate="observability"),
}
BASELINES = ["local_only", "fedavg_no_alignment", "uniform_alignment", "bridge_gating"]


def _predictions(model, test):
    return [model.predict(s.views, i) for i, s in enumerate(test)]


def _accuracy(preds, test) -> float:
    return float(np.mean([np.mean(p == s.y) for p, s in zip(preds, test)]))


def _relation_rows(test, n_classes):
    """Test rows of relation (m, m', c): class c in sources observing both m and m'."""
    out = {}
    for m in range(3):
        for j in range(m + 1, 3):
            for c in range(n_classes):
                sel = [(i, s.y == c) for i, s in enumerate(test) if {f"m{m}", f"m{j}"} <= set(s.views)]
                if sum(int(mask.sum()) for _, mask in sel):
                    out[(m, j, c)] = sel
    return out


def _relation_acc(preds, test, sel) -> float:
    hits = sum(int((preds[i][mask] == test[i].y[mask]).sum()) for i, mask in sel)
    return hits / sum(int(mask.sum()) for _, mask in sel)


def _sufficiency_error(train, seed) -> float:
    """max |sketch(pooled) - sketch(shard 1) - sketch(shard 2)| on random embeddings of data A's sources."""
    rng = np.random.default_rng(seed)
    n = sum(len(s.y) for s in train)
    emb = rng.normal(size=(n, 3, 8))
    obs = rng.random((n, 3)) < 0.7
    obs[:, 0] |= ~obs.any(1)
    y = np.concatenate([s.y for s in train])
    cut = n // 3
    whole = compute_sketch(emb, obs, y, 10)
    parts = compute_sketch(emb[:cut], obs[:cut], y[:cut], 10) + compute_sketch(
        emb[cut:], obs[cut:], y[cut:], 10
    )
    return float(
        max(np.abs(getattr(whole, f) - getattr(parts, f)).max() for f in ("counts", "sums", "pair_cos"))
    )


def run(run: Run) -> None:
    seeds = run.seeds(run.param("data_seeds", quick=2, full=5))
    per_class = run.param("rows_per_class", quick=40, full=60)
    sched = dict(rounds=run.param("rounds", quick=20, full=30), local_epochs=run.param("local_epochs", 1))
    run.param("embedding_dim", 32)
    run.param("theta", 0.5)
    run.param("lambda_align", 0.5)
    spearman_on = run.param("spearman_relations", quick=False, full=True)

    rows, gains, gaps, nt_ratios, clean_gaps, spearmans, sufficiency, o_ranges = (
        [],
        [],
        [],
        [],
        [],
        [],
        [],
        [],
    )
    nt_low = {"obsalign": [], "uniform_alignment": []}
    planted_o, other_o, consolidated, consolidated_02, gaps_fedavg = [], [], [], [], []
    for seed in seeds:
        train, test = make_planted_sources(per_class, planted=True, seed=seed)
        sufficiency.append(_sufficiency_error(train, seed))
        acc, preds, models = {}, {}, {}
        for name, kw in METHODS.items():
            models[name] = ObsAlign(random_state=seed, **kw, **sched).fit(train)
            preds[name] = _predictions(models[name], test)
            acc[name] = _accuracy(preds[name], test)
        variant = ObsAlign(random_state=seed, theta=0.2, **sched).fit(train)
        acc["obsalign_theta_0.2"] = _accuracy(_predictions(variant, test), test)
        upper = np.triu(np.ones((3, 3), bool), 1)
        consolidated.append(float(models["obsalign"].consolidated_[upper].mean()))
        consolidated_02.append(float(variant.consolidated_[upper].mean()))
        obs = models["obsalign"].observability_
        o_ranges += [float(obs.o.min()), float(obs.o.max())]
        planted_o += [float(obs.o[1, 2, c]) for c in (8, 9)]
        other_o += [float(obs.o[r]) for r in obs.relations() if not (r[:2] == (1, 2) and r[2] in (8, 9))]
        rel = _relation_rows(test, 10)
        o_vals = {r: float(obs.o[r]) for r in rel}
        median_o = float(np.median(list(o_vals.values())))
        low = [r for r in rel if o_vals[r] < median_o]
        for name in nt_low:
            nt = [
                _relation_acc(preds["local_only"], test, rel[r]) - _relation_acc(preds[name], test, rel[r])
                for r in low
            ]
            nt_low[name].append(float(np.mean(nt)))
        nt_ratios.append(
            nt_low["obsalign"][-1] / nt_low["uniform_alignment"][-1]
            if nt_low["uniform_alignment"][-1] > 0
            else float("inf")
        )
        gains.append(acc["obsalign"] - acc["uniform_alignment"])
        gaps.append(acc["obsalign"] - max(acc[b] for b in BASELINES))
        gaps_fedavg.append(acc["obsalign"] - acc["fedavg_no_alignment"])
        ctrain, ctest = make_planted_sources(per_class, planted=False, seed=seed)
        clean = {
            name: _accuracy(
                _predictions(ObsAlign(random_state=seed, **METHODS[name], **sched).fit(ctrain), ctest), ctest
            )
            for name in ("uniform_alignment", "obsalign")
        }
        clean_gaps.append(clean["obsalign"] - clean["uniform_alignment"])
        rows.append({"data": "A planted", "seed": seed, **acc})
        rows.append({"data": "A clean twin", "seed": seed, **clean})
        if spearman_on and len(spearmans) < 3:  # one extra model per relation: 3 data seeds
            base = preds["fedavg_no_alignment"]
            cand = [r for r in rel if models["obsalign"].observability_.bridge[r] > 0]
            benefit, ovals = [], []
            for r in cand:
                m = ObsAlign(gate="none", align_only=r, random_state=seed, **sched).fit(train)
                p = _predictions(m, test)
                everyone = [(i, s.y == r[2]) for i, s in enumerate(test) if (s.y == r[2]).any()]
                benefit.append(_relation_acc(p, test, everyone) - _relation_acc(base, test, everyone))
                ovals.append(o_vals[r])
            spearmans.append(float(spearmanr(ovals, benefit).statistic))

    run.metric("mean_acc_obsalign", float(np.mean([r["obsalign"] for r in rows if r["data"] == "A planted"])))
    for b in BASELINES + ["obsalign_theta_0.2"]:
        run.metric(f"mean_acc_{b}", float(np.mean([r[b] for r in rows if r["data"] == "A planted"])))
    run.metric("nt_low_obsalign", float(np.mean(nt_low["obsalign"])))
    run.metric("nt_low_uniform", float(np.mean(nt_low["uniform_alignment"])))
    run.metric("mean_o_planted_relations", float(np.mean(planted_o)))
    run.metric("mean_o_other_relations", float(np.mean(other_o)))
    # what consolidation uses: the share of off-diagonal relations (m < m', c) with o_r >= theta
    run.metric("share_relations_consolidated", float(np.mean(consolidated)))
    run.metric("share_relations_consolidated_theta_0.2", float(np.mean(consolidated_02)))
    run.metric("max_o_off_diagonal", float(max(other_o + planted_o)))
    run.metric("acc_gap_vs_fedavg_no_alignment_per_seed", [round(g, 4) for g in gaps_fedavg])
    run.metric("acc_gap_vs_fedavg_no_alignment", float(np.mean(gaps_fedavg)))
    run.metric("acc_gap_vs_best_baseline_per_seed", [round(g, 4) for g in gaps])
    run.metric("clean_gap_signed_mean", float(np.mean(clean_gaps)))

    run.metric("acc_gain_vs_uniform_per_seed", [round(g, 4) for g in gains])
    run.metric("acc_gain_vs_uniform_min_seed", float(min(gains)))
    # the digest's thresholds are on mean accuracy over the data seeds; per-seed values are recorded beside
    planted = {m: float(np.mean([r[m] for r in rows if r["data"] == "A planted"])) for m in METHODS}
    best = max(BASELINES, key=lambda b: planted[b])
    run.metric("best_baseline", best)
    run.metric("best_federated_baseline", max(BASELINES[1:], key=lambda b: planted[b]))
    run.check("acc_gain_vs_uniform", planted["obsalign"] - planted["uniform_alignment"])
    run.check("acc_gap_vs_best_baseline", planted["obsalign"] - planted[best])
    run.metric("nt_ratio_low_observability_per_seed", nt_ratios)
    run.metric("clean_twin_abs_gap_per_seed", [abs(g) for g in clean_gaps])
    # quick's 2 data seeds land on either side of these bars on held-out seeds (see the declaration)
    if run.full:
        run.check("nt_ratio_low_observability", nt_ratios)
        run.check("clean_twin_abs_gap", [abs(g) for g in clean_gaps])
    if spearman_on:
        run.check("spearman_o_vs_benefit", spearmans)
    run.check("sketch_sufficiency_error", max(sufficiency))
    run.check("observability_in_unit_interval", float(min(o_ranges) >= 0 and max(o_ranges) <= 1))

    # exploration (reported, not gated): scarce local data, where sharing across sources should pay
    scarce = run.param("scarce_rows_per_class", quick=None, full=15)
    if scarce:
        scarce_acc = {m: [] for m in ("local_only", "fedavg_no_alignment", "uniform_alignment", "obsalign")}
        for seed in seeds[:3]:
            strain, stest = make_planted_sources(scarce, planted=True, seed=seed)
            for m in scarce_acc:
                model = ObsAlign(random_state=seed, **METHODS[m], **sched).fit(strain)
                scarce_acc[m].append(_accuracy(_predictions(model, stest), stest))
        rows.append(
            {
                "data": f"A planted, {scarce} rows/class",
                "seed": "mean of 3",
                **{m: float(np.mean(v)) for m, v in scarce_acc.items()},
            }
        )
        for m, v in scarce_acc.items():
            run.metric(f"scarce_acc_{m}", float(np.mean(v)))

    # bundled views: digits (10 classes) and breast_cancer (binary), direction only
    for name in run.param("bundled", quick=["digits"], full=["digits", "breast_cancer"]):
        btrain, btest = make_bundled_sources(name, seed=seeds[0])
        bacc = {
            m: _accuracy(
                _predictions(ObsAlign(random_state=seeds[0], **METHODS[m], **sched).fit(btrain), btest), btest
            )
            for m in ("local_only", "fedavg_no_alignment", "uniform_alignment", "obsalign")
        }
        rows.append({"data": name, "seed": seeds[0], **bacc})
        run.metric(f"{name}_gain_vs_no_alignment", bacc["obsalign"] - bacc["fedavg_no_alignment"])

    run.table(
        rows, name="accuracy", caption="Mean per-source test accuracy (each source's own modality pattern)."
    )
    fig, ax = plt.subplots(figsize=(7, 3.5))
    planted_rows = [r for r in rows if r["data"] == "A planted"]
    names = list(METHODS) + ["obsalign_theta_0.2"]
    ax.bar(names, [np.mean([r[n] for r in planted_rows]) for n in names])
    ax.set_ylabel("mean per-source accuracy")
    ax.set_ylim(0.5, 0.85)
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    run.figure(fig, "accuracy_planted", caption="Data A (planted): mean per-source accuracy over seeds.")
