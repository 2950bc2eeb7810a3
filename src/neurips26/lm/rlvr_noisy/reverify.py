"""The re-verification pipeline: is an annotation marked "incorrect" actually correct?

The paper's pipeline (Zhu & Kang, arXiv 2603.16140) for a noisy RLVR set: (1) a strong model lists every correct
answer of the problem (the *answer set*: it fixes references that omit valid alternatives); (2) math-verify
compares the annotation with each member; (3) an LLM judge resolves the rest; (4) a manual audit of 100 random
items bounds the judge's error rate (zero errors in 100 gives a one-sided 95% Clopper-Pearson bound of
``1 - 0.05^(1/100) = 2.95%``). Annotations found correct are removed from the "incorrect" set.

Here the LLM stages are replaced by deterministic code [reconstructed]: the answer set comes from the user (or a
generator's metadata), step 2 is our sympy equivalence (:mod:`.answers`) and math-verify is the second opinion;
:func:`clopper_pearson` and :func:`audit_bound` give the audit bound.

``reverify(problem, annotation, answer_set) -> (verdict, reason)``; verdict is ``"correct"`` (equivalent to a
member of the answer set), ``"incorrect"`` (readable, equivalent to none, and math-verify agrees),
``"undecided"`` (sympy found no match but math-verify does - the two checkers disagree, so the item goes to the
judge/audit; or an answer is over the evaluation bound, e.g. ``9^9^9``; or the time budget ran out) or
``"unparsable"`` (the annotation, or every member of the answer set, cannot be read by sympy and math-verify
finds no match). It never raises on bad answer text and never hangs: every evaluation is bounded by structure
(:func:`.answers.over_bound`, also applied before math-verify sees a string) and a thread-safe time budget is
checked between steps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import NamedTuple

from scipy.stats import beta

from .answers import MAX_CHARS, _text_over_bound, equivalent, over_bound, parse_answer

__all__ = [
    "Reverification",
    "audit_bound",
    "clopper_pearson",
    "math_verify_equivalent",
    "naive_match",
    "reverify",
]

VERDICTS = ("correct", "incorrect", "undecided", "unparsable")


class Reverification(NamedTuple):
    """The pipeline's answer: ``verdict`` in ``VERDICTS`` and a human-readable ``reason``."""

    verdict: str
    reason: str


def _wrap(text: str) -> str:
    t = text.strip()
    return t if "$" in t or r"\boxed" in t else f"${t}$"


def math_verify_equivalent(gold: str, annotation: str) -> bool | None:
    """math-verify's opinion (``verify(parse(gold), parse(annotation))``); None if it parses neither or is absent.

    Its signal-based timeouts only work in the main thread, so they are switched off elsewhere; the input is
    bounded instead: a string over the evaluation bound (an exponent tower, a huge power, a deep nest) gets None
    without reaching math-verify.
    """
    try:
        from math_verify import parse, verify
    except ImportError:  # optional second opinion
        return None
    if len(gold) > MAX_CHARS or len(annotation) > MAX_CHARS:
        return None
    if _text_over_bound(gold) is not None or _text_over_bound(annotation) is not None:
        return None
    main = threading.current_thread() is threading.main_thread()
    t = 5 if main else None
    try:
        g = parse(_wrap(gold), parsing_timeout=t)
        a = parse(_wrap(annotation), parsing_timeout=t)
        if not g or not a:
            return None
        return bool(verify(g, a, timeout_seconds=t))
    except Exception:  # math-verify raises on some inputs despite raise_on_error=False
        return None


def naive_match(annotation: str, answer_set: Sequence[str]) -> bool:
    """The weak verifier that hides contamination: exact string match after removing spaces and ``$``."""

    def norm(s: str) -> str:
        return s.replace("$", "").replace(" ", "").strip()

    return any(norm(annotation) == norm(a) for a in answer_set)


def _check_inputs(problem: object, annotation: object, answer_set: object) -> list[str]:
    if not isinstance(problem, str):
        raise TypeError(f"problem must be a str, got {type(problem).__name__}")
    if not isinstance(annotation, str):
        raise TypeError(f"annotation must be a str, got {type(annotation).__name__}")
    if isinstance(answer_set, str) or not isinstance(answer_set, Sequence):
        raise TypeError("answer_set must be a sequence of answer strings (not one string)")
    if len(answer_set) == 0:
        raise ValueError("answer_set must hold at least one correct answer")
    if not all(isinstance(a, str) for a in answer_set):
        raise TypeError("answer_set must hold str answers only")
    return list(answer_set)


SECOND_OPINION = ("always", "unresolved", "never")


def reverify(
    problem: str,
    annotation: str,
    answer_set: Sequence[str],
    *,
    second_opinion: str = "always",
    time_budget: float = 5.0,
) -> Reverification:
    """Decide whether ``annotation`` is a correct answer to ``problem`` given its full ``answer_set``.

    ``answer_set`` lists every acceptable answer: for "find one root" list each root; for "find all roots" list
    the complete set as one member (``"{-1, 2}"`` or ``"\\{-1, 2\\}"``). ``problem`` is kept for the record (the
    paper's LLM stages read it; the deterministic checkers do not). ``second_opinion``: when to ask math-verify:
    ``"always"`` (default: whenever sympy finds no match; a sympy "no match" that math-verify calls a match is
    *undecided*, the item the paper sends to its judge), ``"unresolved"`` (only when sympy cannot read the
    annotation or some answer) or ``"never"``. ``time_budget``: seconds, checked between steps (thread-safe);
    past it the verdict is undecided.
    """
    answers = _check_inputs(problem, annotation, answer_set)
    if second_opinion not in SECOND_OPINION:
        raise ValueError(f"second_opinion must be one of {SECOND_OPINION}, got {second_opinion!r}")
    if not (isinstance(time_budget, (int, float)) and not isinstance(time_budget, bool) and time_budget > 0):
        raise ValueError(f"time_budget must be a positive number of seconds, got {time_budget!r}")
    deadline = time.monotonic() + time_budget
    if over_bound(annotation):
        return Reverification("undecided", f"the annotation {annotation[:40]!r} is over the evaluation bound")
    bounded = [i for i, a in enumerate(answers) if not over_bound(a)]
    if not bounded:
        return Reverification("undecided", "every member of the answer set is over the evaluation bound")
    readable_gold = [i for i in bounded if parse_answer(answers[i])]
    own = bool(parse_answer(annotation))
    if own:
        for i in readable_gold:
            if time.monotonic() > deadline:
                return Reverification("undecided", f"time budget of {time_budget} s spent")
            if equivalent(annotation, answers[i], time_budget=max(deadline - time.monotonic(), 1e-3)):
                return Reverification(
                    "correct", f"sympy: equivalent to answer-set member {i} ({answers[i]!r})"
                )
    resolved = own and len(readable_gold) == len(answers)
    if second_opinion == "always" or (second_opinion == "unresolved" and not resolved):
        for i in bounded:
            if time.monotonic() > deadline:
                return Reverification("undecided", f"time budget of {time_budget} s spent")
            if math_verify_equivalent(answers[i], annotation):
                if own and i in readable_gold:  # both read it, and they disagree
                    return Reverification(
                        "undecided",
                        f"checkers disagree on answer-set member {i} ({answers[i]!r}): math-verify "
                        "equivalent, sympy not",
                    )
                return Reverification(
                    "correct", f"math-verify: equivalent to answer-set member {i} ({answers[i]!r})"
                )
    if not own:
        return Reverification(
            "unparsable", f"sympy cannot read the annotation {annotation!r} (math-verify found no match)"
        )
    if not readable_gold:
        return Reverification(
            "unparsable", "sympy cannot read any member of the answer set (math-verify found no match)"
        )
    checkers = (
        "sympy"
        if second_opinion == "never" or resolved and second_opinion != "always"
        else "sympy and math-verify"
    )
    return Reverification("incorrect", f"equivalent to none of the {len(answers)} answers ({checkers})")


def clopper_pearson(
    errors: int, n: int, confidence: float = 0.95, alternative: str = "upper"
) -> float | tuple[float, float]:
    """Exact binomial (Clopper-Pearson) bound on an error rate from ``errors`` in ``n`` audited items.

    ``alternative="upper"``: the one-sided upper bound ``Beta^-1(confidence; k + 1, n - k)`` (1 when k = n);
    ``"two-sided"``: the interval ``(Beta^-1(a/2; k, n-k+1), Beta^-1(1-a/2; k+1, n-k))``, ``a = 1 - confidence``.
    """
    for name, v in (("errors", errors), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0 <= errors <= n:
        raise ValueError(f"errors must be in [0, n={n}], got {errors}")
    if not (isinstance(confidence, float | int) and 0 < confidence < 1):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if alternative not in ("upper", "two-sided"):
        raise ValueError(f"alternative must be 'upper' or 'two-sided', got {alternative!r}")
    if alternative == "upper":
        return 1.0 if errors == n else float(beta.ppf(confidence, errors + 1, n - errors))
    a = 1 - confidence
    lo = 0.0 if errors == 0 else float(beta.ppf(a / 2, errors, n - errors + 1))
    hi = 1.0 if errors == n else float(beta.ppf(1 - a / 2, errors + 1, n - errors))
    return lo, hi


def audit_bound(
    predicted: Sequence[bool], truth: Sequence[bool], confidence: float = 0.95
) -> dict[str, float]:
    """Audit a labelled sample: errors of the pipeline's decisions and the one-sided upper bound on its error rate."""
    if len(predicted) != len(truth):
        raise ValueError(f"predicted and truth must have equal length, got {len(predicted)} and {len(truth)}")
    if len(predicted) == 0:
        raise ValueError("predicted must hold at least one audited item")
    errors = sum(bool(p) != bool(t) for p, t in zip(predicted, truth))
    n = len(predicted)
    return {
        "n": n,
        "errors": errors,
        "error_rate": errors / n,
        "upper_bound": clopper_pearson(errors, n, confidence),
    }
