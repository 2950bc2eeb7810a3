"""Owner-side hardening for sandboxes: the seccomp-bpf filter, per-sandbox cgroups, size-limited layers.

- :func:`seccomp_bpf` compiles, once per process, a default-allow filter that refuses (``EPERM``) at least
  every syscall Docker's default profile refuses to a container without extra capabilities: the keyring
  (``add_key``, ``keyctl``, ``request_key``), the mount family (old and new API), ``pivot_root``, ``chroot``,
  ``ptrace``/``process_vm_*``/``kcmp``, ``bpf``, ``perf_event_open``, ``kexec_*``, module loading,
  ``open_by_handle_at``, ``userfaultfd``, new namespaces (``unshare``, ``setns``, ``clone`` with any
  ``CLONE_NEW*`` flag; ``clone3`` answers ``ENOSYS`` so that libc falls back to ``clone``, as in Docker),
  ``io_uring``, clock and time setting, ``reboot``, swap, ``acct``, ``syslog``, quotas, ``iopl``/``ioperm``,
  NUMA policy calls. Other architectures' syscalls (x86's 32-bit entry) kill the process (libseccomp's
  bad-arch action). The filter is built by libseccomp through a maintained Python binding (libseccomp's own
  ``seccomp`` module, Debian's ``python3-seccomp``, or PyPI's ``pyseccomp``, the project's ``systems`` extra)
  and exported as BPF; the spawner loads those bytes with one ``prctl`` per sandbox.
- :class:`Limits` and :class:`Cgroups`: one cgroup per sandbox (cgroup v2 under ``/sys/fs/cgroup/nitrobox``,
  or the v1 ``pids``, ``memory`` and ``cpu`` hierarchies below the owner's own cgroups on a hybrid host) with
  ``pids``, ``memory`` and ``cpu`` limits; ``kill()`` kills every process in it.
- :func:`mount_layer_tmpfs`: the writable layer on its own size-limited tmpfs (``disk_mb``), mounted with a
  source name that says which owner made it, so that the spawner (at owner death) and :func:`cleanup_stale`
  find and detach every layer of a dead owner.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

MS_NOSUID, MS_BIND = 2, 4096
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]

# --------------------------------------------------------------------------------------------------------
# seccomp

DENIED_SYSCALLS = (
    # kernel keyring (shared by every process of a uid in the init user namespace)
    "add_key", "keyctl", "request_key",
    # mounts, old and new API, and root changes
    "mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr",
    # other processes' memory
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
    # kernel attack surface Docker refuses
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module",
    "get_kernel_syms", "query_module", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
    "fanotify_init", "uselib", "nfsservctl", "_sysctl", "vm86", "vm86old",
    # namespaces
    "unshare", "setns",
    # host-wide state
    "reboot", "swapon", "swapoff", "acct", "settimeofday", "stime", "clock_settime", "clock_adjtime",
    "adjtimex", "syslog", "quotactl", "quotactl_fd", "vhangup", "iopl", "ioperm", "sethostname",
    "setdomainname", "mbind", "set_mempolicy", "move_pages", "migrate_pages",
)  # fmt: skip
CLONE_NEW_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x80)

_BPF: bytes | None = None
_BPF_ERROR = ""
_BPF_LOCK = threading.Lock()


def _binding():
    try:
        import seccomp  # libseccomp's own binding (Debian python3-seccomp)

        return seccomp
    except ImportError:
        pass
    try:
        import pyseccomp  # ctypes binding to libseccomp.so, same API (PyPI; the `systems` extra)

        return pyseccomp
    except (ImportError, OSError):
        return None


def seccomp_bpf() -> bytes:
    """The sandbox filter as BPF bytes (compiled once); SandboxError-worthy RuntimeError when impossible."""
    global _BPF, _BPF_ERROR
    with _BPF_LOCK:
        if _BPF is not None:
            return _BPF
        if _BPF_ERROR:
            raise RuntimeError(_BPF_ERROR)
        sc = _binding()
        if sc is None:
            _BPF_ERROR = (
                "no libseccomp Python binding: install the `systems` extra (pyseccomp) or Debian's "
                "python3-seccomp, or pass seccomp=False"
            )
            raise RuntimeError(_BPF_ERROR)
        f = sc.SyscallFilter(defaction=sc.ALLOW)
        for name in DENIED_SYSCALLS:
            try:
                f.add_rule(sc.ERRNO(errno.EPERM), name)
            except Exception:  # noqa: BLE001 - a syscall this architecture does not have
                pass
        for flag in CLONE_NEW_FLAGS:
            f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        with tempfile.TemporaryFile() as tmp:
            f.export_bpf(tmp)
            tmp.seek(0)
            _BPF = tmp.read()
        return _BPF


def seccomp_available() -> tuple[bool, str]:
    try:
        seccomp_bpf()
    except RuntimeError as err:
        return False, str(err)
    return True, ""


# --------------------------------------------------------------------------------------------------------
# cgroups


@dataclass(frozen=True)
class Limits:
    """Per-sandbox resource limits (None: unlimited). Applied through a cgroup when the host has one.

    ``pids``: processes and threads at once (fork bombs stop here); ``memory_mb``: resident memory, tmpfs
    writes included (the kernel OOM-kills inside the sandbox past it); ``cpus``: CPU time as a number of
    cores (CFS quota); ``disk_mb``: size of the writable layer (its own tmpfs; writes past it fail with
    ``ENOSPC`` and ``ExecResult.disk_full`` is set). In rootless mode none is applied: an unprivileged owner
    can neither mount on the host nor write cgroups (see the threat model in sandbox.py).
    """

    pids: int | None = 1024
    memory_mb: int | None = 2048
    cpus: float | None = 1.0
    disk_mb: int | None = 1024

    def __post_init__(self) -> None:
        for name in ("pids", "memory_mb", "disk_mb"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"limits.{name} must be a positive integer or None, got {v!r}")
        c = self.cpus
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0.01):
            raise ValueError(f"limits.cpus must be a number of cores > 0.01 or None, got {c!r}")


_CG_ROOT = Path("/sys/fs/cgroup")
_V1 = ("pids", "memory", "cpu")


def _own_cgroup(controller: str | None) -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if (controller is None and ctrls == "") or (controller and controller in ctrls.split(",")):
            return path
    return "/"


def cgroup_mode() -> tuple[str, str]:
    """("v2" | "v1" | "", why not) for per-sandbox cgroups on this host (root only)."""
    if os.geteuid() != 0:
        return "", "an unprivileged owner cannot create cgroups"
    if (_CG_ROOT / "cgroup.controllers").exists():
        have = set((_CG_ROOT / "cgroup.controllers").read_text().split())
        if {"pids", "memory", "cpu"} <= have:
            if not os.access(_CG_ROOT, os.W_OK):
                return "", f"{_CG_ROOT} is not writable (a read-only cgroup mount)"
            return "v2", ""
        return "", f"cgroup v2 lacks controllers: {sorted({'pids', 'memory', 'cpu'} - have)}"
    missing = [c for c in _V1 if not (_CG_ROOT / c / "cgroup.procs").exists()]
    if not missing:
        if not all(os.access(_CG_ROOT / c / _own_cgroup(c).lstrip("/"), os.W_OK) for c in _V1):
            return "", "the v1 cgroup hierarchies are not writable"
        return "v1", ""
    return "", f"no cgroup v2 with pids/memory/cpu and no v1 hierarchies for {missing}"


class Cgroups:
    """The cgroup(s) of one sandbox: made with ``limits`` applied, ``procs`` files for the spawner to join,
    ``kill()`` and ``remove()``."""

    _n = 0
    _lock = threading.Lock()

    def __init__(self, mode: str, tag: str, limits: Limits) -> None:
        with Cgroups._lock:
            Cgroups._n += 1
            n = Cgroups._n
        name = f"nitrobox-{tag}-{n}"
        self.mode = mode
        self.dirs: list[Path] = []
        try:
            if mode == "v2":
                parent = _CG_ROOT / "nitrobox"
                if not parent.is_dir():
                    parent.mkdir(exist_ok=True)
                want = "+pids +memory +cpu"
                if not {"pids", "memory", "cpu"} <= set(
                    (parent / "cgroup.subtree_control").read_text().split()
                ):
                    (_CG_ROOT / "cgroup.subtree_control").write_text(want)
                    (parent / "cgroup.subtree_control").write_text(want)
                d = parent / name
                d.mkdir()
                self.dirs.append(d)
                self._write(d / "pids.max", "max" if limits.pids is None else str(limits.pids))
                mem = "max" if limits.memory_mb is None else str(limits.memory_mb * 2**20)
                self._write(d / "memory.max", mem)
                if (d / "memory.swap.max").exists():
                    self._write(d / "memory.swap.max", "0" if limits.memory_mb is not None else "max")
                cpu = "max" if limits.cpus is None else str(int(limits.cpus * 100000))
                self._write(d / "cpu.max", f"{cpu} 100000")
            else:
                for ctrl in _V1:
                    d = _CG_ROOT / ctrl / _own_cgroup(ctrl).lstrip("/") / name
                    d.mkdir()
                    self.dirs.append(d)
                    if ctrl == "pids" and limits.pids is not None:
                        self._write(d / "pids.max", str(limits.pids))
                    if ctrl == "memory" and limits.memory_mb is not None:
                        self._write(d / "memory.limit_in_bytes", str(limits.memory_mb * 2**20))
                    if ctrl == "cpu" and limits.cpus is not None:
                        self._write(d / "cpu.cfs_period_us", "100000")
                        self._write(d / "cpu.cfs_quota_us", str(int(limits.cpus * 100000)))
        except BaseException:
            self.remove()
            raise

    @staticmethod
    def _write(path: Path, value: str) -> None:
        with open(path, "w") as f:
            f.write(value)

    @property
    def procs(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> list[int]:
        out: set[int] = set()
        for d in self.dirs:
            try:
                out |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return sorted(out)

    def read(self, name: str) -> str:
        """A file of the sandbox's cgroup (``pids.max``, ``memory.max``/``memory.limit_in_bytes``, ...)."""
        for d in self.dirs:
            if (d / name).exists():
                return (d / name).read_text().strip()
        raise FileNotFoundError(name)

    def kill(self) -> None:
        """SIGKILL every process in the cgroup."""
        for d in self.dirs:
            if self.mode == "v2" and (d / "cgroup.kill").exists():
                try:
                    (d / "cgroup.kill").write_text("1")
                    continue
                except OSError:
                    pass
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        left = []
        for d in self.dirs:
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as err:
                    if err.errno != errno.EBUSY or time.monotonic() > deadline:
                        left.append(d)
                        break
                    self.kill()
                    time.sleep(0.002)
        self.dirs = left
        return not left


_FREE: dict[tuple, list[Cgroups]] = {}
_FREE_LOCK = threading.Lock()
_FREE_MAX = 8


def acquire_cgroups(mode: str, tag: str, limits: Limits) -> Cgroups:
    """A cgroup for a new sandbox: an empty one a closed sandbox of this owner left with the same limits, or a
    new one (making and configuring v1 memory/cpu/pids cgroups costs milliseconds on a busy host)."""
    with _FREE_LOCK:
        free = _FREE.get((mode, limits), [])
        while free:
            cg = free.pop()
            if all(d.is_dir() for d in cg.dirs) and not cg.pids():
                return cg
            cg.kill()
            cg.remove()
    return Cgroups(mode, tag, limits)


def release_cgroups(cg: Cgroups, limits: Limits) -> None:
    """Give back the cgroup of a closed sandbox: kept for reuse when no process is left in it, else killed
    and removed."""
    if cg.dirs and not cg.pids():
        with _FREE_LOCK:
            free = _FREE.setdefault((cg.mode, limits), [])
            if len(free) < _FREE_MAX:
                free.append(cg)
                return
    cg.kill()
    cg.remove()


def remove_free_cgroups() -> None:
    with _FREE_LOCK:
        groups = [cg for free in _FREE.values() for cg in free]
        _FREE.clear()
    for cg in groups:
        cg.kill()
        cg.remove()


def stale_cgroups() -> list[Path]:
    """Every nitrobox cgroup directory on this host (v2 and v1), for cleanup_stale."""
    found = []
    roots = [_CG_ROOT / "nitrobox"] + [_CG_ROOT / c / _own_cgroup(c).lstrip("/") for c in _V1]
    for r in roots:
        if r.is_dir():
            found += [p for p in r.iterdir() if p.is_dir() and p.name.startswith("nitrobox-")]
    return found


# --------------------------------------------------------------------------------------------------------
# size-limited layers


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount_layer_tmpfs(path: Path, tag: str, size_mb: int, uid: int, gid: int) -> None:
    """A tmpfs of ``size_mb`` at ``path`` (mount source ``nitrobox-<tag>``), root dir owned by uid:gid."""
    opts = f"size={size_mb}m,nr_inodes={max(4096, size_mb * 256)},mode=0755,uid={uid},gid={gid}"
    _check(
        _libc.mount(f"nitrobox-{tag}".encode(), str(path).encode(), b"tmpfs", MS_NOSUID, opts.encode()),
        f"mount the layer's tmpfs on {path}",
    )


def bind(source: Path, target: Path) -> None:
    _check(_libc.mount(str(source).encode(), str(target).encode(), None, MS_BIND, None), f"bind on {target}")


def detach(path: Path) -> None:
    """Lazy unmount: O(1); the memory goes when the last sandbox that still mounts the layer is gone."""
    _check(_libc.umount2(str(path).encode(), MNT_DETACH), f"unmount {path}")


def mounts_of(tag_prefix: str) -> list[tuple[str, str]]:
    """(mount point, source) of every mount whose source starts with ``nitrobox-<tag_prefix>``."""
    out = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        fields = line.split()
        try:
            sep = fields.index("-")
        except ValueError:
            continue
        source = fields[sep + 2] if len(fields) > sep + 2 else ""
        if source.startswith("nitrobox-" + tag_prefix):
            point = fields[4].encode().decode("unicode_escape")
            out.append((point, source))
    return out
