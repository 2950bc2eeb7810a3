"""A sandbox: private namespaces, an overlayfs copy-on-write root, a PID-1 agent that runs each command.

Life of one sandbox::

    spawner (one small helper per owning process, see _zygote.py; it watches its owner through a pidfd), on
    request: fork, join the sandbox's cgroup, unshare(mount, UTS, IPC, PID[, net]), fork again -> PID 1:
        mounts the overlay   lowerdir=<snapshots...>:<image>, upperdir=<private, on its own size-limited tmpfs>
        mounts proc, masked as Docker masks it; read-only binds, recursively read-only
        sets the hostname; brings lo up; pivot_root(".", "."), detaches the old root
        enters a new user namespace (uid/gid 0 inside = the image owner's unprivileged host uid/gid)
        new session keyring; every capability dropped; no_new_privs; not dumpable; seccomp-bpf filter
        serves commands: one /bin/sh -c CMD per request, output and wait status relayed in frames

Every mount is made inside the sandbox's private mount namespace (propagation private), so no sandbox mount
ever appears in the host's mount table; the writable layers' tmpfs mounts are the owner's (mount source
``nitrobox-<owner pid>.<start time>``). A ``SIGKILL`` of PID 1 removes processes, namespaces and mounts at
once; ``close()`` also kills the sandbox's cgroup, then detaches the layer and removes the directories.
``reset()`` detaches the upper layer's tmpfs (O(1); without a disk limit: a rename and a background delete)
and starts a new agent on an empty one. ``snapshot()`` freezes the current upper layer as a read-only lower
layer (O(1)) and ``restore(snap)`` mounts a fresh empty upper over the snapshot's layer stack (O(1)).

Threat model
------------
Adversary: the command line given to ``exec`` and everything it starts: arbitrary (model-written) code running
as root inside the sandbox, with any binary of the image and the binds, any syscall the filter allows, and
unlimited retries across commands, resets and restarts. Trusted: the owner process and its arguments (image,
binds, limits), the spawner, the host kernel (shared, as with any container runtime: a kernel exploit is out
of scope).

Guarantees (each proved by a test in tests/systems/, named below):

- G1 host files: nothing outside the sandbox's own upper layer can be written: the image is a read-only
  lower layer, binds are read-only with every mount below them (mount_setattr AT_RECURSIVE), the old root is
  detached (pivot_root without a put-old folder, so the sandbox has nothing to tamper with), and mount targets
  inside the sandbox's tree are opened without following symlinks (a symlink planted in the upper layer stops
  the next start instead of redirecting a mount). Nothing outside image and binds can be read: /proc is
  masked (kcore, keys, timer_list, timer_stats, sched_debug, latency_stats, interrupts, kallsyms hidden;
  acpi, asound, scsi empty; bus, fs, irq, sys, sysrq-trigger read-only), /sys is not mounted, /dev holds six
  safe nodes and mknod is refused.
- G2 other sandboxes and the host's kernel state: private mount, PID, IPC, UTS, cgroup and (default) network
  namespaces; a user namespace per sandbox, so the kernel keyring is not shared (and the keyring syscalls are
  refused anyway); a new session keyring.
- G3 privilege: uid 0 inside is an unprivileged host uid (default; ``DEFAULT_UID`` for images made by
  build_rootfs); no capabilities in any set; no_new_privs; the seccomp filter of hardening.py refuses the
  keyring, the mount family, pivot_root, chroot, ptrace and process_vm_*, bpf, perf_event_open, kexec, module
  loading, open_by_handle_at, userfaultfd, io_uring, unshare/setns/clone with CLONE_NEW*, clock setting,
  reboot, swap, syslog (clone3 answers ENOSYS); other architectures' syscall entries kill the process.
- G4 resources: one cgroup per sandbox with pids (1024), memory (2 GiB) and CPU (1 core) limits (``close()``
  kills every process in it; an emptied cgroup is kept for the owner's next sandbox with the same limits,
  since making v1 cgroups costs milliseconds on a busy host), and a
  size-limited writable layer (1 GiB; writes past it fail with ENOSPC and ``ExecResult.disk_full``), all
  changeable through :class:`Limits`.
- G5 lifetime: nothing the sandbox starts outlives ``close()`` or its owner. The lifeline is the spawner's
  pidfd on the owner (outside the sandbox's PID namespace and uid: the sandbox cannot signal or ptrace it);
  on owner death the spawner detaches the owner's layers and SIGKILLs every sandbox; every PID 1 has
  PR_SET_PDEATHSIG on the spawner. PID 1 ignores every signal sent from inside. ``cleanup_stale`` kills a
  recorded init that still runs and detaches a dead owner's mounts before it removes a folder, and never
  removes one with a mount below it.
- G6 results: each command is its own ``sh -c``; framing and exit status come from the agent (``waitpid``),
  never from anything the command can redefine, close or redirect; a command is done when its shell has exited
  and both output pipes are closed, as with ``subprocess.run``. For any command line, ``exec(cmd)`` returns
  what ``sh -c cmd`` returns in a fresh shell (property-tested). By design, what persists between commands is
  the file system and background processes; shell state (working directory, variables, functions, aliases,
  options, traps) does not: every command starts in ``/`` with the sandbox's environment.

Against Docker's and bubblewrap's defaults (Docker 20.10+/runc without options; bwrap as the baseline runs it:
``--unshare-all --cap-drop ALL --die-with-parent --new-session --proc /proc --dev /dev``):

==========================  ===========================  ==========================  ========================  ==========================================================
point                       NitroBox (default)           Docker default              bubblewrap (as above)     test
==========================  ===========================  ==========================  ========================  ==========================================================
seccomp                     deny-list of Docker's         default profile (allow-     none (``--seccomp FD``    test_seccomp_refuses_dockers_refused_syscalls,
                            refusals + ptrace, io_uring   list; ptrace allowed on     is opt-in)                test_kernel_keyring_refused_and_separate,
                                                          kernels >= 4.8)                                       test_mounting_after_unshare_is_refused
capabilities                none (all five sets empty)    14 kept (CHOWN, DAC_OVER-   none                      test_no_capabilities_and_no_escape_routes
                                                          RIDE, SETUID, MKNOD, ...)
masked /proc                kcore keys timer_list         same list (+ /sys/firmware  none (a fresh proc)       test_proc_is_masked_as_docker_masks_it
                            timer_stats sched_debug       and powercap; no sysfs
                            latency_stats interrupts      here)
                            kallsyms; acpi asound scsi
read-only /proc             bus fs irq sys sysrq-trigger  same                        sys sysrq-trigger irq     test_proc_is_masked_as_docker_masks_it
                                                                                      bus
sysfs                       not mounted                   read-only                   not mounted unless asked  test_sysfs_and_devices
devices                     6 nodes, mknod refused        tmpfs /dev + device cgroup  --dev: minimal tmpfs      test_sysfs_and_devices
cgroup limits               pids 1024, memory 2 GiB,      own cgroup, no limits       none                      test_fork_bomb_is_bounded_and_the_sandbox_recovers,
                            1 CPU (v2, or v1 on hybrid)                                                         test_memory_and_cpu_limits_are_set
disk limit                  1 GiB tmpfs upper             none (overlay2)             none                      test_disk_limit_of_the_writable_layer
no-new-privileges           on                            off (opt-in)                on (always)               test_no_capabilities_and_no_escape_routes
user-namespace remapping    on (0 -> uid 1048576+);       off (userns-remap opt-in)   user ns, 0 -> caller's    test_uid_0_inside_is_an_unprivileged_host_uid,
                            rootless for a non-root                                   uid (root: 0 -> 0)        test_rootless_mode_for_a_non_root_owner,
                            owner                                                                               test_privileged_mode_needs_a_root_owned_image_and_warns
read-only binds             recursive                     ``ro``: top mount only      ``--ro-bind`` recursive   test_read_only_bind_is_read_only_all_the_way_down
                            (mount_setattr)               before Docker 25; then rro
owner death                 spawner kills all; pdeath-    daemon-managed (live-       --die-with-parent         test_sandboxed_code_cannot_kill_the_lifeline_and_owner_death_kills_everything,
                            sig; stale sweep              restore)                    (opt-in)                  test_cleanup_stale_never_removes_a_live_sandbox_under_its_mounts
runtime binary overwrite    PID 1 not dumpable, other     runc re-exec from a         bwrap not in the          test_overwriting_the_runtime_through_proc_exe
(/proc/self/exe)            uid, no caps                  sealed memfd                sandbox's PID ns
symlinked mount targets     refused (O_NOFOLLOW walk)     refused (runc securejoin)   n/a (no persistent root)  test_mount_target_symlink_planted_in_the_upper_layer_is_refused
ptrace of the runtime       refused (seccomp, not dump-   PID ns, caps                PID ns                    test_ptrace_of_the_agent_and_the_spawner
                            able, other PID ns)
cgroup release_agent        no cgroupfs, mount refused    cgroupfs read-only          no cgroupfs               test_cgroup_release_agent_and_cgroupfs
exit status / framing       agent's waitpid, frames       runc/containerd waitpid     bwrap's waitpid           test_exit_status_cannot_be_forged_and_protocol_cannot_desync,
                                                                                                                test_exec_returns_what_sh_c_returns
LSM (AppArmor/SELinux),     none                          docker-default AppArmor     none                      (not implemented; see claims.toml deviations)
Landlock                                                  where enabled
time namespace              none (clock setting refused)  none                        none                      test_seccomp_refuses_dockers_refused_syscalls
==========================  ===========================  ==========================  ========================  ==========================================================

Not guaranteed (honest limits): kernel bugs and side channels (/proc/meminfo, cpuinfo, loadavg show the host);
with ``network=True`` the host's network namespace is shared (abstract unix sockets, ports); sandboxes of one
image owner share one host uid range (their files and processes stay apart through the namespaces, but
per-uid kernel counters such as RLIMIT_NPROC are shared); /proc/1/cmdline shows the host interpreter's and
the spawner's paths where the kernel refuses PR_SET_MM (it does here; the layers are mounted by descriptor,
so /proc/self/mountinfo shows no host path of the image or the layers); cgroup v2 is implemented but this
machine's hybrid hierarchy only exercises v1; in rootless mode no cgroup and no disk limit are applied (an
unprivileged owner can create neither) and ``userns=None`` with an image owned by host root falls back, with
a warning, to privileged mode (uid 0 inside is host uid 0, without capabilities, behind the same filter).
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import queue
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from . import hardening
from .hardening import Cgroups, Limits
from .rootfs import IMAGE_META, find_busybox

_SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_HOST_PATH = _SANDBOX_PATH
_MAX_OUTPUT = 64 * 1024 * 1024
_ZYGOTE_PATH = Path(__file__).with_name("_zygote.py")
_UID_RANGE = 65536  # uids (and gids) 0..65535 inside map to image_owner..image_owner+65535 on the host


class SandboxError(RuntimeError):
    """A sandbox could not be started, or was used after it was closed or broken."""


@dataclass
class ExecResult:
    """What one command returned.

    ``exit_code`` is the exit status of the command's ``sh -c`` as ``waitpid`` reported it (128 + N when a
    signal N killed it; 124 after a timeout, like coreutils ``timeout``). ``stdout`` / ``stderr`` are decoded
    as UTF-8 with replacement characters; the raw bytes are in ``stdout_bytes`` / ``stderr_bytes`` (each kept
    up to 64 MiB, ``truncated`` beyond). ``timed_out`` says the command hit its timeout (every process of the
    sandbox was killed and a new agent started on the same files); ``shell_restarted`` says the agent had to
    be restarted (after a timeout, or when it had died, e.g. killed by the OOM killer). ``disk_full`` says the
    writable layer had no space left after the command (writes past the disk limit fail with ENOSPC).
    """

    exit_code: int
    stdout_bytes: bytes
    stderr_bytes: bytes
    seconds: float
    timed_out: bool = False
    shell_restarted: bool = False
    truncated: bool = False
    disk_full: bool = False

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", errors="replace")

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


# ---------------------------------------------------------------------------------------------------------
# host support and housekeeping


def sandbox_support() -> tuple[bool, str]:
    """Whether sandboxes can run here, and why not: busybox-static, overlayfs, pidfds, namespaces (as root,
    or rootless through a user namespace)."""
    if os.name != "posix" or not Path("/proc/self/ns").is_dir():
        return False, "not Linux"
    if find_busybox() is None:
        return False, "no static busybox (install the Debian package busybox-static)"
    try:
        filesystems = Path("/proc/filesystems").read_text()
    except OSError:
        return False, "cannot read /proc/filesystems"
    if "overlay" not in filesystems.split():
        return False, "the kernel has no overlayfs"
    if not hasattr(os, "pidfd_open") or not hasattr(signal, "pidfd_send_signal"):
        return False, "needs pidfds (Linux >= 5.3, Python >= 3.9)"
    probe = _probe()
    return (not probe["probe"]), probe["probe"]


def userns_support() -> tuple[bool, str]:
    """Whether sandboxes can get a user namespace here (the default remapping of uid 0), and why not."""
    ok, why = sandbox_support()
    if not ok:
        return False, why
    why = _probe()["userns"]
    return (not why), why


_PROBES: dict[int, dict] = {}


def _probe() -> dict:
    euid = os.geteuid()
    if euid not in _PROBES:
        try:
            _PROBES[euid] = _zygote().probe()
        except (OSError, SandboxError) as err:
            _PROBES[euid] = {"probe": f"the sandbox spawner failed: {err}", "userns": "no spawner"}
    return _PROBES[euid]


class _Zygote:
    """The owner's handle on its spawner process (see _zygote.py); requests are serialized by a lock."""

    def __init__(self) -> None:
        import sys

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.owner = os.getpid()
        self.sock = ours
        self.lock = threading.Lock()
        t0 = time.perf_counter()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_ZYGOTE_PATH), str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={"PATH": _HOST_PATH},
                cwd="/",
            )
        finally:
            theirs.close()
        self.startup_seconds = time.perf_counter() - t0

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.proc.poll() is None

    def _call(self, cfg: dict, fds: list[int]) -> tuple[dict, int | None]:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))] if fds else []
        with self.lock:
            self.sock.sendmsg([json.dumps(cfg).encode()], anc)
            msg, anc_in, _, _ = self.sock.recvmsg(1 << 16, socket.CMSG_SPACE(struct.calcsize("i")))
        if not msg:
            raise SandboxError("the sandbox spawner exited")
        pidfd = None
        for level, kind, data in anc_in:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                pidfd = struct.unpack("i", data[:4])[0]
        return json.loads(msg), pidfd

    def probe(self) -> dict:
        reply = self._call({"probe": True, "rootless": os.geteuid() != 0}, [])[0]
        return {"probe": reply.get("probe", "no answer"), "userns": reply.get("userns", "no answer")}

    def spawn(self, cfg: dict, fds: list[int]) -> tuple[int, int]:
        reply, pidfd = self._call(cfg, fds)
        if "error" in reply or pidfd is None:
            raise SandboxError(f"the sandbox could not be started: {reply.get('error', 'no pidfd')}")
        return int(reply["pid"]), pidfd

    def close(self) -> None:
        self.sock.close()  # the spawner reads EOF and exits
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_ZYGOTE: _Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def _zygote() -> _Zygote:
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE is None or not _ZYGOTE.alive():
            _ZYGOTE = _Zygote()
        return _ZYGOTE


def spawner_startup_seconds() -> float:
    """Seconds the (one-off, per owning process) sandbox spawner took to start."""
    return _zygote().startup_seconds


def default_base_dir() -> Path:
    """Where sandboxes keep their layers: ``$NITROBOX_DIR``, else ``<tmp>/nitrobox``."""
    return Path(os.environ.get("NITROBOX_DIR") or Path(tempfile.gettempdir()) / "nitrobox")


def _proc_start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks since boot


def _owner_tag() -> str:
    return f"{os.getpid()} {_proc_start_time(os.getpid())}"


def _mount_tag() -> str:
    """The owner's tag as it appears in the source of its layer mounts: ``nitrobox-<pid>.<start>``."""
    return _owner_tag().replace(" ", ".")


def _tag_alive(pid_s: str, start: str) -> bool:
    try:
        return _proc_start_time(int(pid_s)) == start
    except ValueError:
        return False


def _owner_alive(tag_file: Path) -> bool:
    try:
        pid_s, start = tag_file.read_text().split()
    except (OSError, ValueError):
        return False  # half-made directory: its creator died before writing the tag, or it is garbage
    return _tag_alive(pid_s, start)


def _kill_recorded_init(entry: Path) -> bool:
    """Kill a sandbox init recorded in ``entry/init`` if it still runs; True when none runs any more."""
    try:
        pid_s, start = (entry / "init").read_text().split()
    except (OSError, ValueError):
        return True
    if not _tag_alive(pid_s, start):
        return True
    try:
        fd = os.pidfd_open(int(pid_s))
    except OSError:
        return True
    try:
        if _proc_start_time(int(pid_s)) != start:
            return True
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return bool(select.select([fd], [], [], 5.0)[0])
    finally:
        os.close(fd)


def _rmtree(path: Path) -> None:
    """rmtree that also removes what overlayfs leaves unreadable (its ``work/work`` holds mode-000 folders,
    which only root can enter without a chmod: a rootless owner needs one)."""
    try:
        shutil.rmtree(path)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    for dirpath, dirnames, _ in os.walk(path):  # top-down: each folder is opened up before it is entered
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                try:
                    os.chmod(p, 0o700)
                except OSError:
                    pass
    shutil.rmtree(path, ignore_errors=True)


_SWEPT: set[str] = set()
_SWEEP_LOCK = threading.Lock()


def cleanup_stale(base_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Remove what sandboxes and snapshots of dead owners left; return the directory names removed.

    For a directory whose owner is gone: a sandbox init still recorded as running is killed first (and the
    directory is kept if it does not die), every layer mount of that owner is detached (so nothing is ever
    deleted under a live mount), then the directory is removed. The dead owners' cgroups are removed too.
    It runs once per process and base directory on first use.
    """
    base = Path(base_dir).resolve() if base_dir is not None else default_base_dir()
    removed: list[str] = []
    dead_tags = set()
    for _point, source in hardening.mounts_of(""):
        tag = source[len("nitrobox-") :]
        pid_s, _, start = tag.partition(".")
        if not _tag_alive(pid_s, start):
            dead_tags.add(tag)
    if base.is_dir():
        for entry in base.iterdir():
            if not entry.name.startswith(("sbx-", "snap-")) or not entry.is_dir():
                continue
            if _owner_alive(entry / "owner"):
                continue
            try:  # a directory made a moment ago by a live process gets its (atomic) owner tag within microseconds
                if time.time() - entry.stat().st_mtime < 5 and not (entry / "owner").exists():
                    continue
            except FileNotFoundError:
                continue
            if not _kill_recorded_init(entry):
                continue
            inside = [p for p, _ in hardening.mounts_of("") if p == str(entry) or p.startswith(f"{entry}/")]
            try:
                for point in sorted(inside, key=len, reverse=True):
                    hardening.detach(Path(point))
            except OSError:
                continue
            if any(p.startswith(f"{entry}/") for p, _ in hardening.mounts_of("")):
                continue  # never remove a directory with a mount below it
            _rmtree(entry)
            removed.append(entry.name)
    for point, source in hardening.mounts_of(""):  # layers of dead owners elsewhere (another base_dir)
        if source[len("nitrobox-") :] in dead_tags:
            try:
                hardening.detach(Path(point))
            except OSError:
                pass
    if os.geteuid() == 0:
        for cg in hardening.stale_cgroups():
            parts = cg.name.split("-")  # nitrobox-<pid>.<start>-<n>
            if len(parts) >= 3:
                pid_s, _, start = parts[1].partition(".")
                if not _tag_alive(pid_s, start):
                    try:
                        for pid in (int(p) for p in (cg / "cgroup.procs").read_text().split()):
                            os.kill(pid, signal.SIGKILL)
                        cg.rmdir()
                    except OSError:
                        pass
    return removed


def _sweep_once(base: Path) -> None:
    key = str(base)
    with _SWEEP_LOCK:  # held through the sweep: no thread makes a sandbox directory while one runs
        if key in _SWEPT:
            return
        _SWEPT.add(key)
        cleanup_stale(base)


def _write_owner_tag(directory: Path) -> None:
    """Write ``directory/owner`` atomically, so a sweep never reads a half-written tag as a dead owner."""
    tmp = directory / ".owner"
    tmp.write_text(_owner_tag())
    os.replace(tmp, directory / "owner")


class _Reaper:
    """One daemon thread that waits for old sandbox processes to exit and deletes old layers (reset's
    background half). ``flush()`` waits until everything queued so far is done."""

    def __init__(self) -> None:
        self._q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, shell: _Shell | None, path: Path | None) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="nitrobox-reaper", daemon=True)
                self._thread.start()
        self._q.put((shell, path))

    def _loop(self) -> None:
        while True:
            shell, path = self._q.get()
            try:
                if shell is not None:
                    shell.wait_gone()
                if path is not None:
                    _rmtree(path)
            finally:
                self._q.task_done()

    def flush(self) -> None:
        self._q.join()


_REAPER = _Reaper()


def _wait_proc(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# every open sandbox, so that a normal interpreter exit closes them (a SIGKILLed owner is handled by the
# init's lifeline and by cleanup_stale)
_OPEN: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for sbx in list(_OPEN):
        try:
            sbx.close()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass
    for snap in list(_SNAPSHOTS):
        snap._remove_now()
    _REAPER.flush()
    hardening.remove_free_cgroups()
    if _ZYGOTE is not None and _ZYGOTE.owner == os.getpid():
        _ZYGOTE.close()


# ---------------------------------------------------------------------------------------------------------
# snapshots


_SNAPSHOTS: weakref.WeakSet = weakref.WeakSet()


class Snapshot:
    """A frozen file-system state of a sandbox: a stack of read-only layers over the image.

    Any sandbox on the same image can ``restore`` it, any number of times and concurrently (each gets its own
    empty upper layer). ``close()`` deletes the snapshot's own layer once no sandbox mounts it and no later
    snapshot stacks on it; until then deletion waits.
    """

    def __init__(self, path: Path, layer: Path, parent: Snapshot | None, image: Path) -> None:
        self.path = path
        self.layer = layer
        self.parent = parent
        self.image = image
        self.created = time.time()
        self._users = 0
        self._children = 0
        self._closed = False
        self._lock = threading.Lock()
        if parent is not None:
            parent._acquire_child()
        _SNAPSHOTS.add(self)

    @property
    def layers(self) -> tuple[Path, ...]:
        """The overlay lower layers, top first, without the image."""
        out, s = [], self
        while s is not None:
            out.append(s.layer)
            s = s.parent
        return tuple(out)

    @property
    def closed(self) -> bool:
        return self._closed

    def _acquire(self) -> None:
        with self._lock:
            if self._closed:
                raise SandboxError("snapshot is closed")
            self._users += 1

    def _release(self) -> None:
        with self._lock:
            self._users -= 1
        self._maybe_remove()

    def _acquire_child(self) -> None:
        with self._lock:
            self._children += 1

    def _release_child(self) -> None:
        with self._lock:
            self._children -= 1
        self._maybe_remove()

    def _maybe_remove(self) -> None:
        with self._lock:
            if not (self._closed and self._users == 0 and self._children == 0) or not self.path.exists():
                return
        self._remove_now()

    def _remove_now(self) -> None:
        if self.path.exists():
            mount = self.path / "layer"
            if os.path.ismount(mount):  # a size-limited layer: its own tmpfs
                try:
                    hardening.detach(mount)
                except OSError:
                    return
            _rmtree(self.path)
            if self.parent is not None:
                self.parent._release_child()

    def close(self) -> None:
        """Delete the snapshot (deferred while a sandbox or a later snapshot still uses its layer)."""
        with self._lock:
            self._closed = True
        self._maybe_remove()

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Snapshot({str(self.path)!r}, depth={len(self.layers)}, closed={self._closed})"


# ---------------------------------------------------------------------------------------------------------
# the sandbox


@dataclass
class _Shell:
    """One running sandbox process tree: its PID 1 (the agent; pidfd and host pid) and the agent's pipes."""

    pidfd: int
    init_pid: int
    stdin: int  # requests
    stdout: int  # frames
    stderr: int  # setup errors
    pid_ns: str | None = None
    mnt_ns: str | None = None
    buffers: dict = field(default_factory=dict)

    def alive(self) -> bool:
        return self.pidfd >= 0 and not select.select([self.pidfd], [], [], 0)[0]

    def kill(self) -> None:
        """SIGKILL the sandbox's PID 1: the kernel kills the rest of its PID namespace."""
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except (ProcessLookupError, OSError):
            pass

    def close_pipes(self) -> None:
        for fd in (self.stdin, self.stdout, self.stderr):
            try:
                os.close(fd)
            except OSError:
                pass
        self.stdin = self.stdout = self.stderr = -1

    def wait_gone(self, timeout: float = 30.0) -> bool:
        """Wait until PID 1 has exited: by then every process of the namespace is gone and its mounts are
        released. Closes the pidfd."""
        if self.pidfd < 0:
            return True
        deadline = time.monotonic() + timeout
        gone = bool(select.select([self.pidfd], [], [], timeout)[0])
        while gone and time.monotonic() < deadline:  # exited; now wait for the spawner to reap the zombie
            try:
                signal.pidfd_send_signal(self.pidfd, 0)
            except ProcessLookupError:
                break
            time.sleep(0.0002)
        os.close(self.pidfd)
        self.pidfd = -1
        return gone


class Sandbox:
    """An isolated environment on a shared read-only image; each command is a fresh ``sh -c`` inside it.

    Parameters
    ----------
    image_dir : the root file system (the overlay's shared lower layer), e.g. from :func:`build_rootfs`.
    network : share the host's network (True) or get a private network namespace with only loopback (False).
    hostname : the sandbox's hostname (default ``"sandbox"``).
    binds : host paths bind-mounted read-only (recursively: every mount below them too) at the same path
        (mount points must exist in the image; :func:`python_binds` gives those for running the host's Python).
    env : extra environment variables for the commands (the host environment is never passed through).
    base_dir : where the private layers live (default :func:`default_base_dir`).
    start_timeout : seconds allowed for the sandbox to come up.
    volatile : mount the overlay with ``volatile`` (Linux >= 5.10): no sync of the upper layer.
    userns : map uid/gid 0 inside to the image owner's uid/gid on the host (a user namespace; a range of
        65536 ids). ``None`` (default): on when the kernel allows it and the image is not owned by host root
        (:func:`build_rootfs` makes images owned by ``DEFAULT_UID``); otherwise a warning and privileged
        mode (uid 0 inside is host uid 0 without capabilities). A non-root owner always runs rootless (its
        own uid is root inside, the image must be its own).
    seccomp : load the seccomp-bpf filter (see :mod:`.hardening`; needs a libseccomp binding).
    limits : :class:`Limits` (pids, memory, CPU, size of the writable layer); ``Limits(None, None, None,
        None)`` lifts them all.

    Use it as a context manager; ``close()`` kills every process in the sandbox (its PID namespace and its
    cgroup) and removes its directories, whatever state it is in. Not thread-safe: use one sandbox per
    thread (see :class:`SandboxPool`).
    """

    def __init__(
        self,
        image_dir: str | os.PathLike[str],
        *,
        network: bool = False,
        hostname: str | None = None,
        binds: list[str] | tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        start_timeout: float = 30.0,
        volatile: bool = True,
        userns: bool | None = None,
        seccomp: bool = True,
        limits: Limits | None = None,
    ) -> None:
        if not isinstance(image_dir, (str, os.PathLike)):
            raise TypeError(f"image_dir must be a path, got {type(image_dir).__name__}")
        image = Path(image_dir).resolve()
        if not (image / "bin" / "sh").exists() and not (image / "bin" / "sh").is_symlink():
            raise ValueError(f"image_dir {str(image)!r} is not a root file system (no /bin/sh)")
        if not isinstance(network, bool):
            raise TypeError(f"network must be a bool, got {type(network).__name__}")
        hostname = "sandbox" if hostname is None else hostname
        if (
            not isinstance(hostname, str)
            or not 1 <= len(hostname) <= 64
            or not all(c.isalnum() or c in "-." for c in hostname)
        ):
            raise ValueError(
                f"hostname must be 1-64 characters of letters, digits, '-' and '.', got {hostname!r}"
            )
        if isinstance(binds, (str, bytes)):
            raise TypeError("binds must be a sequence of absolute host paths, not one string")
        binds = tuple(binds)
        for b in binds:
            if not isinstance(b, str) or not os.path.isabs(b) or not os.path.exists(b):
                raise ValueError(f"binds must hold existing absolute host paths, got {b!r}")
            if ".." in b.split("/"):
                raise ValueError(f"binds must not contain '..', got {b!r}")
            if not os.path.lexists(image / b.lstrip("/")):
                raise ValueError(
                    f"binds: the image has no mount point for {b!r}; build it with "
                    "build_rootfs(..., python=True) or extra_binds"
                )
        env = dict(env or {})
        for k, v in env.items():
            if not isinstance(k, str) or not k.isidentifier() or not isinstance(v, str) or "\0" in v:
                raise ValueError(f"env must map identifier names to strings, got {k!r}: {v!r}")
        if (
            isinstance(start_timeout, bool)
            or not isinstance(start_timeout, (int, float))
            or start_timeout <= 0
        ):
            raise ValueError(f"start_timeout must be a positive number of seconds, got {start_timeout!r}")
        if not isinstance(volatile, bool):
            raise TypeError(f"volatile must be a bool, got {type(volatile).__name__}")
        if userns is not None and not isinstance(userns, bool):
            raise TypeError(f"userns must be a bool or None, got {type(userns).__name__}")
        if not isinstance(seccomp, bool):
            raise TypeError(f"seccomp must be a bool, got {type(seccomp).__name__}")
        if limits is None:
            limits = Limits()
        if not isinstance(limits, Limits):
            raise TypeError(f"limits must be a Limits, got {type(limits).__name__}")
        ok, why = sandbox_support()
        if not ok:
            raise SandboxError(f"sandboxes cannot run here: {why}")
        st = image.stat()
        self.rootless = os.geteuid() != 0
        if self.rootless:
            if st.st_uid != os.geteuid():
                raise ValueError(
                    f"image_dir is owned by uid {st.st_uid}; a rootless sandbox needs an image owned by its "
                    f"owner (uid {os.geteuid()}): build_rootfs(..., uid={os.geteuid()}) as root, or chown it"
                )
            userns = True
        else:
            ns_ok, ns_why = userns_support()
            if userns is None:
                userns = ns_ok and st.st_uid != 0
                if not userns:
                    why = ns_why or "the image is owned by host root (build it with build_rootfs())"
                    warnings.warn(
                        f"nitrobox: no user namespace ({why}): uid 0 inside is host uid 0 (without "
                        "capabilities)",
                        stacklevel=2,
                    )
            elif userns:
                if not ns_ok:
                    raise SandboxError(f"userns=True but user namespaces are unavailable: {ns_why}")
                if st.st_uid == 0:
                    raise ValueError(
                        "userns=True needs an image not owned by host root: build_rootfs() makes one owned by "
                        "DEFAULT_UID, or chown -R the image to an unused uid range"
                    )
            if userns and st.st_uid + _UID_RANGE >= 2**32 - 1:
                raise ValueError(f"the image owner uid {st.st_uid} leaves no room for {_UID_RANGE} ids")
        self.userns = bool(userns)
        self.uid = st.st_uid if self.userns else 0  # host uid of root inside
        self.gid = st.st_gid if self.userns else 0
        self._bpf = b""
        if seccomp:
            try:
                self._bpf = hardening.seccomp_bpf()
            except RuntimeError as err:
                raise SandboxError(str(err)) from None
        self.seccomp = seccomp
        self.image = image
        self.network = network
        self.hostname = hostname
        self.binds = binds
        self.env = env
        self.start_timeout = float(start_timeout)
        self.volatile = volatile
        self.limits = limits
        self._disk_mb = None if self.rootless else limits.disk_mb
        base = Path(base_dir).resolve() if base_dir is not None else default_base_dir()
        base.mkdir(parents=True, exist_ok=True)
        _sweep_once(base)
        self.base_dir = base
        self.dir = Path(tempfile.mkdtemp(prefix="sbx-", dir=base))
        _write_owner_tag(self.dir)
        self._merged = self.dir / "merged"
        self._merged.mkdir()
        self._layer = self.dir / "layer"
        self._trash_n = itertools.count()
        self._lowers: Snapshot | None = None  # the restored snapshot under the upper layer, if any
        self._owned_snapshots: list[Snapshot] = []
        self._shell: _Shell | None = None
        self._owner_pid = os.getpid()
        self._closed = False
        self._broken: str | None = None
        self.cgroups: Cgroups | None = None
        try:
            mode, self.cgroup_why = hardening.cgroup_mode()
            if mode and any(v is not None for v in (limits.pids, limits.memory_mb, limits.cpus)):
                try:
                    self.cgroups = hardening.acquire_cgroups(mode, _mount_tag(), limits)
                except OSError as err:  # e.g. controllers not delegated: run, but say so
                    self.cgroup_why = f"cgroup {mode} not usable: {err}"
            if self.cgroups is None and not self.rootless and self.cgroup_why:
                warnings.warn(f"nitrobox: no cgroup limits ({self.cgroup_why})", stacklevel=2)
            self._new_layer()
            self._start_shell()
        except BaseException:
            self.close()
            raise
        _OPEN.add(self)

    # --- public API -----------------------------------------------------------------------------------
    def exec(self, cmd: str, timeout: float | None = 60.0) -> ExecResult:
        """Run ``cmd`` as ``/bin/sh -c cmd`` in the sandbox; return its status and output.

        Each command is a fresh shell (stdin /dev/null, working directory ``/``, the sandbox's environment):
        files and background processes persist between commands, shell state (variables, functions,
        aliases, options, traps, the working directory) does not. The result is what ``subprocess.run(["sh",
        "-c", cmd], capture_output=True)`` gives: the command is done when its shell has exited and both
        output pipes are closed. After ``timeout`` seconds every process in the sandbox is killed and a new
        agent starts on the same files (``timed_out=True``, exit code 124).
        """
        if not isinstance(cmd, str):
            raise TypeError(f"cmd must be a str, got {type(cmd).__name__}")
        if "\0" in cmd:
            raise ValueError("cmd must not contain NUL bytes")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
        ):
            raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        self._check_usable()
        restarted = False
        if self._shell is None or not self._shell.alive():
            self._restart_shell()
            restarted = True
        t0 = time.perf_counter()
        data = cmd.encode("utf-8", errors="surrogateescape")
        out = self._converse(struct.pack("!I", len(data)) + data, timeout)
        seconds = time.perf_counter() - t0
        if out is None:  # timeout: kill everything, new agent on the same files
            partial = self._shell.buffers if self._shell else {}
            self._restart_shell()
            return ExecResult(
                124,
                bytes(partial.get("out", b""))[:_MAX_OUTPUT],
                bytes(partial.get("err", b""))[:_MAX_OUTPUT],
                seconds,
                timed_out=True,
                shell_restarted=True,
                disk_full=self._disk_full(),
            )
        rc, stdout, stderr, died, truncated = out
        if died:
            self._restart_shell()
            restarted = True
        return ExecResult(
            rc,
            stdout,
            stderr,
            seconds,
            shell_restarted=restarted,
            truncated=truncated,
            disk_full=self._disk_full(),
        )

    def reset(self) -> None:
        """Back to the pristine image: the upper layer is dropped (its tmpfs detached, or renamed away and
        deleted in the background), a new empty one is made and a new agent started. Nothing written since
        creation (or restore) survives."""
        self._check_open()
        old = self._stop_shell(wait=False)
        self._trash_layer(old)
        self._set_lowers(None)
        self._new_layer()
        self._broken = None
        self._start_shell()

    def snapshot(self) -> Snapshot:
        """Freeze the current file-system state (O(1): the upper layer becomes a read-only layer).

        The agent is restarted on a new empty upper layer over the frozen one: files are kept, processes are
        not. The snapshot is deleted with this sandbox's ``close()`` unless another sandbox still uses it
        (then when that one lets go), or earlier by ``Snapshot.close()``.
        """
        self._check_usable()
        self._stop_shell(wait=True)  # the layer must be unmounted before it can serve as a lower
        snap_dir = Path(tempfile.mkdtemp(prefix="snap-", dir=self.base_dir))
        _write_owner_tag(snap_dir)
        dest = snap_dir / "layer"
        if os.path.ismount(self._layer):  # O(1): the tmpfs moves (a bind, then the old point detached)
            dest.mkdir()
            hardening.bind(self._layer, dest)
            hardening.detach(self._layer)
            self._layer.rmdir()
        else:
            os.rename(self._layer, dest)
        snap = Snapshot(snap_dir, dest / "upper", self._lowers, self.image)
        self._owned_snapshots.append(snap)
        self._set_lowers(snap)
        self._new_layer()
        self._start_shell()
        return snap

    def restore(self, snap: Snapshot) -> None:
        """Replace the file-system state with ``snap`` (O(1): a new empty upper layer over its layers).

        Works for a snapshot taken by any sandbox on the same image; the agent is restarted."""
        if not isinstance(snap, Snapshot):
            raise TypeError(f"snap must be a Snapshot, got {type(snap).__name__}")
        if snap.image != self.image:
            raise ValueError(
                f"snap was taken on image {str(snap.image)!r}, this sandbox runs {str(self.image)!r}"
            )
        if snap.closed:
            raise ValueError("snap is closed")
        self._check_open()
        old = self._stop_shell(wait=False)
        self._trash_layer(old)
        self._set_lowers(snap)
        self._new_layer()
        self._broken = None
        self._start_shell()

    def close(self) -> None:
        """Kill every process in the sandbox, then remove its layers, cgroups and directories. Idempotent;
        works whatever the agent's state (dead, busy with a command, never started)."""
        if getattr(self, "_closed", True) or self._owner_pid != os.getpid():
            return  # a forked child never tears down its parent's sandboxes
        self._closed = True
        if self.cgroups is not None:
            self.cgroups.kill()
        self._stop_shell(wait=True)
        self._set_lowers(None)
        for snap in self._owned_snapshots:
            snap.close()
        self._owned_snapshots.clear()
        if os.path.ismount(self._layer):
            try:
                hardening.detach(self._layer)
            except OSError:
                pass
        if not any(p.startswith(f"{self.dir}/") for p, _ in hardening.mounts_of("")):
            _rmtree(self.dir)
        if self.cgroups is not None:
            hardening.release_cgroups(self.cgroups, self.limits)  # emptied: kept for the next sandbox
        _OPEN.discard(self)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a forgotten sandbox still goes away with its object
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def broken(self) -> str | None:
        """Why the sandbox cannot run commands (its agent could not be restarted), or None."""
        return self._broken

    @property
    def init_pid(self) -> int | None:
        """Host PID of the sandbox's PID 1 (None while none runs)."""
        return self._shell.init_pid if self._shell else None

    @property
    def namespaces(self) -> dict[str, str]:
        """``{"pid": "pid:[...]", "mnt": "mnt:[...]", "user": ...}`` of the running sandbox (for audits)."""
        if self._shell is None:
            return {}
        return {"pid": self._shell.pid_ns or "", "mnt": self._shell.mnt_ns or ""}

    @property
    def upper_dir(self) -> Path:
        """The private upper layer (what this sandbox has written since its last reset/restore/snapshot)."""
        return self._layer / "upper"

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("broken" if self._broken else "open")
        return f"Sandbox({str(self.image)!r}, hostname={self.hostname!r}, network={self.network}, {state})"

    # --- internals ------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("sandbox is closed")

    def _check_usable(self) -> None:
        self._check_open()
        if self._broken:
            raise SandboxError(f"sandbox is broken: {self._broken} (reset() or close() it)")

    def _disk_full(self) -> bool:
        if self._disk_mb is None:
            return False
        try:
            return os.statvfs(self._layer).f_bavail == 0
        except OSError:
            return False

    def _new_layer(self) -> None:
        self._layer.mkdir()
        if self._disk_mb is not None:
            hardening.mount_layer_tmpfs(self._layer, _mount_tag(), self._disk_mb, self.uid, self.gid)
        upper = self._layer / "upper"
        upper.mkdir()
        (self._layer / "work").mkdir()
        if self.userns and not self.rootless:
            os.chown(upper, self.uid, self.gid)  # the merged root belongs to root inside

    def _trash_layer(self, shell: _Shell | None) -> None:
        if os.path.ismount(self._layer):  # O(1): the memory goes with the old overlay
            hardening.detach(self._layer)
            self._layer.rmdir()
            if shell is not None:
                _REAPER.put(shell, None)
        elif self._layer.exists():
            dest = self.dir / f"trash-{next(self._trash_n)}"
            os.rename(self._layer, dest)  # O(1); the old overlay may still be tearing down
            _REAPER.put(shell, dest)
        elif shell is not None:
            _REAPER.put(shell, None)

    def _set_lowers(self, snap: Snapshot | None) -> None:
        if snap is not None:
            snap._acquire()
        if self._lowers is not None:
            self._lowers._release()
        self._lowers = snap

    def _root_spec(self) -> dict:
        """How the spawner mounts the root at ``merged``: an overlay of image + snapshots + private upper."""
        lowers = [str(p) for p in (self._lowers.layers if self._lowers else ())] + [str(self.image)]
        opts = f"lowerdir={':'.join(lowers)},upperdir={self._layer / 'upper'},workdir={self._layer / 'work'}"
        if len(opts) > 3800:  # one page of mount options
            raise SandboxError(f"snapshot stack too deep for one mount ({len(lowers)} layers)")
        return {
            "type": "overlay",
            "lower": lowers,
            "upper": str(self._layer / "upper"),
            "work": str(self._layer / "work"),
            "volatile": self.volatile,
        }

    def _start_shell(self) -> None:
        env = {
            "PATH": _SANDBOX_PATH,
            "HOME": "/root",
            "USER": "root",
            "HOSTNAME": self.hostname,
            "TERM": "dumb",
            "LANG": "C.UTF-8",
            **self.env,
        }
        cfg = {
            "merged": str(self._merged),
            "root": self._root_spec(),
            "binds": list(self.binds),
            "hostname": self.hostname,
            "new_net": not self.network,
            "env": env,
            "rootless": self.rootless,
            "userns": (
                {"uid": self.uid, "gid": self.gid, "count": _UID_RANGE}
                if self.userns and not self.rootless
                else None
            ),
            "cgroups": self.cgroups.procs if self.cgroups else [],
            "cgroupns": self.cgroups is not None,
            "seccomp": self._bpf.hex(),
        }
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            pid, pidfd = _zygote().spawn(cfg, [in_r, out_w, err_w])
        except SandboxError as exc:
            os.close(err_w)
            err_w = -1
            os.set_blocking(err_r, False)
            try:
                detail = os.read(err_r, 1 << 16).decode(errors="replace").strip()
            except OSError:
                detail = ""
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            raise SandboxError(f"{exc}{': ' + detail if detail else ''}") from None
        except BaseException:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            raise
        finally:
            for fd in (in_r, out_w, err_w):
                if fd >= 0:
                    os.close(fd)
        for fd in (in_w, out_r, err_r):
            os.set_blocking(fd, False)
        self._shell = _Shell(pidfd, pid, in_w, out_r, err_r)
        out = self._converse(b"", self.start_timeout, ready=True)
        if out is None or out[3]:
            err = self._drain_stderr()
            self._stop_shell(wait=True)
            why = "timed out" if out is None else "exited"
            raise SandboxError(f"sandbox {why} during start: {err.decode(errors='replace').strip()}")
        self._shell.pid_ns = _readlink(f"/proc/{pid}/ns/pid")
        self._shell.mnt_ns = _readlink(f"/proc/{pid}/ns/mnt")
        (self.dir / "init").write_text(f"{pid} {_proc_start_time(pid)}")

    def _drain_stderr(self) -> bytes:
        data = b""
        fd = self._shell.stderr if self._shell else -1
        deadline = time.monotonic() + 1.0
        while fd >= 0 and time.monotonic() < deadline:
            if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                break
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                break
            data += chunk
        return data

    def _restart_shell(self) -> None:
        # a command that was hung when another thread closed the sandbox lands here: restarting would make its
        # layer directories again behind close()'s removal
        self._check_open()
        try:
            self._stop_shell(wait=True)  # the same upper layer is remounted: the old mount must be gone first
            work = (
                self._layer / "work"
            )  # a fresh workdir: a volatile mount leaves a marker that refuses reuse
            _rmtree(work)
            work.mkdir()
            self._start_shell()
        except SandboxError as err:
            self._broken = str(err)
            raise

    def _stop_shell(self, wait: bool) -> _Shell | None:
        """Kill the sandbox's process tree; with ``wait``, until its mounts are gone (else return the shell for
        the reaper to wait on)."""
        shell, self._shell = self._shell, None
        if shell is None:
            return None
        shell.kill()
        shell.close_pipes()
        if wait:
            shell.wait_gone()
            return None
        return shell

    def _converse(self, request: bytes, timeout: float | None, ready: bool = False):
        """Send one request, read the agent's frames until the command's status (or, with ``ready``, the
        ready frame); None on timeout.

        Returns (exit code, stdout, stderr, agent died, truncated)."""
        shell = self._shell
        frames_fd, in_fd = shell.stdout, shell.stdin
        out, err = _Capture(), _Capture()
        shell.buffers = {"out": out.buf, "err": err.buf}
        pending = memoryview(request)
        deadline = None if timeout is None else time.monotonic() + timeout
        buf = bytearray()
        status = None
        eof = False
        try:
            while status is None and not eof:
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    return None
                try:
                    r, w, _ = select.select([frames_fd], [in_fd] if pending else [], [], wait)
                except InterruptedError:
                    continue
                if w:
                    try:
                        pending = pending[os.write(in_fd, pending[: 1 << 16]) :]
                    except BlockingIOError:
                        pass
                    except BrokenPipeError:
                        pending = memoryview(b"")
                if not r:
                    continue
                try:
                    chunk = os.read(frames_fd, 1 << 20)
                except BlockingIOError:
                    continue
                if not chunk:
                    eof = True
                    break
                buf += chunk
                while len(buf) >= 5:
                    kind = bytes(buf[:1])
                    (n,) = struct.unpack("!I", buf[1:5])
                    if len(buf) < 5 + n:
                        break
                    data = bytes(buf[5 : 5 + n])
                    del buf[: 5 + n]
                    if kind == b"o":
                        out.feed(data)
                    elif kind == b"e":
                        err.feed(data)
                    elif kind == b"x":
                        status = struct.unpack("!i", data)[0]
                    elif kind == b"r" and ready:
                        status = 0
                    else:
                        raise SandboxError(f"protocol error: unexpected frame {kind!r}")
                    if status is not None:
                        break
        except (OSError, ValueError) as exc:
            if self._shell is not shell:  # close() (or a restart) from another thread took the shell away
                raise SandboxError("the sandbox was closed while the command ran") from exc
            raise
        truncated = out.truncated or err.truncated
        if status is None:  # the agent died mid-command (killed, or out of memory): SIGKILL's status
            return 128 + signal.SIGKILL, out.output(), err.output(), True, truncated
        if ready:
            return 0, b"", b"", False, False
        if os.WIFEXITED(status):
            code = os.WEXITSTATUS(status)
        elif os.WIFSIGNALED(status):
            code = 128 + os.WTERMSIG(status)
        else:
            code = 255
        return code, out.output(), err.output(), False, truncated


class _Capture:
    """One output stream of a command (kept up to _MAX_OUTPUT bytes)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.truncated = False

    def feed(self, data: bytes) -> None:
        room = _MAX_OUTPUT - len(self.buf)
        if len(data) > room:
            self.truncated = True
            data = data[: max(0, room)]
        self.buf += data

    def output(self) -> bytes:
        return bytes(self.buf)


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def host_pids_in_namespace(ns: str) -> list[int]:
    """Host PIDs of every live process whose PID (or mount) namespace is ``ns`` (e.g. ``"pid:[4026532]"``)."""
    kind = ns.split(":", 1)[0]
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _readlink(f"/proc/{entry.name}/ns/{kind}") == ns:
            out.append(int(entry.name))
    return out


def image_meta(image_dir: str | os.PathLike[str]) -> dict:
    """The metadata :func:`build_rootfs` wrote into an image ({} for an image made otherwise)."""
    try:
        return json.loads((Path(image_dir) / IMAGE_META).read_text())
    except (OSError, ValueError):
        return {}
