"""The multimodal skill package: SKILL.md (descriptor + procedure), runtime state cards with views, audit cards.

A package is one directory::

    <name>/SKILL.md             descriptor, applicability, ordered procedure, transfer limits, checks
    <name>/state_cards.json     runtime (inference-facing) cards: what the branch reads, no pixels
    <name>/audit_cards.json     authoring-facing cards: grounding (object cells), crop boxes, provenance
    <name>/views/<state_id>_<k>_<role>.png    keyframe views (full frame, focus crop, before / after)
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["AuditCard", "SkillPackage", "StateCard", "View"]

VIEW_ROLES = ("full", "focus", "before", "after")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass
class View:
    """One keyframe view of a state card (uint8 RGB image)."""

    role: str
    image: np.ndarray
    source: str = ""  # trajectory id and step it was taken from

    def __post_init__(self) -> None:
        if self.role not in VIEW_ROLES:
            raise ValueError(f"view role must be one of {VIEW_ROLES}, got {self.role!r}")
        img = np.asarray(self.image)
        if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8 or img.size == 0:
            raise ValueError(f"view image must be a non-empty HxWx3 uint8 array, got {img.shape} {img.dtype}")
        self.image = img


@dataclass
class StateCard:
    """A runtime state card: when a stage applies, what it looks like, how its completion shows."""

    state_id: str
    stage: str  # the procedure step that is due in this state
    image_role: str
    when_to_use: str
    when_not_to_use: str
    visible_cues: list[str]
    verification_cue: str
    visual_risk: str
    views: list[View] = field(default_factory=list)

    def preview(self) -> str:
        """The compact one-line preview the main context holds (no images)."""
        return f"[{self.state_id}] {self.stage}: {self.when_to_use} (views: {len(self.views)})"


@dataclass
class AuditCard:
    """The authoring-facing side of a card: grounding and provenance (never shown to the runtime agent)."""

    state_id: str
    grounding: list[dict[str, list[list[int]]]]  # per view: object class -> cells
    crops: list[list[int]]  # focus crop boxes (x0, y0, x1, y1) in cells
    provenance: list[str]


@dataclass
class SkillPackage:
    """A multimodal skill: descriptor, ordered procedure, one runtime state card per stage, audit cards."""

    name: str
    description: str
    procedure: list[str]
    cards: list[StateCard]
    audit: list[AuditCard] = field(default_factory=list)
    applicability: str = ""
    transfer_limits: str = ""
    checks: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # instructions of the trajectories it was induced from

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"name must be lower-case letters, digits, '-' or '_', got {self.name!r}")
        if not self.procedure or not all(isinstance(s, str) and s for s in self.procedure):
            raise ValueError("procedure must be a non-empty list of non-empty step strings")
        if len(self.cards) != len(self.procedure):
            raise ValueError(
                f"cards must hold one state card per procedure step ({len(self.procedure)}), got {len(self.cards)}"
            )
        ids = [c.state_id for c in self.cards]
        if len(set(ids)) != len(ids):
            raise ValueError(f"state ids must be unique, got {ids}")
        for c, step in zip(self.cards, self.procedure, strict=True):
            if c.stage != step:
                raise ValueError(
                    f"card {c.state_id!r} is for stage {c.stage!r}, the procedure has {step!r} there"
                )

    # --- the text the agent reads ----------------------------------------------------------------------------
    def skill_md(self) -> str:
        steps = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(self.procedure))
        checks = "\n".join(f"- {c}" for c in self.checks) or "- (none)"
        return (
            f"---\nname: {self.name}\ndescription: {self.description}\n---\n\n# {self.name}\n\n"
            f"## When to use\n{self.applicability}\n\n## Procedure\n{steps}\n\n"
            f"## Transfer limits\n{self.transfer_limits}\n\n## Checks\n{checks}\n"
        )

    def previews(self, max_cards: int = 3) -> list[str]:
        return [c.preview() for c in self.cards[:max_cards]]

    @property
    def n_views(self) -> int:
        return sum(len(c.views) for c in self.cards)

    # --- (de)serialisation -------------------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        from PIL import Image

        root = Path(directory) / self.name
        (root / "views").mkdir(parents=True, exist_ok=True)
        (root / "SKILL.md").write_text(self.skill_md())
        cards = []
        for c in self.cards:
            d = asdict(c)
            d["views"] = []
            for k, v in enumerate(c.views):
                fname = f"{c.state_id}_{k}_{v.role}.png"
                Image.fromarray(v.image).save(root / "views" / fname)
                d["views"].append({"role": v.role, "file": fname, "source": v.source})
            cards.append(d)
        meta = {
            "name": self.name,
            "description": self.description,
            "procedure": self.procedure,
            "applicability": self.applicability,
            "transfer_limits": self.transfer_limits,
            "checks": self.checks,
            "sources": self.sources,
        }
        (root / "state_cards.json").write_text(json.dumps({"skill": meta, "cards": cards}, indent=1))
        (root / "audit_cards.json").write_text(json.dumps([asdict(a) for a in self.audit], indent=1))
        return root

    @classmethod
    def load(cls, directory: str | Path) -> SkillPackage:
        from PIL import Image

        root = Path(directory)
        try:
            data = json.loads((root / "state_cards.json").read_text())
            audit = json.loads((root / "audit_cards.json").read_text())
        except FileNotFoundError as err:
            raise ValueError(f"{root} is not a skill package: {err.filename} is missing") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"{root}: malformed card file ({err})") from None
        cards = []
        for d in data["cards"]:
            views = [
                View(
                    v["role"], np.asarray(Image.open(root / "views" / v["file"]).convert("RGB")), v["source"]
                )
                for v in d.pop("views")
            ]
            cards.append(StateCard(**d, views=views))
        return cls(cards=cards, audit=[AuditCard(**a) for a in audit], **data["skill"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "procedure": self.procedure,
            "cards": [c.preview() for c in self.cards],
            "views": self.n_views,
        }
