"""MMSkills: Towards Multimodal Skills for General Visual Agents (arXiv 2605.13527).

A multimodal skill S = (descriptor, procedure P = [p_1..p_L], runtime state cards C = {c_j}, views V_j): each card
says when its stage applies, what the screen shows then (visible cues, views: full frame, focus crop, before /
after), how completion shows (verification cue) and what must not be copied (visual risk); audit cards keep the
grounding. Packages are induced from trajectories (group instructions with MiniLM + k-means, induce the
procedure, ground keyframes into cards, audit by replay), and consulted by a branch-loaded agent: the branch
reads SKILL.md and the cards, loads views one at a time and matches them with the live frame,

    branch(S, o_t) = first j (in order of plausibility) with d(o_t, V_j) <= theta, else "no match",

returning the stage j and its next step; the branch and its images are discarded, only the note stays.
:class:`ScreenTextSkillAgent` is the text-only condition: the same live screen, the cards' text cues only.

[reconstructed] The VLM is replaced by a fixed visual matcher (:class:`TileParser`: tiles -> object classes,
idf-weighted presence, cosine), the LLM generator by deterministic steps (:mod:`.generator`), the GUI by
MiniGrid task families (:mod:`.gridworld`) with random layouts and random start stages.

    lib = induce_library(trajectories, held_out_layouts, encode_minilm, n_clusters=3, calibration=more)
    agent = BranchSkillAgent(lib.skills[0], lib.parser, lib.theta)
    result = run_episode(agent, EpisodeSpec("doorkey", seed=12345, start_stage=2))
"""

from .agents import (
    BranchSkillAgent,
    DirectInjectionAgent,
    EpisodeResult,
    NoSkillAgent,
    ScreenTextSkillAgent,
    TextSkillAgent,
    cue_verified,
    run_episode,
)
from .generator import (
    Library,
    Trajectory,
    group_workflows,
    induce_library,
    induce_procedure,
    purity,
    record_trajectory,
)
from .gridworld import FAMILIES, Controller, EpisodeSpec, start_episode
from .package import AuditCard, SkillPackage, StateCard, View
from .visual import TileParser

__all__ = [
    "SkillPackage",
    "StateCard",
    "View",
    "TileParser",
    "BranchSkillAgent",
    "TextSkillAgent",
    "ScreenTextSkillAgent",
    "NoSkillAgent",
    "DirectInjectionAgent",
    "EpisodeSpec",
    "induce_library",
    "run_episode",
    "FAMILIES",
    "AuditCard",
    "Controller",
    "EpisodeResult",
    "Library",
    "Trajectory",
    "cue_verified",
    "group_workflows",
    "induce_procedure",
    "purity",
    "record_trajectory",
    "start_episode",
]
