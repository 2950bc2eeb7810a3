"""The four agents of the comparison. All drive the environment through the same :class:`.Controller`.

- :class:`NoSkillAgent`: no procedure; tries generic subgoals in a fixed order (go to the goal, pick up the
  nearest object, open the nearest closed door, drop what it carries), whatever is executable, until done.
- :class:`TextSkillAgent`: the skill's procedure as text only, screen-blind; it follows it from step 1 and tracks
  its stage by its own history (a step whose target is absent is skipped), starting over after the last step.
- :class:`ScreenTextSkillAgent`: the skill as text only (procedure and the cards' text), with the live screen:
  it reads the screen with the same :class:`.TileParser` and takes the stage whose card's ``visible_cues`` best
  match the objects on screen. This is the paper's text-only condition (its agent sees screenshots).
- :class:`BranchSkillAgent` (MMSkills): the main context holds the skill's name and card previews; at the
  start and after every step it opens a branch that reads SKILL.md and the runtime cards (text), loads views one
  at a time (most plausible card first, at most ``max_rounds``), compares each with the live frame and returns a
  note (matched stage, next step, verification cue). The branch and its images are discarded; only the stage
  enters the main context. Consultations per trajectory are capped.

The two screen-reading skill agents judge whether a step worked by its card's verification cue on the live screen
(:func:`cue_verified`), never by the controller's own success flag.
- :class:`DirectInjectionAgent`: every view of every card is in context at every consultation; it takes the
  stage of the closest keyframe and copies that keyframe's object cells (from its grounding) as the targets,
  falling back to the live frame only after a copied target proves wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .gridworld import Controller, EpisodeSpec, abstract_state, optimal_steps, render, start_episode
from .package import SkillPackage, StateCard
from .visual import TileParser

__all__ = [
    "BranchSkillAgent",
    "DirectInjectionAgent",
    "EpisodeResult",
    "NoSkillAgent",
    "ScreenTextSkillAgent",
    "TextSkillAgent",
    "cue_verified",
    "run_episode",
]


@dataclass
class EpisodeResult:
    success: bool
    steps: int
    optimal: int
    loops: int  # subgoals after which the task state (abstract_state) repeats an earlier one
    consults: int = 0
    views_per_consult: list[int] = field(default_factory=list)
    context_images: int = 0  # images that entered the main context


class _Tracker:
    """Counts loops: a subgoal that brings the task state back to one already seen."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.seen = {abstract_state(env)}
        self.loops = 0

    def after_subgoal(self) -> None:
        s = abstract_state(self.env)
        if s in self.seen:
            self.loops += 1
        self.seen.add(s)


class NoSkillAgent:
    name = "no skill"
    ORDER = ("goal", "pickup:nearest", "open:door", "drop")

    def run(self, env: Any, ctl: Controller, budget: int, result: EpisodeResult) -> None:
        track = _Tracker(env)
        while not ctl.terminated and ctl.steps < budget:
            progressed = False
            for token in self.ORDER:
                if ctl.terminated or ctl.steps >= budget:
                    break
                before = ctl.steps
                ctl.execute(token, budget)
                if ctl.steps > before:
                    progressed = True
                    track.after_subgoal()
            if not progressed:
                break  # nothing executable any more
        result.loops = track.loops


class TextSkillAgent:
    name = "text-only skill"

    def __init__(self, skill: SkillPackage) -> None:
        self.skill = skill

    def run(self, env: Any, ctl: Controller, budget: int, result: EpisodeResult) -> None:
        track = _Tracker(env)
        proc, cursor, idle = self.skill.procedure, 0, 0
        while not ctl.terminated and ctl.steps < budget and idle < len(proc):
            before = ctl.steps
            ctl.execute(proc[cursor], budget)
            idle = 0 if ctl.steps > before else idle + 1
            if ctl.steps > before:
                track.after_subgoal()
            cursor = (cursor + 1) % len(proc)
        result.loops = track.loops


_NOTHING_VISIBLE = "the step changes nothing visible"


def cue_verified(card: StateCard, after: set[str], terminated: bool) -> bool:
    """Whether ``card``'s verification cue holds on a screen showing the object classes ``after``.

    The generator writes the cue as ``"<class> no longer visible"`` / ``"<class> appears"`` clauses joined by
    ``"; "``; a step that changes nothing visible is verified only by the task's end signal (``terminated``, which
    every agent observes)."""
    cue = card.verification_cue
    if cue.startswith(_NOTHING_VISIBLE):
        return bool(terminated)
    for clause in cue.split("; "):
        if clause.endswith(" no longer visible"):
            if clause[: -len(" no longer visible")] in after:
                return False
        elif clause.endswith(" appears"):
            if clause[: -len(" appears")] not in after:
                return False
        else:
            raise ValueError(
                f"verification cue clause {clause!r} of card {card.state_id!r} is not understood"
            )
    return True


class _StagedSkillAgent:
    """The loop both screen-reading skill agents share: locate the stage on the live screen, run its step,
    check its card's verification cue on the screen, locate again. Consultations per trajectory are capped."""

    def __init__(self, skill: SkillPackage, parser: TileParser, max_consults: int | None) -> None:
        if not isinstance(skill, SkillPackage):
            raise TypeError(f"skill must be a SkillPackage, got {type(skill).__name__}")
        if not hasattr(parser, "appearance_"):
            raise ValueError("parser must be a fitted TileParser")
        if max_consults is not None and (isinstance(max_consults, bool) or int(max_consults) < 1):
            raise ValueError(f"max_consults must be a positive integer or None, got {max_consults!r}")
        self.skill, self.parser = skill, parser
        self.max_consults = int(max_consults) if max_consults is not None else 2 * len(skill.procedure) + 2

    def locate(self, frame: np.ndarray, prior: int) -> tuple[int | None, int]:
        """(stage the screen shows or None, skill images loaded to decide it)."""
        raise NotImplementedError

    def _classes(self, frame: np.ndarray) -> set[str]:
        return {c for c in self.parser.parse(frame).ravel() if c in self.parser.classes_}

    def run(self, env: Any, ctl: Controller, budget: int, result: EpisodeResult) -> None:
        track = _Tracker(env)
        proc = self.skill.procedure
        stage, idle = 0, 0
        consults = 0

        def ask(prior: int) -> int:
            nonlocal consults
            if consults >= self.max_consults:
                return prior
            consults += 1
            matched, loaded = self.locate(render(env), prior)
            result.views_per_consult.append(loaded)
            return matched if matched is not None else prior

        stage = ask(0)
        while not ctl.terminated and ctl.steps < budget and idle < len(proc):
            before = ctl.steps
            ctl.execute(proc[stage], budget)
            done = cue_verified(self.skill.cards[stage], self._classes(render(env)), ctl.terminated)
            idle = 0 if ctl.steps > before else idle + 1
            if ctl.steps > before:
                track.after_subgoal()
            if ctl.terminated:
                break
            expected = stage + 1 if done else stage
            stage = ask(expected) if expected < len(proc) else ask(len(proc) - 1)
            if not done and stage == expected and idle:
                stage = (stage + 1) % len(proc)  # the step cannot run here: move on
        result.loops = track.loops
        result.consults = consults


class ScreenTextSkillAgent(_StagedSkillAgent):
    """Text-only skill with the live screen: the stage is the card whose text ``visible_cues`` best match the
    object classes on screen (Jaccard index; ties go to the card nearest the expected stage). No skill image is
    ever loaded."""

    name = "text-only skill, reads the screen"

    def __init__(self, skill: SkillPackage, parser: TileParser, *, max_consults: int | None = None) -> None:
        super().__init__(skill, parser, max_consults)

    def locate(self, frame: np.ndarray, prior: int) -> tuple[int | None, int]:
        n = len(self.skill.cards)
        prior = min(max(prior, 0), n - 1)
        live = self._classes(frame)
        best, best_key = None, None
        for j, card in enumerate(self.skill.cards):
            cues = set(card.visible_cues)
            union = cues | live
            score = len(cues & live) / len(union) if union else 1.0
            key = (score, -abs(j - prior), j)
            if best_key is None or key > best_key:
                best, best_key = j, key
        return (best if best_key[0] > 0 else None), 0


class BranchSkillAgent(_StagedSkillAgent):
    """MMSkills: branch-loaded consultation of state cards against the live frame."""

    name = "MMSkills (branch)"

    def __init__(
        self,
        skill: SkillPackage,
        parser: TileParser,
        theta: float,
        *,
        max_rounds: int = 4,
        max_consults: int | None = None,
    ) -> None:
        super().__init__(skill, parser, max_consults)
        theta = float(theta)
        if not np.isfinite(theta) or not 0.0 <= theta <= 2.0:
            raise ValueError(f"theta must be a cosine distance in [0, 2], got {theta!r}")
        if isinstance(max_rounds, bool) or int(max_rounds) < 1:
            raise ValueError(f"max_rounds must be a positive integer, got {max_rounds!r}")
        self.theta, self.max_rounds = theta, int(max_rounds)
        # per card: its full views' descriptors, medoid first (the view a branch loads first)
        self.card_views = []
        for c in skill.cards:
            d = [parser.descriptor(v.image) for v in c.views if v.role == "full"]
            order = np.argsort([sum(1 - a @ b for b in d) for a in d], kind="stable")
            self.card_views.append([d[i] for i in order])

    def consult(self, frame: np.ndarray, prior: int) -> tuple[int | None, int]:
        """The branch: (matched stage or None, views loaded). Views are loaded one per round, cards in order
        of plausibility (the expected stage, then its neighbours), each card's medoid view first."""
        n = len(self.skill.cards)
        prior = min(max(prior, 0), n - 1)
        order = sorted(range(n), key=lambda j: (abs(j - prior), -j))
        live = self.parser.descriptor(frame)
        queue = [(j, v) for j in order for v in self.card_views[j][:1]]
        queue += [(j, v) for j in order for v in self.card_views[j][1:]]
        loaded = 0
        for j, view in queue[: self.max_rounds]:
            loaded += 1
            if 1.0 - float(live @ view) <= self.theta:
                return j, loaded
        return None, loaded  # far from every card: no stage guidance

    locate = consult


class DirectInjectionAgent:
    """Every keyframe in context; object cells copied from the closest keyframe (over-anchoring)."""

    name = "direct injection"

    def __init__(self, skill: SkillPackage, parser: TileParser) -> None:
        self.skill, self.parser = skill, parser
        self.keyframes = []  # (stage, descriptor, grounding)
        for j, (c, a) in enumerate(zip(skill.cards, skill.audit, strict=True)):
            fulls = [v for v in c.views if v.role == "full"]
            for v, g in zip(fulls, a.grounding, strict=False):
                self.keyframes.append((j, parser.descriptor(v.image), g))
        self.n_views = skill.n_views

    def run(self, env: Any, ctl: Controller, budget: int, result: EpisodeResult) -> None:
        track = _Tracker(env)
        proc = self.skill.procedure
        idle, consults = 0, 0
        while not ctl.terminated and ctl.steps < budget and idle < 2 * len(proc):
            live = self.parser.descriptor(render(env))
            consults += 1
            result.views_per_consult.append(self.n_views)
            result.context_images += self.n_views
            d = [1.0 - float(live @ k[1]) for k in self.keyframes]
            stage, _, grounding = self.keyframes[int(np.argmin(d))]
            token = proc[stage]
            kind, _, what = token.partition(":")
            key = {"pickup": what, "unlock": "door", "goal": "goal"}.get(kind)
            cells = [tuple(c) for c in grounding.get(key, [])] if key else None
            before = ctl.steps
            done = ctl.execute(token, budget, at=cells or None) if cells else ctl.execute(token, budget)
            if not done and cells and not ctl.terminated:
                done = ctl.execute(token, budget)  # the copied cell was wrong: look at the live frame
            idle = 0 if ctl.steps > before else idle + 1
            if ctl.steps > before:
                track.after_subgoal()
        result.loops = track.loops
        result.consults = consults


def run_episode(
    agent: Any, spec: EpisodeSpec, budget_factor: float = 3.0, absent: str = "search"
) -> EpisodeResult:
    """Play one episode from the spec's start state with a step budget of ``budget_factor`` x the expert's.

    ``absent``: what a subgoal whose target is not on screen costs the shared controller ("search": a look
    around, walking to the farthest reachable cell; "free": nothing, as if the whole grid were visible)."""
    budget_factor = float(budget_factor)
    if not np.isfinite(budget_factor) or budget_factor <= 0:
        raise ValueError(f"budget_factor must be a positive number, got {budget_factor!r}")
    optimal = optimal_steps(spec)
    budget = int(budget_factor * optimal)
    env, ctl = start_episode(spec, absent=absent)
    result = EpisodeResult(False, 0, optimal, 0)
    agent.run(env, ctl, budget, result)
    result.success = bool(ctl.terminated and ctl.reward > 0 and ctl.steps <= budget)
    result.steps = ctl.steps
    return result
