"""Reproduction: NitroBox-style sandboxes (namespaces + overlayfs CoW + a persistent in-sandbox command agent) against bubblewrap,
a full-copy root and Docker: create / exec / reset / delete latency, isolation probes, and a GRPO-style rollout
harness (digest: ``nitrobox``).

Every backend uses the same root file system: Debian's static busybox plus 64 MB of filler in 2048 files (the
digest's >= 50 MB image for the full-copy ablation), on the same file system (tmpfs when /dev/shm is one, so
that no backend pays this machine's slow ext4 metadata; ours is also measured with layers on disk). Rounds
are interleaved across backends, so a busy moment of the shared machine hits all of them alike. Absolute
latency gates use the minimum over repeats (load only ever adds time); medians, p90 and the load average are
recorded beside them. Docker runs in full mode when a dockerd can be started here.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from neurips26.harness import Run

from .baselines import BwrapOneShot, CopyRootSandbox, DockerDaemon, DockerSandbox, PlainShell, criu_check
from .hardening import Limits, cgroup_mode, seccomp_bpf
from .rollout import TASK_SETUP, Backend, run_rollouts
from .rootfs import build_rootfs, tree_size
from .sandbox import (
    _REAPER,
    Sandbox,
    SandboxError,
    host_pids_in_namespace,
    sandbox_support,
    spawner_startup_seconds,
    userns_support,
)

CMD = "echo hello > /tmp/probe && cat /tmp/probe"  # the digest's exec: write a file, read it back
OPS = ("create", "exec", "reset", "delete")


def _ms(values: list[float]) -> dict:
    v = np.asarray(values) * 1e3
    return {
        "min": float(v.min()),
        "median": float(np.median(v)),
        "p90": float(np.percentile(v, 90)),
        "n": len(v),
    }


def _timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def _paired(theirs: list[float], ours: list[float], per_round: int = 1) -> list[float]:
    """Per-round ratios theirs / ours (the fastest of each round's ``per_round`` samples on each side)."""
    n = min(len(theirs), len(ours)) // per_round
    best = lambda v, i: min(v[i * per_round : (i + 1) * per_round])  # noqa: E731
    return [best(theirs, i) / best(ours, i) for i in range(n)]


def _lifecycle(make, times: dict, n_exec: int, verify_reset: bool = True) -> int:
    """One round of create / exec x n / reset / delete on a backend; returns 1 when reset wiped the episode."""
    sbx, t = _timed(make)
    times["create"].append(t)
    for _ in range(n_exec):
        r, t = _timed(sbx.exec, CMD)
        if r.stdout.strip() != "hello":
            raise SandboxError(f"exec returned {r!r}")
        times["exec"].append(t)
    sbx.exec("echo episode > /tmp/episode-file")
    _, t = _timed(sbx.reset)
    times["reset"].append(t)
    wiped = int(sbx.exec("test -e /tmp/episode-file").exit_code != 0) if verify_reset else 1
    _REAPER.flush()  # background deletion of the old layer is not left to overlap the next measurement
    _, t = _timed(sbx.close)
    times["delete"].append(t)
    _REAPER.flush()
    return wiped


def _isolation_probes(image: Path, base: Path) -> list[dict]:
    """Real isolation and escape probes on two sandboxes; each row says whether the property held."""
    rows = []

    def probe(name: str, held: bool, detail: str = "") -> None:
        rows.append({"probe": name, "held": bool(held), "detail": detail})

    passwd = (image / "etc" / "passwd").read_bytes()
    host_name = os.uname().nodename
    a = Sandbox(image, base_dir=base, hostname="sbx-a", limits=Limits(disk_mb=2))
    b = Sandbox(image, base_dir=base, hostname="sbx-b")
    try:
        a.exec("echo secret > /root/secret")
        probe("file invisible to another sandbox", b.exec("cat /root/secret").exit_code != 0)
        probe("file invisible to the host image", not (image / "root" / "secret").exists())
        init = a.exec("cat /proc/1/comm").stdout
        probe("PID 1 is the sandbox init", init.startswith("nitrobox-init"), init[:40])
        n_proc = int(a.exec("ls /proc | grep -c '^[0-9]'").stdout.strip() or 0)
        host_proc = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit())
        probe(
            "host processes invisible", n_proc < 10 < host_proc, f"{n_proc} inside, {host_proc} on the host"
        )
        hn = (a.exec("hostname").stdout.strip(), b.exec("hostname").stdout.strip(), os.uname().nodename)
        probe("hostname private", hn[:2] == ("sbx-a", "sbx-b") and hn[2] == host_name, str(hn))
        links = a.exec("ip -o link | cut -d: -f2").stdout.split()
        probe("network: loopback only", links == ["lo"], str(links))
        a.exec("echo evil >> /etc/passwd; rm -f /bin/ls")
        probe(
            "lower layer not writable",
            (image / "etc" / "passwd").read_bytes() == passwd and (image / "bin" / "ls").is_symlink(),
        )
        caps = a.exec("grep CapEff /proc/self/status").stdout.split()
        probe("no capabilities", caps[-1:] == ["0000000000000000"], " ".join(caps))
        probe("cannot mount", a.exec("mount -t tmpfs none /mnt").exit_code != 0)
        probe("/proc/sys read-only", "Read-only" in a.exec("echo 1 > /proc/sys/vm/overcommit_ratio").stderr)
        probe("old root unreachable", a.exec("ls /.oldroot/etc").exit_code != 0)
        status = a.exec("cat /proc/self/status").stdout
        probe("seccomp filter loaded", "Seccomp:\t2" in status)
        uid_map = a.exec("cat /proc/self/uid_map").stdout.split()
        probe(
            "uid 0 is an unprivileged host uid",
            not a.userns or (uid_map[:2] == ["0", str(a.uid)] and a.uid != 0),
            " ".join(uid_map),
        )
        probe("no nested user namespace", a.exec("unshare -U -r true").exit_code != 0)
        probe("/proc/timer_list hidden", a.exec("cat /proc/timer_list").stdout == "")
        probe("/proc/irq read-only", "Read-only" in a.exec("echo 1 > /proc/irq/default_smp_affinity").stderr)
        r = a.exec("dd if=/dev/zero of=/tmp/fill bs=1M count=4 2>&1; rm -f /tmp/fill")
        probe("writes beyond the disk limit fail", "No space left" in r.stdout, r.stdout[-60:])
        probe("pids limit set", a.cgroups is None or a.cgroups.read("pids.max") == "1024")
        a.exec("echo v1 > /root/state")
        snap = a.snapshot()
        a.exec("echo v2 > /root/state; echo junk > /root/junk")
        a.restore(snap)
        probe(
            "snapshot/restore round-trips",
            a.exec("cat /root/state; ls /root").stdout.split() == ["v1", "secret", "state"],
        )
        b.restore(snap)
        probe("snapshot restores in another sandbox", b.exec("cat /root/state").stdout.strip() == "v1")
        r = a.exec("sleep 30", timeout=0.5)
        probe(
            "hung command times out, sandbox usable",
            r.timed_out and a.exec("cat /root/state").stdout.strip() == "v1",
        )
        a.exec("sleep 1000 >/dev/null 2>&1 &")
        ns = a.namespaces
        upper = str(a.dir)
    finally:
        a.close()
        b.close()
    left = host_pids_in_namespace(ns["pid"]) + host_pids_in_namespace(ns["mnt"])
    probe("close kills background processes", not left, f"{len(left)} left")
    mounts = Path("/proc/self/mountinfo").read_text()
    probe(
        "close leaves no mounts and no files",
        upper not in mounts and str(base) not in mounts and not Path(upper).exists(),
    )
    return rows


def _docker_backend(daemon: DockerDaemon, image: str) -> Backend:
    counter = iter(range(10**9))

    def branch(s: DockerSandbox) -> str:
        return s.commit(f"nitrobox-branch-{os.getpid()}-{next(counter)}")

    return Backend(
        "docker",
        open=lambda: DockerSandbox(daemon, image),
        exec=lambda s, c: s.exec(c),
        branch=branch,
        start_from=lambda s, img: s.restore(img),
        reset=lambda s: s.reset(),
        close=lambda s: s.close(),
        drop_branch=lambda img: daemon.request("DELETE", f"/images/{img}?force=true"),
    )


def _bwrap_backend(image: Path, base: Path) -> Backend:
    def branch(s: BwrapOneShot) -> str:
        token = tempfile.mkdtemp(prefix="bwrap-branch-", dir=base)
        shutil.copytree(s.work, token, dirs_exist_ok=True, symlinks=True)
        return token

    def start_from(s: BwrapOneShot, token: str) -> None:
        s.reset()
        shutil.copytree(token, s.work, dirs_exist_ok=True, symlinks=True)

    return Backend(
        "bubblewrap one-shot",
        open=lambda: BwrapOneShot(image, base_dir=str(base)),
        exec=lambda s, c: s.exec(c),
        branch=branch,
        start_from=start_from,
        reset=lambda s: s.reset(),
        close=lambda s: s.close(),
        drop_branch=lambda token: shutil.rmtree(token, ignore_errors=True),
    )


def _ours_backend(image: Path, base: Path) -> Backend:
    return Backend(
        "nitrobox (ours)",
        open=lambda: Sandbox(image, base_dir=base),
        exec=lambda s, c: s.exec(c),
        branch=lambda s: s.snapshot(),
        start_from=lambda s, snap: s.restore(snap),
        reset=lambda s: s.reset(),
        close=lambda s: s.close(),
        drop_branch=lambda snap: snap.close(),
    )


def _copy_backend(image: Path, base: Path) -> Backend:
    def start_from(s: CopyRootSandbox, _token) -> None:  # no snapshots: a fresh copy, then replay the setup
        s.reset()
        s.exec(TASK_SETUP)

    return Backend(
        "chroot + full copy",
        open=lambda: CopyRootSandbox(image, base_dir=base),
        exec=lambda s, c: s.exec(c),
        branch=lambda s: None,
        start_from=start_from,
        reset=lambda s: s.reset(),
        close=lambda s: s.close(),
    )


def run(run: Run) -> None:
    ok, why = sandbox_support()
    if not ok:
        raise RuntimeError(f"nitrobox needs root, overlayfs and namespaces: {why}")
    reps = run.param("repeats", quick=10, full=20)
    copy_reps = run.param("copy_repeats", quick=5, full=10)
    disk_reps = run.param("disk_layer_repeats", quick=3, full=10)
    n_exec = run.param("execs_per_round", quick=5, full=10)
    pad_mb = run.param("rootfs_pad_mb", quick=64)
    n_tasks = run.param("harness_tasks", quick=2, full=16)  # at least one per worker
    group = run.param("grpo_group_size", quick=4)
    steps = run.param("steps_per_episode", quick=8)
    policy = run.param("policy_sleep_s", quick=0.02)
    concurrencies = run.param("concurrency", quick=[1, 4])
    run.metric("load_average_start", os.getloadavg()[0])
    run.metric("cpu_count", os.cpu_count())

    shm = Path("/dev/shm")
    tmpfs = shm.is_dir() and os.access(shm, os.W_OK)
    root = Path(tempfile.mkdtemp(prefix="nitrobox-exp-", dir=str(shm) if tmpfs else None))
    disk_root = Path(tempfile.mkdtemp(prefix="nitrobox-exp-disk-"))
    run.metric("layers_on_tmpfs", int(tmpfs))
    daemon = None
    try:
        image = build_rootfs(root / "image", pad_mb=pad_mb, pad_files=2048)
        size, entries = tree_size(image)
        run.metric("rootfs_entries", entries)
        base = root / "layers"
        base.mkdir()
        backends = {
            "nitrobox (ours)": lambda: Sandbox(image, base_dir=base),
            "chroot + full copy": lambda: CopyRootSandbox(image, base_dir=base),
            "bubblewrap one-shot": lambda: BwrapOneShot(image, base_dir=str(base)),
            "nitrobox (ours), layers on disk": lambda: Sandbox(image, base_dir=disk_root),
        }
        docker_why = "full mode only (quick mode never starts a daemon)"
        docker_image = None
        if run.full:
            ok, docker_why = DockerDaemon.available()
            if ok:
                try:
                    daemon = DockerDaemon(base_dir=root).start()
                    run.metric("dockerd_startup_s", daemon.startup_seconds)
                    docker_image = daemon.import_image(image)
                    backends["docker"] = lambda: DockerSandbox(daemon, docker_image)
                    docker_why = ""
                except SandboxError as err:
                    docker_why = str(err)
                    daemon = None
        criu_ok, criu_why = criu_check()
        run.metric("criu_check_passed", int(criu_ok))
        run.note(f"CRIU process snapshots: {'criu check passes' if criu_ok else 'skipped, ' + criu_why}")
        if docker_why:
            run.note(f"Docker baseline not run: {docker_why}")

        # warm-up: the spawner, page cache, dockerd's first container
        for make in backends.values():
            s = make()
            s.exec(CMD)
            s.close()
        run.metric("spawner_startup_ms", spawner_startup_seconds() * 1e3)

        times = {name: {op: [] for op in OPS} for name in backends}
        wiped = {name: [] for name in backends}
        plain = PlainShell(str(base))
        plain_exec = []
        for r in run.progress(range(reps), "lifecycle rounds"):
            for name, make in backends.items():
                if name == "chroot + full copy" and r >= copy_reps:
                    continue
                if name.endswith("on disk") and r >= disk_reps:
                    continue
                wiped[name].append(_lifecycle(make, times[name], n_exec))
            for _ in range(n_exec):
                plain_exec.append(_timed(plain.exec, CMD)[1])
        plain.close()
        rows = []
        stats = {}
        for name in backends:
            stats[name] = {op: _ms(times[name][op]) for op in OPS}
            row = {"backend": name}
            for op in OPS:
                row[f"{op} min ms"] = stats[name][op]["min"]
                row[f"{op} median ms"] = stats[name][op]["median"]
                row[f"{op} p90 ms"] = stats[name][op]["p90"]
            row["rounds"] = len(times[name]["create"])
            row["reset wiped the episode"] = f"{sum(wiped[name])}/{len(wiped[name])}"
            rows.append(row)
        pe = _ms(plain_exec)
        rows.append(
            {
                "backend": "plain sh -c (no isolation)",
                "exec min ms": pe["min"],
                "exec median ms": pe["median"],
                "exec p90 ms": pe["p90"],
                "rounds": reps,
            }
        )
        run.table(
            rows,
            name="latency",
            caption="Lifecycle latency per backend (ms; rounds interleaved). bubblewrap has no persistent sandbox: its "
            "exec is a whole one-shot sandbox per command, its create/reset/delete only make or remove the "
            "per-episode /tmp directory. Ours: create includes the first shell round-trip; reset is verified "
            "(the episode's file is gone); delete kills the namespace and removes every directory.",
        )
        ours = stats["nitrobox (ours)"]
        for op in OPS:
            run.metric(f"ours_{op}_median_ms", ours[op]["median"])
            run.metric(f"ours_{op}_p90_ms", ours[op]["p90"])
        copy = stats["chroot + full copy"]
        run.metric("copy_reset_min_ms", copy["reset"]["min"])
        run.metric("copy_reset_median_ms", copy["reset"]["median"])
        run.metric("reset_speedup_vs_copy_medians", copy["reset"]["median"] / ours["reset"]["median"])
        disk = stats["nitrobox (ours), layers on disk"]
        run.metric("ours_disk_delete_median_ms", disk["delete"]["median"])
        run.metric("ours_disk_reset_median_ms", disk["reset"]["median"])
        run.metric("bwrap_exec_median_ms", stats["bubblewrap one-shot"]["exec"]["median"])
        run.metric("plain_exec_median_ms", pe["median"])
        # every ratio, from medians of the same interleaved rounds
        run.metric(
            "exec_speedup_vs_bwrap_medians",
            stats["bubblewrap one-shot"]["exec"]["median"] / ours["exec"]["median"],
        )
        run.metric("exec_vs_plain_sh_medians", ours["exec"]["median"] / pe["median"])
        run.metric("exec_vs_plain_sh_minima", ours["exec"]["min"] / pe["min"])
        run.metric(
            "create_vs_bwrap_exec_medians",
            ours["create"]["median"] / stats["bubblewrap one-shot"]["exec"]["median"],
        )
        run.metric("seccomp_filter_instructions", len(seccomp_bpf()) // 8)
        run.metric("userns", int(userns_support()[0]))
        mode, why = cgroup_mode()
        run.metric("cgroup_v2", int(mode == "v2"))
        run.metric("cgroup_v1", int(mode == "v1"))
        if why:
            run.note(f"no per-sandbox cgroups: {why}")

        run.check("create_latency_ms", ours["create"]["min"])
        run.check("reset_latency_ms", ours["reset"]["min"])
        run.check("exec_latency_ms", ours["exec"]["min"])
        run.check("exec_vs_plain_sh", ours["exec"]["median"] / pe["median"])
        run.metric("reset_speedup_vs_copy_minima", copy["reset"]["min"] / ours["reset"]["min"])
        copy_resets = times["chroot + full copy"]["reset"]
        ours_resets = times["nitrobox (ours)"]["reset"][: len(copy_resets)]
        copy_rounds = _paired(copy_resets, ours_resets)
        run.metric("reset_speedup_vs_copy_round_min", min(copy_rounds))
        run.metric("reset_speedup_vs_copy_round_max", max(copy_rounds))
        run.metric("reset_speedup_vs_copy_round_median", float(np.median(copy_rounds)))
        # best of N on each side over the same rounds (timeit's rule): load only adds time, and ours' reset, a
        # hand-shake between several processes, gains more of it than the copy's kernel memcpy does
        run.check("reset_speedup_vs_copy", min(copy_resets) / min(ours_resets))
        run.check("copy_rootfs_mb", size / 2**20)
        run.check("reset_wipes_episode", min(min(v) for v in wiped.values() if v))
        if run.full:
            if "docker" in stats:
                d = stats["docker"]
                for op in OPS:
                    run.metric(f"docker_{op}_median_ms", d[op]["median"])
                    run.metric(f"docker_{op}_min_ms", d[op]["min"])
                    run.metric(f"{op}_speedup_vs_docker_medians", d[op]["median"] / ours[op]["median"])
                    run.metric(f"{op}_speedup_vs_docker_minima", d[op]["min"] / ours[op]["min"])
                # one ratio per interleaved round (same round, same moment of the machine's load)
                speed = {
                    op: _paired(
                        times["docker"][op], times["nitrobox (ours)"][op], n_exec if op == "exec" else 1
                    )
                    for op in OPS
                }
                for op in OPS:
                    run.metric(f"{op}_speedup_vs_docker_round_min", float(min(speed[op])))
                    run.metric(f"{op}_speedup_vs_docker_round_max", float(max(speed[op])))
            else:
                speed = {op: float("nan") for op in OPS}
            run.check("create_speedup_vs_docker", speed["create"])
            run.check("reset_speedup_vs_docker", speed["reset"])
            run.check("delete_speedup_vs_docker", speed["delete"])
            run.check("exec_speedup_vs_docker", speed["exec"])

        # --- isolation and escape probes -----------------------------------------------------------------
        probes = _isolation_probes(image, base)
        run.table(
            probes, name="isolation", caption="Isolation and escape probes, run for real on this machine"
        )
        run.check("isolation_probes_held", sum(p["held"] for p in probes) / len(probes))

        # --- rollout harness --------------------------------------------------------------------------------
        harness = [_ours_backend(image, base), _bwrap_backend(image, base)]
        if run.full:
            harness.append(_copy_backend(image, base))
            if daemon is not None:
                harness.append(_docker_backend(daemon, docker_image))
        h_rows = []
        for c in concurrencies:
            for backend in harness:
                res = run_rollouts(
                    backend,
                    n_tasks=max(n_tasks, c),
                    group_size=group,
                    n_steps=steps,
                    concurrency=c,
                    policy_seconds=policy,
                )
                h_rows.append(res)
                _REAPER.flush()
        run.table(
            h_rows,
            name="rollout_harness",
            caption=f"GRPO-style harness: tasks x {group} rollouts branching from one snapshot, {steps} steps of "
            f"{policy * 1e3:.0f} ms policy + one command; sandbox_share = time in sandbox operations / worker time",
        )

        def h(backend: str, c: int) -> dict:
            return next(r for r in h_rows if r["backend"] == backend and r["concurrency"] == c)

        for c in concurrencies:
            run.metric(f"ours_sandbox_share_c{c}", h("nitrobox (ours)", c)["sandbox_share"])
            run.metric(f"bwrap_sandbox_share_c{c}", h("bubblewrap one-shot", c)["sandbox_share"])
        run.metric("harness_failed_commands", sum(r["failed_commands"] for r in h_rows))
        run.check("harness_commands_succeed", sum(r["failed_commands"] for r in h_rows))
        if run.full:
            if daemon is not None:
                run.metric("docker_sandbox_share_c4", h("docker", 4)["sandbox_share"])
                red = 1 - h("nitrobox (ours)", 4)["wall_s"] / h("docker", 4)["wall_s"]
            else:
                red = float("nan")
            run.check("harness_wall_reduction_vs_docker_c4", red)
        run.metric("load_average_end", os.getloadavg()[0])

        # --- figure --------------------------------------------------------------------------------------
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        names = [n for n in backends]
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            med = [stats[name][op]["median"] for op in OPS]
            lo = [stats[name][op]["min"] for op in OPS]
            x = np.arange(len(OPS)) + i * width
            ax1.bar(x, med, width, label=name)
            ax1.scatter(x, lo, color="k", s=8, zorder=3)
        ax1.set_xticks(np.arange(len(OPS)) + width * (len(names) - 1) / 2, OPS)
        ax1.set_yscale("log")
        ax1.set_ylabel("ms (bar: median, dot: min)")
        ax1.axhline(50, color="grey", ls=":", lw=1)
        ax1.legend(fontsize=7)
        ax1.set_title("lifecycle latency")
        labels = [f"{r['backend']}\nc={r['concurrency']}" for r in h_rows]
        ax2.barh(range(len(h_rows)), [r["wall_s"] for r in h_rows], color="lightgrey", label="wall")
        ax2.barh(
            range(len(h_rows)),
            [r["sandbox_s"] / r["concurrency"] for r in h_rows],
            color="tab:red",
            label="sandbox ops / worker",
        )
        ax2.set_yticks(range(len(h_rows)), labels, fontsize=7)
        ax2.set_xlabel("seconds")
        ax2.legend(fontsize=7)
        ax2.set_title("rollout harness")
        run.figure(
            fig, "latency_and_harness", caption="Lifecycle latency per backend and rollout-harness wall time"
        )
    finally:
        if daemon is not None:
            daemon.stop()
        _REAPER.flush()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(disk_root, ignore_errors=True)
