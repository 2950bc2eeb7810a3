"""A hand-written answer-equivalence set, independent of the Part 1 generator (:mod:`.data`).

Each entry is ``(reference, annotation, same)``: ``same`` is what a careful grader decides (written by hand from
mathematical meaning, not from either checker's output). The forms are ones the generator never plants: mixed
numbers, repeating decimals, currency, Euler's formula, inequality forms of intervals, plain-brace sets, sets vs
open intervals, rounded irrationals, thousands separators, scientific notation, exponent towers. Exact
rationals: a terminating decimal is the rational it writes (``0.333 != 1/3``, ``1.41421356237 != sqrt 2``).
An annotation whose value cannot be computed within the evaluation bound (``9^9^9``) is not equal to a small
reference; a checker that answers *undecided* on it does not mark it correct.
"""

from __future__ import annotations

__all__ = ["HAND_PAIRS"]

HAND_PAIRS: tuple[tuple[str, str, bool], ...] = (
    # --- equal ---
    ("3/2", r"1\frac{1}{2}", True),
    ("5/2", r"2\frac12", True),
    ("-7/4", r"-1\frac{3}{4}", True),
    ("1/3", r"0.\overline{3}", True),
    ("1/6", r"0.1\overline{6}", True),
    ("2/11", r"0.\overline{18}", True),
    ("12", r"\$12", True),
    ("4.5", r"\$4.50", True),
    ("-1", r"e^{i\pi}", True),
    ("[1, 3)", r"1 \le x < 3", True),
    (r"(2, \infty)", "x > 2", True),
    (r"(-\infty, 5]", r"x \leq 5", True),
    (r"(-\infty, 1) \cup (2, \infty)", r"x < 1 \text{ or } x > 2", True),
    (r"\{-1, 2\}", "{2, -1}", True),
    (r"\{-1, 2\}", "{-1, 2}", True),
    ("{2, -1}", "{-1, 2}", True),
    (r"\{3, 4, 5\}", r"\{5,3,4\}", True),
    (r"\{-1, 2\}", "x = -1 or x = 2", True),
    (r"\{1-\sqrt2, 1+\sqrt2\}", r"1 \pm \sqrt{2}", True),
    ("1/2", "0.5", True),
    ("1/2", r"\dfrac{1}{2}", True),
    ("0.25", r"\frac{1}{4}", True),
    ("1/4", "2.5e-1", True),
    ("3/2", "1.5", True),
    ("2", "2.000", True),
    ("22/7", r"\frac{22}{7}", True),
    (r"\sqrt{12}", r"2\sqrt{3}", True),
    (r"\frac{\sqrt2}{2}", r"\frac{1}{\sqrt{2}}", True),
    ("3", r"\sqrt[3]{27}", True),
    ("8", "2^3", True),
    (r"\pi/2", r"\frac{\pi}{2}", True),
    ("0.1", r"10\%", True),
    ("3/4", "75%", True),
    ("(x+1)^2", "x^2 + 2x + 1", True),
    ("x^2 - 1", "(x - 1)(x + 1)", True),
    ("(2, 3)", r"\left(2, 3\right)", True),
    ("[0.5, 1]", r"[\frac12, 1]", True),
    ("5", "x = 5", True),
    ("5", r"\boxed{5}", True),
    ("1000", "1,000", True),
    ("2500", "2,500", True),
    ("45", r"45^\circ", True),
    (r"\emptyset", r"\{\}", True),
    ("e^2", r"\exp(2)", True),
    # --- different ---
    ("(1, 2)", "{1, 2}", False),
    (r"\{1, 2\}", "(1, 2)", False),
    (r"\{-1, 2\}", "(-1, 2)", False),
    ("[1, 3)", "[1, 3]", False),
    ("(0, 1)", "(0, 1]", False),
    ("(1, 3)", "[1, 3]", False),
    (r"(2, \infty)", r"x \ge 2", False),
    ("[1, 3)", r"1 < x \le 3", False),
    (r"(-\infty, 5]", "x < 5", False),
    ("1/3", "0.333", False),
    ("1/3", "0.33", False),
    (r"\sqrt{2}", "1.41421356237", False),
    (r"\pi", "3.14159", False),
    ("e", "2.718", False),
    ("(2, 1)", "(1, 2)", False),
    (r"\{-1, 2\}", r"\{1, -2\}", False),
    (r"\{-1, 2\}", "-1", False),
    (r"\{2\}", r"\{2, 3\}", False),
    ("3/2", r"1\frac{1}{3}", False),
    ("1/2", r"1\frac{1}{2}", False),
    ("1/3", r"0.\overline{03}", False),
    ("-1", r"e^{\pi}", False),
    ("1,000", r"\{0, 1\}", False),
    ("12", r"\$21", False),
    ("x^2 + 2x + 1", "x^2 + 1", False),
    ("(x+1)^2", "(x-1)^2", False),
    ("2", "-2", False),
    ("0.5", "5", False),
    ("50%", "0.05", False),
    (r"\frac{1}{2}", r"\frac{2}{1}", False),
    (r"2\sqrt3", r"3\sqrt2", False),
    ("4", "2^3", False),
    (r"\frac{\pi}{2}", r"\frac{\pi}{3}", False),
    ("5", "9^9^9", False),
    ("6", "10**10**10", False),
)
