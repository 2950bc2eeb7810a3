"""Test helpers: run a paper's quick experiment and assert every check's outcome against its declaration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import papers
from .claims import placeholders
from .run import describe
from .runner import run_experiment


def assert_quick_verdict(slug: str, out_dir: str | Path, seed: int = 0) -> dict[str, Any]:
    """Run ``slug`` in quick mode and assert that the run matches its claims declaration exactly.

    Every declared check must be recorded with its declared outcome (a passing check that starts failing, or a
    failing one that starts passing, fails the test with both values printed); no sanity check may fail; and
    the registry's derived status must equal the measured verdict. Returns the result for further assertions.
    """
    result = run_experiment(slug, mode="quick", seed=seed, out_dir=out_dir)
    assert result["status"] == "ok", f"{slug}: the quick run is an error:\n{result.get('error')}"
    surprises = [c for c in result["checks"] if c["outcome"] != c["expected"]]
    lines = "\n".join(f"  declared {c['expected']}, measured {describe(c)}" for c in surprises)
    assert not surprises, f"{slug} (seed {seed}): checks whose outcome differs from the declaration:\n{lines}"
    claims = papers.get(slug).claims
    recorded = {**result["params"], **result["metrics"], **{c["id"]: c["measured"] for c in result["checks"]}}
    # a check left inconclusive by an unmet precondition is explained by that precondition (whose own reason must
    # cite recorded values); its reason may describe what another mode measured
    gated = {c["id"] for c in result["checks"] if c.get("gated_by")}
    for spec in claims.for_mode("quick"):
        if spec.expect["quick"] == "pass" or spec.id in gated:
            continue
        cited = set(spec.explained_by) | set(placeholders(spec.reason))
        unrecorded = sorted(name for name in cited if recorded.get(name) is None)
        assert not unrecorded, (
            f"{slug}: the reason of {spec.id!r} cites values the run did not record: {unrecorded}"
        )
    status = papers.get(slug).status
    assert status == result["verdict"], (
        f"{slug}: the registry's derived status is {status!r}, the quick run measured {result['verdict']!r}"
    )
    return result
