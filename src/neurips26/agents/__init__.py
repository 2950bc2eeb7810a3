"""Agents: MemForest (agent memory compression on SQLite) and MMSkills (multimodal skill packages)."""

from .._lazy import attach

_EXPORTS = {
    "MemoryStore": ".memforest",
    "MemoryStoreError": ".memforest",
    "MemoryNodes": ".memforest",
    "Hit": ".memforest",
    "event_partition": ".memforest",
    "eventtree_compress": ".memforest",
    "anchor_rerank": ".memforest",
    "extractive_merge": ".memforest",
    "SkillPackage": ".mmskills",
    "StateCard": ".mmskills",
    "View": ".mmskills",
    "TileParser": ".mmskills",
    "BranchSkillAgent": ".mmskills",
    "TextSkillAgent": ".mmskills",
    "NoSkillAgent": ".mmskills",
    "DirectInjectionAgent": ".mmskills",
    "EpisodeSpec": ".mmskills",
    "induce_library": ".mmskills",
    "run_episode": ".mmskills",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
