"""Gated, non-expanding continued-fraction channel mixing (follow-up to CoFrGeNet, Dhurandhar et al., arXiv
2601.21766; the follow-up's own text is not public, so its block wiring and log/exp division are reconstructed).

Continued fractions ``f(a) = 1/(a_1 + 1/(a_2 + ... + 1/a_d))`` are evaluated through continuants (one division for
any depth), directly or in log space (:func:`continued_fraction`). :class:`Cffn` is the predecessor's block (with its
:class:`DyadicSchedule`), :class:`GatedCFFN` the gated follow-up; both drop into the stack's FFN slot
(``GPTConfig(ffn="cffn" | "gated_cf")``).
"""

from .blocks import Cffn, DyadicSchedule, GatedCFFN
from .continued_fraction import (
    continuant,
    continuants,
    continued_fraction,
    fraction_gradient,
    nested_fraction,
)

__all__ = [
    "Cffn",
    "GatedCFFN",
    "DyadicSchedule",
    "continued_fraction",
    "continuant",
    "continuants",
    "fraction_gradient",
    "nested_fraction",
]
