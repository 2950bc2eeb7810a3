"""Reproduction (digest ``bip-gapgen``): repulsion-based provisioning inside the real subspace gives zero
virtual-vs-enrolled and virtual-vs-virtual collisions, future enrolments collide at most 2 x FAR, virtuals are as
on-manifold as real identities (realisability >= 0.95, uniform-sphere baseline < 0.5), naive on-manifold sampling
collides, and repulsion provisions >= 2x faster than rejection sampling once virtual/real > 2.

Gallery (1): synthetic face-like identity centres (d = 128, power-law spectrum, effective rank ~37) with 20% held
out as future enrolments. Thresholds come from the enrolled gallery's impostor distribution: ``tau_c = tau_v`` =
the (1 - FAR) quantile of cosines between distinct enrolled identities, margin m = 0.02. Full mode adds gallery (2),
all-MiniLM-L6-v2 embeddings of standard-library names (384-d), and a 100k-against-10k scale run.

Only the geometric allocator is checked: nothing here speaks to face photorealism (GapGen), v-LFW or a recognizer's
behaviour on rendered images, and the paper's 10M / 360K scale is out of reach on 2 cores.
"""

from __future__ import annotations

import resource
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from neurips26.harness import Run

from .galleries import minilm_name_gallery, synthetic_gallery
from .geometry import count_collisions, impostor_threshold, realisability
from .provisioning import IdentityProvisioner, uniform_sphere

MARGIN = 0.02
VARIANCE_KEPT = 0.95
REJECTION_CANDIDATES = 2048
NAIVE_PAIR_ROWS = 12_000  # naive virtual-virtual pairs counted among the first rows only


def _rejection_throughput(R, V, tau, seed):
    """On-manifold rejection sampling (same sampler, same acceptance test) against gallery + virtuals ``V``."""
    rej = IdentityProvisioner(MARGIN, tau_c=tau, variance_kept=VARIANCE_KEPT, n_steps=0, random_state=seed)
    rej.fit(R, existing=V)
    t0 = time.perf_counter()
    got = rej.provision(10**9, max_candidates=REJECTION_CANDIDATES)
    dt = time.perf_counter() - t0
    # zero acceptances would give an infinite ratio: count one more acceptance than observed (favours rejection)
    return len(got), (len(got) + 1) / dt, dt


def _evaluate(
    run: Run, label: str, gallery: np.ndarray, n_enrolled: int, n_virtual: int, far: float, seed: int
):
    rng = np.random.default_rng(seed)
    G = gallery[rng.permutation(len(gallery))]
    R, H = G[:n_enrolled], G[n_enrolled:]
    with run.timer(f"{label}: impostor threshold"):
        tau = impostor_threshold(R, far)
    est = IdentityProvisioner(MARGIN, tau_c=tau, variance_kept=VARIANCE_KEPT, random_state=seed).fit(R)
    P = est.basis_
    run.log(
        f"{label}: tau = {tau:.4f}, q = {P.shape[1]}, effective rank = {est.subspace_.effective_rank:.1f}"
    )

    n_chunks = 6
    sizes = np.diff(np.linspace(0, n_virtual, n_chunks + 1).round().astype(int))
    curve = []
    for size in run.progress(list(sizes), f"{label}: provisioning"):
        start_ratio = len(est.identities_) / n_enrolled
        n_rej, rej_tp, _ = _rejection_throughput(R, est.identities_, tau, seed + 1)
        est.provision(int(size))
        st = est.history_[-1]
        curve.append(
            {
                "start_ratio": start_ratio,
                "end_ratio": len(est.identities_) / n_enrolled,
                "repulsion_per_s": st.throughput,
                "rejection_per_s": rej_tp,
                "rejection_accepted": n_rej,
                "repulsion_accepted_per_scan": st.accepted_per_scan,
                "rejection_accepted_per_scan": n_rej / REJECTION_CANDIDATES,
                "candidates": st.n_candidates,
                "seconds": st.seconds,
            }
        )
    V = est.identities_
    late = [c for c in curve if c["start_ratio"] >= 2.0]
    rep_tp = (
        sum(c["end_ratio"] - c["start_ratio"] for c in late) * n_enrolled / sum(c["seconds"] for c in late)
    )
    rej_tp = float(np.mean([c["rejection_per_s"] for c in late]))
    rep_aps = float(np.mean([c["repulsion_accepted_per_scan"] for c in late]))
    rej_aps = float(np.mean([c["rejection_accepted_per_scan"] for c in late]))

    with run.timer(f"{label}: exact collision checks"):
        a = count_collisions(V, R, tau, basis=P)
        b = count_collisions(V, None, tau, basis=P)
        c = count_collisions(V, H, tau, basis=P)
    naive = est.sample_naive(len(V), random_state=seed + 2)
    with run.timer(f"{label}: naive baseline checks"):
        na = count_collisions(naive, R, tau, basis=P)
        nb = count_collisions(naive[:NAIVE_PAIR_ROWS], None, tau, basis=P)  # a lower bound is enough
        nc = count_collisions(naive, H, tau, basis=P)
    uni = uniform_sphere(len(V), R.shape[1], random_state=seed + 3)
    real_h = float(np.median(realisability(H, P)))
    d_ours = float(np.median(realisability(V, P))) / real_h
    d_naive = float(np.median(realisability(naive, P))) / real_h
    d_uni = float(np.median(realisability(uni, P))) / real_h
    nvr, nvv, nvh = len(V) * len(R), len(V) * (len(V) - 1) / 2, len(V) * len(H)
    m_nb = min(len(naive), NAIVE_PAIR_ROWS)
    rows = [
        {
            "gallery": label,
            "method": "repulsion (ours)",
            "virtual": len(V),
            "enrolled": len(R),
            "(a) vs enrolled": a / nvr,
            "(b) virtual-virtual": b / nvv,
            "(c) vs future": c / nvh,
            "(d) realisability": d_ours,
            "accepted/s (ratio>2)": rep_tp,
        },
        {
            "gallery": label,
            "method": "naive on-manifold",
            "virtual": len(naive),
            "enrolled": len(R),
            "(a) vs enrolled": na / nvr,
            "(b) virtual-virtual": nb / (m_nb * (m_nb - 1) / 2),
            "(c) vs future": nc / nvh,
            "(d) realisability": d_naive,
            "accepted/s (ratio>2)": None,
        },
        {
            "gallery": label,
            "method": "rejection sampling",
            "virtual": None,
            "enrolled": len(R),
            "(a) vs enrolled": 0.0,
            "(b) virtual-virtual": 0.0,
            "(c) vs future": None,
            "(d) realisability": None,
            "accepted/s (ratio>2)": rej_tp,
        },
        {
            "gallery": label,
            "method": "uniform sphere",
            "virtual": len(uni),
            "enrolled": len(R),
            "(a) vs enrolled": None,
            "(b) virtual-virtual": None,
            "(c) vs future": None,
            "(d) realisability": d_uni,
            "accepted/s (ratio>2)": None,
        },
    ]
    info = {
        "tau": tau,
        "q": P.shape[1],
        "effective_rank": est.subspace_.effective_rank,
        "far": far,
        "a": a,
        "b": b,
        "c_rate": c / nvh,
        "d": d_ours,
        "d_uniform": d_uni,
        "naive_a": na,
        "naive_b": nb,
        "throughput_ratio": rep_tp / rej_tp,
        "repulsion_per_s": rep_tp,
        "rejection_per_s": rej_tp,
        "ratio": len(V) / len(R),
        "repulsion_accepted_per_scan": rep_aps,
        "rejection_accepted_per_scan": rej_aps,
        "curve": curve,
    }
    return rows, info


def _checks(run: Run, info: dict, prefix: str = "") -> None:
    far = info["far"]
    run.check(f"{prefix}(a) collisions virtual vs enrolled at tau_c", info["a"], "==", 0)
    run.check(f"{prefix}(b) collisions virtual vs virtual at tau_v", info["b"], "==", 0)
    run.check(f"{prefix}(c) collision rate vs future enrolments / FAR", info["c_rate"] / far, "<=", 2.0)
    run.check(
        f"{prefix}(d) realisability of virtuals (median, rel. to held-out reals)", info["d"], ">=", 0.95
    )
    run.check(f"{prefix}(d) realisability of uniform-sphere baseline", info["d_uniform"], "<", 0.5)
    run.check(f"{prefix}naive sampling collisions vs enrolled (count)", info["naive_a"], ">", 0)
    run.check(f"{prefix}naive sampling collisions virtual-virtual (count)", info["naive_b"], ">", 0)
    run.check(
        f"{prefix}throughput repulsion / rejection at virtual/real > 2", info["throughput_ratio"], ">=", 2.0
    )


def _figure(run: Run, infos: dict) -> None:
    fig, axes = plt.subplots(1, len(infos), figsize=(5.5 * len(infos), 4), squeeze=False)
    for ax, (label, info) in zip(axes[0], infos.items(), strict=True):
        cv = info["curve"]
        x = [c["start_ratio"] for c in cv]
        ax.semilogy(x, [c["repulsion_per_s"] for c in cv], "o-", label="repulsion (ours)")
        ax.semilogy(x, [c["rejection_per_s"] for c in cv], "s--", label="rejection sampling (upper est.)")
        ax.axvline(2.0, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("virtual / enrolled ratio at start of batch")
        ax.set_ylabel("accepted identities per second")
        ax.set_title(f"{label}: tau={info['tau']:.3f}, q={info['q']}, eff. rank={info['effective_rank']:.0f}")
        ax.legend()
    run.figure(fig, "throughput_vs_ratio", caption="Provisioning throughput as the virtual population grows.")


def run(run: Run) -> None:
    far = run.pick(quick=1e-4, full=1e-5)
    n_real = 20_000  # the digest's 16000 enrolled + 4000 held out, in both modes
    run.expect(
        "partial",
        reason="All hard constraints hold exactly (zero collisions with the gallery and among virtuals), future "
        "enrolments collide far below 2 x FAR (~0.2 x FAR), virtuals are on-manifold (realisability ~1.04 vs 0.42 for "
        "uniform directions) and naive sampling collides; but repulsion is ~1.4-1.5x, not >= 2x, faster than on-manifold "
        "rejection sampling at virtual/real 2-3. Both methods pay one full scan of gallery + virtuals per candidate; "
        "on this FAR-calibrated gallery (effective rank ~37) rejection still accepts ~22% of candidates at ratio 2-3 "
        "and repulsion ~51% per scan, which caps the speed-up at ~2.3x before the cost of the gradient steps. Larger "
        "repulsion moves raise acceptance to ~0.8 per scan but cost more in steps than they save (tuning runs). The "
        "advantage grows with density (rejection acceptance decays like exp(-density)), i.e. beyond the tested ratios.",
    )
    n_enrolled = int(0.8 * n_real)
    n_virtual = 3 * n_enrolled  # the digest's ratio ~3 (its full mode goes to 12x; not run here)
    run.note(
        f"synthetic gallery: d = 128, {n_enrolled} enrolled + {n_real - n_enrolled} held-out future enrolments, "
        f"{n_virtual} virtuals (ratio 3), FAR = {far:g}, margin = {MARGIN}"
        + f"; naive virtual-virtual pairs counted among its first {NAIVE_PAIR_ROWS} rows"
    )
    gallery = synthetic_gallery(n_real, 128, random_state=run.seed)
    rows, info = _evaluate(run, "synthetic", gallery, n_enrolled, n_virtual, far, run.seed)
    infos = {"synthetic": info}
    _checks(run, info)
    if run.full:
        with run.timer("minilm: encoding"):
            emb, _ = minilm_name_gallery(10_000, random_state=run.seed)
        n_enr = int(0.8 * len(emb))
        rows2, info2 = _evaluate(run, "MiniLM names", emb, n_enr, 3 * n_enr, 1e-4, run.seed)
        rows += rows2
        infos["MiniLM names"] = info2
        _checks(run, info2, prefix="MiniLM: ")
        # scale run: 100k new identities against a 10k gallery
        G = synthetic_gallery(10_000, 128, random_state=run.seed + 7)
        t0 = time.perf_counter()
        big = IdentityProvisioner(MARGIN, far=1e-4, variance_kept=VARIANCE_KEPT, random_state=run.seed).fit(G)
        big.provision(100_000)
        dt = time.perf_counter() - t0
        run.metric("scale run: 100k virtual vs 10k gallery, seconds", dt)
        run.metric("scale run: peak RSS MiB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        run.note(f"scale run: 100000 virtuals against 10000 enrolled in {dt:.0f} s")
    for label, inf in infos.items():
        for key in (
            "tau",
            "q",
            "effective_rank",
            "ratio",
            "repulsion_per_s",
            "rejection_per_s",
            "c_rate",
            "repulsion_accepted_per_scan",
            "rejection_accepted_per_scan",
        ):
            run.metric(f"{label}: {key}", inf[key])
    run.table(
        rows, name="results", caption="Collision rates (exact), realisability and throughput per method."
    )
    run.table(
        [{"gallery": lab, **c} for lab, inf in infos.items() for c in inf["curve"]],
        name="throughput_curve",
        caption="Per-batch throughput; rejection sampling measured on the same state with "
        f"{REJECTION_CANDIDATES} candidates, (accepted + 1) / seconds.",
    )
    _figure(run, infos)
    run.note(
        "Allocator reconstructed from the abstract (full text not public): Gaussian on-manifold candidates, "
        "softplus repulsion by projected Riemannian gradient descent, hard acceptance; virtuals are kept exactly in "
        "the real subspace (the lambda -> inf limit of the digest's penalty). GapGen/v-LFW are not reproduced."
    )
