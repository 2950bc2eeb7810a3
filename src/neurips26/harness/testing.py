"""Test helpers: run a paper's quick experiment and assert the verdict it declared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import papers
from .run import VERDICTS
from .runner import run_experiment


def assert_quick_verdict(slug: str, out_dir: str | Path, seed: int = 0) -> dict[str, Any]:
    """Run ``slug`` in quick mode and assert that it ran and that its verdict is the one it declared.

    The declared verdict is ``reproduced`` unless the experiment called ``run.expect(...)`` with a
    written reason. Also asserts the registry does not call the paper planned/implemented while an
    experiment exists. Returns the result dict for further assertions.
    """
    result = run_experiment(slug, mode="quick", seed=seed, out_dir=out_dir)
    assert result["status"] == "ok", f"{slug} experiment crashed:\n{result.get('error')}"
    failed = [c for c in result["checks"] if not c["passed"]]
    lines = "\n".join(f"  {c['name']}: measured {c['measured']} {c['op']} {c['threshold']}" for c in failed)
    assert result["verdict"] == result["expected_verdict"], (
        f"{slug}: verdict {result['verdict']!r}, declared {result['expected_verdict']!r}; failed checks:\n{lines}"
    )
    assert papers.get(slug).status in VERDICTS, (
        f"{slug} has an experiment but the registry says {papers.get(slug).status!r}"
    )
    return result
