"""Reproduction of the noisy-alignment criterion (digest ``noisy-gnn-margin``; definitions reconstructed).

Gates (digest, "Reproduction check"):

1. zero noise, all 1200 atlas graphs on 6-7 nodes, random GIN (width 64, 3 layers, float64): alignment iff
   unique 3-round WL hash on >= 99% of graphs; a mean-aggregation GCN aligns strictly fewer graphs.
2. a GIN trained to separate atlas graphs on 7 nodes (150 quick / 300 full): Spearman between the predicted
   radius ``delta_i / (2 L_emp,i)`` and the per-graph alignment rate of identifiable 1-2 flip copies
   (50 / 200 draws per flip count) >= 0.5; 0 violations of the certified radius (provable bound).
3. margin training (gamma0 = 0.5, flip rate 0.05): alignment at edit distance 1 and 2 >= plain + 10 points
   each; 100% zero-noise separation of the WL-separable sources.
4. node level: 2-class CSBM, n = 300, GIN node classifier: certified fraction at radius >= 1 (reported),
   0 violations under a greedy attack, tightness (median attack / certified radius, reported).
5. (full mode) SBM graphs with 2 vs 3 communities: margin-trained accuracy under 5% flips >= plain + 3
   points, clean accuracy within 2 points.

Noise levels are bucketed by the exact edit distance of a copy to its source (a 2-flip copy can be
isomorphic to its source again; it then is a zero-noise copy and is not counted as noisy).
"""

from __future__ import annotations

import warnings
from collections import Counter

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker
import networkx as nx
import numpy as np
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

from neurips26.harness import Run

from .alignment import (
    alignment_margins,
    certified_flip_radius,
    empirical_flip_lipschitz,
    gin_flip_bound,
    robustness_radius,
    separation_gaps,
    train_alignment,
    zero_noise_alignment,
)
from .atlas import AtlasFlipIndex
from .gnn import DenseGNN, random_edge_flips, to_dense_batch
from .node_certificate import (
    GINNodeClassifier,
    greedy_flip_attack,
    make_csbm,
    node_certificates,
    train_node_classifier,
)


def _wl_unique(graphs: list[nx.Graph], iterations: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        h = [nx.weisfeiler_lehman_graph_hash(g, iterations=iterations) for g in graphs]
    counts = Counter(h)
    return np.array([counts[x] == 1 for x in h])


def gate_zero_noise(run: Run) -> None:
    graphs = [g for g in nx.graph_atlas_g() if g.number_of_nodes() in (6, 7)]
    A, X, M = to_dense_batch(graphs)
    unique = _wl_unique(graphs, iterations=3)
    rows, aligned = [], {}
    for conv in ("gin", "gcn", "mean"):
        model = DenseGNN(hidden=64, n_layers=3, conv=conv, normalize=False, random_state=run.seed)
        al = zero_noise_alignment(model, A, X, M, random_state=run.seed)
        aligned[conv] = al
        rows.append(
            {
                "model": {"gin": "GIN (sum)", "gcn": "GCN (sym. norm.)", "mean": "GCN (mean aggregation)"}[
                    conv
                ],
                "graphs": len(graphs),
                "aligned": int(al.sum()),
                "WL-unique": int(unique.sum()),
                "agreement with WL": float((al == unique).mean()),
            }
        )
    run.table(
        rows, name="zero_noise", caption="Zero-noise alignment vs 3-round WL-hash uniqueness, atlas 6-7 nodes"
    )
    run.check(
        "zero-noise GIN alignment agrees with WL-hash uniqueness", rows[0]["agreement with WL"], ">=", 0.99
    )
    run.check(
        "GIN aligns minus mean-GCN aligns (graphs)", int(aligned["gin"].sum() - aligned["mean"].sum()), ">", 0
    )


def _noisy_eval(model, A, fam, idx, draws, seed):
    """Margins of identifiable 1- and 2-flip copies, with their edit distance to the source."""
    gen = torch.Generator().manual_seed(seed)
    m = len(fam)
    src, dist, gam = [], [], []
    with torch.no_grad():
        F_ = model(A)
        for k in (1, 2):
            An = random_edge_flips(A.repeat(draws, 1, 1), k, generator=gen)
            s = np.tile(np.arange(m), draws)
            cls = idx.classify(An.numpy().astype(np.int64))
            ident = idx.identifiable(cls, s, fam)
            d = idx.distances_[cls, fam[s]]
            keep = ident & (d > 0)
            src.append(s[keep])
            dist.append(d[keep])
            if keep.any():
                gam.append(alignment_margins(model(An[keep]), torch.as_tensor(s[keep]), F_).numpy())
            else:
                gam.append(np.zeros(0))
    return np.concatenate(src), np.concatenate(dist), np.concatenate(gam)


MIN_COPIES = 30  # below this many identifiable copies a rate is not measured (NaN never passes a check)


def _rate(gam: np.ndarray) -> float:
    return float((gam > 0).mean()) if len(gam) >= MIN_COPIES else float("nan")


def gate_prediction_and_margin(run: Run) -> None:
    m = run.pick(quick=150, full=300)
    draws = run.pick(quick=50, full=200)
    steps = run.pick(quick=150, full=400)
    idx = AtlasFlipIndex(7)
    rng = run.rng
    fam = np.sort(rng.choice(idx.n_classes, m, replace=False))
    graphs = [idx.graphs_[c] for c in fam]
    A, _, _ = to_dense_batch(graphs)
    wl_sep = _wl_unique(graphs, iterations=3)
    if run.quick:
        run.note(
            f"quick mode: {m} source graphs, {draws} draws per flip count, {steps} training steps "
            "(full: 300, 200, 400); same protocol"
        )

    def filt(An, source):  # identifiable *noisy* copies: closest to their source, not isomorphic to it
        cls, src = idx.classify(An.numpy().astype(np.int64)), np.asarray(source)
        return idx.identifiable(cls, src, fam) & (idx.distances_[cls, fam[src]] > 0)

    configs = {
        "plain (contrastive)": dict(),
        "DropEdge (p = 0.1)": dict(augment="dropedge", drop_rate=0.1),
        "margin (gamma0 = 0.5)": dict(
            margin_weight=1.0, gamma0=0.5, flip_rate=0.05, n_noisy=16, copy_filter=filt
        ),
    }
    rows, models, evals = [], {}, {}
    for name, kw in run.progress(list(configs.items()), "training GINs"):
        model = DenseGNN(hidden=32, n_layers=3, random_state=run.seed)
        with run.timer(f"train {name}"):
            train_alignment(model, A, n_steps=steps, lr=2e-2, random_state=run.seed, **kw)
        src, dist, gam = _noisy_eval(model, A, fam, idx, draws, run.seed + 1)
        zero = zero_noise_alignment(model, A, random_state=run.seed)
        models[name], evals[name] = model, (src, dist, gam)
        rows.append(
            {
                "training": name,
                "align @ GED 1": _rate(gam[dist == 1]),
                "align @ GED 2": _rate(gam[dist == 2]),
                "identifiable copies (1 / 2)": f"{int((dist == 1).sum())} / {int((dist == 2).sum())}",
                "zero-noise sep. of WL-separable": float(zero[wl_sep].mean()),
            }
        )
    run.table(
        rows,
        name="noisy_alignment",
        caption=f"Noisy alignment of identifiable copies, {m} atlas graphs on 7 nodes",
    )

    # --- gate 2: prediction by the radius, soundness of the certificate (plain model) ---------------------
    plain = models["plain (contrastive)"]
    src, dist, gam = evals["plain (contrastive)"]
    with torch.no_grad():
        delta = separation_gaps(plain(A)).numpy()
    L_emp = empirical_flip_lipschitz(plain, A)
    r_pred = robustness_radius(delta, L_emp)
    hits = np.bincount(src, weights=(gam > 0).astype(float), minlength=m)
    count = np.bincount(src, minlength=m)
    has = count > 0
    rate = hits[has] / count[has]
    rho = float(spearmanr(r_pred[has], rate).statistic)
    # a single global empirical L makes r_i proportional to delta_i: reported, not gated
    run.metric(
        "Spearman(delta_i, alignment rate) (global empirical L)", float(spearmanr(delta[has], rate).statistic)
    )
    cert = certified_flip_radius(plain, A, delta, max_flips=4)
    within = dist <= cert[src]
    violations = int((gam[within] <= 0).sum())
    # the certificate also covers non-identifiable copies: check every sampled copy, and check the provable
    # displacement bound B_i(k) itself on every copy of every trained model (non-vacuous even when all
    # certified radii are 0)
    gen = torch.Generator().manual_seed(run.seed + 2)
    viol_all, bound_viol = 0, 0
    for k in (1, 2):
        An = random_edge_flips(A.repeat(draws, 1, 1), k, generator=gen)
        s = np.tile(np.arange(m), draws)
        with torch.no_grad():
            g_all = alignment_margins(plain(An), torch.as_tensor(s), plain(A)).numpy()
            viol_all += int((g_all[cert[s] >= k] <= 0).sum())
            for model in models.values():
                moved = (model(An) - model(A)[s]).norm(dim=1).numpy()
                bound_viol += int((moved > gin_flip_bound(model, A, [k])[s, 0] + 1e-12).sum())
    run.metric("copies moved further than the provable bound B_i(k)", bound_viol)
    run.metric("graphs with a non-trivial certified radius (>= 1 flip)", float((cert >= 1).mean()))
    run.metric(
        "median provable 1-flip bound / median empirical L",
        float(np.median(gin_flip_bound(plain, A, 1)) / np.median(L_emp)),
    )
    run.metric("graphs with identifiable noisy copies", int(has.sum()))
    run.check("Spearman(predicted radius, alignment rate)", rho, ">=", 0.5)
    run.check(
        "certificate violations (misaligned within certified radius, or beyond the provable bound)",
        violations + viol_all + bound_viol,
        "==",
        0,
    )

    # --- gate 3: margin training -------------------------------------------------------------------------
    base, marg = rows[0], rows[2]
    n2 = int((evals["plain (contrastive)"][1] == 2).sum())
    if n2 < MIN_COPIES:
        run.note(
            f"only {n2} of the sampled 2-flip copies are identifiable at edit distance 2 (the rest are closer "
            f"to another source or isomorphic to their own): the rate at 2 flips is not measured (NaN)"
        )
    run.check(
        "margin minus plain alignment @ 1 flip (points)",
        100 * (marg["align @ GED 1"] - base["align @ GED 1"]),
        ">=",
        10.0,
    )
    run.check(
        "margin minus plain alignment @ 2 flips (points)",
        100 * (marg["align @ GED 2"] - base["align @ GED 2"]),
        ">=",
        10.0,
    )
    run.check(
        "margin-trained zero-noise separation of WL-separable graphs",
        marg["zero-noise sep. of WL-separable"],
        ">=",
        1.0,
    )

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    ax = axes[0]
    ax.scatter(r_pred[has], rate, s=12, alpha=0.6)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("predicted radius delta_i / (2 L_emp,i)  [flips]")
    ax.set_ylabel("alignment (survival) rate, identifiable 1-2 flip copies")
    ax.set_title(f"plain GIN: Spearman = {rho:.2f}")
    ax = axes[1]
    for name, (_, d_, g_) in evals.items():
        ax.hist(g_[d_ == 1], bins=40, histtype="step", label=name, density=True)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("alignment margin gamma at edit distance 1")
    ax.legend(fontsize=8)
    run.figure(
        fig,
        "radius_vs_survival",
        caption="Predicted radius vs survival rate (left); margins by training (right)",
    )


def gate_node_level(run: Run) -> None:
    n = 300
    A, X, y = make_csbm(n, p_in=0.04, p_out=0.01, mu=1.0, d=8, random_state=run.seed)
    rng = run.rng
    train = np.zeros(n, dtype=bool)
    train[rng.choice(n, n // 2, replace=False)] = True
    model = GINNodeClassifier(
        8, hidden=32, n_classes=2, agg_scale=1.0 / (1.0 + A.sum(1).mean()), random_state=run.seed
    )
    with run.timer("node classifier"):
        train_node_classifier(model, A, X, y, train, n_steps=200)
        cert = node_certificates(model, A, X)
        max_flips = run.pick(quick=6, full=10)
        attack = greedy_flip_attack(model, A, X, np.arange(n), max_flips=max_flips)
    r = cert["radius"]
    violations = int((attack <= r).sum())
    ok = (r >= 1) & (attack <= max_flips)
    tight = float(np.median(attack[ok] / r[ok])) if ok.any() else float("nan")
    run.table(
        [
            {
                "test accuracy": float((cert["pred"][~train] == y[~train]).mean()),
                "certified at radius >= 1": float((r >= 1).mean()),
                "median certified radius": float(np.median(r)),
                "median greedy-attack radius": float(np.median(attack)),
                "median attack / certified (tightness)": tight,
                "violations": violations,
            }
        ],
        name="node_level",
        caption=f"CSBM (n = {n}, 2 classes), 2-layer GIN node classifier",
    )
    run.metric("node-level certified fraction at radius >= 1", float((r >= 1).mean()))
    run.metric("node-level tightness (median attack / certified radius)", tight)
    run.check("node-level certificate violations under greedy attack", violations, "==", 0)


def _sbm_graphs(count: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    graphs, labels = [], []
    for i in range(count):
        k = 2 + i % 2
        n = int(rng.integers(20, 31))
        sizes = [n // k + (j < n % k) for j in range(k)]
        g = nx.stochastic_block_model(
            sizes, np.where(np.eye(k) > 0, 0.5, 0.1).tolist(), seed=int(rng.integers(2**31))
        )
        graphs.append(g)
        labels.append(k - 2)
    A, X, M = to_dense_batch(graphs, n_max=30)
    return A, M, torch.tensor(labels)


def _flip_rate_noise(A, M, rate, gen):
    n = A.shape[1]
    iu = torch.triu_indices(n, n, 1)
    on = (torch.rand(A.shape[0], iu.shape[1], generator=gen, dtype=A.dtype) < rate).to(A.dtype)
    on = on * M[:, iu[0]] * M[:, iu[1]]
    flips = torch.zeros_like(A)
    flips[:, iu[0], iu[1]] = on
    flips = flips + flips.transpose(1, 2)
    return A + flips * (1 - 2 * A)


def gate_graph_classification(run: Run) -> None:
    rng = np.random.default_rng(run.seed + 5)
    A, M, y = _sbm_graphs(600, rng)
    perm = torch.as_tensor(rng.permutation(600))
    tr, te = perm[:400], perm[400:]
    accs = {}
    for name, mw in (("plain", 0.0), ("margin (gamma0 = 0.5)", 1.0)):
        gnn = DenseGNN(hidden=32, n_layers=3, normalize=False, random_state=run.seed)
        head = torch.nn.Linear(3 * 32, 2, dtype=torch.float64)
        opt = torch.optim.Adam([*gnn.parameters(), *head.parameters()], lr=1e-2)
        gen = torch.Generator().manual_seed(run.seed)
        ones = torch.ones(*A.shape[:2], 1, dtype=A.dtype)
        for _ in range(150):
            opt.zero_grad()
            z = head(gnn(A[tr], ones[tr], M[tr]))
            loss = F.cross_entropy(z, y[tr])
            if mw > 0:
                An = _flip_rate_noise(A[tr], M[tr], 0.05, gen)
                zn = head(gnn(An, ones[tr], M[tr]))
                own = zn.gather(1, y[tr][:, None])[:, 0]
                other = zn.scatter(1, y[tr][:, None], -torch.inf).max(1).values
                loss = loss + mw * F.relu(0.5 - (own - other)).mean()
            loss.backward()
            opt.step()
        with torch.no_grad():
            clean = (head(gnn(A[te], ones[te], M[te])).argmax(1) == y[te]).double().mean().item()
            An = _flip_rate_noise(A[te], M[te], 0.05, torch.Generator().manual_seed(run.seed + 9))
            noisy = (head(gnn(An, ones[te], M[te])).argmax(1) == y[te]).double().mean().item()
        accs[name] = (clean, noisy)
    run.table(
        [{"training": k, "clean accuracy": v[0], "accuracy @ 5% flips": v[1]} for k, v in accs.items()],
        name="graph_classification",
        caption="SBM graphs, 2 vs 3 communities, 20-30 nodes",
    )
    (pc, pn), (mc, mn) = accs["plain"], accs["margin (gamma0 = 0.5)"]
    run.check(
        "graph classification: margin minus plain accuracy @ 5% flips (points)", 100 * (mn - pn), ">=", 3.0
    )
    run.check("graph classification: |clean accuracy difference| (points)", 100 * abs(mc - pc), "<=", 2.0)


def run(run: Run) -> None:
    run.expect(
        "partial",
        reason=(
            "Gate 1 (zero-noise alignment = WL-hash uniqueness on 100% of the 1200 atlas graphs; the "
            "mean-aggregation GCN aligns none), certificate soundness (0 violations, graph and node level) and "
            "zero-noise separation after margin training reproduce. Not reproduced: (a) the predicted radius "
            "delta/(2 L_emp) does not predict survival (quick: Spearman 0.16 < 0.5): on random 7-node atlas "
            "graphs every trained GIN has L_emp (about 1.2 on the unit sphere) far above its gaps (about 0.4), "
            "so all radii are below 0.3 flips and survival of identifiable 1-flip copies is 7-10%, zero for "
            "most graphs; (b) margin training (gamma0 = 0.5, flip rate 0.05, on identifiable noisy copies) "
            "raises alignment at edit distance 1 by 3 points (quick: 7.2% -> 10.3%; DropEdge 9.9%), short of "
            "+10; (c) at edit distance 2 almost no copy is identifiable (2 of 7500 in quick mode: a 2-flip copy "
            "of a 7-node graph is nearly always as close to another source), so that rate is not measured. The "
            "paper's protocol is unknown (descriptive title, reconstructed definitions). Full mode adds gate 5 "
            "(SBM graph classification), where margin training gained 2.5 points at 5% flips (< 3) and lost 3 "
            "points of clean accuracy (> 2)."
        ),
    )
    torch.manual_seed(run.seed)
    with run.timer("gate 1: zero noise"):
        gate_zero_noise(run)
    with run.timer("gates 2-3: prediction and margin training"):
        gate_prediction_and_margin(run)
    with run.timer("gate 4: node level"):
        gate_node_level(run)
    if run.full:
        run.note("full mode runs one seed (the digest's full protocol averages 3 seeds)")
        with run.timer("gate 5: graph classification"):
            gate_graph_classification(run)
    else:
        run.note(
            "gate 5 (graph classification under test-time noise) runs in full mode only, as the digest says"
        )
