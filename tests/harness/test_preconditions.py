"""Preconditions: a claim is decided only when what it rests on holds (a trained model, a live codebook, ...)."""

import json

import pytest

from neurips26 import papers
from neurips26.harness import Run, run_experiment
from neurips26.harness.claims import ClaimsError, parse_claims
from neurips26.harness.records import write_json_atomic
from neurips26.harness.report import build_markdown
from neurips26.harness.run import describe

SMALL_SAMPLE = "neurips26.harness.selftest.experiment:run_small_sample"
SELFTEST = "neurips26.harness.selftest.experiment:run"


def _check(cid, kind="claim", **extra):
    return {"id": cid, "measures": "m", "kind": kind, "op": ">=", "threshold": 0.5, "expect": "pass", **extra}


def _claims(precondition_expect="pass", claim_expect="pass", **extra):
    claim = _check("gain", expect=claim_expect)
    return parse_claims(
        {
            "checks": [
                _check("trained", "precondition", gates=["gain"], expect=precondition_expect, **extra),
                claim,
                _check("other"),
            ]
        }
    )


@pytest.mark.parametrize(
    ("checks", "message"),
    [
        ([_check("p", "precondition"), _check("c")], "must name the claim checks it gates"),
        ([_check("p", "precondition", gates=["nope"]), _check("c")], "not a declared claim check"),
        ([_check("p", "precondition", gates="c"), _check("c")], "gates must be a list"),
        (
            [_check("p", "precondition", gates=["s"]), _check("s", "sanity"), _check("c")],
            "not a declared claim check",
        ),
        ([_check("c", gates=["d"]), _check("d")], "only a precondition gates"),
        (
            [_check("p", "precondition", gates=["c"], modes=["quick"], expect="pass"), _check("c")],
            r"not declared in \['full'\]",
        ),
        (
            [
                _check(
                    "p",
                    "precondition",
                    gates=["c"],
                    expect={"quick": "fail", "full": "pass"},
                    reason="r",
                    explained_by=["p"],
                ),
                _check("c"),
            ],
            "can only be expected inconclusive there, not pass",
        ),
        ([_check("c", confirmed_on=[3, -1])], "confirmed_on"),
        ([_check("c", confirmed_on=[True])], "confirmed_on"),
        ([_check("c", expect="inconclusive")], "needs a reason"),
        (
            [_check("p", "precondition", gates=["c"], expect="fail", explained_by=["p"]), _check("c")],
            "reason",
        ),
    ],
)
def test_malformed_preconditions_are_rejected(checks, message):
    with pytest.raises(ClaimsError, match=message):
        parse_claims({"checks": checks}, source="x")


def test_a_precondition_expected_unmet_explains_its_gated_claims():
    claims = _claims(
        precondition_expect={"quick": "fail", "full": "pass"},
        claim_expect={"quick": "inconclusive", "full": "pass"},
        reason="quick training is too short: {trained}",
        explained_by=["trained"],
    )
    # the gated claim needs no reason of its own: the precondition's is shown for it
    assert claims.expected_verdict("quick") == "partial"  # gain inconclusive, other pass
    assert "precondition trained unmet: quick training is too short" in claims.note("quick")
    assert claims.gated_by("gain", "quick")[0].id == "trained"
    assert claims.gated_by("other", "quick") == []


def test_confirmed_on_is_parsed():
    claims = parse_claims({"checks": [_check("c", confirmed_on=[3, 4, 5])]})
    assert claims.checks[0].confirmed_on == (3, 4, 5)


@pytest.mark.parametrize("precondition_first", [True, False])
def test_an_unmet_precondition_makes_its_claims_inconclusive_in_either_order(tmp_path, precondition_first):
    run = Run(slug="x", claims=_claims(), out_dir=tmp_path)
    steps = [lambda: run.check("trained", 0.1), lambda: run.check("gain", 0.9)]
    for step in steps if precondition_first else steps[::-1]:
        step()
    run.check("other", 0.9)
    by_id = {c["id"]: c for c in run.to_dict()["checks"]}
    gain = by_id["gain"]
    assert gain["outcome"] == "inconclusive" and gain["measured_outcome"] == "pass"
    assert gain["gated_by"] == [
        {"id": "trained", "measured": 0.1, "condition": "0.1 >= 0.5", "outcome": "fail"}
    ]
    assert by_id["other"]["outcome"] == "pass" and by_id["other"]["gated_by"] is None
    assert by_id["trained"]["outcome"] == "fail"
    # the precondition decides nothing itself, and failing it is a finding, not a bug
    assert run.verdict == "partial" and run.problems() == []
    text = describe(gain)
    assert text.startswith("INCONCLUSIVE") and "precondition unmet: trained 0.1 >= 0.5 (fail)" in text
    assert "measured alone: pass" in text


def test_a_met_precondition_changes_nothing(tmp_path):
    run = Run(slug="x", claims=_claims(), out_dir=tmp_path)
    assert run.check("gain", 0.1) == "fail"
    run.check("trained", 0.9)
    run.check("other", 0.9)
    assert [c.outcome for c in run.checks] == ["fail", "pass", "pass"] and run.verdict == "partial"
    assert all(c.gated_by is None for c in run.checks)


def test_an_inconclusive_precondition_is_unmet(tmp_path):
    run = Run(slug="x", claims=_claims(), out_dir=tmp_path)
    run.check("trained", [0.4, 0.6])  # straddles the bar
    assert run.check("gain", 0.9) == "inconclusive"


def test_a_precondition_that_is_never_recorded_makes_the_run_an_error(tmp_path):
    run = Run(slug="x", claims=_claims(), out_dir=tmp_path)
    run.check("gain", 0.9)
    run.check("other", 0.9)
    assert any("trained" in p for p in run.problems())


def test_selftest_run_meets_its_precondition(tmp_path):
    result = run_experiment("selftest", out_dir=tmp_path, experiment=SELFTEST)
    by_id = {c["id"]: c for c in result["checks"]}
    assert by_id["sample_large_enough"]["outcome"] == "pass"
    assert by_id["mean_within_5_se"]["gated_by"] is None and result["verdict"] == "reproduced"


def test_selftest_small_sample_record_states_the_unmet_precondition(tmp_path):
    result = run_experiment("selftest", out_dir=tmp_path, experiment=SMALL_SAMPLE)
    assert result["status"] == "ok"  # an unmet precondition is a finding, not an error
    stored = json.loads((tmp_path / "selftest" / "quick").glob("*/result.json").__next__().read_text())
    claim = {c["id"]: c for c in stored["checks"]}["mean_within_5_se"]
    assert claim["outcome"] == "inconclusive" and claim["measured_outcome"] in ("pass", "fail")
    assert claim["gated_by"][0]["id"] == "sample_large_enough" and claim["gated_by"][0]["measured"] == 10
    assert stored["verdict"] == "inconclusive"


def test_report_and_show_name_the_unmet_precondition(tmp_path):
    """A stored record of a registered paper whose first claim is gated: the report says why it is inconclusive."""
    slug = "minibatch-kernel-kmeans"
    claims = papers.get(slug).claims
    result = run_experiment("selftest", out_dir=tmp_path / "scratch", experiment=SELFTEST)
    first = next(c for c in claims.for_mode("quick") if c.kind == "claim")
    result.update(slug=slug, claims={"source": claims.source, "digest": claims.digest})
    result["checks"] = [
        {
            "id": c.id,
            "kind": c.kind,
            "op": c.op,
            "threshold": c.threshold,
            "measured": 1.0,
            "outcome": "inconclusive" if c is first else c.expect["quick"],
            "expected": c.expect["quick"],
            "values": None,
            "interval": None,
            "note": "",
            "measures": c.measures,
            "measured_outcome": c.expect["quick"],
            "gated_by": [{"id": "teacher", "measured": 0.18, "condition": "0.18 >= 0.3", "outcome": "fail"}]
            if c is first
            else None,
        }
        for c in claims.for_mode("quick")
    ]
    run_dir = tmp_path / slug / "quick" / "r1"
    write_json_atomic(run_dir / "result.json", result)
    (tmp_path / slug / "quick" / "latest").write_text("r1\n")
    text = build_markdown(tmp_path)
    assert "precondition unmet: teacher 0.18 >= 0.3 (fail)" in text
