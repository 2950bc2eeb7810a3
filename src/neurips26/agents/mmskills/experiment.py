"""Reproduction: multimodal skills (state cards with views, consulted in a branch) beat text-only skills and no
skills when visual agents start in arbitrary states (digest: ``mmskills``).

Environment: MiniGrid task families with random layouts AND random start stages (key already held, door
already open, key dropped, ...). Skills are induced from scripted-expert trajectories with 20 % noisy detours on
generator layouts (seeds 0-499); evaluation layouts are disjoint (seeds >= 10000). Every agent drives the same
shortest-path controller with a step budget of 3x the state-aware expert's, so only skill knowledge differs.
The text-only arm that decides the claim reads the live screen and matches the cards' text cues (the paper's
text-only agent sees screenshots); the screen-blind text agent is reported beside it. A canonical-start control
(every episode starts at stage 0) is run for the text-only and MMSkills agents.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from neurips26.harness import Run

from .agents import (
    BranchSkillAgent,
    DirectInjectionAgent,
    NoSkillAgent,
    ScreenTextSkillAgent,
    TextSkillAgent,
    run_episode,
)
from .generator import induce_library, record_trajectory
from .gridworld import FAMILIES, EpisodeSpec, optimal_steps

QUICK_FAMILIES = ["doorkey", "unlockpickup", "keycorridor"]
GENERATOR_SEEDS = 500  # the public, non-evaluation split
EVAL_SEED0 = 10_000


def _bootstrap_diff(
    a: np.ndarray, b: np.ndarray, rng: np.random.Generator, n: int = 2000
) -> tuple[float, float]:
    """95 % percentile interval of mean(a - b) over paired episodes."""
    d = a.astype(float) - b.astype(float)
    idx = rng.integers(0, len(d), size=(n, len(d)))
    means = d[idx].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def run(run: Run) -> None:
    from neurips26.data.text_embeddings import encode_minilm

    families = run.param("families", quick=QUICK_FAMILIES, full=list(FAMILIES))
    n_gen = run.param("generator_trajectories_per_family", quick=16, full=60)
    n_held = run.param("heldout_layouts_per_family", quick=8, full=20)
    n_eval = run.param("eval_episodes_per_family", quick=20, full=180)
    noise = run.param("detour_noise", quick=0.2)
    budget_factor = run.param("budget_factor", quick=3.0)
    max_walk = run.param("max_random_walk", quick=6)
    rng = run.rng
    cache: dict[str, np.ndarray] = {}

    def embed(texts: list[str]) -> np.ndarray:  # MiniLM, each distinct instruction encoded once per run
        new = [t for t in dict.fromkeys(texts) if t not in cache]
        if new:
            cache.update(zip(new, encode_minilm(new), strict=True))
        return np.stack([cache[t] for t in texts])

    # --- generator: source trajectories, held-out audit layouts, calibration trajectories -----------------------
    trajs, held_out, calib = [], {}, []
    for fam in families:
        seeds = rng.permutation(GENERATOR_SEEDS)
        src, audit, cal = (
            seeds[:n_gen],
            seeds[n_gen : n_gen + n_held],
            seeds[n_gen + n_held : n_gen + 2 * n_held],
        )
        with run.timer("record_trajectories"):
            trajs += [record_trajectory(fam, int(s), noise, rng) for s in src]
            calib += [record_trajectory(fam, int(s), noise, rng) for s in cal]
        held_out[fam] = [EpisodeSpec(fam, int(s)) for s in audit]
    with run.timer("induce_library"):
        lib = induce_library(
            trajs, held_out, embed, n_clusters=len(families), calibration=calib, random_state=run.seed
        )
    gen_seeds = (
        {t.seed for t in trajs} | {s.seed for v in held_out.values() for s in v} | {t.seed for t in calib}
    )

    # --- evaluation episodes: disjoint layouts, random start stages ----------------------------------------------
    specs = []
    for f_i, fam in enumerate(families):
        n_stages = len(FAMILIES[fam].procedure)
        for i in range(n_eval):
            while True:  # a start the expert cannot finish (never seen, but possible) is redrawn
                spec = EpisodeSpec(
                    fam,
                    EVAL_SEED0 + 1000 * run.seed + 100 * f_i + i,
                    start_stage=int(rng.integers(n_stages)),
                    walk=int(rng.integers(max_walk + 1)),
                    walk_seed=int(rng.integers(2**31)),
                )
                try:
                    optimal_steps(spec)
                    break
                except RuntimeError:
                    continue
            specs.append(spec)
    canonical = [EpisodeSpec(s.family, s.seed, 0, s.walk, s.walk_seed) for s in specs]
    eval_seeds = {s.seed for s in specs}
    missions = embed([f"[minigrid] {_mission(s)}" for s in specs])
    cluster = np.argmin(((missions[:, None, :] - lib.centres[None, :, :]) ** 2).sum(axis=2), axis=1)

    # arm -> metric key; "text-only skill" (the one the claim is decided against) reads the live screen
    arms = {
        "no skill": "no_skill",
        "text-only skill, screen-blind": "text_blind",
        "text-only skill": "text_only",
        "MMSkills (branch)": "mmskills",
        "direct injection": "direct",
    }

    def agents_for(i: int) -> dict:
        k = lib.cluster_skill.get(int(cluster[i]))
        if k is None:  # the mapped skill was dropped by the audit: every skill arm runs without one
            return {a: NoSkillAgent() for a in arms}
        skill = lib.skills[k]
        return {
            "no skill": NoSkillAgent(),
            "text-only skill, screen-blind": TextSkillAgent(skill),
            "text-only skill": ScreenTextSkillAgent(skill, lib.parser),
            "MMSkills (branch)": BranchSkillAgent(skill, lib.parser, lib.theta),
            "direct injection": DirectInjectionAgent(skill, lib.parser),
        }

    results = {a: [] for a in arms}
    control = {a: [] for a in ("text-only skill, screen-blind", "text-only skill", "MMSkills (branch)")}
    visible = {a: [] for a in arms}
    with run.timer("evaluate"):
        for i, spec in enumerate(run.progress(specs, "episodes")):
            agents = agents_for(i)
            for a in arms:
                results[a].append(run_episode(agents[a], spec, budget_factor))
                visible[a].append(run_episode(agents[a], spec, budget_factor, absent="free"))
            for a in control:
                control[a].append(run_episode(agents[a], canonical[i], budget_factor))

    # --- record ---------------------------------------------------------------------------------------------------
    succ = {a: np.array([r.success for r in results[a]]) for a in arms}
    rows = []
    for a in arms:
        rs = results[a]
        views = [v for r in rs for v in r.views_per_consult]
        won = [r for r in rs if r.success]
        rows.append(
            {
                "agent": a,
                "success": float(succ[a].mean()),
                "steps_to_success": float(np.mean([r.steps for r in won])) if won else float("nan"),
                "steps_over_optimal": float(np.mean([r.steps / r.optimal for r in won]))
                if won
                else float("nan"),
                "loops_per_episode": float(np.mean([r.loops for r in rs])),
                "consults_per_episode": float(np.mean([len(r.views_per_consult) for r in rs])),
                "views_per_consult": float(np.mean(views)) if views else 0.0,
                "context_images_per_episode": float(np.mean([r.context_images for r in rs])),
            }
        )
    run.table(
        rows, name="agents", caption="random layouts and random start stages (same episodes for every agent)"
    )
    fam_rows = []
    for fam in families:
        mask = np.array([s.family == fam for s in specs])
        fam_rows.append({"family": fam, **{a: float(succ[a][mask].mean()) for a in arms}})
    run.table(fam_rows, name="per_family", caption="success by task family")
    stage_rows = []
    for st in sorted({s.start_stage for s in specs}):
        mask = np.array([s.start_stage == st for s in specs])
        stage_rows.append(
            {"start_stage": st, "episodes": int(mask.sum()), **{a: float(succ[a][mask].mean()) for a in arms}}
        )
    run.table(stage_rows, name="per_start_stage", caption="success by start stage (0 = canonical)")
    run.table(
        [
            {
                "agent": a,
                "success, search for absent targets (gated)": float(succ[a].mean()),
                "success, absent targets known for free": float(np.mean([r.success for r in visible[a]])),
            }
            for a in arms
        ],
        name="controller_variant",
        caption="the same episodes with a controller that knows for free that a target is not on the grid",
    )
    for a, key in arms.items():
        run.metric(f"free_absence_success_{key}", float(np.mean([r.success for r in visible[a]])))
    ctrl = {arms[a]: float(np.mean([r.success for r in control[a]])) for a in control}
    for key, value in ctrl.items():
        run.metric(f"canonical_success_{key}", value)
    run.metric("canonical_gap_mmskills_minus_text", ctrl["mmskills"] - ctrl["text_only"])
    run.table(
        [
            {
                "skill": s.name,
                "procedure": " > ".join(s.procedure),
                "cards": len(s.cards),
                "views": s.n_views,
                "replay_success": lib.replay.get(s.name),
            }
            for s in lib.skills
        ],
        name="skills",
        caption="induced skill packages",
    )
    for a, key in arms.items():
        run.metric(f"success_{key}", float(succ[a].mean()))
    run.metric("match_threshold_theta", lib.theta)
    run.metric("calibration_stage_accuracy", lib.stage_accuracy)
    run.metric("n_skills", len(lib.skills))
    run.metric("n_eval_episodes", len(specs))
    mm = succ["MMSkills (branch)"]
    boot = np.random.default_rng(run.seed + 1)
    for other, key in (
        ("text-only skill", "text_only"),
        ("text-only skill, screen-blind", "text_blind"),
        ("no skill", "no_skill"),
        ("direct injection", "direct"),
    ):
        lo, hi = _bootstrap_diff(mm, succ[other], boot)
        run.metric(f"gain_vs_{key}_ci_low", lo)
        run.metric(f"gain_vs_{key}_ci_high", hi)
    mm_views = [v for r in results["MMSkills (branch)"] for v in r.views_per_consult]
    text_views = [v for r in results["text-only skill"] for v in r.views_per_consult]
    run.metric("text_only_views_per_consult", float(np.mean(text_views)) if text_views else 0.0)
    direct_views = [v for r in results["direct injection"] for v in r.views_per_consult]
    run.metric("direct_injection_views_per_consult", float(np.mean(direct_views)) if direct_views else 0.0)
    by_agent = {r["agent"]: r for r in rows}
    run.metric("steps_over_optimal_mmskills", by_agent["MMSkills (branch)"]["steps_over_optimal"])
    run.metric("steps_over_optimal_direct", by_agent["direct injection"]["steps_over_optimal"])
    run.metric(
        "context_images_per_episode_direct", by_agent["direct injection"]["context_images_per_episode"]
    )
    run.metric("gain_vs_text_blind", float(mm.mean() - succ["text-only skill, screen-blind"].mean()))
    run.check("gain_vs_text_only", float(mm.mean() - succ["text-only skill"].mean()))
    run.check("gain_vs_text_only_ci_low", run.metrics["gain_vs_text_only_ci_low"])
    run.check("gain_vs_no_skill", float(mm.mean() - succ["no skill"].mean()))
    run.check("gain_vs_no_skill_ci_low", run.metrics["gain_vs_no_skill_ci_low"])
    run.metric("gain_vs_direct", float(mm.mean() - succ["direct injection"].mean()))
    run.check(
        "gain_vs_direct_injection",
        [run.metrics["gain_vs_direct_ci_low"], run.metrics["gain_vs_direct_ci_high"]],
    )
    run.check("views_per_consult", float(np.mean(mm_views)))
    replay = [lib.replay[s.name] for s in lib.skills] if lib.skills else [0.0]
    run.metric("skills_dropped_by_audit", len(lib.replay) - len(lib.skills))
    run.check("generator_audit_replay", float(np.mean(list(lib.replay.values()) or [0.0])))
    run.check("grouping_purity", lib.purity)
    run.check("eval_layouts_disjoint", float(not (eval_seeds & gen_seeds)))
    run.metric("replay_success_kept_skills_mean", float(np.mean(replay)))
    _figure(run, rows, stage_rows, arms)


def _mission(spec: EpisodeSpec) -> str:
    from .gridworld import make_env

    return make_env(spec.family, spec.seed).mission


def _figure(run: Run, rows: list[dict], stage_rows: list[dict], arms: dict[str, str]) -> None:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.4))
    a1.bar(
        range(len(rows)),
        [r["success"] for r in rows],
        color=["#999", "#a9c8e8", "#6a9fd4", "#d4572a", "#8c6bb1"],
    )
    a1.set_xticks(range(len(rows)), [r["agent"] for r in rows], rotation=15, fontsize=8)
    a1.set_ylabel("success rate")
    a1.set_ylim(0, 1.05)
    a1.set_title("random layouts + random start stages")
    x = [r["start_stage"] for r in stage_rows]
    for a in arms:
        a2.plot(x, [r[a] for r in stage_rows], marker="o", label=a)
    a2.set_xlabel("start stage (0 = canonical)")
    a2.set_ylabel("success rate")
    a2.set_ylim(0, 1.05)
    a2.legend(fontsize=7)
    run.figure(fig, "success", caption="success by agent and by start stage")
