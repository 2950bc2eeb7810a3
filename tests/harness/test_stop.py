"""Stopping a run: SIGTERM (what `timeout` and CI send), the parent's death and a task timeout leave no process
running and no empty run folder, and the experiment's `finally` blocks run."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from neurips26.harness.executor import run_many

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc (Linux)")

# Each run says it started, starts a child of its own (it must be stopped too) and sleeps; its finally block
# leaves a mark.
SLEEPER = """
import os
import subprocess
import sys
import time
from pathlib import Path

def run(run):
    marks = Path(os.environ["PROBE_MARKS"])
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    (marks / f"started-{run.slug}-{run.seed}").write_text(str(helper.pid))
    try:
        time.sleep(120)
    finally:
        (marks / f"cleaned-{run.slug}-{run.seed}").write_text("")
    run.check("score", 1.0)
"""


def _marked(token: str) -> list[int]:
    """Live processes that carry ``token`` in their environment (inherited by every descendant)."""
    needle = f"PROBE_TOKEN={token}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()  # empty for a zombie
            except OSError:
                continue
            if needle in environ.split(b"\0"):
                pids.append(int(entry.name))
    return pids


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def _launch(tmp_path, make_experiment, args):
    exp = make_experiment(SLEEPER)
    marks = tmp_path / "marks"
    marks.mkdir()
    token = uuid.uuid4().hex
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "probe_pkgs"), os.environ.get("PYTHONPATH", "")]),
        "PROBE_MARKS": str(marks),
        "PROBE_TOKEN": token,
    }
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "neurips26", "run", *args, "--experiment", exp, "--out", str(out)]
    # its own session, as under `timeout` or a CI runner, which signal the whole process group
    proc = subprocess.Popen(
        cmd, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return proc, marks, token, out


def _check_clean(marks, token, out, runs):
    deadline = time.monotonic() + 15
    while (alive := _marked(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in alive:  # leave nothing behind, even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"processes survived: {alive}"
    assert sorted(p.name for p in marks.glob("cleaned-*")) == [f"cleaned-{r}" for r in runs]
    assert not [p for p in out.glob("*/quick/*") if p.name != "sweeps"], "a run folder or pointer was left"
    assert not list(out.glob("*/quick/sweeps/*")), "an interrupted sweep left its folder"


@pytest.mark.parametrize(
    "args, runs",
    [
        (["alpha", "beta", "--jobs", "2"], ["alpha-0", "beta-0"]),
        (["alpha", "--seeds", "0-1", "--jobs", "2"], ["alpha-0", "alpha-1"]),
        (["alpha"], ["alpha-0"]),
    ],
    ids=["workers", "sweep-workers", "in-process"],
)
def test_sigterm_stops_every_process_and_leaves_no_run_folder(tmp_path, make_experiment, args, runs):
    proc, marks, token, out = _launch(tmp_path, make_experiment, args)
    try:
        started = _wait_for(lambda: len(list(marks.glob("started-*"))) == len(runs), 60)
        assert started, proc.communicate(timeout=30) if proc.poll() is not None else "runs did not start"
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        stopped_in = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143 and "terminated (SIGTERM)" in err, err
    assert stopped_in < 10
    _check_clean(marks, token, out, runs)


def test_workers_stop_when_the_parent_is_killed(tmp_path, make_experiment):
    proc, marks, token, out = _launch(tmp_path, make_experiment, ["alpha", "beta", "--jobs", "2"])
    try:
        started = _wait_for(lambda: len(list(marks.glob("started-*"))) == 2, 60)
        assert started, proc.communicate(timeout=30) if proc.poll() is not None else "runs did not start"
        proc.kill()  # SIGKILL to the parent alone: no handler runs, the workers learn it from the kernel
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    _check_clean(marks, token, out, ["alpha-0", "beta-0"])


def test_a_timed_out_task_cleans_up_and_its_error_record_is_its_only_folder(
    tmp_path, make_experiment, monkeypatch
):
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("PROBE_MARKS", str(marks))
    exp = make_experiment(SLEEPER)
    (result,), _ = run_many(["demo"], out_dir=tmp_path / "out", jobs=2, experiment=exp, task_timeout=10)
    assert result["status"] == "error" and "timed out" in result["error"]
    assert (marks / "cleaned-demo-0").exists()  # stopped with SIGTERM first: the finally block ran
    helper = int((marks / "started-demo-0").read_text())
    assert _wait_for(lambda: not Path(f"/proc/{helper}/environ").exists() or _zombie(helper), 10)
    quick = tmp_path / "out" / "demo" / "quick"
    assert [p.name for p in quick.iterdir() if p.is_dir()] == [result["run_id"]]
    assert (quick / result["run_id"] / "result.json").exists()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _default_sigint() -> None:
    # a shell's background job (`make test &`) starts with SIGINT ignored and its children inherit that; the
    # probe's Ctrl-C must reach a process that handles it as a terminal's would
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# A library that catches the KeyboardInterrupt a stop raises and carries on (scikit-learn's MLP does: "Training
# interrupted by user", then it returns the half-trained model); Ctrl-C and SIGTERM alike.
SWALLOWER = """
import os
import signal
import time

def run(run):
    try:
        os.kill(os.getpid(), getattr(signal, os.environ["PROBE_SIGNAL"]))
        time.sleep(30)
    except KeyboardInterrupt:
        pass
    run.check("score", 1.0)
"""


@pytest.mark.parametrize(
    "sig, jobs", [("SIGTERM", "1"), ("SIGTERM", "2"), ("SIGINT", "1")], ids=["term", "term-workers", "int"]
)
def test_a_stop_that_library_code_swallowed_writes_no_record(tmp_path, make_experiment, sig, jobs):
    exp = make_experiment(SWALLOWER)
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "probe_pkgs"), os.environ.get("PYTHONPATH", "")]),
        "PROBE_SIGNAL": sig,
    }
    done = subprocess.run(
        [sys.executable, "-m", "neurips26", "run", "alpha", "beta", "--jobs", jobs, "--experiment", exp,
         "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=120,
        preexec_fn=_default_sigint,
    )  # fmt: skip
    records = [r.read_text() for r in out.glob("*/quick/*/result.json")]
    if jobs == "1":  # in process: the stop reaches the command, which stops with no record
        assert done.returncode == (143 if sig == "SIGTERM" else 130), done.stderr[-2000:]
        assert not records, "a stopped run left a record"
    else:  # a worker stopped on its own: its task is an error, never an ok record
        assert done.returncode != 0 and not [r for r in records if '"status": "ok"' in r]
