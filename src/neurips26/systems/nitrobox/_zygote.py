"""The sandbox spawner: a small helper process that forks sandboxes on request, and their PID 1 (the agent).

It is started once per owning process (``python -I -S _zygote.py FD OWNER_PID``, standard library only) and
talks over a SOCK_SEQPACKET socket pair: a request is a JSON config plus three file descriptors (the agent's
request pipe read end, its frame pipe write end and its stderr write end); the answer is ``{"pid": ...}`` plus a
pidfd of the sandbox's PID 1. It watches its owner through a pidfd: when the owner is gone (exit, SIGKILL) or
closes the socket, the spawner SIGKILLs every sandbox it made and exits; every sandbox's PID 1 also has
``PR_SET_PDEATHSIG=SIGKILL`` on the spawner, so a killed spawner takes its sandboxes down with it. Neither
process is visible from inside a sandbox (other PID namespace, other uid, no capabilities).

Per request (privileged mode; ``rootless`` differs as noted)::

    fork -> C1: join the sandbox's cgroups; unshare(mount, UTS, IPC, PID[, net]) [rootless: + user, and C1
                maps its own uid to 0]; fork -> C2; C1 reports C2's pid and exits
    C2 (PID 1 of the new PID namespace; reparented to this helper, a child subreaper):
       mount / rprivate; unshare(cgroup); mount the root (overlay of the layers, or a bind) at `merged`;
       mount proc; mask /proc as Docker does (kcore, keys, timer_list, ... hidden; bus, fs, irq, sys,
       sysrq-trigger read-only); read-only binds, recursively (mount_setattr AT_RECURSIVE); every mount
       target inside the sandbox's own tree is opened without following symlinks; sethostname; lo up;
       pivot_root(".", ".") and detach the old root (no put-old directory the sandbox could tamper with);
       unshare(user) and wait while the spawner writes uid_map / gid_map (inside 0 -> an unprivileged host
       uid); setresuid/setresgid(0); a new session keyring; drop every capability (bounding, inheritable,
       ambient, permitted, effective); no_new_privs; not dumpable; load the seccomp-bpf filter; then serve
       commands (below), never exec'ing anything itself.

The agent (C2 after setup) runs each command as ``/bin/sh -c CMD`` (posix_spawn, default signal dispositions,
stdin /dev/null, fresh stdout/stderr pipes) and relays its output to the owner in length-prefixed frames,
then its wait status: the command can print anything, close or redirect any descriptor, redefine any shell
function, but it cannot write a frame, and its exit status comes from ``waitpid``. Like ``subprocess.run``,
a command is finished when it has exited and both of its output pipes are closed (a background job that keeps
them open is waited for; one that redirected them is not). Orphans are reaped by the agent.

Frames (agent -> owner): ``b"r"`` ready; ``b"o"``/``b"e"`` + u32 length + bytes: output; ``b"x"`` + i32 wait
status: the command is done. Requests (owner -> agent): u32 length + the command's bytes.
"""

import ctypes
import errno
import fcntl
import json
import os
import platform
import select
import signal
import socket
import stat
import struct
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NAME = 1, 4, 15
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 24, 36, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
KEYCTL_JOIN_SESSION_KEYRING = 1
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_SYSCALLS = {  # pivot_root, capget, capset, keyctl, mount_setattr
    "x86_64": (155, 125, 126, 250, 442),
    "aarch64": (41, 90, 91, 219, 442),
    "arm64": (41, 90, 91, 219, 442),
}
# Docker's default masked and read-only paths (moby oci/defaults.go), relative to /proc
PROC_MASKED = (
    "acpi", "asound", "interrupts", "kcore", "keys", "latency_stats", "timer_list", "timer_stats",
    "sched_debug", "scsi", "kallsyms",
)  # fmt: skip
PROC_READONLY = ("bus", "fs", "irq", "sys", "sysrq-trigger")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
libc.syscall.restype = ctypes.c_long


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype, flags, data=None):
    _check(
        libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        f"mount {fstype or 'bind'} on {target}",
    )


def _open_beneath(root, rel):
    """An O_PATH descriptor of ``root/rel`` reached without following any symlink (the sandbox controls its
    upper layer: a symlink planted there must not redirect a mount made at its next start)."""
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    try:
        for part in [p for p in rel.split("/") if p]:
            if part == "..":
                raise OSError(errno.EINVAL, f"'..' in a mount target: {rel}")
            nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise OSError(errno.ELOOP, f"mount target {rel!r} is a symlink inside the sandbox")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _mount_beneath(source, root, rel, fstype, flags, data=None):
    fd = _open_beneath(root, rel)
    try:
        _mount(source, f"/proc/self/fd/{fd}", fstype, flags, data)
    finally:
        os.close(fd)


def _make_readonly(target):
    """Read-only, nosuid, nodev for ``target`` and every mount below it."""
    attr = struct.pack("QQQQ", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, len(attr))
    nr = _SYSCALLS[platform.machine()][4]
    if libc.syscall(nr, AT_FDCWD, target.encode(), AT_RECURSIVE, buf, len(attr)) == 0:
        return
    if ctypes.get_errno() != errno.ENOSYS:
        _check(-1, f"mount_setattr read-only on {target}")
    # kernels before 5.12: remount every mount at or below target (deepest last does not matter)
    with open("/proc/self/mountinfo") as f:
        points = [ln.split()[4] for ln in f]
    real = os.path.realpath(target)
    for p in points:
        if p == real or p.startswith(real.rstrip("/") + "/"):
            _mount(None, p, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _loopback_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        req = struct.pack("16sh14x", b"lo", 0)
        flags = struct.unpack("16sh14x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sh14x", b"lo", flags | IFF_UP))
    finally:
        s.close()


with open("/proc/sys/kernel/cap_last_cap") as _f:
    CAP_LAST = int(_f.read())


def _drop_capabilities():
    """Empty bounding, ambient, inheritable, permitted and effective sets; no_new_privs; not dumpable."""
    for cap in range(CAP_LAST + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop bounding capability")
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    capset = _SYSCALLS[platform.machine()][2]
    header = struct.pack("Ii", _LINUX_CAPABILITY_VERSION_3, 0)
    _check(libc.syscall(capset, header, bytes(24)), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")  # no ptrace, no /proc/1/mem, fd, environ


def _load_seccomp(bpf):
    if not bpf:
        return
    buf = ctypes.create_string_buffer(bpf, len(bpf))
    prog = _SockFprog(len(bpf) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp filter")


def _write_maps(pid, userns):
    for kind in ("uid", "gid"):
        with open(f"/proc/{pid}/{kind}_map", "w") as f:
            f.write(f"0 {userns[kind]} {userns['count']}\n")


def _read_exact(fd, n):
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError("peer closed")
        data += chunk
    return data


def _setup(cfg, sync_w, sync_r):
    """C2, as root of its new namespaces: mounts, masks, pivot, identity, privileges. Returns the agent's
    protocol descriptors."""
    merged = cfg["merged"]
    userns = cfg.get("userns")
    rootless = bool(cfg.get("rootless"))
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    if cfg.get("cgroupns"):
        _check(libc.unshare(CLONE_NEWCGROUP), "unshare cgroup")
    root = cfg["root"]
    if root["type"] == "overlay":
        # the layers by descriptor: the sandbox's /proc/self/mountinfo then shows /proc/self/fd/N, not the
        # host paths of the image and the layers
        fds = [os.open(p, os.O_PATH | os.O_DIRECTORY) for p in (*root["lower"], root["upper"], root["work"])]
        paths = [f"/proc/self/fd/{fd}" for fd in fds]
        opts = f"lowerdir={':'.join(paths[:-2])},upperdir={paths[-2]},workdir={paths[-1]}"
        if root.get("volatile"):
            opts += ",volatile"  # no sync of the upper layer (neither fsync inside nor at unmount)
        try:
            _mount("overlay", merged, "overlay", MS_NOSUID, opts)
        finally:
            for fd in fds:
                os.close(fd)
    else:
        _mount(root["source"], merged, None, MS_BIND | MS_REC)
    _mount_beneath("proc", merged, "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    proc = merged + "/proc"
    for name in PROC_MASKED:
        path = f"{proc}/{name}"
        if not os.path.lexists(path):
            continue
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,mode=0555")
        else:
            _mount("/dev/null", path, None, MS_BIND)
    for name in PROC_READONLY:
        path = f"{proc}/{name}"
        if os.path.isdir(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _make_readonly(path)
        elif os.path.exists(path):
            _mount(path, path, None, MS_BIND)
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    if rootless:  # device nodes on a user namespace's own mounts do not open: bind the host's
        for name in DEVICES:
            if os.path.exists(f"/dev/{name}"):
                _mount_beneath(f"/dev/{name}", merged, f"dev/{name}", None, MS_BIND)
    for src in cfg["binds"]:
        fd = _open_beneath(merged, src)
        try:
            target = f"/proc/self/fd/{fd}"
            _mount(src, target, None, MS_BIND | MS_REC)
        finally:
            os.close(fd)
        fd = _open_beneath(merged, src)  # the new mount on top of the mount point
        try:
            _make_readonly(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
    name = cfg["hostname"].encode()
    _check(libc.sethostname(name, len(name)), "sethostname")
    if cfg["new_net"]:
        _loopback_up()
    os.chdir(merged)
    pivot_root = _SYSCALLS[platform.machine()][0]
    _check(libc.syscall(pivot_root, b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")
    _set_cmdline()
    if userns and not rootless:
        _check(libc.unshare(CLONE_NEWUSER), "unshare user")
    os.write(sync_w, b"u")  # the spawner writes our uid/gid maps now
    if _read_exact(sync_r, 1) != b"g":
        raise OSError("the spawner refused the sandbox")
    os.close(sync_w)
    os.close(sync_r)
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "parent-death signal")
    if userns and not rootless:
        os.setresgid(0, 0, 0)
        os.setgroups([])
        os.setresuid(0, 0, 0)
    keyctl = _SYSCALLS[platform.machine()][3]
    libc.syscall(keyctl, KEYCTL_JOIN_SESSION_KEYRING, None)  # a new, empty session keyring (best effort)
    libc.prctl(PR_SET_NAME, b"nitrobox-init", 0, 0, 0)
    _drop_capabilities()
    _load_seccomp(bytes.fromhex(cfg.get("seccomp", "")))


_CMDLINE = ctypes.create_string_buffer(b"nitrobox-init\0")
PR_SET_MM, PR_SET_MM_ARG_START, PR_SET_MM_ARG_END = 35, 8, 9


def _set_cmdline():
    """/proc/1/cmdline reads ``nitrobox-init`` (not the host's interpreter and spawner paths). Needs
    CAP_SYS_RESOURCE in the initial user namespace: privileged mode only (rootless keeps the real one)."""
    start = ctypes.addressof(_CMDLINE)
    end = start + len(b"nitrobox-init") + 1
    for order in (
        ((PR_SET_MM_ARG_END, end), (PR_SET_MM_ARG_START, start)),
        (
            (PR_SET_MM_ARG_START, start),
            (PR_SET_MM_ARG_END, end),
        ),
    ):
        if all(libc.prctl(PR_SET_MM, opt, ctypes.c_ulong(v), 0, 0) == 0 for opt, v in order):
            return


def _frame(fd, kind, data=b""):
    msg = kind + struct.pack("!I", len(data)) + data
    view = memoryview(msg)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except InterruptedError:
            continue


def _reap(statuses):
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        statuses[pid] = st


def _serve(req_fd, out_fd, env):
    """The agent loop: one ``/bin/sh -c`` per request, output and status relayed in frames."""
    devnull = "/dev/null"
    all_signals = set(range(1, signal.NSIG)) - {signal.SIGKILL, signal.SIGSTOP, 32, 33}
    _frame(out_fd, b"r")
    while True:
        try:
            (n,) = struct.unpack("!I", _read_exact(req_fd, 4))
            cmd = _read_exact(req_fd, n)
        except EOFError:
            os._exit(0)  # the owner closed the request pipe
        o_r, o_w = os.pipe()
        e_r, e_w = os.pipe()
        try:
            pid = os.posix_spawn(
                "/bin/sh",
                ["sh", "-c", cmd],
                env,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, o_w, 1),
                    (os.POSIX_SPAWN_DUP2, e_w, 2),
                ],
                setsigdef=all_signals,
                setsigmask=(),
            )
        except OSError as err:
            os.close(o_w)
            os.close(e_w)
            os.close(o_r)
            os.close(e_r)
            _frame(out_fd, b"e", f"nitrobox: cannot start /bin/sh: {err}\n".encode())
            _frame(out_fd, b"x", struct.pack("!i", 127 << 8))
            continue
        os.close(o_w)
        os.close(e_w)
        statuses = {}
        pidfd = os.pidfd_open(pid)
        open_fds = {o_r: b"o", e_r: b"e"}
        while open_fds or pid not in statuses:
            watch = list(open_fds) + ([pidfd] if pid not in statuses else [])
            try:
                ready, _, _ = select.select(watch, [], [])
            except InterruptedError:
                continue
            for fd in ready:
                if fd == pidfd:
                    _reap(statuses)
                    continue
                try:
                    chunk = os.read(fd, 1 << 16)
                except InterruptedError:
                    continue
                if chunk:
                    _frame(out_fd, open_fds[fd], chunk)
                else:
                    os.close(fd)
                    del open_fds[fd]
        os.close(pidfd)
        _reap(statuses)
        _frame(out_fd, b"x", struct.pack("!i", statuses[pid]))


def _agent(cfg, fds, sync_w, sync_r):
    """C2: runs as PID 1 of the new namespaces; never returns."""
    hi = [fcntl.fcntl(f, fcntl.F_DUPFD_CLOEXEC, 64) for f in (*fds, sync_w, sync_r)]
    req_r, frame_w, err_w, sync_w, sync_r = hi
    os.setsid()
    for sig in range(1, signal.NSIG):
        if sig not in (signal.SIGKILL, signal.SIGSTOP, 32, 33):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
    signal.set_wakeup_fd(-1)
    for fd in os.listdir("/proc/self/fd"):
        fd = int(fd)
        if fd not in hi and fd > 0:
            try:
                os.close(fd)
            except OSError:
                pass
    # 0: /dev/null (the spawner's), 1: frames, 2: setup errors, 3: requests; the rest closed
    os.dup2(err_w, 2)
    os.dup2(frame_w, 1)
    os.dup2(req_r, 3)
    for fd in (req_r, frame_w, err_w):
        os.close(fd)
    _setup(cfg, sync_w, sync_r)
    for fd in (1, 3):
        os.set_inheritable(fd, False)
    os.close(2)
    os.open("/dev/null", os.O_WRONLY)  # fd 2, close-on-exec
    _serve(3, 1, cfg["env"])


def _spawn(cfg, fds):
    rootless = bool(cfg.get("rootless"))
    flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | (CLONE_NEWNET if cfg["new_net"] else 0)
    if rootless:
        flags |= CLONE_NEWUSER
    r, w = os.pipe()
    s_up_r, s_up_w = os.pipe()  # C2 -> spawner: "u" (ready for the uid/gid maps)
    s_dn_r, s_dn_w = os.pipe()  # spawner -> C2: "g"
    uid, gid = os.geteuid(), os.getegid()
    c1 = os.fork()
    if c1 == 0:
        try:
            os.close(r)
            os.close(s_up_r)
            os.close(s_dn_w)
            for procs in cfg.get("cgroups", ()):
                with open(procs, "w") as f:
                    f.write("0")
            _check(libc.unshare(flags), "unshare")
            if rootless:
                with open("/proc/self/setgroups", "w") as f:
                    f.write("deny")
                with open("/proc/self/uid_map", "w") as f:
                    f.write(f"0 {uid} 1\n")
                with open("/proc/self/gid_map", "w") as f:
                    f.write(f"0 {gid} 1\n")
            c2 = os.fork()
            if c2 == 0:
                os.close(w)
                try:
                    _agent(cfg, fds, s_up_w, s_dn_r)
                except BaseException as err:  # noqa: BLE001 - report to the owner through the agent's stderr
                    try:
                        os.write(2, f"nitrobox: sandbox setup failed: {err}\n".encode())
                    finally:
                        os._exit(127)
                os._exit(127)
            os.write(w, str(c2).encode())
            os._exit(0)
        except BaseException as err:  # noqa: BLE001
            try:
                os.write(fds[2], f"nitrobox: namespace setup failed: {err}\n".encode())
            finally:
                os._exit(1)
    os.close(w)
    os.close(s_up_w)
    os.close(s_dn_r)
    try:
        data = b""
        while True:
            chunk = os.read(r, 64)
            if not chunk:
                break
            data += chunk
        os.waitpid(c1, 0)
        if not data:
            raise OSError("the namespace could not be created (see the sandbox's stderr)")
        c2 = int(data)
        pidfd = os.pidfd_open(c2)  # C2 is our child now (subreaper): nobody else can reap it first
        try:
            if os.read(s_up_r, 1) != b"u":
                raise OSError("the sandbox's setup failed (see its stderr)")
            if cfg.get("userns") and not rootless:
                _write_maps(c2, cfg["userns"])
            os.write(s_dn_w, b"g")
        except BaseException:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)
            raise
        return c2, pidfd
    finally:
        os.close(r)
        os.close(s_up_r)
        os.close(s_dn_w)


def _probe(cfg):
    """'' when a child can unshare every namespace a sandbox uses, else the error."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
        if cfg.get("rootless"):
            flags |= CLONE_NEWUSER
        if libc.unshare(flags) != 0:
            os.write(w, os.strerror(ctypes.get_errno()).encode() or b"unshare failed")
        elif not cfg.get("rootless") and libc.unshare(CLONE_NEWUSER) != 0:
            os.write(w, b"-userns " + os.strerror(ctypes.get_errno()).encode())
        os._exit(0)
    os.close(w)
    msg = os.read(r, 4096).decode()
    os.close(r)
    os.waitpid(pid, 0)
    if msg.startswith("-userns "):
        return {"probe": "", "userns": msg[len("-userns ") :]}
    return {"probe": f"unshare failed: {msg}" if msg else "", "userns": ""}


def _reap_children(live):
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = live.pop(pid, None)
        if fd is not None:
            os.close(fd)


def _kill_all(live, cgroups):
    """SIGKILL every sandbox's PID 1 (its PID namespace goes with it), then whatever is left in their cgroups."""
    for fd in live.values():
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass
    for procs in cgroups:
        kill = os.path.join(os.path.dirname(procs), "cgroup.kill")
        try:
            if os.path.exists(kill):
                with open(kill, "w") as f:
                    f.write("1")
                continue
            with open(procs) as f:
                for pid in f.read().split():
                    os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass


def _owner_mounts(owner_pid):
    """Mount points of the owner's size-limited layers (mount source ``nitrobox-<pid>.<start time>``)."""
    try:
        with open(f"/proc/{owner_pid}/stat") as f:
            start = f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None
    return f"nitrobox-{owner_pid}.{start}"


def _detach_mounts(tag):
    if not tag:
        return
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return
    points = []
    for line in lines:
        fields = line.split()
        if "-" in fields:
            sep = fields.index("-")
            if len(fields) > sep + 2 and fields[sep + 2] == tag:
                points.append(fields[4].encode().decode("unicode_escape"))
    for p in sorted(points, key=len, reverse=True):
        libc.umount2(p.encode(), MNT_DETACH)


def main(fd, owner_pid):
    sock = socket.socket(fileno=fd)
    tag = _owner_mounts(owner_pid)
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "child subreaper")
    live = {}  # pid -> pidfd of every sandbox's PID 1 this spawner made
    cgroups = set()  # the cgroup.procs files of the sandboxes' cgroups
    try:
        owner = os.pidfd_open(owner_pid)
    except OSError:
        return
    if os.getppid() != owner_pid:
        return  # the owner died before we could watch it
    # a sandbox's PID 1 is reaped the moment it exits (its owner waits for that in close())
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    fd_space = socket.CMSG_SPACE(8 * struct.calcsize("i"))
    try:
        while True:
            _reap_children(live)
            ready, _, _ = select.select([sock, wake_r, owner], [], [], 5.0)
            if owner in ready:
                return  # the owner is gone (even by SIGKILL)
            if wake_r in ready:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
            if sock not in ready:
                continue
            try:
                msg, anc, _, _ = sock.recvmsg(1 << 20, fd_space)
            except ConnectionResetError:
                return
            if not msg:
                return  # the owner closed its end
            fds = []
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds += list(struct.unpack(f"{len(data) // 4}i", data[: len(data) - len(data) % 4]))
            pidfd = None
            try:
                cfg = json.loads(msg)
                if cfg.get("probe"):
                    reply = {"pid": 0, **_probe(cfg)}
                else:
                    pid, pidfd = _spawn(cfg, fds)
                    live[pid] = os.dup(pidfd)
                    cgroups.update(cfg.get("cgroups", ()))
                    reply = {"pid": pid}
            except Exception as err:  # noqa: BLE001 - every failure goes back to the owner
                reply = {"error": f"{type(err).__name__}: {err}"}
            finally:
                for f in fds:
                    os.close(f)
            anc_out = (
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", pidfd))] if pidfd is not None else []
            )
            try:
                sock.sendmsg([json.dumps(reply).encode()], anc_out)
            except (BrokenPipeError, ConnectionResetError):
                return
            finally:
                if pidfd is not None:
                    os.close(pidfd)
    finally:
        _detach_mounts(tag)  # the layers of a dead owner (nothing of a live one: only this owner's tag)
        _kill_all(live, cgroups)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
