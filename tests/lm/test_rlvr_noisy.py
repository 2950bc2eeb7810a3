"""Tests for the noisy-data RLVR paper: answer equivalence, re-verification, audit bound, toy RLVR parts."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.harness.testing import assert_quick_verdict
from neurips26.lm.rlvr_noisy import (
    FractionTask,
    audit_bound,
    clopper_pearson,
    equivalent,
    extract_answer,
    format_ok,
    noisy_math_items,
    parse_answer,
    pgfc_reward,
    reverify,
    rlvr_reward,
)
from neurips26.lm.rlvr_noisy.answers import over_bound

# (a, b, equivalent?) decided by hand from the semantics in the module docstring, not by the implementation
TABLE = [
    ("1/2", "0.5", True),
    (r"\frac{1}{2}", "2/4", True),
    (r"\dfrac{3}{4}", "0.75", True),
    ("50%", "1/2", True),
    (r"50\%", "50", True),
    ("0.333", "1/3", False),
    ("7", "7.0", True),
    ("-3/4", "-0.75", True),
    ("3/4", "-3/4", False),
    ("x^2+2x+1", "(x+1)^2", True),
    ("x^2+2x+1", "x^2-2x+1", False),
    ("2x+2", "2(x+1)", True),
    (r"\sqrt{8}", r"2\sqrt{2}", True),
    (r"\sqrt{8}", "2.828427", False),
    ("x = 3", "3", True),
    (r"\boxed{5}", "5", True),
    (r"$x = -1$ or $x = 2$", "2, -1", True),
    ("x = 1, 2", r"\{2, 1\}", True),
    ("1, 2", "1", False),
    ("1, 2", "1, 2, 3", False),
    (r"1 \pm \sqrt{2}", r"\{1+\sqrt2, 1-\sqrt 2\}", True),
    ("[1, 2)", "[1,2)", True),
    ("[1, 2)", "[1, 2]", False),
    (r"(-\infty, 3]", "(-oo, 3]", True),
    (r"\left(2, \infty\right)", "(2, oo)", True),
    ("(1, 2)", "(2, 1)", False),
    (r"(1,2) \cup (3,4)", "(1,2) U (3,4)", True),
    ("1,000", "1000", True),
    ("3", "4", False),
    # plain braces are a set, never an interval or a pair
    ("{2, -1}", "{-1, 2}", True),
    ("{-1, 2}", r"\{-1, 2\}", True),
    ("{1, 2}", "(1, 2)", False),
    (r"\{1, 2\}", "[1, 2]", False),
    # mixed numbers (a whole number followed by a proper fraction), repeating decimals, currency
    (r"1\frac{1}{2}", "3/2", True),
    (r"1\frac{1}{2}", "1/2", False),
    (r"-2\frac{1}{4}", "-9/4", True),
    (r"0.\overline{3}", "1/3", True),
    (r"0.\overline{3}", "0.333", False),
    (r"\$12", "12", True),
    # Euler's number and the imaginary unit; a rounded irrational is not the irrational
    (r"e^{i\pi}", "-1", True),
    (r"\sqrt2", "1.41421356237", False),
    # inequality forms of intervals
    (r"1 \le x < 3", "[1, 3)", True),
    ("x > 2", r"(2, \infty)", True),
    (r"x \geq 2", r"(2, \infty)", False),
    ("x < 1 or x > 2", r"(-\infty, 1) \cup (2, \infty)", True),
    ("1,000", r"\{0, 1\}", False),
]


@pytest.mark.parametrize(("a", "b", "same"), TABLE)
def test_equivalence_table(a, b, same):
    assert equivalent(a, b) is same
    assert equivalent(b, a) is same  # symmetric


@pytest.mark.parametrize(
    "bad", ["hello world", r"\frac{1}{", "1/0", "__import__('os')", "2**99999", "", "x ++* 2"]
)
def test_unparsable_is_none_not_an_error(bad):
    assert parse_answer(bad) == []
    assert equivalent(bad, "1") is None


@pytest.mark.parametrize(
    "tower",
    ["9^9^9", "10**10**10", "2^(3^(4^5))", "(2^9)^9", "2^{999*999}", r"10^{10^{10}}", "99999!", "(" * 200],
)
def test_exponent_towers_are_undecided_quickly(tower):
    # unbounded, each of these runs for minutes or forever; bounded, in milliseconds. The wall-clock bar is
    # wide (10 s) so that a loaded CI machine or math-verify's first import cannot make it flaky
    t0 = time.perf_counter()
    assert over_bound(tower) or tower.startswith("(")
    assert parse_answer(tower) == []
    assert equivalent(tower, "5") is None
    assert reverify("p", tower, ["5"]).verdict == "undecided"
    assert reverify("p", "5", [tower, "5"]).verdict == "correct"  # a bounded member still decides
    assert time.perf_counter() - t0 < 10.0


def test_bound_holds_off_the_main_thread():
    # signal-based timeouts only work in the main thread; the structural bound must work anywhere
    out: list = []
    worker = threading.Thread(target=lambda: out.append(reverify("p", "9^9^9", ["10**10**10"]).verdict))
    t0 = time.perf_counter()
    worker.start()
    worker.join(timeout=30.0)
    assert not worker.is_alive() and out == ["undecided"]
    assert time.perf_counter() - t0 < 10.0


def test_bounded_powers_still_evaluate():
    assert equivalent("2^10", "1024") is True
    assert equivalent("10^{100}", "1" + "0" * 100) is True
    assert equivalent("(x^2 + 1)^2", "x^4 + 2x^2 + 1") is True  # a power of a polynomial is no tower


def _long_division(p: int, q: int) -> str:
    """Independent oracle: the repeating decimal of 0 < p/q < 1 by long division with cycle detection."""
    digits, seen, r = [], {}, p % q
    while r and r not in seen:
        seen[r] = len(digits)
        r *= 10
        digits.append(str(r // q))
        r %= q
    if not r:
        return "0." + "".join(digits)
    k = seen[r]
    return "0." + "".join(digits[:k]) + r"\overline{" + "".join(digits[k:]) + "}"


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 60), st.integers(2, 61))
def test_repeating_decimals_against_long_division(p, q):
    if p >= q:
        p, q = q - 1, q
    text = _long_division(p, q)
    assert equivalent(text, f"{p}/{q}") is True
    assert equivalent(text, f"{p + 1}/{q}") is False


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 9), st.integers(1, 9), st.integers(2, 12))
def test_mixed_numbers_property(w, n, d):
    if n >= d:
        return
    assert equivalent(rf"{w}\frac{{{n}}}{{{d}}}", _frac_text(Fraction(w) + Fraction(n, d))) is True
    assert equivalent(rf"-{w}\frac{{{n}}}{{{d}}}", _frac_text(-(Fraction(w) + Fraction(n, d)))) is True


def _frac_text(q: Fraction) -> str:
    return f"{q.numerator}/{q.denominator}"


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-20, 20), min_size=2, max_size=5, unique=True), st.randoms(use_true_random=False))
def test_brace_sets_are_order_free(values, rnd):
    shuffled = values[:]
    rnd.shuffle(shuffled)
    plain = "{" + ", ".join(map(str, values)) + "}"
    latex = r"\{" + ", ".join(map(str, shuffled)) + r"\}"
    assert equivalent(plain, latex) is True
    assert equivalent(plain, r"\{" + ", ".join(map(str, values[1:])) + r"\}") is False


@settings(max_examples=30, deadline=None)
@given(st.integers(-9, 9), st.integers(1, 9), st.booleans(), st.booleans())
def test_inequality_intervals_against_sympy(a, width, lo_strict, hi_strict):
    import sympy

    b = a + width
    text = f"{a} {'<' if lo_strict else '<='} x {'<' if hi_strict else '<='} {b}"
    x = sympy.Symbol("x", real=True)
    # oracle: sympy solves the two inequalities itself
    rel = (x > a if lo_strict else x >= a) & (x < b if hi_strict else x <= b)
    truth = sympy.solve_univariate_inequality(rel.args[0], x, relational=False).intersect(
        sympy.solve_univariate_inequality(rel.args[1], x, relational=False)
    )
    assert isinstance(truth, sympy.Interval)
    interval = (
        f"{'(' if truth.left_open else '['}{truth.start}, {truth.end}{')' if truth.right_open else ']'}"
    )
    assert equivalent(text, interval) is True
    flipped = f"{'[' if truth.left_open else '('}{truth.start}, {truth.end}{')' if truth.right_open else ']'}"
    assert equivalent(text, flipped) is False


def test_equivalent_bad_input():
    with pytest.raises(ValueError, match="tol"):
        equivalent("1", "1", tol=2.0)
    with pytest.raises(ValueError, match="time_budget"):
        equivalent("1", "1", time_budget=0)
    with pytest.raises(TypeError, match="text"):
        over_bound(3)


def test_handset_expectations_are_well_formed():
    from neurips26.lm.rlvr_noisy.handset import HAND_PAIRS

    assert len({(g, a) for g, a, _ in HAND_PAIRS}) == len(HAND_PAIRS)
    assert 30 <= sum(same for *_, same in HAND_PAIRS) <= len(HAND_PAIRS) - 30


@settings(max_examples=40, deadline=None)
@given(st.integers(-50, 50), st.integers(1, 40), st.integers(2, 9))
def test_rational_forms_property(p, q, k):
    f = Fraction(p, q)
    assert equivalent(f"{p}/{q}", f"{p * k}/{q * k}")
    assert equivalent(f"{p}/{q}", rf"\frac{{{p * k}}}{{{q * k}}}") if p >= 0 else True
    assert equivalent(f"{p}/{q}", f"{f + 1}".replace(" ", "")) is False
    # a 12-digit decimal is exact iff the reduced denominator has no prime factor but 2 and 5 (q <= 40 keeps
    # every such expansion within 12 digits)
    d = f.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    assert equivalent(f"{p}/{q}", f"{float(f):.12f}") is (d == 1)


@settings(max_examples=25, deadline=None)
@given(st.integers(-9, 9), st.integers(-9, 9))
def test_polynomial_expansion_property(a, b):
    # oracle: (x + a)(x + b) = x^2 + (a + b) x + ab by hand
    factored = f"(x {a:+d})(x {b:+d})"
    assert equivalent(factored, f"x^2 {a + b:+d}x {a * b:+d}")
    if a + b != 0:
        assert equivalent(factored, f"x^2 {-(a + b):+d}x {a * b:+d}") is False


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_parse_never_raises(text):
    assert isinstance(parse_answer(text), list)
    assert equivalent(text, "1") in (True, False, None)


def test_extract_answer():
    assert extract_answer(r"so the answer is \boxed{\frac{1}{2}}.") == r"\frac{1}{2}"
    assert extract_answer("work <ans>3/4</ans>") == "3/4"
    assert extract_answer("no answer here") is None
    with pytest.raises(TypeError, match="text"):
        extract_answer(3)


def test_reverify_verdicts():
    v, why = reverify("Compute 1/4 + 1/4.", "0.5", ["1/2"])
    assert v == "correct" and "sympy" in why
    assert reverify("Find a root of x^2 - 3x + 2 = 0.", "2", ["1", "2"]).verdict == "correct"  # other root
    assert reverify("Find all roots.", "1", [r"\{1, 2\}"]).verdict == "incorrect"  # missing root
    assert reverify("Compute 1/4 + 1/4.", "1/3", ["1/2"]).verdict == "incorrect"
    assert reverify("p", "no idea", ["1/2"]).verdict == "unparsable"
    assert reverify("p", "1/2", ["???"], second_opinion="never").verdict == "unparsable"
    assert reverify("p", "1/3", ["1/2"], second_opinion="always").verdict == "incorrect"
    assert reverify("p", "9^9^9", ["5"]).verdict == "undecided"


def test_reverify_asks_math_verify_when_sympy_finds_no_match():
    mv = pytest.importorskip("math_verify")
    if not mv.parse(r"$\frac{1}{2}$"):
        pytest.skip("math-verify cannot parse LaTeX here (antlr4 runtime version)")
    # math-verify equates a set with an open interval; sympy does not: the disagreement is undecided
    assert reverify("p", "{1, 2}", ["(1, 2)"]).verdict == "undecided"
    assert reverify("p", "{1, 2}", ["(1, 2)"], second_opinion="unresolved").verdict == "incorrect"
    assert reverify("p", "{1, 2}", ["(1, 2)"], second_opinion="never").verdict == "incorrect"
    # sympy cannot read a unit; math-verify can
    assert reverify("p", r"5\text{ cm}", ["5"]).verdict == "correct"


def test_reverify_bad_input():
    with pytest.raises(TypeError, match="problem"):
        reverify(None, "1", ["1"])
    with pytest.raises(TypeError, match="annotation"):
        reverify("p", 1, ["1"])
    with pytest.raises(TypeError, match="answer_set"):
        reverify("p", "1", "1")
    with pytest.raises(ValueError, match="answer_set"):
        reverify("p", "1", [])
    with pytest.raises(ValueError, match="second_opinion"):
        reverify("p", "1", ["1"], second_opinion="maybe")
    with pytest.raises(ValueError, match="time_budget"):
        reverify("p", "1", ["1"], time_budget=-1)


def test_math_verify_second_opinion_reads_latex():
    mv = pytest.importorskip("math_verify")
    if not mv.parse(r"$\frac{1}{2}$"):  # its LaTeX parser needs antlr4-python3-runtime 4.13.x
        pytest.skip("math-verify cannot parse LaTeX here (antlr4 runtime version)")
    from neurips26.lm.rlvr_noisy import math_verify_equivalent

    assert math_verify_equivalent(r"\frac{1}{2}", "0.5") is True
    assert math_verify_equivalent("1/2", "1/3") is False


def test_clopper_pearson_closed_form_and_peer():
    # zero errors: the one-sided bound solves (1 - p)^n = alpha exactly
    assert clopper_pearson(0, 100) == pytest.approx(1 - 0.05 ** (1 / 100), abs=1e-12)
    assert clopper_pearson(0, 100) == pytest.approx(0.0295, abs=1e-4)
    assert clopper_pearson(7, 7) == 1.0
    sm = pytest.importorskip("statsmodels.stats.proportion")
    for k, n in [(0, 20), (3, 50), (10, 10), (17, 40)]:
        lo, hi = clopper_pearson(k, n, alternative="two-sided")
        plo, phi = sm.proportion_confint(k, n, alpha=0.05, method="beta")
        assert lo == pytest.approx(plo, abs=1e-9) and hi == pytest.approx(phi, abs=1e-9)


def test_clopper_pearson_bad_input():
    with pytest.raises(ValueError, match="n"):
        clopper_pearson(0, 0)
    with pytest.raises(ValueError, match="errors"):
        clopper_pearson(5, 4)
    with pytest.raises(TypeError, match="errors"):
        clopper_pearson(0.5, 4)
    with pytest.raises(ValueError, match="confidence"):
        clopper_pearson(1, 4, confidence=1.5)
    with pytest.raises(ValueError, match="alternative"):
        clopper_pearson(1, 4, alternative="lower")


def test_audit_bound():
    out = audit_bound([True, False, True, True], [True, False, False, True])
    assert out["errors"] == 1 and out["n"] == 4 and out["error_rate"] == 0.25
    assert out["upper_bound"] == pytest.approx(clopper_pearson(1, 4))
    with pytest.raises(ValueError, match="equal length"):
        audit_bound([True], [True, False])
    with pytest.raises(ValueError, match="predicted"):
        audit_bound([], [])


def test_noisy_items_shares_and_truth():
    items = noisy_math_items(140, planted_share=0.25, seed=3)
    assert sum(it.planted_correct for it in items) == 35
    assert {it.kind for it in items} == {
        "linear",
        "quadratic_one",
        "quadratic_all",
        "fraction",
        "percent",
        "polynomial",
        "inequality",
    }
    # numeric kinds: check the planted truth with exact Fraction arithmetic from the problem text
    for it in items:
        if it.kind == "fraction" and it.rewrite in ("unreduced", "decimal"):
            gold = Fraction(it.answer_set[0])
            assert Fraction(it.annotation) == gold
    with pytest.raises(ValueError, match="n"):
        noisy_math_items(0)
    with pytest.raises(ValueError, match="planted_share"):
        noisy_math_items(10, planted_share=2.0)


def test_fraction_task_forms_against_fractions():
    task = FractionTask(n_eval=100, seed=1)
    assert len(task.train_problems) + len(task.eval_problems) == 8 * 81
    assert not set(task.train_problems) & set(task.eval_problems)
    for p in task.train_problems[:50]:
        a, b, c, d = p
        truth = Fraction(a, b) + Fraction(c, d)
        for form in task.surface_forms(p):
            assert Fraction(form) == truth
        assert Fraction(task.reference(p)).denominator == truth.denominator  # reduced
    with pytest.raises(ValueError, match="max_den"):
        FractionTask(max_den=12)
    with pytest.raises(ValueError, match="n_eval"):
        FractionTask(n_eval=0)


def test_format_and_rewards():
    assert format_ok("[3/4]\n") == "3/4"
    assert format_ok("3/4]\n") is None and format_ok("[3/4][1]\n") is None
    task = FractionTask(n_eval=100, seed=0)
    enc = task.tokenizer.encode
    comps = [enc("[6/8]\n"), enc("[0.75]\n"), enc("[1/2]\n"), enc("6/8\n")]
    labels = ["3/4"] * 4
    assert rlvr_reward("match")(None, comps, labels, task) == [1.0, 1.0, 0.0, 0.0]
    assert rlvr_reward("format")(None, comps, labels, task) == [1.0, 1.0, 1.0, 0.0]
    corrected = pgfc_reward(0.5, 0.1)(None, comps, labels, task)
    assert corrected[0] == pytest.approx((1 - 0.1) / (1 - 0.5 - 0.1))
    assert corrected[2] == pytest.approx(-0.1 / 0.4)
    with pytest.raises(ValueError, match="kind"):
        rlvr_reward("length")
    with pytest.raises(ValueError, match="rates"):
        pgfc_reward(0.6, 0.5)


def test_toy_rlvr_smoke():
    from neurips26.lm.grpo import GRPOConfig
    from neurips26.lm.rlvr_noisy import LabelPools, greedy_accuracy, run_arm, sft_policy

    task = FractionTask(n_eval=50, seed=0)
    base = sft_policy(task, steps=20, seed=0, d_model=32, batch_size=16)
    acc0 = greedy_accuracy(base, task, task.eval_problems)
    assert 0.0 <= acc0 <= 1.0
    pools = LabelPools.build(base, task, n_samples=1, seed=0)
    assert len(pools.wrong) == len(pools.problems) and all(isinstance(w, str) for w in pools.wrong)
    acc, hist, _ = run_arm(
        base, task, pools.problems, pools.clean, GRPOConfig(group_size=4, lr=1e-3), 2, 4, 0
    )
    assert len(hist) == 2 and math.isfinite(acc)
    with pytest.raises(ValueError, match="steps"):
        sft_policy(task, steps=0)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("rlvr-noisy-data", tmp_path)


def test_answer_checking_does_not_import_torch():
    # a user who only re-verifies annotations should not pay torch's import; the toy study's names still resolve
    code = (
        "import sys\n"
        "from neurips26.lm.rlvr_noisy import equivalent, reverify\n"
        "assert reverify('Solve.', '1/2', ['0.5']).verdict == 'correct'\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "from neurips26.lm.rlvr_noisy import rlvr_trainer\n"
        "assert 'torch' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
