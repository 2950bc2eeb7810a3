"""Math-answer equivalence: parse plain or LaTeX answers into sympy values and compare them.

An answer string is parsed into a list of *candidate readings* (sympy objects); two answers are equivalent when
some reading of one equals some reading of the other. Readings make the ambiguous notations explicit:

- ``(1, 2)`` reads as the ordered pair ``Tuple(1, 2)`` *and* the open interval ``Interval.open(1, 2)``;
- ``50%`` reads as ``1/2`` *and* ``50`` (a "what percent" question accepts both);
- ``1,000`` (no space after the comma, groups of three digits) reads as ``1000`` only; ``1, 000`` is a list.

Semantics (decided here, explicitly):

- a bare list ``-1, 2``, ``x = -1 or x = 2``, ``x = 1 \\pm \\sqrt 2`` and ``\\{-1, 2\\}`` are *sets* (order-free);
  a single value equals the one-element set holding it;
- ``[a, b]``, ``[a, b)``, ``(-\\infty, 3]`` and unions (``\\cup``) are intervals; ``(a, b)`` is pair-or-interval;
- decimals are exact rationals (``0.5 == 1/2``; ``0.333 != 1/3``; a rounded irrational is not the irrational:
  ``1.41421356237 != \\sqrt 2``);
- expressions with free symbols are equal when they agree at several random rational points (Schwartz-Zippel
  for polynomials: ``x^2 + 2x + 1 == (x + 1)^2``); constants compare exactly when both are rational, a rational
  never equals a provably irrational constant, else they compare to a relative tolerance of ``1e-9`` at 30 digits.

Robustness (what a user's noisy data needs): parsing never raises and never hangs. Every evaluation is bounded by
structure, not by a timeout (a signal-based timeout only works in the main thread): at most 300 characters and 20
nested brackets; an exponent tower (``9^9^9``, ``10**10**10``, ``(2^9)^9``), an exponent above 9999 or a
factorial of a number above 999 is rejected on the text (this also guards math-verify); sympy first reads the
expression *unevaluated* and an upper bound on the digits of every exact intermediate value (``b^e`` has at
most ``digits(b) * |e|`` digits) must stay below ``MAX_DIGITS`` and the tree below ``MAX_NODES`` nodes, else the
answer is *over the bound* (:func:`over_bound`: the comparison is undecided, ``equivalent`` gives None). Only a
whitelisted character set reaches sympy's parser and its namespace holds sympy constructors only (no builtins).

Notation read besides the above: mixed numbers (``1\\frac12 = 3/2``, a proper fraction after an integer),
repeating decimals (``0.\\overline{3} = 1/3``), currency (``\\$12``), inequality forms of intervals
(``1 \\le x < 3`` = ``[1, 3)``, ``x > 2`` = ``(2, oo)``, joined by ``or``), plain braces around a list as a set
(``{2, -1} == \\{-1, 2\\}``; a set is never an interval or a pair), and ``e`` / ``i`` also read as Euler's number and
the imaginary unit (``e^{i\\pi} = -1``).
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

import sympy
from sympy.parsing.sympy_parser import (
    convert_xor,
    implicit_multiplication_application,
    parse_expr,
    rationalize,
    standard_transformations,
)

__all__ = ["equivalent", "extract_answer", "normalise_latex", "over_bound", "parse_answer"]

MAX_CHARS = 300
MAX_DEPTH = 20  # nested brackets
MAX_DIGITS = 20_000  # upper bound on the decimal digits of any exact intermediate value
MAX_NODES = 400  # sympy expression-tree nodes
MAX_EXPONENT = 9999
_TRANSFORMS = standard_transformations + (implicit_multiplication_application, convert_xor, rationalize)
_FUNCS = {
    "sqrt": sympy.sqrt,
    "sin": sympy.sin,
    "cos": sympy.cos,
    "tan": sympy.tan,
    "log": sympy.log,
    "ln": sympy.log,
    "exp": sympy.exp,
    "Abs": sympy.Abs,
    "pi": sympy.pi,
    "oo": sympy.oo,
    "E": sympy.E,
}
_GLOBALS = {
    "__builtins__": {},
    "Integer": sympy.Integer,
    "Rational": sympy.Rational,
    "Float": sympy.Float,
    "Symbol": sympy.Symbol,
    "Function": sympy.Function,
    **_FUNCS,
}
_RAW_GLOBALS = {**_GLOBALS, "Add": sympy.Add, "Mul": sympy.Mul, "Pow": sympy.Pow}
_ALLOWED = re.compile(r"^[0-9a-zA-Z+\-*/^().\s|]*$")
_LATEX_WORDS = {
    r"\cdot": "*",
    r"\times": "*",
    r"\div": "/",
    r"\pi": " pi ",
    r"\infty": " oo ",
    r"\sin": " sin",
    r"\cos": " cos",
    r"\tan": " tan",
    r"\ln": " log",
    r"\log": " log",
    r"\exp": " exp",
    r"\cup": " U ",
    r"\le": "<=",
    r"\ge": ">=",
    r"\leq": "<=",
    r"\geq": ">=",
    r"\lt": "<",
    r"\gt": ">",
    r"\in": " ∈ ",
}
_DROP = [
    r"\left",
    r"\right",
    r"\displaystyle",
    r"\!",
    r"\,",
    r"\;",
    r"\:",
    r"\quad",
    r"\qquad",
    "^\\circ",
    "^{\\circ}",
    r"\degree",
    r"\$",  # currency before the math-mode dollar
    "$",
]


# --- LaTeX to plain text ------------------------------------------------------------------------------------
def _group(s: str, i: int) -> tuple[str, int] | None:
    """The brace group (or single character) starting at ``s[i]``; returns its content and the end index."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return None
    if s[i] != "{":
        if s[i] == "\\":  # a command as one argument, e.g. \frac\pi2
            m = re.match(r"\\[a-zA-Z]+", s[i:])
            if m:
                return m.group(0), i + len(m.group(0))
        return s[i], i + 1
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "{":
            depth += 1
        elif s[j] == "}":
            depth -= 1
            if depth == 0:
                return s[i + 1 : j], j + 1
    return None


def _commands(s: str) -> str | None:
    """Rewrite \\frac, \\sqrt, \\text, \\boxed (innermost content kept) into plain syntax; None if malformed."""
    out, i = [], 0
    while i < len(s):
        m = re.match(r"\\(d|t)?frac|\\sqrt|\\text|\\textbf|\\mathrm|\\mbox|\\boxed|\\operatorname", s[i:])
        if not m:
            out.append(s[i])
            i += 1
            continue
        name, i = m.group(0), i + len(m.group(0))
        if name.endswith("frac"):
            a = _group(s, i)
            b = _group(s, a[1]) if a else None
            if not (a and b):
                return None
            na, nb = _commands(a[0]), _commands(b[0])
            if na is None or nb is None:
                return None
            out.append(f"(({na})/({nb}))")
            i = b[1]
        elif name == r"\sqrt":
            index = None
            if i < len(s) and s[i] == "[":
                close = s.find("]", i)
                if close < 0:
                    return None
                index, i = s[i + 1 : close], close + 1
            a = _group(s, i)
            if not a:
                return None
            na = _commands(a[0])
            if na is None:
                return None
            out.append(f"sqrt({na})" if index is None else f"(({na})**(1/({index})))")
            i = a[1]
        else:
            a = _group(s, i)
            if not a:
                return None
            na = _commands(a[0])
            if na is None:
                return None
            out.append(f" {na} " if name != r"\boxed" else na)
            i = a[1]
    return "".join(out)


_MIXED = re.compile(r"(?<![\w.}\)^_])(\d+)\s*\\frac\s*(?:\{\s*(\d+)\s*\}|(\d))\s*(?:\{\s*(\d+)\s*\}|(\d))")
_REPEATING = re.compile(r"(?<![\w.])(\d*)\.(\d*)\s*\\(?:overline|dot)\s*(?:\{\s*(\d+)\s*\}|(\d))")


def _mixed(m: re.Match) -> str:
    """``1\\frac12`` -> ``(1+1/2)``: a whole number followed by a proper fraction (else left as a product)."""
    whole, num, den = m.group(1), m.group(2) or m.group(3), m.group(4) or m.group(5)
    if not 0 < int(num) < int(den):
        return m.group(0)
    return f"({whole}+{num}/{den})"


def _repeating(m: re.Match) -> str:
    """``0.1\\overline{6}`` -> ``(1/6)``: whole part, non-repeating digits N, repeating digits R."""
    whole, fixed, rep = m.group(1) or "0", m.group(2), m.group(3) or m.group(4)
    k, r = len(fixed), len(rep)
    if k + r > MAX_CHARS:
        return m.group(0)
    frac = Fraction(int(fixed + rep) - int(fixed or "0"), 10**k * (10**r - 1))
    q = int(whole) + frac
    return f"({q.numerator}/{q.denominator})"


def _braces_are_a_set(s: str) -> bool:
    """Whether plain ``{...}`` wraps the whole answer and holds a top-level comma (a set, not a group)."""
    if not (s.startswith("{") and s.endswith("}")):
        return False
    g = _group(s, 0)
    return (
        g is not None
        and g[1] == len(s)
        and len(_split_top(g[0].replace("{", "(").replace("}", ")"), [","])) > 1
    )


def normalise_latex(text: str) -> str | None:
    """LaTeX (or plain) answer text to the plain syntax :func:`parse_answer` reads; None when malformed."""
    s = text.strip()
    for d in _DROP:
        s = s.replace(d, "")
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = _MIXED.sub(_mixed, s)
    s = _REPEATING.sub(_repeating, s)
    s = s.replace(r"\{", "⟨").replace(r"\}", "⟩").replace(r"\%", "%").replace(r"\pm", "±")
    s = s.replace(r"\emptyset", "∅").replace(r"\varnothing", "∅")
    s = _commands(s)
    if s is None:
        return None
    s = s.strip()
    if _braces_are_a_set(s):  # plain braces around a list are set braces
        s = "⟨" + s[1:-1] + "⟩"
    for k in sorted(_LATEX_WORDS, key=len, reverse=True):
        s = re.sub(re.escape(k) + r"(?![a-zA-Z])", lambda _m, v=_LATEX_WORDS[k]: v, s)
    if "\\" in s:  # an unknown command
        return None
    s = s.replace("{", "(").replace("}", ")")
    return re.sub(r"\s+", " ", s).strip()


# --- the evaluation bound -------------------------------------------------------------------------------------
class _OverBound(Exception):
    """An answer whose exact evaluation could exceed the size bound (the comparison is undecided)."""


def _operand(s: str, i: int) -> tuple[str, int]:
    """The exponent operand starting at ``s[i]`` (a bracket group, a command with its groups, or a token)."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i < len(s) and s[i] in "+-":
        i += 1
    if i >= len(s):
        return "", i
    if s[i] in "{(":
        depth = 0
        for j in range(i, len(s)):
            depth += s[j] in "{(["
            depth -= s[j] in "})]"
            if depth == 0:
                return s[i + 1 : j], j + 1
        return s[i + 1 :], len(s)
    if s[i] == "\\":
        m = re.match(r"\\[a-zA-Z]+", s[i:])
        j = i + (len(m.group(0)) if m else 1)
        while j < len(s) and s[j] == "{":
            g = _group(s, j)
            if g is None:
                return s[i:], len(s)
            j = g[1]
        return s[i:j], j
    m = re.match(r"[\w.]+", s[i:])
    return (m.group(0), i + len(m.group(0))) if m else (s[i], i + 1)


def _text_over_bound(text: str) -> str | None:
    """Why ``text`` could not be evaluated within the bound (checked before any parser sees it), or None."""
    depth = top = 0
    for c in text:
        depth += c in "([{"
        depth -= c in ")]}"
        top = max(top, depth)
    if top > MAX_DEPTH:
        return f"more than {MAX_DEPTH} nested brackets"
    for m in re.finditer(r"\^|\*\*", text):
        op, end = _operand(text, m.end())
        if re.search(r"\^|\*\*|exp", op):
            return "an exponent tower"
        if re.match(r"\s*(\^|\*\*)", text[end:]):
            return "an exponent tower"
        before = text[: m.start()].rstrip()
        if before.endswith((")", "}")):  # a power of a bracketed power, e.g. (2^9)^9
            k, depth = len(before) - 1, 0
            while k >= 0:
                depth += before[k] in ")}"
                depth -= before[k] in "({"
                if depth == 0:
                    break
                k -= 1
            inner = before[k:]
            if re.search(r"\^|\*\*", inner) and not re.search(r"[a-zA-Z]", inner.replace("frac", "")):
                return "an exponent tower"
        product = 1
        for lit in re.findall(r"\d+", op):
            product *= max(1, int(lit)) if len(lit) < 6 else MAX_EXPONENT + 1
        if product > MAX_EXPONENT:
            return f"an exponent above {MAX_EXPONENT}"
    if re.search(r"(\d{4,}|[)}\]])\s*!", text):
        return "a factorial of a large or compound number"
    return None


def _digit_bound(e: sympy.Basic, budget: list[int]) -> float:
    """Upper bound on the decimal digits of the exact value sympy computes for the unevaluated tree ``e``."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _OverBound(f"more than {MAX_NODES} expression nodes")
    if isinstance(e, sympy.Integer):
        return max(1, len(str(abs(int(e)))))
    if isinstance(e, sympy.Rational):
        return len(str(abs(e.p))) + len(str(e.q))
    if isinstance(e, (sympy.Float, sympy.Symbol, sympy.NumberSymbol)) or not e.args:
        return 3
    if isinstance(e, sympy.Pow):
        base, ex = e.args
        db = _digit_bound(base, budget)
        if isinstance(ex, sympy.Rational):
            out = db * max(1, abs(int(ex.p)))
        else:
            dx = _digit_bound(ex, budget)
            if ex.free_symbols or ex.has(sympy.pi, sympy.E, sympy.I):
                out = db + dx  # a symbolic or irrational exponent: sympy keeps the power unevaluated
            elif dx > 4:
                raise _OverBound("an exponent that may exceed the bound")
            else:
                out = db * 10**dx
    elif isinstance(e, sympy.exp):
        dx = _digit_bound(e.args[0], budget)
        if dx > 4 and not e.args[0].free_symbols:
            raise _OverBound("an exponential that may exceed the bound")
        out = dx + 1
    else:
        out = sum(_digit_bound(a, budget) for a in e.args) + 1
    if out > MAX_DIGITS:
        raise _OverBound(f"a value of more than {MAX_DIGITS} digits")
    return out


def extract_answer(text: str, tags: tuple[str, str] = ("<ans>", "</ans>")) -> str | None:
    """The final answer in a model output: the last ``\\boxed{...}``, else the last ``tags`` span; else None."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    start = text.rfind(r"\boxed")
    if start >= 0:
        g = _group(text, start + len(r"\boxed"))
        if g is not None:
            return g[0].strip()
    open_tag, close_tag = tags
    end = text.rfind(close_tag)
    if end < 0:
        return None
    begin = text.rfind(open_tag, 0, end)
    if begin < 0:
        return None
    return text[begin + len(open_tag) : end].strip()


# --- plain text to sympy --------------------------------------------------------------------------------------
def _split_top(s: str, seps: Sequence[str]) -> list[str]:
    """Split on separators outside brackets (``(``, ``[``, ``⟨``)."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(s):
        c = s[i]
        if c in "([⟨":
            depth += 1
        elif c in ")]⟩":
            depth -= 1
        if depth == 0:
            hit = next((sep for sep in seps if s.startswith(sep, i)), None)
            if hit is not None:
                parts.append("".join(cur))
                cur = []
                i += len(hit)
                continue
        cur.append(c)
        i += 1
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _expr(s: str) -> sympy.Expr | None:
    s = s.strip()
    if not s or len(s) > MAX_CHARS or not _ALLOWED.match(s):
        return None
    why = _text_over_bound(s)
    if why is not None:
        raise _OverBound(why)
    if re.search(r"[a-zA-Z]{2,}", s.replace("sqrt", "").replace("pi", "").replace("oo", "")) and not all(
        w in _FUNCS for w in re.findall(r"[a-zA-Z]{2,}", s)
    ):
        return None  # a word is prose, not a product of one-letter symbols
    try:  # read unevaluated first: the digit bound decides whether evaluating it is affordable
        raw = parse_expr(
            s, local_dict={}, global_dict=dict(_RAW_GLOBALS), transformations=_TRANSFORMS, evaluate=False
        )
    except Exception:  # sympy raises many types on bad input; unparsable is the answer
        return None
    if not isinstance(raw, sympy.Basic):
        return None
    _digit_bound(raw, [MAX_NODES])
    try:
        e = parse_expr(s, local_dict={}, global_dict=dict(_GLOBALS), transformations=_TRANSFORMS)
    except Exception:
        return None
    if not isinstance(e, sympy.Expr) or e.has(sympy.zoo, sympy.nan):
        return None
    return e


def _strip_lhs(s: str) -> str:
    """``x = 3`` -> ``3``; ``answer: 3`` -> ``3`` (a single-symbol left side only)."""
    s = re.sub(r"^(the\s+)?(final\s+)?answer\s*(is|:)\s*", "", s, flags=re.I)
    m = re.match(r"^\s*[a-zA-Z]\s*=(?!=)\s*(.*)$", s)
    return m.group(1) if m else s


def _interval(s: str) -> sympy.Set | None:
    s = s.strip()
    if len(s) < 5 or s[0] not in "([" or s[-1] not in ")]":
        return None
    parts = _split_top(s[1:-1], [","])
    if len(parts) != 2:
        return None
    lo, hi = _expr(parts[0]), _expr(parts[1])
    if lo is None or hi is None or not (lo.is_extended_real and hi.is_extended_real):
        return None
    try:
        iv = sympy.Interval(lo, hi, left_open=s[0] == "(", right_open=s[-1] == ")")
    except Exception:
        return None
    return iv if isinstance(iv, sympy.Interval) else None


def _values(piece: str) -> list[list[sympy.Expr]] | None:
    """Readings of one list item as lists of values (``a ± b`` gives two values)."""
    piece = _strip_lhs(piece)
    if "±" in piece:
        a, _, b = piece.partition("±")
        ea, eb = _expr(a) if a.strip() else sympy.Integer(0), _expr(b)
        return None if ea is None or eb is None else [[ea + eb, ea - eb]]
    readings = []
    if piece.endswith("%"):
        e = _expr(piece[:-1])
        if e is None:
            return None
        return [[e / 100], [e]]
    if _THOUSANDS.fullmatch(piece):
        return [[_expr(piece.replace(",", ""))]]
    e = _expr(piece)
    if e is not None:
        readings.append([e])
    return readings or None


_RATIONAL_LITERAL = re.compile(r"^\s*(-?\d{1,40}(?:\.\d{1,40})?)\s*(?:/\s*(\d{1,40}))?\s*$")


_INEQ = re.compile(r"(<=|>=|<|>)")
_THOUSANDS = re.compile(r"-?\d{1,3}(,\d{3})+(\.\d+)?")


def _inequality(piece: str) -> sympy.Set | None:
    """``a < x <= b``, ``x > a``, ``a >= x`` as an interval of the one variable (None when not that form)."""
    parts = [p.strip() for p in _INEQ.split(piece)]
    if len(parts) not in (3, 5):
        return None
    terms, ops = parts[0::2], parts[1::2]
    var = [k for k, t in enumerate(terms) if re.fullmatch(r"[a-zA-Z]", t)]
    if len(var) != 1 or (len(terms) == 3 and var[0] != 1):
        return None
    if len(terms) == 3 and len({o[0] for o in ops}) != 1:  # a < x > b is not an interval
        return None
    lo, hi, lo_open, hi_open = sympy.S.NegativeInfinity, sympy.S.Infinity, True, True
    for k, op in enumerate(ops):  # relation between terms[k] and terms[k + 1]
        left, right = terms[k], terms[k + 1]
        if k + 1 == var[0]:  # bound  op  x
            bound, x_is_greater = _expr(left), op[0] == "<"
        elif k == var[0]:  # x  op  bound
            bound, x_is_greater = _expr(right), op[0] == ">"
        else:
            return None
        if bound is None or not bound.is_extended_real:
            return None
        if x_is_greater:
            lo, lo_open = bound, "=" not in op
        else:
            hi, hi_open = bound, "=" not in op
    try:
        iv = sympy.Interval(lo, hi, left_open=lo_open or lo.is_infinite, right_open=hi_open or hi.is_infinite)
    except Exception:
        return None
    return iv if isinstance(iv, sympy.Interval) else None


_EULER = {sympy.Symbol("e"): sympy.E, sympy.Symbol("i"): sympy.I}


def _readings(text: str) -> tuple[sympy.Basic, ...]:
    m = _RATIONAL_LITERAL.match(text)
    if m:  # fast path for plain rationals (the same reading the parser gives, without sympy's parser)
        num = sympy.Rational(m.group(1))
        if m.group(2) is None:
            return (num,)
        den = sympy.Integer(m.group(2))
        return () if den == 0 else (num / den,)
    why = _text_over_bound(text)
    if why is not None:
        raise _OverBound(why)
    plain = normalise_latex(text)
    if plain is None or not plain or len(plain) > MAX_CHARS:
        return ()
    plain = re.sub(r"^[a-zA-Z]\s*∈\s*", "", plain.rstrip(". "))
    if plain == "∅" or plain == "⟨⟩":
        return (sympy.EmptySet,)
    readings: list[sympy.Basic] = []
    # set braces
    if plain.startswith("⟨") and plain.endswith("⟩"):
        items = _split_top(plain[1:-1], [","])
        vals = [_values(p) for p in items]
        if all(v is not None for v in vals):
            readings.append(sympy.FiniteSet(*[x for v in vals for x in v[0]]))  # type: ignore[index]
        return tuple(readings)
    # inequality forms of intervals, joined by "or"
    if "<" in plain or ">" in plain:
        ivs = [_inequality(p) for p in _split_top(plain, [" or ", " U "])]
        return (sympy.Union(*ivs),) if all(iv is not None for iv in ivs) else ()
    # unions of intervals
    if " U " in plain:
        ivs = [_interval(p) for p in plain.split(" U ")]
        return (sympy.Union(*ivs),) if all(iv is not None for iv in ivs) else ()
    # pair-or-interval, closed or half-open interval
    iv = _interval(plain)
    if iv is not None:
        readings.append(iv)
        if plain[0] == "(" and plain[-1] == ")":
            parts = _split_top(plain[1:-1], [","])
            readings.append(sympy.Tuple(*[_expr(p) for p in parts]))
        return tuple(readings)
    if plain[0] == "(" and plain[-1] == ")" and len(_split_top(plain[1:-1], [","])) > 1:
        parts = [_expr(p) for p in _split_top(plain[1:-1], [","])]
        return (sympy.Tuple(*parts),) if all(p is not None for p in parts) else ()
    # a list of answers (a set), or one answer
    items = [p for p in _split_top(plain, [",", ";", " or ", " and "]) if p]
    if len(items) > 1 and not _THOUSANDS.fullmatch(plain):
        vals = [_values(p) for p in items]
        if all(v is not None for v in vals):
            readings.append(sympy.FiniteSet(*[x for v in vals for x in v[0]]))  # type: ignore[index]
        return tuple(readings)
    vals = _values(plain)
    if vals is None:
        return ()
    for v in vals:
        readings.append(v[0] if len(v) == 1 else sympy.FiniteSet(*v))
    return tuple(readings)


def _with_constants(readings: tuple[sympy.Basic, ...]) -> tuple[sympy.Basic, ...]:
    """Add the reading with ``e`` as Euler's number and ``i`` as the imaginary unit where those letters occur."""
    out = list(readings)
    for r in readings:
        if r.free_symbols & set(_EULER):
            alt = r.subs(_EULER)
            if isinstance(alt, sympy.Basic) and not alt.has(sympy.zoo, sympy.nan) and alt not in out:
                out.append(alt)
    return tuple(out)


@lru_cache(maxsize=65536)
def _parse_cached(text: str) -> tuple[bool, tuple[sympy.Basic, ...]]:
    """``(over_bound, readings)``: over the evaluation bound (no readings), or the readings (maybe none)."""
    try:
        return False, _with_constants(_readings(text))
    except _OverBound:
        return True, ()
    except Exception:  # defensive: a reading that sympy cannot build is simply absent
        return False, ()


def over_bound(text: str) -> bool:
    """Whether evaluating ``text`` could exceed the size bound (an exponent tower, a huge power, a deep nest).

    Such an answer gets no reading: comparing it is *undecided*, never attempted.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return len(text) > 4 * MAX_CHARS or _parse_cached(text)[0]


def parse_answer(text: str) -> list[sympy.Basic]:
    """Candidate readings of an answer (plain or LaTeX) as sympy objects; ``[]`` when unparsable or over the
    evaluation bound (never raises, never hangs).

    >>> parse_answer(r"\\frac{1}{2}")
    [1/2]
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if len(text) > 4 * MAX_CHARS:
        return []
    return list(_parse_cached(text)[1])


# --- comparison ----------------------------------------------------------------------------------------------
def _num(e: sympy.Expr, subs: dict | None = None) -> complex | None:
    try:
        v = complex(e.evalf(30, subs=subs) if subs else e.evalf(30))
    except Exception:
        return None
    return v if math.isfinite(v.real) and math.isfinite(v.imag) else None


def _expr_equal(a: sympy.Expr, b: sympy.Expr, tol: float) -> bool:
    if a == b:
        return True
    if a.is_infinite or b.is_infinite:
        return bool(a == b)
    syms = sorted(a.free_symbols | b.free_symbols, key=str)
    if not syms:
        if a.is_Rational and b.is_Rational:
            return False  # exact, and a != b
        if (a.is_Rational and b.is_rational is False) or (b.is_Rational and a.is_rational is False):
            return False  # a decimal is exact: 1.41421356237 is not sqrt(2)
        va, vb = _num(a), _num(b)
        return va is not None and vb is not None and abs(va - vb) <= tol * max(1.0, abs(va), abs(vb))
    rnd = random.Random(12345)  # fixed points: the comparison is deterministic
    agree = 0
    for _ in range(12):
        point = {s: sympy.Rational(rnd.randint(-97, 97), rnd.randint(7, 31)) for s in syms}
        va, vb = _num(a, point), _num(b, point)
        if va is None or vb is None:
            continue  # a pole: try another point
        if abs(va - vb) > tol * max(1.0, abs(va), abs(vb)):
            return False
        agree += 1
        if agree >= 6:
            return True
    return False


def _intervals(s: sympy.Set) -> list[sympy.Interval] | None:
    if isinstance(s, sympy.Interval):
        return [s]
    if isinstance(s, sympy.Union) and all(isinstance(a, sympy.Interval) for a in s.args):
        return sorted(s.args, key=lambda iv: float(iv.start))
    return None


def _same(a: sympy.Basic, b: sympy.Basic, tol: float) -> bool:
    if isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr):
        return _expr_equal(a, b, tol)
    if isinstance(a, sympy.Expr) and isinstance(b, sympy.FiniteSet):
        return len(b) == 1 and _same(a, next(iter(b)), tol)
    if isinstance(b, sympy.Expr) and isinstance(a, sympy.FiniteSet):
        return _same(b, a, tol)
    if isinstance(a, sympy.FiniteSet) and isinstance(b, sympy.FiniteSet):
        xs, ys = list(a), list(b)
        if len(xs) != len(ys):
            return False
        unused = list(range(len(ys)))
        for x in xs:  # equality of values is an equivalence relation, so greedy matching suffices
            j = next((j for j in unused if _same(x, ys[j], tol)), None)
            if j is None:
                return False
            unused.remove(j)
        return True
    if isinstance(a, sympy.Tuple) and isinstance(b, sympy.Tuple):
        return len(a) == len(b) and all(_same(x, y, tol) for x, y in zip(a, b))
    if a is sympy.EmptySet or b is sympy.EmptySet:
        return a is b
    ia, ib = (
        (_intervals(a), _intervals(b))
        if isinstance(a, sympy.Set) and isinstance(b, sympy.Set)
        else (None, None)
    )
    if ia is not None and ib is not None:
        return len(ia) == len(ib) and all(
            x.left_open == y.left_open
            and x.right_open == y.right_open
            and _expr_equal(x.start, y.start, tol)
            and _expr_equal(x.end, y.end, tol)
            for x, y in zip(ia, ib)
        )
    return False


def equivalent(a: str, b: str, tol: float = 1e-9, time_budget: float = 2.0) -> bool | None:
    """Whether answers ``a`` and ``b`` are mathematically the same (see the module docstring for semantics).

    Returns None (*undecided*) when either is unparsable or over the evaluation bound (:func:`over_bound`), or
    when the comparison runs past ``time_budget`` seconds (checked between readings; each step is bounded by
    structure, so this is thread-safe and needs no signal). Never raises on bad text.
    """
    if not isinstance(a, str) or not isinstance(b, str):
        raise TypeError("a and b must be str")
    if not (isinstance(tol, (int, float)) and not isinstance(tol, bool) and 0 <= tol < 1):
        raise ValueError(f"tol must be a number in [0, 1), got {tol!r}")
    if not (isinstance(time_budget, (int, float)) and not isinstance(time_budget, bool) and time_budget > 0):
        raise ValueError(f"time_budget must be a positive number of seconds, got {time_budget!r}")
    deadline = time.monotonic() + time_budget
    ra, rb = parse_answer(a), parse_answer(b)
    if not ra or not rb:
        return None
    for x in ra:
        for y in rb:
            if time.monotonic() > deadline:
                return None
            try:
                if _same(x, y, tol):
                    return True
            except Exception:  # a comparison sympy cannot decide counts as "not shown equal"
                continue
    return False
