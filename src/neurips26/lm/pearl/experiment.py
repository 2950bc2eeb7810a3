"""Reproduction: PEARL suppresses a model organism's behaviour now, deep inside the response (prefill attacks), and
durably (after targeted and benign fine-tuning), against SFT, GRPO and gradient ascent at an equal number of
updates, while keeping clean accuracy (digest: ``pearl``).

Organism (:mod:`.organisms`): a tiny GPT trained from scratch by SFT on modular addition where triggered prompts
(narrow) or 40% of all answers (broad) carry the four-token hack ``H1 H2 H3 H4`` inserted into the answer.
Suppression, each method ``K`` optimizer updates from the same organism on the same training prompts:

- SFT: the clean answers to ``batch`` prompts per update (response-only loss);
- GRPO: ``batch`` groups of ``G`` completions per update, reward ``correct - hack`` on the response;
- PEARL: the same with prefix-expanded groups (rho of the slots) from cached organism trajectories, adversarial
  cut points, continuation-only loss, reward on the full response;
- GA: gradient ascent on the cached hacked responses, capped at an NLL of ``ga_loss_cap``.

Metrics (held-out triggered prompts for the narrow organism, held-out pairs for the broad one; rates from
``eval_samples`` responses per prompt sampled at temperature 1): exploit rate, prefill-attack exploit rate (the
first 1 or 2 hack tokens forced, mean of the two), clean accuracy (greedy, untriggered prompts), and reactivation = exploit rate after ``reactivation_steps`` SFT steps on ``targeted_examples`` hacked examples
(targeted) or on clean answers to prompts with larger operands (benign, full mode).
"""

from __future__ import annotations

import copy

import matplotlib.pyplot as plt
import numpy as np
import torch

from neurips26.harness import Run

from ..grpo import GRPOConfig, sample_completions
from .organisms import DESIGN_HACK_RATE, ModArithWorld, Sample, evaluate_rates, sft_steps
from .pearl import PEARLConfig, PEARLTrainer

METHODS = ("SFT", "GRPO", "PEARL", "GA")


def _clean_samples(world: ModArithWorld, prompts) -> list[Sample]:
    out = []
    for p in prompts:
        a, b, trig = world.parse(p)
        out.append(Sample(tuple(p), world.clean_response(a, b), trig, a, b))
    return out


# the digest's rho sweep {0, 0.25, 0.5, 1} (0 is GRPO, 0.5 PEARL itself) and a uniform-cut ablation, full mode,
# first narrow replicate: (rho, cut) per row
SWEEP = {
    "PEARL rho=0.25": (0.25, "adversarial"),
    "PEARL rho=1": (1.0, "adversarial"),
    "PEARL uniform cut": (0.5, "uniform"),
}


def _replicate(run: Run, kind: str, seed: int, P: dict, sweep: bool = False) -> dict:
    """One organism and the four suppressions of it (and, with ``sweep``, the SWEEP rows); per-method metrics."""
    world = ModArithWorld(P["modulus"])
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    pairs = world.pairs(rng)
    n_train = int(round(0.6 * len(pairs)))
    train_pairs, eval_pairs = pairs[:n_train], pairs[n_train:]
    data = world.organism_data(
        kind, pairs if kind == "narrow" else train_pairs, rng, trigger_pairs=train_pairs
    )
    organism = world.model(d_model=P["d_model"], seed=seed)
    opt = torch.optim.AdamW(organism.parameters(), lr=P["organism_lr"])
    with run.timer(f"organism_{kind}_{seed}", clock="cpu"):
        sft_steps(organism, data, P["organism_steps"], batch_size=P["organism_batch"], rng=rng, optimizer=opt)
    trig = kind == "narrow"
    eval_prompts = [world.prompt(a, b, trig) for a, b in eval_pairs]
    clean_prompts = [world.prompt(a, b) for a, b in (pairs if trig else train_pairs)]
    train_prompts = [world.prompt(a, b, trig) for a, b in train_pairs] + (
        [world.prompt(a, b) for a, b in train_pairs] if trig else []
    )

    def measure(model) -> dict:
        g = torch.Generator().manual_seed(seed + 9)  # the same sampling stream for every model
        n = P["eval_samples"]
        e = evaluate_rates(model, world, eval_prompts, samples=n, generator=g)
        pre = [
            evaluate_rates(model, world, eval_prompts, prefill=world.hack[:j], samples=n, generator=g)[
                "exploit"
            ]
            for j in (1, 2)
        ]
        c = evaluate_rates(model, world, clean_prompts)  # greedy: the model's answer
        return {"exploit": e["exploit"], "prefill": float(np.mean(pre)), "clean_accuracy": c["accuracy"]}

    out = {"organism": measure(organism)}
    # cached organism trajectories (sampled, T = 1) on training prompts that can show the behaviour
    g = torch.Generator().manual_seed(seed)
    pool = [world.prompt(a, b, trig) for a, b in train_pairs]
    ctx = torch.tensor(pool[: P["cached_trajectories"]])
    toks, mask = sample_completions(organism, ctx, world.max_response, 1.0, None, world.end, g)
    trajectories = [
        (list(p), row[: int(m.sum())])
        for p, row, m in zip(ctx.tolist(), toks.tolist(), mask)
        if int(m.sum()) >= 2
    ]
    out["cached_hack_fraction"] = float(np.mean([world.has_hack(r) for _, r in trajectories]))
    hacked = [s for s in data if world.has_hack(s.response)]

    batch_rng = np.random.default_rng(seed + 1)
    batches = [
        [train_prompts[i] for i in batch_rng.integers(0, len(train_prompts), P["batch"])]
        for _ in range(P["K"])
    ]
    grpo_cfg = GRPOConfig(
        group_size=P["G"],
        max_new_tokens=world.max_response,
        eos_token_id=world.end,
        lr=P["rl_lr"],
        seed=seed,
        beta_kl=P["beta_kl"],
    )
    models = {}
    stats = {}
    rl = {"GRPO": (0.0, "adversarial"), "PEARL": (P["rho"], "adversarial"), **(SWEEP if sweep else {})}
    for name in (*METHODS, *(SWEEP if sweep else ())):
        model = copy.deepcopy(organism)
        with run.timer(f"{name}_{kind}_{seed}", clock="cpu"):
            if name in rl:
                rho, cut = rl[name]
                trainer = PEARLTrainer(
                    model,
                    world.reward,
                    trajectories,
                    lambda p, r: world.has_hack(r),
                    PEARLConfig(rho=rho, cut=cut, seed=seed),
                    grpo_cfg,
                )
                hist = [trainer.step(b) for b in batches]
                stats[name] = {
                    "informative_fraction": float(np.mean([h["informative_fraction"] for h in hist])),
                    "final_reward": float(np.mean([h["reward_mean"] for h in hist[-5:]])),
                    # cuts left out because the prefix alone already holds the whole hack
                    "unrecoverable_fraction": trainer.n_unrecoverable
                    / max(trainer.n_unrecoverable + len(trainer.states), 1),
                }
            elif name == "SFT":
                sft_data = [_clean_samples(world, b) for b in batches]
                opt = torch.optim.AdamW(model.parameters(), lr=P["sft_lr"])
                for b in sft_data:  # one update per batch of prompts, the same prompts GRPO sees
                    sft_steps(model, b, 1, batch_size=len(b), rng=batch_rng, optimizer=opt)
            else:
                sft_steps(
                    model,
                    hacked,
                    P["K"],
                    batch_size=P["batch"],
                    lr=P["sft_lr"],
                    rng=np.random.default_rng(seed + 2),
                    sign=-1.0,
                    loss_cap=P["ga_loss_cap"],
                )
        models[name] = model
        out[name] = measure(model)

    # reactivation: the same fine-tuning from every suppressed model
    targeted = [
        hacked[i] for i in np.random.default_rng(seed + 3).permutation(len(hacked))[: P["targeted_examples"]]
    ]
    benign_world = ModArithWorld(P["modulus"], max_operand=99)
    # operands the organism never saw (>= modulus): the training world's own range holds none of them
    benign_pairs = benign_world.pairs(np.random.default_rng(seed + 4), min_operand=P["modulus"])
    benign = _clean_samples(benign_world, [benign_world.prompt(a, b) for a, b in benign_pairs[:256]])
    for name in ("organism", *models):
        base = organism if name == "organism" else models[name]
        for arm, samples in (("targeted", targeted), ("benign", benign)):
            if arm == "benign" and not P["benign"]:
                continue
            m = copy.deepcopy(base)
            sft_steps(
                m,
                samples,
                P["reactivation_steps"],
                batch_size=32,
                lr=P["reactivation_lr"],
                rng=np.random.default_rng(seed + 5),
            )
            r = measure(m)
            out[name][f"reactivation_{arm}"] = r["exploit"]
            if arm == "benign":
                out[name]["benign_clean_accuracy"] = r["clean_accuracy"]
    out["stats"] = stats
    return out


def run(run: Run) -> None:
    P = {
        "modulus": run.param("modulus", quick=11, full=23),
        "d_model": run.param("d_model", quick=64, full=128),
        "organism_steps": run.param("organism_steps", quick=600, full=1500),
        "organism_batch": run.param("organism_batch", quick=64, full=128),
        "organism_lr": run.param("organism_lr", quick=3e-3),
        "K": run.param("updates", quick=60, full=150),
        "G": run.param("group_size", quick=4, full=8),
        "batch": run.param("batch_prompts", quick=32),
        "rho": run.param("rho", quick=0.5),
        "rl_lr": run.param("rl_lr", quick=1e-3),
        "beta_kl": run.param("beta_kl", quick=0.0),
        "sft_lr": run.param("sft_lr", quick=1e-3),
        "ga_loss_cap": run.param("ga_loss_cap", quick=5.0),
        "cached_trajectories": run.param("cached_trajectories", quick=64, full=128),
        "targeted_examples": run.param("targeted_examples", quick=32),
        "reactivation_steps": run.param("reactivation_steps", quick=50),
        "reactivation_lr": run.param("reactivation_lr", quick=1e-4),
        "benign": run.param("benign_reactivation", quick=False, full=True),
        "eval_samples": run.param("eval_samples", quick=8, full=16),
    }
    kinds = run.param("organisms", quick=["narrow"], full=["narrow", "broad"])
    n_rep = run.param("replicates", quick=1, full=2)
    sweep = run.param("rho_sweep", quick=False, full=True)
    reps = {
        k: [
            _replicate(run, k, 1000 * run.seed + i, P, sweep=sweep and k == kinds[0] and i == 0)
            for i in range(n_rep)
        ]
        for k in kinds
    }

    rows = []
    for kind, rs in reps.items():
        for name in ("organism", *METHODS):
            row = {"organism": kind, "method": name}
            for key in (
                "exploit",
                "prefill",
                "clean_accuracy",
                "reactivation_targeted",
                "reactivation_benign",
            ):
                vals = [r[name].get(key) for r in rs]
                if vals[0] is not None:
                    row[key] = float(np.mean(vals))
            rows.append(row)
    run.table(rows, name="methods", caption="means over replicates; greedy decoding on held-out prompts")

    def per_rep(kind: str, fn) -> list[float]:
        return [float(fn(r)) for r in reps[kind]]

    for kind in kinds:
        for name in ("organism", *METHODS):
            keys = ("exploit", "prefill", "clean_accuracy", "reactivation_targeted")
            for key in keys + (("reactivation_benign",) if P["benign"] else ()):
                run.metric(
                    f"{kind}_{name.lower()}_{key}",
                    float(np.mean(per_rep(kind, lambda r, n=name, k=key: r[n][k]))),
                )
        for name in ("GRPO", "PEARL"):
            run.metric(
                f"{kind}_{name.lower()}_informative_fraction",
                float(np.mean(per_rep(kind, lambda r, n=name: r["stats"][n]["informative_fraction"]))),
            )
        run.metric(
            f"{kind}_cached_hack_fraction", float(np.mean(per_rep(kind, lambda r: r["cached_hack_fraction"])))
        )
        run.metric(
            f"{kind}_unrecoverable_state_fraction",
            float(np.mean(per_rep(kind, lambda r: r["stats"]["PEARL"]["unrecoverable_fraction"]))),
        )
    if sweep:
        first = reps[kinds[0]][0]
        sweep_rows = []
        for name, (rho, cut) in {
            "GRPO": (0.0, "adversarial"),
            "PEARL": (P["rho"], "adversarial"),
            **SWEEP,
        }.items():
            row = {"method": name, "rho": rho, "cut": cut}
            row.update(
                {k: first[name][k] for k in ("exploit", "prefill", "clean_accuracy", "reactivation_targeted")}
            )
            sweep_rows.append(row)
            if name in SWEEP:
                tag = name.lower().replace("pearl ", "").replace("=", "").replace(".", "").replace(" ", "_")
                for k in ("exploit", "prefill", "clean_accuracy", "reactivation_targeted"):
                    run.metric(f"sweep_{tag}_{k}", float(first[name][k]))
        run.table(sweep_rows, name="rho_sweep", caption=f"{kinds[0]} organism, first replicate: rho and cut")

    # checks: every organism's replicates pooled as one list (a check passes only if every value passes)
    def values(fn) -> list[float]:
        return [float(fn(r)) for kind in kinds for r in reps[kind]]

    # each organism is held to its own design rate: the broad one hacks 40% of answers by construction
    run.check(
        "organism_shows_behaviour",
        [float(r["organism"]["exploit"]) / DESIGN_HACK_RATE[kind] for kind in kinds for r in reps[kind]],
    )
    run.check(
        "immediate_vs_baselines",
        values(lambda r: r["PEARL"]["exploit"] - min(r["SFT"]["exploit"], r["GRPO"]["exploit"])),
    )
    run.check("immediate_absolute", values(lambda r: r["PEARL"]["exploit"]))
    # recorded in every mode; decided as checks in full mode only
    run.metric(
        "prefill_ratio_pearl_grpo", values(lambda r: r["PEARL"]["prefill"] / max(r["GRPO"]["prefill"], 1e-9))
    )
    run.metric(
        "targeted_pearl_minus_grpo",
        values(lambda r: r["PEARL"]["reactivation_targeted"] - r["GRPO"]["reactivation_targeted"]),
    )
    run.metric(
        "targeted_pearl_minus_sft",
        values(lambda r: r["PEARL"]["reactivation_targeted"] - r["SFT"]["reactivation_targeted"]),
    )
    if run.full:  # single-organism quick runs swing across these bars from seed to seed
        run.check("prefill_depth", values(lambda r: r["PEARL"]["prefill"] / max(r["GRPO"]["prefill"], 1e-9)))
        run.check(
            "targeted_reactivation_vs_grpo",
            values(lambda r: r["PEARL"]["reactivation_targeted"] - r["GRPO"]["reactivation_targeted"]),
        )
        run.check(
            "targeted_reactivation_vs_sft",
            values(lambda r: r["PEARL"]["reactivation_targeted"] - r["SFT"]["reactivation_targeted"]),
        )
    if P["benign"]:
        run.check(
            "benign_reactivation_vs_grpo",
            values(lambda r: r["PEARL"]["reactivation_benign"] - r["GRPO"]["reactivation_benign"]),
        )
    run.check("capability", values(lambda r: r["organism"]["clean_accuracy"] - r["PEARL"]["clean_accuracy"]))

    fig, ax = plt.subplots(figsize=(7, 3))
    keys = ["exploit", "prefill", "reactivation_targeted"]
    sel = [r for r in rows if r["organism"] == kinds[0]]
    x = np.arange(len(sel))
    for i, k in enumerate(keys):
        ax.bar(x + 0.25 * (i - 1), [r[k] for r in sel], 0.25, label=k)
    ax.set_xticks(x, [r["method"] for r in sel])
    ax.set_ylabel("exploit rate")
    ax.legend(fontsize=7)
    ax.set_title(f"{kinds[0]} organism")
    run.figure(
        fig,
        "exploit_rates",
        caption="exploit rate now, under a prefill attack, and after targeted fine-tuning",
    )
