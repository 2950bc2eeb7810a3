"""Trajectory-to-skill generator: workflow grouping, procedure induction, visual grounding, audit.

Deterministic stand-ins for the paper's LLM-driven steps [reconstructed]:

a. workflow grouping: all-MiniLM-L6-v2 embeddings of ``"[domain] instruction"``, k-means (as the official code);
b-d. skill planning and procedure drafting: the procedure is the medoid of the cluster's subgoal-event sequences
   under edit distance (a majority alignment: noisy detours add or drop events in a minority of trajectories);
e. visual grounding: per procedure stage a state card whose full-frame views are the stage-start keyframes of
   several trajectories, plus a focus crop around the stage's target object and the before / after frames of
   the step; cues are the object classes visible at the stage start and the class changes the step causes;
f. audit: the induced procedure is replayed by the shared controller on held-out (non-evaluation) training
   layouts; a skill whose replay success falls below ``min_replay`` is dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .gridworld import (
    DROP,
    FAMILIES,
    FORWARD,
    PICKUP,
    TILE,
    TOGGLE,
    Controller,
    EpisodeSpec,
    abstract_state,
    expert_remaining,
    make_env,
    positions,
    render,
    start_episode,
)
from .package import AuditCard, SkillPackage, StateCard, View
from .visual import TileParser, cell_labels, crop

__all__ = [
    "Trajectory",
    "edit_distance",
    "group_workflows",
    "induce_library",
    "induce_procedure",
    "purity",
    "record_trajectory",
    "replay_success",
]


@dataclass
class Trajectory:
    """One recorded source trajectory: instruction, subgoal events and the keyframes around them."""

    id: str
    family: str  # ground truth, used only to score the grouping
    seed: int
    instruction: str
    events: list[str]
    stage_frames: list[np.ndarray]  # frame at the start, then after each event
    stage_labels: list[np.ndarray]  # the generator's grounding of those frames (cell classes)
    stage_positions: list[dict]  # object cells at those frames
    before_frames: list[np.ndarray | None] = field(default_factory=list)  # frame just before each event
    success: bool = False


def record_trajectory(family: str, seed: int, noise: float, rng: np.random.Generator) -> Trajectory:
    """Scripted expert with noisy detours: before each subgoal, with probability ``noise``, 2-6 random actions
    (turns and moves; one in five detours also tries a random pickup / drop / toggle, which can add events)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {sorted(FAMILIES)}, got {family!r}")
    noise = float(noise)
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must be a probability in [0, 1], got {noise!r}")
    env = make_env(family, seed)
    ctl = Controller(env)
    frames, labels, poss, befores, events = [render(env)], [cell_labels(env)], [positions(env)], [], []
    state = {"abs": abstract_state(env), "carry": env.carrying}
    raw_act = ctl.act

    def act(action: int) -> None:
        fx, fy = env.front_pos
        front = env.grid.get(int(fx), int(fy))
        maybe_event = action in (PICKUP, DROP, TOGGLE) or (
            action == FORWARD and front is not None and front.type == "goal"
        )
        before = render(env) if maybe_event else None
        carried = env.carrying
        raw_act(action)
        new = abstract_state(env)
        event = None
        if carried is None and env.carrying is not None:
            event = f"pickup:{env.carrying.type}"
        elif carried is not None and env.carrying is None:
            event = "drop"
        elif new[1] < state["abs"][1]:
            event = "unlock:door"
        elif ctl.terminated and action == FORWARD:
            event = "goal"
        state["abs"] = new
        if event is not None:
            events.append(event)
            befores.append(before)
            frames.append(render(env))
            labels.append(cell_labels(env))
            poss.append(positions(env))

    ctl.act = act  # record every primitive action the controller takes
    for _ in range(40):
        if ctl.terminated:
            break
        if rng.random() < noise:
            for _ in range(int(rng.integers(2, 7))):
                a = int(rng.choice([0, 1, 2]))
                if rng.random() < 0.2 / 6:
                    a = int(rng.choice([PICKUP, DROP, TOGGLE]))
                fx, fy = env.front_pos
                front = env.grid.get(int(fx), int(fy))
                if a == FORWARD and front is not None and front.type == "goal":
                    continue
                act(a)
                if ctl.terminated:
                    break
        remaining = expert_remaining(env, family)
        if not remaining or ctl.terminated:
            break
        ctl.execute(remaining[0], budget=10**6)
    return Trajectory(
        f"{family}-{seed}",
        family,
        seed,
        env.mission,
        events,
        frames,
        labels,
        poss,
        befores,
        success=ctl.terminated and ctl.reward > 0,
    )


# --- a. workflow grouping -----------------------------------------------------------------------------------------
def group_workflows(
    instructions: Sequence[str],
    n_clusters: int,
    embed: Callable[[list[str]], np.ndarray],
    *,
    domain: str = "minigrid",
    random_state: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """k-means labels of ``"[domain] instruction"`` sentence embeddings, and the cluster centres."""
    from sklearn.cluster import KMeans

    if len(instructions) == 0:
        raise ValueError("instructions must not be empty")
    if not 1 <= n_clusters <= len(instructions):
        raise ValueError(f"n_clusters must be in [1, {len(instructions)}], got {n_clusters}")
    x = np.asarray(embed([f"[{domain}] {s}" for s in instructions]), dtype=np.float64)
    km = KMeans(n_clusters, n_init=10, random_state=random_state).fit(x)
    return km.labels_, km.cluster_centers_


def purity(labels: Sequence[int], truth: Sequence[str]) -> float:
    """Share of items whose cluster's majority class is their own class."""
    if len(labels) != len(truth) or len(labels) == 0:
        raise ValueError("labels and truth must be non-empty and of one length")
    total = 0
    for c in set(labels):
        members = [t for lab, t in zip(labels, truth, strict=True) if lab == c]
        total += Counter(members).most_common(1)[0][1]
    return total / len(labels)


# --- b-d. procedure induction -------------------------------------------------------------------------------------
def edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance between two token sequences."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def induce_procedure(sequences: Sequence[Sequence[str]]) -> list[str]:
    """The medoid event sequence (least total edit distance to the others; ties: most frequent, then first)."""
    seqs = [tuple(s) for s in sequences if len(s) > 0]
    if not seqs:
        raise ValueError("sequences must hold at least one non-empty event sequence")
    distinct = sorted(set(seqs), key=seqs.index)
    counts = Counter(seqs)
    cost = {s: sum(counts[t] * edit_distance(s, t) for t in distinct) for s in distinct}
    return list(min(distinct, key=lambda s: (cost[s], -counts[s], distinct.index(s))))


def _align(events: list[str], procedure: list[str]) -> list[int] | None:
    """Index of each procedure step's event in ``events`` (greedy in-order match), or None."""
    out, j = [], 0
    for step in procedure:
        while j < len(events) and events[j] != step:
            j += 1
        if j == len(events):
            return None
        out.append(j)
        j += 1
    return out


# --- e. visual grounding ------------------------------------------------------------------------------------------
def _classes(parser: TileParser, frame: np.ndarray) -> set[str]:
    return {c for c in parser.parse(frame).ravel() if c in parser.classes_}


def _target_cell(step: str, pos: dict) -> tuple[int, int] | None:
    kind, _, what = step.partition(":")
    key = {"pickup": what, "unlock": "door", "goal": "goal"}.get(kind)
    cells = pos.get(key) if key else None
    return tuple(cells[0]) if cells else None


def ground_cards(
    name: str, procedure: list[str], trajs: list[Trajectory], parser: TileParser, n_views: int
) -> tuple[list[StateCard], list[AuditCard]]:
    aligned = [(t, idx) for t in trajs if (idx := _align(t.events, procedure)) is not None]
    if not aligned:
        raise ValueError(f"no trajectory of skill {name!r} contains its procedure")
    cards, audit = [], []
    for j, step in enumerate(procedure):
        sources = aligned[:n_views]
        # the frame at the start of stage j: after step j-1's event (the initial frame for j = 0)
        starts = [(t, 0 if j == 0 else idx[j - 1] + 1) for t, idx in sources]
        views = [View("full", t.stage_frames[k], f"{t.id}@event{k}") for t, k in starts]
        t0, k0 = starts[0]
        cell = _target_cell(step, t0.stage_positions[k0])
        crops = []
        if cell is not None:
            views.append(View("focus", crop(t0.stage_frames[k0], cell, TILE), f"{t0.id}@event{k0}"))
            crops.append([cell[0] - 1, cell[1] - 1, cell[0] + 1, cell[1] + 1])
        e = sources[0][1][j]
        if t0.before_frames[e] is not None:
            views.append(View("before", t0.before_frames[e], f"{t0.id}@before{e}"))
        views.append(View("after", t0.stage_frames[e + 1], f"{t0.id}@event{e + 1}"))
        visible = sorted(set.intersection(*[_classes(parser, v.image) for v in views if v.role == "full"]))
        after = _classes(parser, t0.stage_frames[e + 1])
        before = _classes(parser, t0.stage_frames[k0])
        gone, new = sorted(before - after), sorted(after - before)
        verify = "; ".join([f"{c} no longer visible" for c in gone] + [f"{c} appears" for c in new])
        cards.append(
            StateCard(
                state_id=f"{name}-s{j}",
                stage=step,
                image_role="stage start",
                when_to_use=f"visible: {', '.join(visible) or 'nothing task-specific'}; next step {step}",
                when_not_to_use="the screen shows a state of another stage (compare with that stage's card)",
                visible_cues=visible,
                verification_cue=verify or "the step changes nothing visible: check the task's end signal",
                visual_risk="object positions, colours and the agent's heading vary with the layout; "
                "never copy cells from the views",
                views=views,
            )
        )
        audit.append(
            AuditCard(
                state_id=f"{name}-s{j}",
                grounding=[
                    {k: [list(c) for c in v] for k, v in t.stage_positions[k].items()} for t, k in starts
                ],
                crops=crops,
                provenance=[t.id for t, _ in sources],
            )
        )
    return cards, audit


# --- f. audit -------------------------------------------------------------------------------------------------------
def replay_success(procedure: list[str], specs: Sequence[EpisodeSpec], budget_factor: float = 3.0) -> float:
    """Share of episodes the procedure, executed step by step by the shared controller, solves."""
    from .gridworld import optimal_steps

    ok = 0
    for spec in specs:
        budget = int(budget_factor * optimal_steps(spec))
        env, ctl = start_episode(spec)
        for step in procedure:
            ctl.execute(step, budget)
        ok += int(ctl.terminated and ctl.reward > 0)
    return ok / len(specs)


@dataclass
class Library:
    """The induced skills, the matcher they were grounded with, and the generator's own diagnostics."""

    skills: list[SkillPackage]
    parser: TileParser
    centres: np.ndarray  # workflow-cluster centres (task-to-skill mapping)
    cluster_skill: dict[int, int]  # cluster -> index into skills (dropped clusters are absent)
    purity: float
    replay: dict[str, float]
    theta: float
    stage_accuracy: float


def induce_library(
    trajs: list[Trajectory],
    held_out: dict[str, list[EpisodeSpec]],
    embed: Callable[[list[str]], np.ndarray],
    n_clusters: int,
    *,
    n_views: int = 3,
    min_replay: float = 0.5,
    calibration: list[Trajectory] | None = None,
    random_state: int = 0,
) -> Library:
    """Run a-f on the source trajectories; ``held_out`` are non-evaluation layouts per family for the audit."""
    labels, centres = group_workflows(
        [t.instruction for t in trajs], n_clusters, embed, random_state=random_state
    )
    frames = [f for t in trajs for f in t.stage_frames]
    parser = TileParser(TILE).fit(frames, [lab for t in trajs for lab in t.stage_labels])
    skills, cluster_skill, replay = [], {}, {}
    for c in range(n_clusters):
        members = [t for t, lab in zip(trajs, labels, strict=True) if lab == c and t.success]
        if not members:
            continue
        procedure = induce_procedure([t.events for t in members])
        name = f"skill{c}-" + "-".join(s.replace(":", "-") for s in procedure)[:60].rstrip("-")
        try:
            cards, audit = ground_cards(name, procedure, members, parser, n_views)
        except ValueError:
            continue
        # audit on held-out layouts of the cluster's majority family (canonical starts)
        family = Counter(t.family for t in members).most_common(1)[0][0]
        rate = replay_success(procedure, held_out[family])
        replay[name] = rate
        if rate < min_replay:
            continue
        instr = Counter(t.instruction for t in members).most_common(3)
        cluster_skill[c] = len(skills)
        skills.append(
            SkillPackage(
                name=name,
                description=f"Procedure for tasks like: {instr[0][0]!r}",
                procedure=procedure,
                cards=cards,
                audit=audit,
                applicability="; ".join(i for i, _ in instr),
                transfer_limits="Induced from MiniGrid layouts; object cells differ in every layout.",
                checks=[c.verification_cue for c in cards],
                sources=[t.id for t in members],
            )
        )
    theta, acc = calibrate_theta(skills, parser, calibration or [])
    return Library(
        skills, parser, centres, cluster_skill, purity(labels, [t.family for t in trajs]), replay, theta, acc
    )


def calibrate_theta(
    skills: list[SkillPackage], parser: TileParser, trajs: list[Trajectory]
) -> tuple[float, float]:
    """Match threshold from held-out generator trajectories (training data only).

    For every stage-start frame: its distance to its own stage's nearest full view, and to the nearest view of any
    other stage of the same skill. ``theta`` is the midpoint between the 0.95 quantile of the first (over the
    frames whose own distance is below the smallest of the second) and the smallest of the second, floored at
    0.02: the branch accepts the first loaded view within ``theta``, so ``theta`` stays below every cross-stage
    distance seen. Also returns the nearest card's stage accuracy on those frames.
    """
    own, other, correct = [], [], []
    for t in trajs:
        for s in skills:
            idx = _align(t.events, s.procedure)
            if idx is None:
                continue
            for j in range(len(s.procedure)):
                frame = t.stage_frames[0 if j == 0 else idx[j - 1] + 1]
                d = [
                    min(parser.distance(frame, v.image) for v in c.views if v.role == "full") for c in s.cards
                ]
                own.append(d[j])
                if len(d) > 1:
                    other.append(min(x for i, x in enumerate(d) if i != j))
                correct.append(int(np.argmin(d) == j))
    if not own or not other:
        return 0.05, float("nan")
    nearest_other = float(np.min(other))
    below = [d for d in own if d < nearest_other] or [0.0]  # own-stage distances no other stage undercuts
    theta = 0.5 * (float(np.quantile(below, 0.95)) + nearest_other)
    return max(0.02, theta), float(np.mean(correct))
