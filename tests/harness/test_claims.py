"""Claims declarations: parsing, validation, outcomes on one value and on a seed interval, verdicts."""

import math
import textwrap
import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neurips26 import papers
from neurips26.harness.claims import (
    ClaimsError,
    fill_reason,
    load_claims,
    parse_claims,
    placeholders,
    verdict_from,
)


def _decl(**check):
    base = {"id": "c", "measures": "m", "kind": "claim", "op": ">=", "threshold": 1.0, "expect": "pass"}
    base.update(check)
    return {"checks": [{k: v for k, v in base.items() if v is not None}]}


def test_a_declaration_parses_with_defaults():
    claims = parse_claims(_decl(), source="x")
    (c,) = claims.checks
    assert c.modes == ("quick", "full") and dict(c.expect) == {"quick": "pass", "full": "pass"}
    assert claims.expected_verdict("quick") == "reproduced"
    per_mode = parse_claims(
        _decl(
            expect={"quick": "fail", "full": "pass"}, reason="r", explained_by=["m"], modes=["quick", "full"]
        )
    )
    assert per_mode.expected_verdict("quick") == "not-reproduced"
    assert per_mode.expected_verdict("full") == "reproduced"
    assert parse_claims(_decl(op="in", threshold=[0.6, 1.4])).checks[0].threshold == (0.6, 1.4)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"id": "Bad Id"}, "lower_snake_case"),
        ({"kind": "maybe"}, "kind"),
        ({"op": "=>"}, "op"),
        ({"op": "in", "threshold": 1.0}, r"\[lo, hi\]"),
        ({"op": "in", "threshold": [2, 1]}, "lo <= hi"),
        ({"threshold": "ten"}, "threshold"),
        ({"measures": " "}, "measures"),
        ({"expect": "maybe"}, "expected outcome"),
        ({"expect": {"quick": "pass"}}, "exactly the check's modes"),
        ({"modes": ["slow"]}, "modes"),
        ({"expect": "fail", "explained_by": ["x"]}, "reason"),
        ({"expect": "fail", "reason": "bad bandwidth"}, "explained_by|name the recorded"),
        ({"expect": "fail", "reason": "ARI was 0.52", "explained_by": ["x"]}, "literally"),
        ({"expect": "fail", "reason": "it lost 15%", "explained_by": ["x"]}, "literally"),
        ({"kind": "sanity", "expect": "fail", "reason": "r", "explained_by": ["x"]}, "by construction"),
        ({"bogus": 1}, "unknown keys"),
    ],
)
def test_malformed_declarations_are_rejected(change, message):
    with pytest.raises(ClaimsError, match=message):
        parse_claims(_decl(**change), source="claims.toml")


def test_declaration_level_errors(tmp_path):
    with pytest.raises(ClaimsError, match="at least one"):
        parse_claims({"checks": []})
    with pytest.raises(ClaimsError, match="unknown top-level"):
        parse_claims({**_decl(), "status": "reproduced"})
    with pytest.raises(ClaimsError, match="must be a claim"):
        parse_claims(_decl(kind="sanity"))
    twice = _decl()
    twice["checks"].append(dict(twice["checks"][0]))
    with pytest.raises(ClaimsError, match="twice"):
        parse_claims(twice)
    bad = tmp_path / "claims.toml"
    bad.write_text("[[checks]\nid = ")
    with pytest.raises(ClaimsError, match="not valid TOML"):
        load_claims(bad)


def test_placeholders_may_cite_numbers_and_are_filled():
    claims = parse_claims(
        _decl(expect="fail", reason="kernel {ari_full:.2f} vs linear {ari_lin}", explained_by=["ari_full"])
    )
    reason = claims.checks[0].reason
    assert placeholders(reason) == ["ari_full", "ari_lin"]
    assert fill_reason(reason, {"ari_full": 0.7412, "ari_lin": 0.75}) == "kernel 0.74 vs linear 0.75"
    assert "not recorded" in fill_reason(reason, {"ari_full": 0.7})


def test_outcomes_on_values_and_intervals():
    c = parse_claims(_decl(op=">=", threshold=1.0)).checks[0]
    assert c.outcome([1.0]) == "pass" and c.outcome([0.99]) == "fail"
    assert c.outcome([1.2, 1.5, 1.1]) == "pass"
    assert c.outcome([0.2, 0.5, 0.9]) == "fail"
    assert c.outcome([0.9, 1.1, 1.3]) == "inconclusive"
    assert c.outcome([math.inf]) == "pass"  # a diverged value is a measurement
    # nothing measured is no evidence either way, alone or beside values that pass or fail
    assert c.outcome([math.nan]) == c.outcome([1.5, math.nan]) == c.outcome([0.5, math.nan]) == "inconclusive"
    eq = parse_claims(_decl(op="==", threshold=0.0)).checks[0]
    assert eq.outcome([math.inf]) == "fail"
    rng = parse_claims(_decl(op="in", threshold=[0.6, 1.4])).checks[0]
    assert rng.outcome([0.6, 1.4]) == "pass" and rng.outcome([0.5, 1.0]) == "inconclusive"


@given(st.lists(st.floats(-10, 10), min_size=1, max_size=8), st.floats(-10, 10))
def test_interval_outcome_agrees_with_its_extremes(values, threshold):
    c = parse_claims(_decl(op=">=", threshold=threshold)).checks[0]
    outcome = c.outcome(values)
    if min(values) >= threshold:
        assert outcome == "pass"
    elif max(values) < threshold:
        assert outcome == "fail"
    else:
        assert outcome == "inconclusive"


def test_verdicts_come_from_claim_outcomes():
    assert verdict_from(["pass", "pass"]) == "reproduced"
    assert verdict_from(["pass", "fail"]) == "partial"
    assert verdict_from(["pass", "inconclusive"]) == "partial"
    assert verdict_from(["fail", "fail"]) == "not-reproduced"
    assert verdict_from(["fail", "inconclusive"]) == "not-reproduced"
    assert verdict_from(["inconclusive"]) == "inconclusive"
    with pytest.raises(ClaimsError):
        verdict_from([])


def test_sanity_checks_do_not_decide_the_verdict():
    data = _decl()
    data["checks"].append(
        {"id": "s", "measures": "identity", "kind": "sanity", "op": "==", "threshold": 0.0, "expect": "pass"}
    )
    data["checks"][0].update(expect="fail", reason="r", explained_by=["x"])
    assert parse_claims(data).expected_verdict("quick") == "not-reproduced"


def test_every_declaration_in_the_tree_parses():
    found = [p for p in papers.PAPERS if p.claims_path.exists()]
    for p in found:
        claims = load_claims(p.claims_path)
        assert claims.expected_verdict("quick") or claims.expected_verdict("full"), p.slug
        raw = tomllib.loads(p.claims_path.read_text())
        assert "status" not in raw, p.slug
    selftest = papers._ROOT / "harness" / "selftest" / "claims.toml"
    assert load_claims(selftest).checks


def test_example_in_the_docstring_parses():
    from neurips26.harness import claims as module

    doc = module.__doc__
    start = doc.index('    quick = "')
    block = textwrap.dedent(doc[start : doc.index("A reason is a template")]).replace("...", "x")
    data = tomllib.loads(block)
    data["checks"][0]["reason"] = "x {ari_linear:.2f} x"
    parse_claims(data)
