"""MinSteer: steering directions from one cached self-rewrite contrast (reconstructed; see :mod:`.minsteer`)."""

from .minsteer import (
    DEFAULT_FLIP,
    DEFAULT_STYLE_INSTRUCTION,
    RewriteContrast,
    SteeredBatch,
    caa_direction,
    contrastive_rewrite_direction,
    contrastive_rewrite_directions,
    generate_steered,
    matched_strength,
    random_direction,
    steer,
    two_sequence_direction,
)

__all__ = [
    "contrastive_rewrite_direction",
    "contrastive_rewrite_directions",
    "caa_direction",
    "two_sequence_direction",
    "random_direction",
    "generate_steered",
    "matched_strength",
    "steer",
    "RewriteContrast",
    "DEFAULT_FLIP",
    "DEFAULT_STYLE_INSTRUCTION",
    "SteeredBatch",
]
