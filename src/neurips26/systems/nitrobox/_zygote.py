"""The sandbox spawner: a small privileged helper process that forks sandboxes on request.

It is started once per owning process (``python -I -S _zygote.py FD``, standard library only) and talks over a
SOCK_SEQPACKET socket pair: a request is a JSON config plus four file descriptors (the shell's stdin read end,
stdout and stderr write ends, and the lifeline's read end); the answer is ``{"pid": ...}`` plus a pidfd of the
sandbox's PID 1. Forking this small single-threaded process and making the namespace, mount and capability
calls through libc costs a few hundred microseconds, where a chain of util-linux and busybox programs costs
several milliseconds of CPU: on a loaded machine that CPU time is what a create or a reset waits for.

Per request::

    fork -> C1: unshare(mount, UTS, IPC, PID[, net]); fork -> C2; C1 reports C2's pid and exits
    C2 (PID 1 of the new PID namespace; reparented to this helper, a child subreaper):
       mount / rprivate; mount the root (overlay of the layers, or a bind of a private copy) at `merged`;
       mount proc; /proc/sys (and /proc/sysrq-trigger) read-only; read-only binds; sethostname; lo up;
       pivot_root into `merged` and detach the old root; drop every capability (bounding set, inheritable,
       ambient) and set no_new_privs; exec busybox sh as the sandbox's init.

The helper exits when its owner closes the socket (or dies). It reaps the sandboxes' PID 1s.
"""

import ctypes
import fcntl
import json
import os
import platform
import select
import signal
import socket
import struct
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 24, 36, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_SYSCALLS = {  # pivot_root, capget, capset
    "x86_64": (155, 125, 126),
    "aarch64": (41, 90, 91),
    "arm64": (41, 90, 91),
}

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
libc.syscall.restype = ctypes.c_long


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


def _ro_bind(source, target):
    _mount(source, target, None, MS_BIND | MS_REC)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


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
    for cap in range(CAP_LAST + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop bounding capability")
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    _, capget, capset = _SYSCALLS[platform.machine()]
    header = struct.pack("Ii", _LINUX_CAPABILITY_VERSION_3, 0)
    data = ctypes.create_string_buffer(24)
    _check(libc.syscall(capget, header, data), "capget")
    eff0, perm0, _, eff1, perm1, _ = struct.unpack("6I", data.raw)
    # inheritable = 0; the bounding set is empty, so the exec below leaves permitted and effective empty too
    _check(libc.syscall(capset, header, struct.pack("6I", eff0, perm0, 0, eff1, perm1, 0)), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _setup_and_exec(cfg, fds):
    """C2: runs as PID 1 of the new namespaces; never returns."""
    stdin_r, stdout_w, stderr_w, life_r = fds
    os.setsid()
    os.dup2(stdin_r, 0)
    os.dup2(stdout_w, 1)
    os.dup2(stderr_w, 2)
    os.dup2(life_r, 8)
    os.closerange(3, 8)
    os.closerange(9, 1 << 16)
    merged = cfg["merged"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = cfg["root"]
    if root["type"] == "overlay":
        opts = f"lowerdir={':'.join(root['lower'])},upperdir={root['upper']},workdir={root['work']}"
        if root.get("volatile"):
            opts += ",volatile"  # no sync of the upper layer (neither fsync inside nor at unmount)
        _mount("overlay", merged, "overlay", 0, opts)
    else:
        _mount(root["source"], merged, None, MS_BIND | MS_REC)
    _mount("proc", merged + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for sub in ("sys", "sysrq-trigger"):
        path = f"{merged}/proc/{sub}"
        if os.path.exists(path):
            _ro_bind(path, path)
    for src in cfg["binds"]:
        _ro_bind(src, merged + src)
    name = cfg["hostname"].encode()
    _check(libc.sethostname(name, len(name)), "sethostname")
    if cfg["new_net"]:
        _loopback_up()
    os.chdir(merged)
    pivot_root = _SYSCALLS[platform.machine()][0]
    _check(libc.syscall(pivot_root, b".", b".oldroot"), "pivot_root")
    _check(libc.umount2(b"/.oldroot", MNT_DETACH), "detach the old root")
    os.chdir("/")
    _drop_capabilities()
    os.execve("/bin/busybox", ["sh", "-c", cfg["init"]], cfg["env"])


def _spawn(cfg, fds):
    flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | (CLONE_NEWNET if cfg["new_net"] else 0)
    r, w = os.pipe()
    c1 = os.fork()
    if c1 == 0:
        try:
            os.close(r)
            _check(libc.unshare(flags), "unshare")
            c2 = os.fork()
            if c2 == 0:
                os.close(w)
                try:
                    _setup_and_exec(cfg, fds)
                except BaseException as err:  # noqa: BLE001 - report to the owner through the shell's stderr
                    os.write(2, f"nitrobox: sandbox setup failed: {err}\n".encode())
                os._exit(127)
            os.write(w, str(c2).encode())
            os._exit(0)
        except BaseException as err:  # noqa: BLE001
            try:
                os.write(fds[2], f"nitrobox: namespace setup failed: {err}\n".encode())
            finally:
                os._exit(1)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 64)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(c1, 0)
    if not data:
        raise OSError("the namespace could not be created (see the sandbox's stderr)")
    c2 = int(data)
    return c2, os.pidfd_open(c2)  # C2 is our child now (subreaper): nobody else can reap it first


def _probe():
    """'' when a child can unshare every namespace a sandbox uses, else the error."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
        if libc.unshare(flags) != 0:
            os.write(w, os.strerror(ctypes.get_errno()).encode() or b"unshare failed")
        os._exit(0)
    os.close(w)
    msg = os.read(r, 4096).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return f"unshare failed: {msg}" if msg else ""


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(fd):
    sock = socket.socket(fileno=fd)
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "child subreaper")
    # a sandbox's PID 1 is reaped the moment it exits (its owner waits for that in close())
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    fd_space = socket.CMSG_SPACE(8 * struct.calcsize("i"))
    while True:
        _reap()
        ready, _, _ = select.select([sock, wake_r], [], [], 5.0)
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
            return  # the owner is gone
        fds = []
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += list(struct.unpack(f"{len(data) // 4}i", data[: len(data) - len(data) % 4]))
        pidfd = None
        try:
            cfg = json.loads(msg)
            if cfg.get("probe"):
                reply = {"pid": 0, "probe": _probe()}
            else:
                pid, pidfd = _spawn(cfg, fds)
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


if __name__ == "__main__":
    main(int(sys.argv[1]))
