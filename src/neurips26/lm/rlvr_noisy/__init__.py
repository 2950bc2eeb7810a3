"""Noisy Data is Destructive to Reinforcement Learning with Verifiable Rewards (Zhu & Kang, arXiv 2603.16140).

The paper: the "100% incorrect" RLVR training set on which GRPO seemed to learn as well as on clean data is
contaminated with annotations that are actually correct (equivalent forms, valid alternative answers); after a
re-verification pipeline removes them, truly wrong annotations are destructive (no better than a format-only
reward, monotone in the noise share), and algorithmic fixes (Dr. GRPO, DAPO, PGFC, ...) do not compensate.

Here:

- :mod:`.answers`: answer equivalence over plain and LaTeX forms (fractions, decimals, percents, polynomial
  forms, multi-root sets, tuples, intervals); :func:`equivalent` never raises (``None`` = unparsable);
- :mod:`.reverify`: :func:`reverify(problem, annotation, answer_set) -> (verdict, reason)` (sympy, then
  math-verify as the second opinion), :func:`clopper_pearson` and :func:`audit_bound` for the manual audit;
- :mod:`.handset`: a hand-written equivalence set the generator does not plant (the independent check);
- :mod:`.data`: synthetic noisy annotations with known answer sets (planted-correct rewrites);
- :mod:`.toy`: the toy RLVR study on the tiny stack (fraction sums, GRPO from :mod:`neurips26.lm.grpo`).

The LLM stages of the paper (GPT-5 Pro answer sets, GPT-5 judge) are replaced by deterministic code
[reconstructed]; see ``claims.toml`` for every deviation.

Usage::

    from neurips26.lm.rlvr_noisy import reverify, equivalent
    reverify("Find a root of x^2 - 3x + 2 = 0.", r"x = \\frac{4}{2}", ["1", "2"])   # ('correct', 'sympy: ...')
    equivalent("(x+1)^2", "x^2 + 2x + 1")                                          # True
"""

from typing import TYPE_CHECKING

from .answers import equivalent, extract_answer, normalise_latex, parse_answer
from .data import KINDS, NoisyItem, noisy_math_items
from .reverify import (
    Reverification,
    audit_bound,
    clopper_pearson,
    math_verify_equivalent,
    naive_match,
    reverify,
)

if TYPE_CHECKING:  # the toy RLVR study needs torch and answer checking does not: its names load on first use
    from .toy import (
        FractionTask,
        LabelPools,
        false_match_rate,
        format_ok,
        greedy_accuracy,
        pgfc_reward,
        rlvr_reward,
        rlvr_trainer,
        run_arm,
        sft_policy,
    )


def __getattr__(name: str):
    if name in __all__:  # a public name not bound above comes from .toy
        from . import toy

        return getattr(toy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


equivalent_answers = equivalent  # the name neurips26.lm exports

__all__ = [
    "reverify",
    "equivalent_answers",
    "parse_answer",
    "clopper_pearson",
    "KINDS",
    "FractionTask",
    "LabelPools",
    "NoisyItem",
    "Reverification",
    "audit_bound",
    "equivalent",
    "extract_answer",
    "false_match_rate",
    "format_ok",
    "greedy_accuracy",
    "math_verify_equivalent",
    "naive_match",
    "noisy_math_items",
    "normalise_latex",
    "pgfc_reward",
    "rlvr_reward",
    "rlvr_trainer",
    "run_arm",
    "sft_policy",
]
