"""Sparse Support Grounding for multiple instance learning (descriptive title; NeurIPS 2026 abstract, no arXiv id).

Bag-label-only MIL where a few rare, diverse instances carry the label among many nuisance and decoy instances.
Each bag's compact evidence support (top-k by attention x instance probability) enters a per-class memory; every
instance is transported by entropic unbalanced OT onto the label-consistent and the label-inconsistent supports,
and its grounding strength ``w = relu(r+ - r-)`` (difference of the unclipped retained masses) weights an
instance-level grounding loss, while the gated-attention bag classifier still sees the whole bag.

Reconstructed [R]: the paper's text is not available; the whole method follows the project digest (support
selection, FIFO memory, UOT retained mass, the contrast form, the loss and lambda = 0.5), the data generators and
the evaluation protocol. Departures: the optional attention alignment is KL(w || attention), not the digest's
KL(attention || w) (infinite where the sparse w is 0), and off by default; the instance head is warmed up with
the bag labels while the encoder sees the bag loss only.
"""

from .bags import MILData, check_bags, digits_bags, pad_bags, synthetic_bags
from .mil import (
    CONTRASTS,
    AttentionMIL,
    MILNet,
    SparseSupportGroundingMIL,
    grounding_weights,
    support_retained_mass,
)
from .uot import retained_mass, unbalanced_sinkhorn_log

__all__ = [
    "SparseSupportGroundingMIL",
    "AttentionMIL",
    "unbalanced_sinkhorn_log",
    "retained_mass",
    "grounding_weights",
    "synthetic_bags",
    "MILNet",
    "support_retained_mass",
    "digits_bags",
    "check_bags",
    "pad_bags",
    "MILData",
    "CONTRASTS",
]
