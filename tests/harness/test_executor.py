"""Executors: in-process, local processes and Dask agree; dead workers and crashed seeds are results."""

import json

import pytest

from neurips26.harness import executor as executor_mod
from neurips26.harness.executor import SchedulerUnreachable, parse_seeds, run_many
from neurips26.harness.records import load_result, load_sweep

SELFTEST = "neurips26.harness.selftest.experiment:run"


def _numbers(results):
    return [(r["slug"], r["seed"], r["metrics"], [c["measured"] for c in r["checks"]]) for r in results]


def test_parse_seeds():
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("5, 1,1") == [1, 5]
    assert parse_seeds("2") == [2]
    for bad in ("", "a-b", "3-1", "-1", "1,,2"):
        with pytest.raises(ValueError, match="seeds"):
            parse_seeds(bad)


def test_bad_executor_arguments(tmp_path):
    with pytest.raises(ValueError, match="executor"):
        run_many(["demo"], executor="spark", out_dir=tmp_path, experiment=SELFTEST)
    with pytest.raises(ValueError, match="jobs"):
        run_many(["demo"], jobs=0, out_dir=tmp_path, experiment=SELFTEST)
    with pytest.raises(ValueError, match="scheduler"):
        run_many(["demo"], executor="dask", out_dir=tmp_path, experiment=SELFTEST)
    with pytest.raises(ValueError, match="seeds"):
        run_many(["demo"], seeds=[], out_dir=tmp_path, experiment=SELFTEST)


def test_seed_sweep_in_process_and_processes_agree(tmp_path):
    seeds = [0, 1, 2, 3]
    inproc, (summary,) = run_many(["demo"], seeds=seeds, out_dir=tmp_path / "a", experiment=SELFTEST)
    pooled, _ = run_many(["demo"], seeds=seeds, out_dir=tmp_path / "b", jobs=2, experiment=SELFTEST)
    assert _numbers(inproc) == _numbers(pooled)
    assert len({r["metrics"]["sample_mean"] for r in inproc}) == 4  # different seeds, different data
    assert summary == load_sweep("demo", tmp_path / "a", "quick")
    assert (
        summary["seeds"] == seeds and summary["verdicts"] == {"reproduced": 4} and summary["n_crashed"] == 0
    )
    check = summary["checks"][0]
    values = [r["checks"][0]["measured"] for r in inproc]
    assert check["min"] == min(values) and check["max"] == max(values) and check["pass_rate"] == 1.0
    assert (
        check["outcomes"] == {str(s): "pass" for s in seeds} and check["consistent"] and summary["consistent"]
    )
    sweep = tmp_path / "a" / "demo" / "quick" / "sweeps" / summary["sweep_id"]
    assert (sweep / "seed-2" / "result.json").exists()
    assert load_result("demo", tmp_path / "a", "quick") is None  # sweeps do not move the latest pointer


def test_threads_are_honoured_in_process(tmp_path):
    torch = pytest.importorskip("torch")
    default = torch.get_num_threads()
    (result,), _ = run_many(["demo"], out_dir=tmp_path, experiment=SELFTEST, threads=None)
    assert result["environment"]["threads"]["requested"] is None
    assert result["environment"]["threads"]["torch"] == default
    (result,), _ = run_many(["demo"], out_dir=tmp_path, experiment=SELFTEST, threads=2)
    assert result["environment"]["threads"]["torch"] == 2


DIES = """
import os
import signal

def run(run):
    if run.seed == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if run.seed == 2:
        raise RuntimeError("seed 2 crashes")
    run.check("score", 1.0)
"""


def test_a_killed_worker_is_an_error_result_and_crashed_seeds_are_counted(tmp_path, make_experiment):
    exp = make_experiment(DIES)
    results, (summary,) = run_many(["demo"], seeds=[0, 1, 2, 3], out_dir=tmp_path, jobs=2, experiment=exp)
    by_seed = {r["seed"]: r for r in results}
    assert by_seed[0]["status"] == by_seed[3]["status"] == "ok"
    assert by_seed[1]["status"] == "error" and "signal 9" in by_seed[1]["error"]
    assert by_seed[2]["status"] == "error" and "seed 2 crashes" in by_seed[2]["error"]
    assert summary["crashed"] == [1, 2] and summary["n_crashed"] == 2 and not summary["consistent"]
    sweep = tmp_path / "demo" / "quick" / "sweeps" / summary["sweep_id"]
    assert json.loads((sweep / "seed-1" / "result.json").read_text())["status"] == "error"


def test_ctrl_c_cancels_queued_tasks_and_stops_running_ones(tmp_path, make_experiment):
    exp = make_experiment(
        "import time\n\ndef run(run):\n    time.sleep(0.3 if run.seed == 0 else 30)\n    run.check('score', 1.0)\n"
    )
    seen = []

    def interrupt(result):
        seen.append(result["seed"])
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_many(["demo"], seeds=[0, 1, 2, 3], out_dir=tmp_path, jobs=2, experiment=exp, on_result=interrupt)
    assert seen == [0]
    sweeps = list((tmp_path / "demo" / "quick" / "sweeps").iterdir())
    started = [p.name for p in sweeps[0].iterdir()]
    assert "seed-2" not in started and "seed-3" not in started  # queued work never started
    assert not (sweeps[0] / "seed-1" / "result.json").exists()  # the running one was stopped


def test_a_task_over_its_timeout_is_killed(tmp_path, make_experiment):
    exp = make_experiment("import time\n\ndef run(run):\n    time.sleep(60)\n    run.check('score', 1.0)\n")
    (result,), _ = run_many(["demo"], out_dir=tmp_path, jobs=2, experiment=exp, task_timeout=2)
    assert result["status"] == "error" and "timed out" in result["error"]
    assert load_result("demo", tmp_path, "quick")["status"] == "error"


@pytest.mark.slow
def test_dask_local_cluster_equals_local_run(tmp_path):
    pytest.importorskip("dask.distributed")
    seeds = [0, 1, 2]
    local, _ = run_many(["demo"], seeds=seeds, out_dir=tmp_path / "local", experiment=SELFTEST)
    dask, (summary,) = run_many(
        ["demo"], seeds=seeds, out_dir=tmp_path / "dask", executor="dask-local", jobs=2, experiment=SELFTEST
    )
    assert _numbers(local) == _numbers(dask)
    assert summary["consistent"]


def test_a_failed_dask_task_is_an_error_result(tmp_path, monkeypatch):
    distributed = pytest.importorskip("dask.distributed")
    real = executor_mod._task

    def flaky(*args):
        if args[2] == 1:
            raise MemoryError("worker lost")
        return real(*args)

    monkeypatch.setattr(executor_mod, "_task", flaky)
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        results, _ = run_many(
            ["demo"],
            seeds=[0, 1],
            out_dir=tmp_path,
            executor="dask",
            scheduler=cluster.scheduler_address,
            experiment=SELFTEST,
        )
    assert [r["status"] for r in results] == ["ok", "error"]
    assert "outside the experiment" in results[1]["error"]


def test_unreachable_scheduler_names_the_address_and_keeps_results(tmp_path):
    pytest.importorskip("dask.distributed")
    run_many(["demo"], out_dir=tmp_path, experiment=SELFTEST)
    before = load_result("demo", tmp_path, "quick")
    with pytest.raises(SchedulerUnreachable, match="tcp://127.0.0.1:9"):
        run_many(
            ["demo"],
            executor="dask",
            scheduler="tcp://127.0.0.1:9",
            out_dir=tmp_path,
            experiment=SELFTEST,
            connect_timeout="2s",
        )
    assert load_result("demo", tmp_path, "quick") == before
