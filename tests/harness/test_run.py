"""Run: checks against the declaration, params, the rng stream, timers, problems that make a run an error."""

import math

import pytest

from neurips26.harness import Run
from neurips26.harness.claims import ClaimsError, parse_claims


def _claims():
    return parse_claims(
        {
            "checks": [
                {"id": "a", "measures": "m", "kind": "claim", "op": ">=", "threshold": 1.0, "expect": "pass"},
                {
                    "id": "b",
                    "measures": "m",
                    "kind": "claim",
                    "op": "<",
                    "threshold": 0.0,
                    "expect": "fail",
                    "reason": "r {b}",
                    "explained_by": ["b"],
                },
                {
                    "id": "s",
                    "measures": "identity",
                    "kind": "sanity",
                    "op": "==",
                    "threshold": 0.0,
                    "expect": "pass",
                },
                {
                    "id": "f",
                    "measures": "full only",
                    "kind": "claim",
                    "op": ">",
                    "threshold": 0.0,
                    "modes": ["full"],
                    "expect": "pass",
                },
            ]
        }
    )


def test_checks_take_op_and_threshold_from_the_declaration():
    run = Run("demo", _claims())
    assert run.check("a", 2.0) == "pass"
    assert run.check("b", 1.0) == "fail"
    with pytest.raises(ValueError, match="twice"):
        run.check("a", 2.0)
    with pytest.raises(ClaimsError, match="not declared"):
        run.check("nope", 1.0)
    with pytest.raises(ClaimsError, match="full"):
        run.check("f", 1.0)
    assert run.verdict == "partial"
    assert run.problems() == ["declared checks not recorded in quick mode: s"]
    run.check("s", 1e-3)
    assert "sanity check 's'" in run.problems()[0] and "bug" in run.problems()[0]


def test_sequence_measurements_give_median_and_interval():
    run = Run("demo", _claims())
    assert run.check("a", [0.8, 1.2, 1.5]) == "inconclusive"
    c = run.checks[0]
    assert c.measured == 1.2 and c.interval == (0.8, 1.5) and c.values == [0.8, 1.2, 1.5]
    assert run.check("b", [-1.0, -2.0, -0.5]) == "pass"
    with pytest.raises(ValueError, match="non-empty"):
        run.check("s", [])


def test_non_finite_measurements_are_kept_as_strings():
    run = Run("demo", _claims())
    assert run.check("a", math.inf) == "pass"
    assert run.checks[0].measured == "inf"
    assert run.check("b", math.nan) == "inconclusive"
    assert run.to_dict()["checks"][1]["measured"] == "nan"


def test_params_rng_seeds_and_validation():
    with pytest.raises(ValueError, match="mode"):
        Run("demo", _claims(), mode="medium")
    with pytest.raises(ValueError, match="seed"):
        Run("demo", _claims(), seed=-1)
    with pytest.raises(TypeError, match="claims"):
        Run("demo", claims=None)
    run = Run("demo", _claims(), seed=4)
    assert run.param("n", quick=10, full=1000) == 10 and run.params == {"n": 10}
    assert Run("demo", _claims(), mode="full").param("n", quick=10, full=1000) == 1000
    assert run.param("k", quick=3) == 3
    full = Run("demo", _claims(), mode="full")
    assert full.param("same", 7) == 7  # no full value: the setting does not change with the mode
    assert full.param("limit", quick=1000, full=None) is None  # None is a full-mode value (no limit)
    with pytest.raises(ValueError, match="twice"):
        run.param("n", quick=1, full=2)
    first, second = run.rng.normal(), run.rng.normal()
    assert first != second  # one stream, not a fresh generator per access
    assert Run("demo", _claims(), seed=4).rng.normal() == first
    assert run.seeds(3) == Run("demo", _claims(), seed=4).seeds(3) and len(set(run.seeds(3))) == 3
    with pytest.raises(ValueError, match="n must"):
        run.seeds(0)
    with pytest.raises(ValueError, match="row"):
        run.table([])


def test_timer_returns_its_seconds_and_accumulates():
    run = Run("demo", _claims())
    with run.timer("work") as t:
        sum(range(10_000))
    assert t.seconds > 0 and run.timings["work"] == t.seconds
    with run.timer("work") as t2:
        pass
    assert run.timings["work"] == pytest.approx(t.seconds + t2.seconds)
    with run.timer() as t3:
        pass
    assert t3.seconds >= 0 and set(run.timings) == {"work"}


def test_figure_names_are_checked(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = Run("demo", _claims(), out_dir=tmp_path)
    fig, _ = plt.subplots()
    with pytest.raises(ValueError, match="file stem"):
        run.figure(fig, "../escape")
    path = run.figure(fig, "ok")
    assert path.parent == tmp_path and path.stat().st_size > 0
    with pytest.raises(ValueError, match="twice"):
        run.figure(plt.subplots()[0], "ok")


def test_cpu_clock_ignores_sleep():
    import time

    from neurips26.harness import Timer, time_repeats

    with Timer("cpu") as cpu, Timer() as wall:
        time.sleep(0.05)
    assert wall.seconds >= 0.05 and cpu.seconds < 0.04
    assert time_repeats(lambda: time.sleep(0.01), repeat=2, clock="cpu")["max"] < 0.01
    with pytest.raises(ValueError, match="clock"):
        Timer("gpu")
