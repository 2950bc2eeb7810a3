"""Synthetic noisy math annotations with known full answer sets (the digest's Part 1 data) [reconstructed].

Each item is a problem with its complete answer set (from the generator: the stand-in for the paper's GPT-5 Pro
answer-set stage), an "incorrect" annotation and the truth about it. ``planted_share`` of the annotations are
secretly correct (equivalent rewrites: ``1/2`` vs ``0.5`` vs ``2/4`` vs ``\\frac{1}{2}``, expanded vs factored
polynomials, percent forms, re-ordered sets, the *other* root of a quadratic when one root is asked for); the
rest are truly wrong (perturbed values, sign errors, reciprocal, a missing root, a wrong bracket).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

__all__ = ["NoisyItem", "KINDS", "noisy_math_items"]

KINDS = ("linear", "quadratic_one", "quadratic_all", "fraction", "percent", "polynomial", "inequality")


@dataclass(frozen=True)
class NoisyItem:
    """One problem: ``answer_set`` lists every correct answer; ``planted_correct`` is the truth about ``annotation``."""

    problem: str
    answer_set: tuple[str, ...]
    annotation: str
    planted_correct: bool
    kind: str
    rewrite: str  # how the annotation was made (e.g. "decimal", "sign error")


def _frac(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def _latex(q: Fraction) -> str:
    if q.denominator == 1:
        return str(q.numerator)
    sign = "-" if q < 0 else ""
    return f"{sign}\\frac{{{abs(q.numerator)}}}{{{q.denominator}}}"


def _decimal(q: Fraction) -> str | None:
    d = q.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d != 1:
        return None
    s = f"{float(q):.10f}".rstrip("0")
    return s + "0" if s.endswith(".") else s


def _rewrites(q: Fraction, rng: np.random.Generator) -> list[tuple[str, str]]:
    k = int(rng.integers(2, 5))
    out = [
        ("unreduced", f"{q.numerator * k}/{q.denominator * k}"),
        ("latex fraction", _latex(q) if q.denominator != 1 else f"\\frac{{{q.numerator * k}}}{{{k}}}"),
        ("boxed", f"\\boxed{{{_frac(q)}}}"),
        ("x = form", f"x = {_frac(q)}"),
    ]
    dec = _decimal(q)
    if dec is not None and dec != _frac(q):
        out.append(("decimal", dec))
    return out


def _wrongs(q: Fraction, rng: np.random.Generator) -> list[tuple[str, str]]:
    out = [("off by one", _frac(q + 1)), ("off by a half", _frac(q - Fraction(1, 2)))]
    if q != 0:
        out.append(("sign error", _frac(-q)))
    if q not in (0, 1, -1):
        out.append(("reciprocal", _frac(1 / q)))
    return out


def _pick(options: list[tuple[str, str]], rng: np.random.Generator) -> tuple[str, str]:
    return options[int(rng.integers(len(options)))]


def _item(kind: str, planted: bool, rng: np.random.Generator) -> NoisyItem:
    r = lambda lo, hi: int(rng.integers(lo, hi + 1))  # noqa: E731
    if kind == "linear":
        a, b = r(2, 9), r(-20, 20)
        x = Fraction(r(-30, 30), r(1, 6))
        c = a * x + b
        problem = f"Solve {a}x + {b} = {_frac(c)} for x."
        gold = _frac(x)
        how, ann = _pick(_rewrites(x, rng) if planted else _wrongs(x, rng), rng)
        return NoisyItem(problem, (gold,), ann, planted, kind, how)
    if kind in ("quadratic_one", "quadratic_all"):
        r1, r2 = r(-9, 9), r(-9, 9)
        while r2 == r1 or r2 == -r1:
            r2 = r(-9, 9)
        b, c = -(r1 + r2), r1 * r2
        poly = f"x^2 {'+' if b >= 0 else '-'} {abs(b)}x {'+' if c >= 0 else '-'} {abs(c)} = 0"
        if kind == "quadratic_one":
            problem = f"Find a solution of {poly}."
            answer_set = (str(r1), str(r2))
            if planted:
                how, ann = _pick(
                    [("other root", str(r2)), ("x = form", f"x = {r1}"), ("decimal", f"{r2}.0")], rng
                )
            else:
                wrong = [v for v in (-r1, r1 + 1, r1 * r2, r1 - 1) if v not in (r1, r2)]
                how, ann = "sign error / perturbed", str(wrong[r(0, len(wrong) - 1)])
            return NoisyItem(problem, answer_set, ann, planted, kind, how)
        problem = f"Find all solutions of {poly}."
        answer_set = (f"\\{{{r1}, {r2}\\}}",)
        if planted:
            how, ann = _pick(
                [
                    ("x = ... or x = ...", f"x = {r2} or x = {r1}"),
                    ("reordered list", f"{r2}, {r1}"),
                    ("reordered set", f"\\{{{r2},{r1}\\}}"),
                ],
                rng,
            )
        else:
            how, ann = _pick(
                [
                    ("missing root", str(r1)),
                    ("sign error", f"{-r1}, {-r2}"),
                    ("one perturbed", f"{r1}, {r2 + 1}"),
                ],
                rng,
            )
        return NoisyItem(problem, answer_set, ann, planted, kind, how)
    if kind == "fraction":
        a, b, c, d = r(1, 9), r(2, 9), r(1, 9), r(2, 9)
        op = "+" if rng.random() < 0.5 else "-"
        q = Fraction(a, b) + Fraction(c, d) if op == "+" else Fraction(a, b) - Fraction(c, d)
        problem = f"Compute {a}/{b} {op} {c}/{d}."
        gold = _frac(q)
        if planted:
            how, ann = _pick(_rewrites(q, rng), rng)
        else:
            naive = Fraction(a + c, b + d) if op == "+" else Fraction(a - c, abs(b - d) or 1)
            opts = _wrongs(q, rng) + ([("added denominators", _frac(naive))] if naive != q else [])
            how, ann = _pick(opts, rng)
        return NoisyItem(problem, (gold,), ann, planted, kind, how)
    if kind == "percent":
        p, base = r(1, 19) * 5, r(1, 40) * 4
        v = Fraction(p * base, 100)
        problem = f"What is {p}% of {base}?"
        gold = _frac(v)
        if planted:
            how, ann = _pick(_rewrites(v, rng), rng)
        else:
            how, ann = _pick(
                [("percent of the wrong base", _frac(Fraction(p * (base + 4), 100)))] + _wrongs(v, rng), rng
            )
        return NoisyItem(problem, (gold,), ann, planted, kind, how)
    if kind == "polynomial":
        a, b = r(1, 9) * (1 if rng.random() < 0.5 else -1), r(1, 9) * (1 if rng.random() < 0.5 else -1)
        s, p = a + b, a * b
        problem = f"Expand (x + {a})(x + {b})." if a >= 0 and b >= 0 else f"Expand (x {a:+d})(x {b:+d})."
        gold = f"x^2 {s:+d}x {p:+d}"
        if planted:
            how, ann = _pick(
                [
                    ("factored", f"(x {a:+d})(x {b:+d})"),
                    ("reordered terms", f"{p} {s:+d}x + x^2"),
                    ("latex", f"x^{{2}} {s:+d} \\cdot x {p:+d}"),
                ],
                rng,
            )
        else:
            how, ann = _pick(
                [
                    ("sign error", f"x^2 {-s:+d}x {p:+d}" if s != 0 else f"x^2 {-p:+d}"),
                    ("dropped middle term", f"x^2 {p:+d}" if s != 0 else f"x^2 {p + 1:+d}"),
                    ("constant as sum", f"x^2 {s:+d}x {s + 1 if s + 1 != p else s + 2:+d}"),
                ],
                rng,
            )
        return NoisyItem(problem, (gold,), ann, planted, kind, how)
    if kind == "inequality":
        a, t = r(2, 6), Fraction(r(-20, 20), r(1, 3))
        strict = rng.random() < 0.5
        problem = (
            f"Solve {a}x {'>' if strict else '>='} {_frac(a * t)}; give the solution set as an interval."
        )
        lb = "(" if strict else "["
        gold = f"{lb}{_frac(t)}, \\infty)"
        if planted:
            how, ann = _pick(
                [
                    ("oo notation", f"{lb}{_frac(t)}, oo)"),
                    ("left/right", f"\\left{lb}{_latex(t)}, \\infty\\right)"),
                    (
                        "decimal endpoint" if _decimal(t) else "latex endpoint",
                        f"{lb}{_decimal(t) or _latex(t)}, \\infty)",
                    ),
                ],
                rng,
            )
        else:
            how, ann = _pick(
                [
                    ("wrong bracket", f"{'[' if strict else '('}{_frac(t)}, \\infty)"),
                    ("flipped direction", f"(-\\infty, {_frac(t)}{')' if strict else ']'}"),
                    ("perturbed endpoint", f"{lb}{_frac(t + 1)}, \\infty)"),
                ],
                rng,
            )
        return NoisyItem(problem, (gold,), ann, planted, kind, how)
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def noisy_math_items(n: int = 2000, planted_share: float = 0.2, seed: int = 0) -> list[NoisyItem]:
    """``n`` items of all ``KINDS`` (in turn); a random ``planted_share`` of them carry a secretly correct label."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not 0 <= planted_share <= 1:
        raise ValueError(f"planted_share must be in [0, 1], got {planted_share!r}")
    rng = np.random.default_rng(seed)
    planted = np.zeros(n, dtype=bool)
    planted[rng.choice(n, int(round(planted_share * n)), replace=False)] = True
    return [_item(KINDS[i % len(KINDS)], bool(planted[i]), rng) for i in range(n)]
