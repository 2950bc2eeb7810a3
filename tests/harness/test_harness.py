"""The experiment protocol: checks, verdicts, result files, report."""

import json
import math

import pytest

from neurips26.harness import Run, run_experiment
from neurips26.harness import runner as runner_mod
from neurips26.harness.report import write_report


def test_check_operators_and_nan():
    run = Run("demo")
    assert run.check("ge", 2.0, ">=", 2.0)
    assert not run.check("lt", 2.0, "<", 2.0)
    assert run.check("in", 1.5, "in", (1.0, 2.0))
    assert not run.check("in-out", 2.5, "in", (1.0, 2.0))
    assert not run.check("nan never passes", math.nan, ">=", 0.0)
    assert not run.check("nan never passes <=", math.nan, "<=", 0.0)
    assert run.check("inf is comparable", math.inf, ">=", 10.0)
    assert run.verdict == "partial"
    with pytest.raises(ValueError, match="twice"):
        run.check("ge", 1.0, ">=", 0.0)
    with pytest.raises(ValueError, match="op"):
        run.check("bad", 1.0, "=>", 0.0)
    with pytest.raises(ValueError, match="threshold"):
        run.check("bad-in", 1.0, "in", 0.0)


def test_verdicts():
    run = Run("demo")
    with pytest.raises(RuntimeError, match="no checks"):
        _ = run.verdict
    run.check("a", 1, ">=", 0)
    assert run.verdict == "reproduced"
    run.check("b", 1, "<=", 0)
    assert run.verdict == "partial"
    none = Run("demo")
    none.check("a", 1, "<=", 0)
    assert none.verdict == "not-reproduced"


def test_run_validation_and_expect():
    with pytest.raises(ValueError, match="mode"):
        Run("demo", mode="medium")
    with pytest.raises(ValueError, match="seed"):
        Run("demo", seed=-1)
    run = Run("demo")
    with pytest.raises(ValueError, match="reason"):
        run.expect("partial", reason=" ")
    with pytest.raises(ValueError, match="verdict"):
        run.expect("maybe", reason="x")
    run.expect("partial", reason="the bound is loose at small n")
    assert run.expected_verdict == "partial"
    assert run.pick(quick=1, full=2) == 1
    assert Run("demo", mode="full").pick(quick=1, full=2) == 2
    assert run.seeds(3) == Run("demo").seeds(3) and len(set(run.seeds(3))) == 3
    with pytest.raises(ValueError, match="row"):
        run.table([])


def _fake_experiment(run: Run) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for _ in run.progress(range(3), "loop"):
        pass
    with run.timer("work"):
        value = float(run.rng.normal())
    run.table([{"method": "ours", "score": value}, {"method": "baseline", "score": 0.0, "extra": 1}])
    run.check("score finite", abs(value), "<", 100.0)
    run.metric("value", value)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, value])
    run.figure(fig, "line", caption="a line")
    run.note("a note")


def test_run_experiment_writes_documented_schema(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_mod, "load_experiment", lambda slug: _fake_experiment)
    result = run_experiment("maxsketch", mode="quick", seed=3, out_dir=tmp_path)
    stored = json.loads((tmp_path / "maxsketch" / "result.json").read_text())
    assert stored == json.loads(json.dumps(result))
    for key in (
        "schema_version",
        "slug",
        "title",
        "tier",
        "mode",
        "seed",
        "status",
        "verdict",
        "expected_verdict",
        "expected_reason",
        "checks",
        "tables",
        "figures",
        "timings",
        "total_seconds",
        "metrics",
        "notes",
        "environment",
        "started_at",
    ):
        assert key in stored, key
    assert stored["status"] == "ok" and stored["verdict"] == "reproduced" and stored["seed"] == 3
    assert set(stored["checks"][0]) == {"name", "measured", "op", "threshold", "passed", "note"}
    assert stored["tables"][0]["columns"] == ["method", "score", "extra"]
    assert (tmp_path / "maxsketch" / "line.png").stat().st_size > 0
    assert stored["environment"]["packages"]["numpy"]
    assert (tmp_path / "maxsketch" / "result-quick.json").exists()
    # the same seed gives the same numbers
    again = run_experiment("maxsketch", mode="quick", seed=3, out_dir=tmp_path / "again")
    assert again["metrics"] == result["metrics"]


def test_crashing_experiment_is_recorded_not_raised(tmp_path, monkeypatch):
    def boom(run):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(runner_mod, "load_experiment", lambda slug: boom)
    result = run_experiment("maxsketch", out_dir=tmp_path)
    assert result["status"] == "error" and "kaboom" in result["error"] and result["verdict"] is None


def test_unknown_slug_and_planned_paper(tmp_path):
    with pytest.raises(KeyError, match="unknown"):
        run_experiment("no-such-paper", out_dir=tmp_path)
    from neurips26 import papers

    planned = [p.slug for p in papers.PAPERS if p.status == "planned"]
    if planned:
        with pytest.raises(runner_mod.ExperimentNotAvailable):
            run_experiment(planned[0], out_dir=tmp_path)


def test_report_has_summary_and_sections(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_mod, "load_experiment", lambda slug: _fake_experiment)
    run_experiment("maxsketch", out_dir=tmp_path)
    md, html = write_report(tmp_path)
    text = md.read_text()
    assert text.count("\n| ") >= 38  # the summary table has a row per paper
    assert "## MaxSketch" in text and "score finite" in text and "maxsketch/line.png" in text
    assert "<img src='maxsketch/line.png'" in html.read_text()


def _thread_probe(run: Run) -> None:
    import torch
    from threadpoolctl import threadpool_info

    run.metric("torch threads", torch.get_num_threads())
    run.metric("blas threads", max([p["num_threads"] for p in threadpool_info()] or [1]))
    run.check("ran", 1.0, ">=", 1.0)


def test_experiments_run_with_capped_threads(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(runner_mod, "load_experiment", lambda slug: _thread_probe)
    before = torch.get_num_threads()
    result = run_experiment("maxsketch", out_dir=tmp_path)
    assert result["metrics"] == {"torch threads": 1, "blas threads": 1}
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads"):
        run_experiment("maxsketch", out_dir=tmp_path, threads=0)
