"""Executors: in-process, process pool and Dask give the same results; seed sweeps summarise every check."""

import json

import pytest

from neurips26.harness.executor import SchedulerUnreachable, parse_seeds, run_many

SELFTEST = "neurips26.harness.selftest:run"


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


def test_seed_sweep_in_process_and_pool_agree(tmp_path):
    seeds = [0, 1, 2, 3]
    inproc = run_many(["demo"], seeds=seeds, out_dir=tmp_path / "a", experiment=SELFTEST)
    pooled = run_many(["demo"], seeds=seeds, out_dir=tmp_path / "b", jobs=2, experiment=SELFTEST)
    assert _numbers(inproc) == _numbers(pooled)
    assert len({r["metrics"]["sample mean"] for r in inproc}) == 4  # different seeds, different data
    summary = json.loads((tmp_path / "a" / "demo" / "sweep-quick.json").read_text())
    assert summary["seeds"] == seeds and summary["verdicts"] == {"reproduced": 4}
    check = summary["checks"][0]
    values = [r["checks"][0]["measured"] for r in inproc]
    assert check["min"] == min(values) and check["max"] == max(values) and check["pass_rate"] == 1.0
    assert (tmp_path / "a" / "demo" / "seeds" / "seed-2" / "demo" / "result.json").exists()


@pytest.mark.slow
def test_dask_local_cluster_equals_local_run(tmp_path):
    pytest.importorskip("dask.distributed")
    seeds = [0, 1, 2]
    local = run_many(["demo"], seeds=seeds, out_dir=tmp_path / "local", experiment=SELFTEST)
    dask = run_many(
        ["demo"], seeds=seeds, out_dir=tmp_path / "dask", executor="dask-local", jobs=2, experiment=SELFTEST
    )
    assert _numbers(local) == _numbers(dask)
    assert (tmp_path / "dask" / "demo" / "sweep-quick.json").exists()


def test_unreachable_scheduler_names_the_address_and_keeps_results(tmp_path):
    pytest.importorskip("dask.distributed")
    run_many(["demo"], out_dir=tmp_path, experiment=SELFTEST)
    before = (tmp_path / "demo" / "result.json").read_text()
    with pytest.raises(SchedulerUnreachable, match="tcp://127.0.0.1:9"):
        run_many(
            ["demo"],
            executor="dask",
            scheduler="tcp://127.0.0.1:9",
            out_dir=tmp_path,
            experiment=SELFTEST,
            connect_timeout="2s",
        )
    assert (tmp_path / "demo" / "result.json").read_text() == before


def test_report_shows_sweep_median_and_spread(tmp_path):
    from neurips26.harness.report import write_report

    run_many(["maxsketch"], seeds=[0, 1, 2], out_dir=tmp_path, experiment=SELFTEST)
    md, _ = write_report(tmp_path)
    text = md.read_text()
    assert "Seed sweep, quick mode, seeds [0, 1, 2]: 3 reproduced" in text
    assert "| check | median | min | max | IQR | op | threshold | pass rate |" in text
