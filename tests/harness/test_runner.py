"""The runner and run records: one folder per run, atomic writes, tolerant readers, errors as results."""

import json
import sys

import pytest

from neurips26.harness import run_experiment
from neurips26.harness.deps import MissingDependency, hint
from neurips26.harness.records import KEEP_RUNS, SCHEMA_VERSION, load_result, write_text_atomic
from neurips26.harness.runner import ExperimentNotAvailable, resolve

GOOD = """
import matplotlib.pyplot as plt

def run(run):
    n = run.param("n", quick=5, full=50)
    for _ in run.progress(range(3), "loop"):
        pass
    with run.timer("work"):
        value = float(run.rng.normal())
    run.table([{"method": "ours", "score": value}, {"method": "baseline", "score": 0.0, "extra": 1}])
    run.metric("value", value)
    run.check("score", abs(value))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, value])
    run.figure(fig, "line", caption="a line")
    run.note("a note")
"""


def test_a_run_writes_its_own_folder_and_the_latest_pointer(tmp_path, make_experiment):
    exp = make_experiment(GOOD)
    result = run_experiment("demo", seed=3, out_dir=tmp_path, experiment=exp)
    base = tmp_path / "demo" / "quick"
    run_dir = base / result["run_id"]
    stored = json.loads((run_dir / "result.json").read_text())
    assert (base / "latest").read_text().strip() == result["run_id"]
    assert stored == json.loads(json.dumps(result))
    for key in (
        "schema_version",
        "run_id",
        "slug",
        "mode",
        "seed",
        "status",
        "verdict",
        "expected_verdict",
        "claims",
        "checks",
        "tables",
        "figures",
        "timings",
        "metrics",
        "params",
        "notes",
        "environment",
        "started_at",
        "finished_at",
        "total_seconds",
    ):
        assert key in stored, key
    assert stored["schema_version"] == SCHEMA_VERSION
    assert stored["status"] == "ok" and stored["verdict"] == "reproduced" and stored["params"] == {"n": 5}
    assert stored["checks"][0]["id"] == "score" and stored["checks"][0]["expected"] == "pass"
    assert (run_dir / "line.png").stat().st_size > 0
    env = stored["environment"]
    assert env["packages"]["numpy"] and "commit" in env["git"]
    assert len(stored["claims"]["digest"]) == 64
    # quick and full figures never share a folder; the same seed gives the same numbers
    full = run_experiment("demo", mode="full", seed=3, out_dir=tmp_path, experiment=exp)
    assert (tmp_path / "demo" / "full" / full["run_id"] / "line.png").exists()
    again = run_experiment("demo", seed=3, out_dir=tmp_path, experiment=exp)
    assert again["metrics"] == result["metrics"] and again["run_id"] != result["run_id"]
    assert load_result("demo", tmp_path, "quick")["run_id"] == again["run_id"]


def test_old_runs_are_pruned(tmp_path, make_experiment):
    exp = make_experiment(GOOD)
    ids = [
        run_experiment("demo", seed=s, out_dir=tmp_path, experiment=exp)["run_id"]
        for s in range(KEEP_RUNS + 2)
    ]
    kept = sorted(p.name for p in (tmp_path / "demo" / "quick").iterdir() if p.is_dir())
    assert len(kept) == KEEP_RUNS and ids[-1] in kept


def test_threads_are_recorded_as_in_effect_inside_the_run(tmp_path, make_experiment):
    torch = pytest.importorskip("torch")
    exp = make_experiment(
        """
        def run(run):
            import torch
            from threadpoolctl import threadpool_info
            run.metric("torch_threads", torch.get_num_threads())
            run.metric("blas_threads", max(p["num_threads"] for p in threadpool_info()))
            run.check("score", 1.0)
        """
    )
    before = torch.get_num_threads()
    result = run_experiment("demo", out_dir=tmp_path, experiment=exp, threads=2)
    assert result["metrics"]["torch_threads"] == 2
    threads = result["environment"]["threads"]
    assert threads["torch"] == 2 and threads["requested"] == 2
    # the record is what the experiment saw inside the cap (a BLAS loaded under OMP_NUM_THREADS=1 cannot grow)
    assert max(b["num_threads"] for b in threads["blas"]) == result["metrics"]["blas_threads"]
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads"):
        run_experiment("demo", out_dir=tmp_path, experiment=exp, threads=0)


def test_a_crash_is_a_result_that_keeps_what_was_recorded(tmp_path, make_experiment):
    exp = make_experiment(
        """
        def run(run):
            run.check("score", 1.0)
            run.table([{"a": 1}])
            raise RuntimeError("kaboom")
        """
    )
    result = run_experiment("demo", out_dir=tmp_path, experiment=exp)
    assert result["status"] == "error" and "kaboom" in result["error"] and result["verdict"] is None
    assert result["checks"][0]["id"] == "score" and result["tables"][0]["rows"] == [{"a": 1}]
    assert load_result("demo", tmp_path, "quick")["status"] == "error"


SANITY = """
[[checks]]
id = "score"
measures = "m"
kind = "claim"
op = ">="
threshold = 0.0
expect = "pass"

[[checks]]
id = "identity"
measures = "an identity"
kind = "sanity"
op = "=="
threshold = 0.0
expect = "pass"
"""


def test_a_failing_sanity_check_or_a_missing_check_is_an_error(tmp_path, make_experiment):
    broken = make_experiment(
        'def run(run):\n    run.check("score", 1.0)\n    run.check("identity", 1e-3)\n', SANITY
    )
    result = run_experiment("demo", out_dir=tmp_path, experiment=broken)
    assert result["status"] == "error" and "sanity check 'identity'" in result["error"]
    missing = make_experiment('def run(run):\n    run.check("score", 1.0)\n', SANITY)
    result = run_experiment("demo", out_dir=tmp_path, experiment=missing)
    assert result["status"] == "error" and "not recorded" in result["error"] and "identity" in result["error"]
    undeclared = make_experiment('def run(run):\n    run.check("other", 1.0)\n')
    result = run_experiment("demo", out_dir=tmp_path, experiment=undeclared)
    assert result["status"] == "error" and "not declared" in result["error"]


def test_damaged_records_are_reported_not_raised(tmp_path, make_experiment):
    exp = make_experiment(GOOD)
    result = run_experiment("demo", out_dir=tmp_path, experiment=exp)
    path = tmp_path / "demo" / "quick" / result["run_id"] / "result.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    damaged = load_result("demo", tmp_path, "quick")
    assert damaged["status"] == "unreadable" and damaged["slug"] == "demo"
    old = json.loads(text)
    old["schema_version"] = 1
    path.write_text(json.dumps(old))
    assert load_result("demo", tmp_path, "quick")["status"] == "stale-schema"
    (tmp_path / "demo" / "quick" / "latest").write_text("")
    assert load_result("demo", tmp_path, "quick")["status"] == "unreadable"
    assert load_result("nothing-here", tmp_path, "quick") is None


def test_atomic_write_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "f.json"
    write_text_atomic(target, "old")

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", fail)
    with pytest.raises(OSError):
        write_text_atomic(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_unknown_slug_unbuilt_paper_and_missing_dependency(tmp_path, make_experiment, monkeypatch):
    from neurips26 import papers

    with pytest.raises(KeyError, match="unknown"):
        run_experiment("no-such-paper", out_dir=tmp_path)
    planned = [p.slug for p in papers.PAPERS if p.status == "planned"]
    if planned:
        with pytest.raises(ExperimentNotAvailable):
            resolve(planned[0])
        result = run_experiment(planned[0], out_dir=tmp_path)
        assert result["status"] == "error" and "no claims declaration" in result["error"]
    monkeypatch.setitem(sys.modules, "ripser", None)  # as if the extra were not installed
    exp = make_experiment("import ripser\n\ndef run(run):\n    run.check('score', 1.0)\n")
    with pytest.raises(MissingDependency, match=r"neurips26\[representation\]"):
        resolve("demo", exp)
    result = run_experiment("demo", out_dir=tmp_path, experiment=exp)
    assert result["status"] == "error" and "pip install 'neurips26[representation]'" in result["error"]
    assert "not installed" in hint("surely_not_a_module")


def test_ctrl_c_in_process_leaves_the_previous_record_in_place(tmp_path, make_experiment):
    good = make_experiment(GOOD)
    first = run_experiment("demo", out_dir=tmp_path, experiment=good)
    interrupted = make_experiment("def run(run):\n    run.check('score', 1.0)\n    raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        run_experiment("demo", out_dir=tmp_path, experiment=interrupted)
    assert load_result("demo", tmp_path, "quick")["run_id"] == first["run_id"]
    assert [p.name for p in (tmp_path / "demo" / "quick").iterdir() if p.is_dir()] == [first["run_id"]]
