"""NitroBox: real isolation and escape tests (they run as root, as CI does), protocol, reset, snapshots, pool,
baselines, bad input and the quick reproduction. Every test checks the outcome on the host for real: files in
the image and the layers, processes by PID namespace, mounts in /proc/self/mountinfo."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from neurips26.systems.nitrobox import (
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxPool,
    Snapshot,
    build_rootfs,
    python_binds,
    sandbox_support,
)
from neurips26.systems.nitrobox.baselines import BwrapOneShot, CopyRootSandbox, criu_check
from neurips26.systems.nitrobox.rollout import Backend, run_rollouts
from neurips26.systems.nitrobox.rootfs import find_busybox, tree_size
from neurips26.systems.nitrobox.sandbox import cleanup_stale, host_pids_in_namespace

SUPPORTED, WHY = sandbox_support() if os.name == "posix" else (False, "not Linux")
needs_sandbox = pytest.mark.skipif(not SUPPORTED, reason=f"sandboxes cannot run here: {WHY}")


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, files in os.walk(path):
        dirnames.sort()
        for f in sorted(files):
            p = Path(dirpath) / f
            h.update(str(p.relative_to(path)).encode())
            if p.is_file() and not p.is_symlink():
                h.update(p.read_bytes())
    return h.hexdigest()


def _mounts_mentioning(path: Path) -> list[str]:
    return [ln for ln in Path("/proc/self/mountinfo").read_text().splitlines() if str(path) in ln]


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Path:
    if not SUPPORTED:
        pytest.skip(f"sandboxes cannot run here: {WHY}")
    return build_rootfs(tmp_path_factory.mktemp("nbx") / "image", python=True)


@pytest.fixture
def base(tmp_path) -> Path:
    d = tmp_path / "layers"
    yield d
    # nothing a test did may leave a mount behind, whatever it asserted
    assert not _mounts_mentioning(tmp_path), "a mount leaked into the host's mount table"


# --- root file system ---------------------------------------------------------------------------------------


@needs_sandbox
def test_rootfs_layout(image):
    assert (image / "bin" / "busybox").is_file() and os.readlink(image / "bin" / "sh") == "busybox"
    assert (image / "dev" / "null").is_char_device()
    assert (image / "usr").is_dir() and (image / sys.base_prefix.lstrip("/")).is_dir()  # python mount points
    meta = json.loads((image / ".nitrobox-image.json").read_text())
    assert meta["applets"] > 100
    assert find_busybox() is not None


@needs_sandbox
def test_rootfs_padding_size(tmp_path):
    img = build_rootfs(tmp_path / "img", pad_mb=3, pad_files=7)
    size, _ = tree_size(img)
    assert size >= 3 * 2**20
    assert len(list((img / "opt" / "pad").rglob("*.bin"))) == 7


def test_rootfs_bad_input(tmp_path):
    with pytest.raises(ValueError, match="pad_mb"):
        build_rootfs(tmp_path / "x", pad_mb=-1)
    with pytest.raises(ValueError, match="pad_files"):
        build_rootfs(tmp_path / "x", pad_files=0)
    with pytest.raises(TypeError, match="python"):
        build_rootfs(tmp_path / "x", python="yes")
    with pytest.raises(ValueError, match="extra_binds"):
        build_rootfs(tmp_path / "x", extra_binds=["relative/path"])
    with pytest.raises(TypeError, match="extra_binds"):
        build_rootfs(tmp_path / "x", extra_binds="/usr")
    with pytest.raises(ValueError, match="prefix"):
        python_binds("/nonexistent/prefix")


@needs_sandbox
def test_rootfs_refuses_existing_dest(image):
    with pytest.raises(FileExistsError, match="dest"):
        build_rootfs(image)


@needs_sandbox
def test_a_relative_base_dir_is_taken_from_the_working_directory(image, base, monkeypatch):
    monkeypatch.chdir(base.parent)
    with Sandbox(image, base_dir=base.name) as s:
        assert s.base_dir == base and s.dir.parent == base
        assert s.exec("echo ok").stdout == "ok\n"
    assert not list(base.glob("sbx-*"))


# --- the shell protocol ---------------------------------------------------------------------------------------


@needs_sandbox
def test_exec_protocol(image, base):
    with Sandbox(image, base_dir=base) as s:
        r = s.exec("echo out; echo err >&2; exit_code=3; (exit 3)")
        assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
        assert s.exec("printf 'no newline'").stdout == "no newline"  # output taken byte for byte
        assert s.exec("printf 'a\\n\\n'").stdout == "a\n\n"
        assert s.exec("printf '\\377\\376x'").stdout_bytes == b"\xff\xfex"  # not UTF-8
        s.exec("cd /tmp; X=41; echo kept > /tmp/f")
        # a fresh sh -c per command: files persist, shell state (cwd, variables) does not
        assert s.exec("echo $(pwd) $((X + 1)); cat /tmp/f").stdout == "/ 1\nkept\n"
        r = s.exec("if then")  # a syntax error is the command's failure, not the shell's
        assert r.exit_code != 0 and not r.shell_restarted
        assert s.exec("cat").stdout == ""  # a command reading stdin gets /dev/null, not the protocol
        big = s.exec("head -c 3000000 /dev/zero | tr '\\0' a")
        assert len(big.stdout_bytes) == 3_000_000 and set(big.stdout) == {"a"}
        assert s.exec("echo __nbx_fake__ 0; echo done").stdout == "__nbx_fake__ 0\ndone\n"


@needs_sandbox
def test_exit_restarts_shell_and_keeps_files(image, base):
    with Sandbox(image, base_dir=base) as s:
        s.exec("echo kept > /root/f")
        r = s.exec("exit 7")
        assert r.exit_code == 7 and not r.shell_restarted  # one command's shell, not the sandbox
        assert s.exec("cat /root/f").stdout == "kept\n"


@needs_sandbox
def test_hung_command_times_out_and_sandbox_stays_usable(image, base):
    with Sandbox(image, base_dir=base) as s:
        s.exec("echo kept > /root/f")
        t0 = time.perf_counter()
        r = s.exec("sleep 60", timeout=0.5)
        assert r.timed_out and r.exit_code == 124 and time.perf_counter() - t0 < 20
        r = s.exec("cat /root/f; pgrep -x sleep | wc -l")
        assert r.stdout.split()[0] == "kept"
        assert int(r.stdout.split()[1]) == 0  # the hung sleep was killed


# --- isolation and escape ---------------------------------------------------------------------------------------


@needs_sandbox
def test_files_are_private_to_a_sandbox_and_never_reach_the_image(image, base):
    before = _digest(image)
    with Sandbox(image, base_dir=base) as a, Sandbox(image, base_dir=base) as b:
        a.exec("echo secret > /root/secret; echo evil >> /etc/passwd; rm /bin/ls; echo x > /bin/cat")
        assert b.exec("cat /root/secret").exit_code != 0
        assert "evil" not in b.exec("cat /etc/passwd").stdout
        assert b.exec("ls /").exit_code == 0
        assert (a.upper_dir / "root" / "secret").read_text() == "secret\n"  # the write went to a's upper only
        assert not (b.upper_dir / "root" / "secret").exists()
    assert _digest(image) == before  # the shared lower layer is untouched


@needs_sandbox
def test_reset_discards_every_file_of_the_episode(image, base):
    with Sandbox(image, base_dir=base) as s:
        pristine = s.exec("ls -A /root").stdout  # the image's own mount points
        s.exec(
            "mkdir -p /tmp/w && for i in 1 2 3; do echo $i > /tmp/w/$i; done; rm /etc/hosts; echo y > /root/y"
        )
        s.reset()
        assert s.exec("ls -A /tmp").stdout == "" and s.exec("ls -A /root").stdout == pristine
        assert s.exec("cat /etc/hosts").stdout.startswith("127.0.0.1")  # the deleted image file is back
        assert list(s.upper_dir.iterdir()) == []


@needs_sandbox
def test_pid_namespace_init_and_host_processes_invisible(image, base):
    with Sandbox(image, base_dir=base) as s:
        assert s.exec("cat /proc/1/comm").stdout == "nitrobox-init\n"  # PID 1 is the sandbox's agent
        pids = [int(p) for p in s.exec("ls /proc").stdout.split() if p.isdigit()]
        assert max(pids) < 50 and len(pids) < 10
        assert s.exec("kill -0 1").exit_code == 0
        host = {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()}
        assert len(host) > len(pids)
        assert s.init_pid in host and host_pids_in_namespace(s.namespaces["pid"])


@needs_sandbox
def test_hostname_and_network_are_private(image, base):
    host = os.uname().nodename
    with (
        Sandbox(image, base_dir=base, hostname="box-1") as s,
        Sandbox(image, base_dir=base, network=True) as n,
    ):
        assert s.exec("hostname").stdout.strip() == "box-1"
        assert s.exec("hostname other").exit_code != 0  # no CAP_SYS_ADMIN
        assert os.uname().nodename == host
        assert s.exec("ip -o link | cut -d: -f2").stdout.split() == ["lo"]
        assert "127.0.0.1" in s.exec("ip -o addr").stdout  # loopback is up
        host_links = sorted(os.listdir("/sys/class/net"))
        assert sorted(n.exec("ip -o link | cut -d: -f2 | cut -d@ -f1").stdout.split()) == host_links  # shared


@needs_sandbox
def test_no_capabilities_and_no_escape_routes(image, base):
    with Sandbox(image, base_dir=base) as s:
        status = dict(
            line.split(":\t") for line in s.exec("cat /proc/self/status").stdout.splitlines() if ":\t" in line
        )
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(status[cap], 16) == 0, cap
        assert status["NoNewPrivs"].strip() == "1"
        assert s.exec("mount -t tmpfs none /mnt").exit_code != 0
        assert s.exec("mount -o remount,rw /").exit_code != 0
        assert s.exec("chroot /tmp /bin/true").exit_code != 0
        assert s.exec("ls /.oldroot/etc").exit_code != 0  # the host's root is detached
        assert "Read-only" in s.exec("echo 1 > /proc/sys/vm/overcommit_ratio").stderr
        assert s.exec("mknod /tmp/sda b 8 0").exit_code != 0


@needs_sandbox
def test_close_kills_background_processes_and_leaves_no_mounts(image, base):
    s = Sandbox(image, base_dir=base)
    s.exec("sleep 1000 >/dev/null 2>&1 & sleep 1001 >/dev/null 2>&1 &")
    ns, sdir = s.namespaces, s.dir
    assert len(host_pids_in_namespace(ns["pid"])) >= 3  # the agent (PID 1), 2 sleeps
    s.close()
    assert host_pids_in_namespace(ns["pid"]) == [] and host_pids_in_namespace(ns["mnt"]) == []
    assert not _mounts_mentioning(base) and not sdir.exists()
    s.close()  # idempotent
    with pytest.raises(SandboxError, match="closed"):
        s.exec("true")


@needs_sandbox
def test_close_after_shell_died_and_while_command_hangs(image, base):
    s = Sandbox(image, base_dir=base)
    os.kill(s.init_pid, signal.SIGKILL)  # the sandbox died under us
    time.sleep(0.05)
    s.close()
    assert not s.dir.exists()
    s2 = Sandbox(image, base_dir=base)
    errors = []

    def hang() -> None:
        try:
            s2.exec("sleep 1000", timeout=None)
        except SandboxError as err:
            errors.append(err)

    t = threading.Thread(target=hang, daemon=True)
    t.start()
    time.sleep(0.2)
    ns = s2.namespaces
    s2.close()  # from another thread, while a command hangs
    t.join(10)
    assert host_pids_in_namespace(ns["pid"]) == [] and not s2.dir.exists()
    assert not t.is_alive() and len(errors) == 1  # the hung exec ended with a clear error


@needs_sandbox
def test_owner_killed_by_sigkill_leaves_nothing_running(image, tmp_path):
    base = tmp_path / "layers"
    code = (
        "import sys, json\n"
        "from neurips26.systems.nitrobox import Sandbox\n"
        "s = Sandbox(sys.argv[1], base_dir=sys.argv[2])\n"
        "s.exec('sleep 1000 >/dev/null 2>&1 &')\n"
        "print(json.dumps(s.namespaces), flush=True)\n"
        "s.exec('sleep 1000', timeout=None)\n"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code, str(image), str(base)], stdout=subprocess.PIPE, text=True
    )
    ns = json.loads(p.stdout.readline())
    assert host_pids_in_namespace(ns["pid"])
    p.kill()
    p.wait()
    deadline = time.monotonic() + 20
    while host_pids_in_namespace(ns["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids_in_namespace(ns["pid"]) == []  # the lifeline took the whole sandbox down
    assert not _mounts_mentioning(base)
    assert cleanup_stale(base) and list(base.iterdir()) == []  # its directories are swept by the next owner


def test_owner_tag_is_written_atomically_and_a_half_made_directory_is_kept(tmp_path):
    # the pool makes sandboxes from several threads while the first one sweeps: a sweep that read a tag
    # mid-write took a live sandbox for a dead one and removed its directory (seen once in CI)
    from neurips26.systems.nitrobox import sandbox as sbx_mod

    live = tmp_path / "sbx-live"
    live.mkdir()
    sbx_mod._write_owner_tag(live)
    assert sorted(p.name for p in live.iterdir()) == ["owner"]
    assert sbx_mod._owner_alive(live / "owner")
    young = tmp_path / "sbx-young"  # made a moment ago, tag not yet in place
    young.mkdir()
    (young / ".owner").write_text("")
    assert cleanup_stale(tmp_path) == [] and live.is_dir() and young.is_dir()


def test_sweep_finishes_before_another_thread_makes_a_sandbox_directory(tmp_path, monkeypatch):
    from neurips26.systems.nitrobox import sandbox as sbx_mod

    started, release, order = threading.Event(), threading.Event(), []

    def slow_sweep(base):
        started.set()
        release.wait(5)
        order.append("sweep done")

    monkeypatch.setattr(sbx_mod, "cleanup_stale", slow_sweep)
    monkeypatch.setattr(sbx_mod, "_SWEPT", set())
    first = threading.Thread(target=sbx_mod._sweep_once, args=(tmp_path,))
    first.start()
    assert started.wait(5)
    second = threading.Thread(target=lambda: (sbx_mod._sweep_once(tmp_path), order.append("second returns")))
    second.start()
    time.sleep(0.2)
    assert order == []  # the second caller waits for the sweep instead of going on to make its directory
    release.set()
    first.join(5)
    second.join(5)
    assert order == ["sweep done", "second returns"]


# --- snapshots ---------------------------------------------------------------------------------------


@needs_sandbox
def test_snapshot_restore_round_trip_and_branching(image, base):
    with Sandbox(image, base_dir=base) as a, Sandbox(image, base_dir=base) as b:
        a.exec("echo v1 > /root/state; rm /etc/hosts")
        snap = a.snapshot()
        assert isinstance(snap, Snapshot) and a.exec("cat /root/state").stdout == "v1\n"  # state kept
        a.exec("echo v2 > /root/state; echo junk > /root/junk; echo back > /etc/hosts")
        a.restore(snap)
        assert a.exec("cat /root/state; ls /root").stdout.split() == ["v1", "state"]
        assert a.exec("cat /etc/hosts").exit_code != 0  # the deletion (a whiteout) is part of the snapshot
        b.restore(snap)  # another sandbox branches from the same snapshot
        b.exec("echo b > /root/state")
        assert a.exec("cat /root/state").stdout == "v1\n"
        a.exec("echo deeper > /root/d")
        snap2 = a.snapshot()  # a snapshot stacked on a snapshot
        b.restore(snap2)
        assert b.exec("cat /root/state /root/d").stdout == "v1\ndeeper\n"
        b.reset()
        assert b.exec("ls /root").stdout == "" and b.exec("cat /etc/hosts").exit_code == 0
        snap.close()  # still under snap2 and mounted by a: deletion waits
        assert snap.path.exists()
        snap2.close()
    assert not snap.path.exists() and not snap2.path.exists()


@needs_sandbox
def test_snapshot_bad_input(image, base, tmp_path):
    other = build_rootfs(tmp_path / "other")
    with Sandbox(image, base_dir=base) as a, Sandbox(other, base_dir=base) as b:
        snap = a.snapshot()
        with pytest.raises(ValueError, match="image"):
            b.restore(snap)
        with pytest.raises(TypeError, match="snap"):
            a.restore("not a snapshot")
        snap.close()
        a.reset()
        with pytest.raises(ValueError, match="closed"):
            a.restore(snap)


# --- python-capable sandboxes ----------------------------------------------------------------------------------


@needs_sandbox
def test_python_inside_with_read_only_binds(image, base):
    with Sandbox(image, base_dir=base, binds=python_binds()) as s:
        py = f"{sys.base_prefix}/bin/python3"
        r = s.exec(f"{py} -c 'import os, socket; print(os.getpid() < 50, socket.gethostname())'")
        assert r.stdout.split() == ["True", "sandbox"], r.stderr
        assert s.exec(f"touch {sys.base_prefix}/evil").exit_code != 0  # read-only bind
        assert not Path(sys.base_prefix, "evil").exists()


# --- pool, harness, baselines --------------------------------------------------------------------------------


@needs_sandbox
def test_pool_resets_released_sandboxes(image, base):
    with SandboxPool(image, size=2, base_dir=base) as pool:
        with pool.sandbox() as s:
            s.exec("echo dirty > /root/x")
        seen = []
        for _ in range(3):
            with pool.sandbox(timeout=30) as s:
                seen.append(s.exec("ls /root").stdout)
        assert seen == ["", "", ""]
        with pytest.raises(ValueError, match="size"):
            SandboxPool(image, size=0)
        with pytest.raises(TypeError, match="sbx"):
            pool.release("x")
        s = pool.acquire()
        s2 = pool.acquire()
        with pytest.raises(TimeoutError):
            pool.acquire(timeout=0.05)
        pool.release(s)
        pool.release(s2)
    assert not list(base.glob("sbx-*"))


@needs_sandbox
def test_rollout_harness_counts_time(image, base):
    backend = Backend(
        "ours",
        open=lambda: Sandbox(image, base_dir=base),
        exec=lambda s, c: s.exec(c),
        branch=lambda s: s.snapshot(),
        start_from=lambda s, snap: s.restore(snap),
        reset=lambda s: s.reset(),
        close=lambda s: s.close(),
        drop_branch=lambda snap: snap.close(),
    )
    res = run_rollouts(backend, n_tasks=2, group_size=2, n_steps=3, concurrency=2, policy_seconds=0.01)
    assert res["episodes"] == 4 and res["steps"] == 12 and res["failed_commands"] == 0
    assert 0 < res["sandbox_share"] < 1 and res["wall_s"] >= 2 * 3 * 0.01
    with pytest.raises(ValueError, match="concurrency"):
        run_rollouts(backend, n_tasks=1, concurrency=0)


@needs_sandbox
def test_copy_root_baseline_is_isolated_the_same_way(image, base):
    with CopyRootSandbox(image, base_dir=base) as c:
        c.exec("echo x > /root/x")
        assert (c._layer / "root" / "root" / "x").exists()
        assert int(c.exec("grep CapEff /proc/self/status").stdout.split()[1], 16) == 0
        c.reset()
        assert c.exec("ls /root").stdout == ""
        with pytest.raises(NotImplementedError):
            c.snapshot()


@needs_sandbox
def test_bwrap_baseline(image, tmp_path):
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap not installed (Debian bubblewrap)")
    with BwrapOneShot(image, base_dir=str(tmp_path)) as b:
        assert b.exec("echo hi > /tmp/f; cat /tmp/f; hostname").stdout == "hi\nsandbox\n"
        assert b.exec("cat /tmp/f").stdout == "hi\n"  # /tmp persists within the episode
        b.reset()
        assert b.exec("cat /tmp/f").exit_code != 0


def test_criu_check_reports_a_reason():
    ok, why = criu_check()
    assert isinstance(ok, bool) and (ok or why)


# --- bad input on every public entry point -------------------------------------------------------------------


@needs_sandbox
def test_sandbox_bad_input(image, base, tmp_path):
    with pytest.raises(TypeError, match="image_dir"):
        Sandbox(42)
    with pytest.raises(ValueError, match="image_dir"):
        Sandbox(tmp_path)
    with pytest.raises(TypeError, match="network"):
        Sandbox(image, network="no")
    with pytest.raises(ValueError, match="hostname"):
        Sandbox(image, hostname="bad name;rm")
    with pytest.raises(ValueError, match="binds"):
        Sandbox(image, binds=["relative"])
    with pytest.raises(ValueError, match="binds"):
        Sandbox(image, binds=["/var/lib"])  # no mount point in the image
    with pytest.raises(TypeError, match="binds"):
        Sandbox(image, binds="/usr")
    with pytest.raises(ValueError, match="env"):
        Sandbox(image, env={"1BAD": "x"})
    with pytest.raises(ValueError, match="start_timeout"):
        Sandbox(image, start_timeout=0)
    with pytest.raises(TypeError, match="volatile"):
        Sandbox(image, volatile=1)
    with Sandbox(image, base_dir=base, env={"GREETING": "hi"}) as s:
        assert s.exec("echo $GREETING").stdout == "hi\n"
        assert s.exec("env | grep -c HOME=/root").stdout.strip() == "1"
        with pytest.raises(TypeError, match="cmd"):
            s.exec(b"echo")
        with pytest.raises(ValueError, match="NUL"):
            s.exec("echo \0")
        with pytest.raises(ValueError, match="timeout"):
            s.exec("true", timeout=-1)
    assert not list(base.glob("sbx-*"))


def test_exec_result_properties():
    r = ExecResult(0, b"a\xff", b"", 0.1)
    assert r.ok and r.stdout == "a\ufffd"
    assert not ExecResult(124, b"", b"", 1.0, timed_out=True).ok


# --- the quick reproduction -------------------------------------------------------------------------------------


@needs_sandbox
@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    from neurips26.harness.testing import assert_quick_verdict

    assert_quick_verdict("nitrobox", tmp_path)
