"""Reproduction: noisy data is destructive to RLVR (digest: ``rlvr-noisy-data``).

Part 1 (re-verification): synthetic "incorrect" math annotations with known full answer sets, 20% of them secretly
correct; the deterministic pipeline (sympy equivalence, math-verify when sympy finds no match) must find them
(recall >= 0.95, precision >= 0.99) where string match cannot (recall <= 0.2); the same bars on a hand-written
equivalence set the generator does not plant (handset.py), with math-verify alone beside it; a 100-item audit
gives the Clopper-Pearson bound. Part 2 (toy RLVR): a tiny GPT SFT-trained on fraction sums, then GRPO against clean,
contaminated, truly noisy, format-only and random labels, a noise-share sweep and GRPO variants at 50% noise;
greedy held-out accuracy.
"""

from __future__ import annotations

import numpy as np

from neurips26.harness import Run

from ..grpo import GRPOConfig
from .data import noisy_math_items
from .handset import HAND_PAIRS
from .reverify import audit_bound, clopper_pearson, math_verify_equivalent, naive_match, reverify
from .toy import (
    FractionTask,
    LabelPools,
    false_match_rate,
    greedy_accuracy,
    pgfc_reward,
    rlvr_reward,
    run_arm,
    sft_policy,
    spearman,
)


def _part1(run: Run) -> None:
    n = run.param("p1_items", quick=300, full=2000)
    n_mv = run.param("p1_math_verify_alone_items", quick=60, full=500)
    items = noisy_math_items(n, planted_share=0.2, seed=run.seed)
    verdicts = [reverify(it.problem, it.annotation, it.answer_set).verdict for it in items]
    truth = np.array([it.planted_correct for it in items])
    pred = np.array([v == "correct" for v in verdicts])
    naive = np.array([naive_match(it.annotation, it.answer_set) for it in items])
    sub = items[:n_mv]
    mv = np.array([any(math_verify_equivalent(g, it.annotation) for g in it.answer_set) for it in sub])
    mv_truth = truth[:n_mv]

    def pr(p: np.ndarray, t: np.ndarray) -> tuple[float, float]:
        rec = float((p & t).sum() / max(t.sum(), 1))
        prec = float((p & t).sum() / max(p.sum(), 1)) if p.sum() else 1.0
        return rec, prec

    rec, prec = pr(pred, truth)
    nrec, nprec = pr(naive, truth)
    mrec, mprec = pr(mv, mv_truth)
    rows = [
        {"checker": "sympy + math-verify (unresolved), ours", "items": n, "recall": rec, "precision": prec},
        {"checker": "string match vs answer set", "items": n, "recall": nrec, "precision": nprec},
        {"checker": "math-verify alone", "items": n_mv, "recall": mrec, "precision": mprec},
    ]
    by_kind = {}
    for it, p in zip(items, pred):
        if it.planted_correct:
            k = by_kind.setdefault(it.kind, [0, 0])
            k[0] += int(p)
            k[1] += 1
    for kind, (hit, tot) in sorted(by_kind.items()):
        rows.append(
            {"checker": f"ours, planted {kind}", "items": tot, "recall": hit / tot, "precision": None}
        )
    run.table(
        rows,
        name="reverification",
        caption="Re-verification of 'incorrect' annotations (20% planted correct)",
    )
    run.metric("unparsable_share", float(np.mean([v == "unparsable" for v in verdicts])))
    run.metric("removed_share", float(pred.mean()))
    run.metric("math_verify_alone_recall", mrec)
    run.metric("math_verify_alone_precision", mprec)
    audit_rng = np.random.default_rng(run.seed + 1)
    idx = audit_rng.choice(n, size=min(100, n), replace=False)
    audit = audit_bound(pred[idx].tolist(), truth[idx].tolist())
    run.metric("audit_errors", audit["errors"])
    run.metric("audit_upper_bound", audit["upper_bound"])
    # an independent, hand-written equivalence set (forms the generator never plants)
    hand_truth = np.array([same for _, _, same in HAND_PAIRS])
    hand_verdicts = [reverify("(hand set)", ann, [gold]).verdict for gold, ann, _ in HAND_PAIRS]
    hand_ours = np.array([v == "correct" for v in hand_verdicts])
    hand_mv = np.array([bool(math_verify_equivalent(gold, ann)) for gold, ann, _ in HAND_PAIRS])
    hrec, hprec = pr(hand_ours, hand_truth)
    hmrec, hmprec = pr(hand_mv, hand_truth)
    run.table(
        [
            {
                "checker": "ours (reverify)",
                "pairs": len(HAND_PAIRS),
                "recall": hrec,
                "precision": hprec,
                "undecided": int(sum(v == "undecided" for v in hand_verdicts)),
            },
            {
                "checker": "math-verify alone",
                "pairs": len(HAND_PAIRS),
                "recall": hmrec,
                "precision": hmprec,
                "undecided": None,
            },
        ],
        name="hand_set",
        caption="Hand-written equivalence pairs the generator does not plant (handset.py)",
    )
    run.metric("handset_pairs", len(HAND_PAIRS))
    run.metric("handset_equal_pairs", int(hand_truth.sum()))
    run.metric("handset_math_verify_recall", hmrec)
    run.metric("handset_math_verify_precision", hmprec)
    run.metric("handset_undecided", int(sum(v == "undecided" for v in hand_verdicts)))
    run.check("handset_recall", hrec)
    run.check("handset_precision", hprec)
    run.check("reverify_recall", rec)
    run.check("reverify_precision", prec)
    run.check("naive_string_recall", nrec)
    run.check("audit_zero_error_bound", abs(clopper_pearson(0, 100) - (1 - 0.05 ** (1 / 100))))


def run(run: Run) -> None:
    _part1(run)

    n_seeds = run.param("p2_seeds", quick=1, full=3)
    sft_steps = run.param("sft_steps", quick=300)
    steps = run.param("rl_steps", quick=40, full=60)
    batch = run.param("rl_batch_prompts", quick=12)
    group = run.param("group_size", quick=8)
    lr = run.param("rl_lr", quick=3e-4)
    n_eval = run.param("eval_problems", quick=300)
    contamination = run.param("contamination_share", quick=0.16)
    full = run.full
    shares = [0.0, 0.25, 0.5, 0.75, 1.0]
    base_cfg = GRPOConfig(group_size=group, max_new_tokens=10, lr=lr)
    variants = {
        "GRPO": base_cfg,
        "Dr. GRPO": GRPOConfig.dr_grpo(group_size=group, max_new_tokens=10, lr=lr),
        "DAPO (clip-higher + dynamic sampling)": GRPOConfig.dapo(group_size=group, max_new_tokens=10, lr=lr),
    }

    results: dict[str, list[float]] = {}
    rows = []
    curves: dict[str, list[list[float]]] = {}
    extra: dict[str, list[float]] = {"dapo_groups_kept": [], "base": [], "secret_available": []}
    for seed in run.seeds(n_seeds):
        task = FractionTask(n_eval=n_eval, seed=seed)
        base = sft_policy(task, steps=sft_steps, seed=seed, d_model=64, batch_size=32)
        base_acc = greedy_accuracy(base, task, task.eval_problems)
        extra["base"].append(base_acc)
        pools = LabelPools.build(
            base, task, n_samples=run.param(f"label_samples_seed{seed}", quick=4, full=8), seed=seed
        )
        rng = np.random.default_rng(seed)
        n = len(pools.problems)
        have_secret = [i for i in range(n) if pools.secret[i] is not None]
        extra["secret_available"].append(len(have_secret) / n)
        n_secret = min(len(have_secret), int(round(contamination * n)))
        secret_idx = set(rng.choice(have_secret, n_secret, replace=False).tolist()) if n_secret else set()
        contaminated = [pools.secret[i] if i in secret_idx else pools.wrong[i] for i in range(n)]
        # re-verification (Part 1's checker) removes the labels that are actually correct
        keep = [
            i
            for i in range(n)
            if reverify(task.prompt(pools.problems[i]), contaminated[i], [pools.clean[i]]).verdict
            != "correct"
        ]
        truly_p = [pools.problems[i] for i in keep]
        truly_l = [contaminated[i] for i in keep]
        arms: list[tuple[str, list, list, GRPOConfig, object]] = [
            ("clean", pools.problems, pools.clean, base_cfg, None),
            ("truly noisy (re-verified)", truly_p, truly_l, base_cfg, None),
        ]
        order = rng.permutation(n)

        def mixed(share: float, pools=pools, order=order, n=n) -> list[str]:
            noisy = set(order[: int(round(share * n))].tolist())
            return [pools.wrong[i] if i in noisy else pools.clean[i] for i in range(n)]

        if full:
            arms += [
                ("contaminated noisy", pools.problems, contaminated, base_cfg, None),
                ("format only", pools.problems, pools.clean, base_cfg, rlvr_reward("format")),
                (
                    "random labels",
                    pools.problems,
                    [str(int(v)) for v in rng.integers(1, 1001, n)],
                    base_cfg,
                    None,
                ),
            ]
            for share in shares[1:]:
                arms.append((f"noise {share:.0%}", pools.problems, mixed(share), base_cfg, None))
            half = mixed(0.5)
            for name, cfg in variants.items():
                if name != "GRPO":
                    arms.append((f"{name} @50%", pools.problems, half, cfg, None))
            rho_fp = 0.5 * false_match_rate(
                base,
                task,
                [p for p, lab, c in zip(pools.problems, half, pools.clean) if lab != c],
                [lab for lab, c in zip(half, pools.clean) if lab != c],
                n_samples=2,
                seed=seed,
            )
            run.metric(f"pgfc_rho_fp_seed{seed}", rho_fp)
            pg_cfg = GRPOConfig(group_size=group, max_new_tokens=10, lr=lr, scale_rewards=False)
            arms.append(("PGFC (true rates) @50%", pools.problems, half, pg_cfg, pgfc_reward(0.5, rho_fp)))
        for name, probs, labels, cfg, reward in arms:
            acc, hist, curve = run_arm(
                base, task, probs, labels, cfg, steps, batch, seed, reward=reward, eval_every=0
            )
            results.setdefault(name, []).append(acc)
            curves.setdefault(name, []).append(curve)
            if name.startswith("DAPO"):
                extra["dapo_groups_kept"].append(float(np.mean([h["groups_kept"] for h in hist])))
            rows.append(
                {
                    "seed": seed,
                    "arm": name,
                    "train problems": len(probs),
                    "base accuracy": base_acc,
                    "final accuracy": acc,
                    "mean reward (last 10 steps)": float(np.mean([h["reward_mean"] for h in hist[-10:]])),
                }
            )
    run.table(rows, name="rlvr_arms", caption="Greedy held-out accuracy after GRPO with each label set")
    run.metric("base_accuracy_mean", float(np.mean(extra["base"])))
    run.metric("secret_available_share", float(np.mean(extra["secret_available"])))
    for name, accs in results.items():
        run.metric(
            "acc_"
            + name.split(" (")[0].split(" @")[0].replace(" ", "_").replace(".", "").lower()
            + ("_at50" if "@50" in name else ""),
            float(np.mean(accs)),
        )
    clean = np.array(results["clean"])
    truly = np.array(results["truly noisy (re-verified)"])
    run.check("clean_minus_truly_noisy", (clean - truly).tolist())
    if full:
        fmt = np.array(results["format only"])
        cont = np.array(results["contaminated noisy"])
        run.check("truly_noisy_minus_format_only", (truly - fmt).tolist())
        run.check("contaminated_minus_truly_noisy", (cont - truly).tolist())
        sweep = [clean] + [np.array(results[f"noise {s:.0%}"]) for s in shares[1:]]
        per_seed = [spearman(shares, [a[k] for a in sweep]) for k in range(n_seeds)]
        run.metric("spearman_of_seed_means", spearman(shares, [float(a.mean()) for a in sweep]))
        run.check("noise_share_spearman", per_seed)
        grpo50 = np.array(results["noise 50%"])
        var_names = [f"{v} @50%" for v in variants if v != "GRPO"] + ["PGFC (true rates) @50%"]
        gains = {v: float(np.mean(np.array(results[v]) - grpo50)) for v in var_names}
        gaps = {v: float(np.mean(clean - np.array(results[v]))) for v in var_names + ["noise 50%"]}
        run.metric("variant_gain_over_grpo", gains)
        run.metric("variant_gap_to_clean", gaps)
        run.metric(
            "random_minus_base", float(np.mean(np.array(results["random labels"]) - np.array(extra["base"])))
        )
        run.metric("dapo_mean_groups_kept", float(np.mean(extra["dapo_groups_kept"])))
        run.check("variants_max_gain_over_grpo", max(gains.values()))
        run.check("variants_min_gap_to_clean", min(gaps.values()))
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
        m = [float(a.mean()) for a in sweep]
        sd = [float(a.std()) for a in sweep]
        ax[0].errorbar([100 * s for s in shares], m, yerr=sd, marker="o")
        ax[0].axhline(float(np.mean(extra["base"])), ls="--", c="grey", label="base (SFT)")
        ax[0].set(
            xlabel="truly wrong labels (%)", ylabel="held-out greedy accuracy", title="noise-share sweep"
        )
        ax[0].legend()
        names = list(results)
        ax[1].barh(names, [float(np.mean(results[k])) for k in names])
        ax[1].set(xlabel="accuracy", title="arms (mean over seeds)")
        fig.tight_layout()
        run.figure(fig, "arms", caption="Toy RLVR: accuracy vs noise share, and every arm")
