"""The four agents of the comparison. All drive the environment through the same :class:`.Controller`.

- :class:`NoSkillAgent`: no procedure; tries generic subgoals in a fixed order (go to the goal, pick up the
  nearest object, open the nearest closed door, drop what it carries), whatever is executable, until done.
- :class:`TextSkillAgent`: the skill's procedure as text only; it follows it from step 1 and tracks its stage by
  its own history (a step whose target is absent is skipped), starting over after the last step.
- :class:`BranchSkillAgent` (MMSkills): the main context holds the skill's name and card previews; at the
  start and after every step it opens a branch that reads SKILL.md and the runtime cards (text), loads views one
  at a time (most plausible card first, at most ``max_rounds``), compares each with the live frame and returns a
  note (matched stage, next step, verification cue). The branch and its images are discarded; only the stage
  enters the main context. Consultations per trajectory are capped.
- :class:`DirectInjectionAgent`: every view of every card is in context at every consultation; it takes the
  stage of the closest keyframe and copies that keyframe's object cells (from its grounding) as the targets,
  falling back to the live frame only after a copied target proves wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .gridworld import Controller, EpisodeSpec, abstract_state, optimal_steps, render, start_episode
from .package import SkillPackage
from .visual import TileParser

__all__ = [
    "BranchSkillAgent",
    "DirectInjectionAgent",
    "EpisodeResult",
    "NoSkillAgent",
    "TextSkillAgent",
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


class BranchSkillAgent:
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
        self.skill, self.parser, self.theta, self.max_rounds = skill, parser, float(theta), int(max_rounds)
        self.max_consults = max_consults if max_consults is not None else 2 * len(skill.procedure) + 2
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
            matched, loaded = self.consult(render(env), prior)
            result.views_per_consult.append(loaded)
            return matched if matched is not None else prior

        stage = ask(0)
        while not ctl.terminated and ctl.steps < budget and idle < len(proc):
            before = ctl.steps
            done = ctl.execute(proc[stage], budget)
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
    optimal = optimal_steps(spec)
    budget = int(budget_factor * optimal)
    env, ctl = start_episode(spec, absent=absent)
    result = EpisodeResult(False, 0, optimal, 0)
    agent.run(env, ctl, budget, result)
    result.success = bool(ctl.terminated and ctl.reward > 0 and ctl.steps <= budget)
    result.steps = ctl.steps
    return result
