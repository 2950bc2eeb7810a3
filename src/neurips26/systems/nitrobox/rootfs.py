"""An offline root file system for sandboxes: Debian's static busybox in a small FHS skeleton.

The tree is built once and shared read-only by every sandbox as the overlay's lower layer. Nothing is
downloaded: the only input is the host's ``busybox`` (Debian package ``busybox-static``), whose applets become
symlinks in ``/bin``. With ``python=True`` the tree also holds empty mount points (and the merged-/usr
symlinks ``/lib`` and ``/lib64``) for read-only bind mounts of the host's ``/usr`` and Python prefix, so that a
sandbox started with ``Sandbox(..., binds=python_binds())`` runs the host's interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

IMAGE_META = ".nitrobox-image.json"
# host uid (and gid) that owns images by default: root inside a sandbox is this uid on the host (a user
# namespace maps 0..65535 inside to DEFAULT_UID..DEFAULT_UID+65535); no account and no file of the host has it
DEFAULT_UID = 1 << 20

# Debian's static busybox first: a dynamically linked one would need the host's libc inside the tree.
_BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox", "/usr/lib/busybox/busybox-static")

_DEVICES = {  # name: (major, minor); made with mknod, so /dev needs no tmpfs or bind mount at start
    "null": (1, 3),
    "zero": (1, 5),
    "full": (1, 7),
    "random": (1, 8),
    "urandom": (1, 9),
    "tty": (5, 0),
}


def find_busybox() -> Path | None:
    """The host's statically linked busybox, or None when there is none (install ``busybox-static``)."""
    for candidate in _BUSYBOX_CANDIDATES:
        path = Path(candidate)
        if path.is_file() and os.access(path, os.X_OK) and _is_static(path):
            return path.resolve()
    found = shutil.which("busybox")
    if found and _is_static(Path(found)):
        return Path(found).resolve()
    return None


def _is_static(path: Path) -> bool:
    """An ELF file without a PT_INTERP program header (no dynamic loader) is statically linked."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit ELF only
                return False
            little = head[5] == 1
            order = "little" if little else "big"
            phoff = int.from_bytes(head[32:40], order)
            phentsize = int.from_bytes(head[54:56], order)
            phnum = int.from_bytes(head[56:58], order)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return False
    for i in range(phnum):
        p_type = int.from_bytes(table[i * phentsize : i * phentsize + 4], order)
        if p_type == 3:  # PT_INTERP
            return False
    return True


def python_binds(prefix: str | os.PathLike[str] | None = None) -> list[str]:
    """Host paths to bind read-only into a sandbox so that it can run the host's Python.

    ``prefix`` defaults to this interpreter's ``sys.base_prefix``; ``/usr`` brings the C library and the
    dynamic loader (Debian's merged /usr: ``/lib`` and ``/lib64`` are symlinks into it). A virtual
    environment's own ``site-packages`` is not included: add ``sys.prefix`` to the list for that.
    """
    prefix = Path(prefix if prefix is not None else sys.base_prefix).resolve()
    if not prefix.is_dir():
        raise ValueError(f"prefix must be an existing directory, got {str(prefix)!r}")
    binds = ["/usr"]
    if not str(prefix).startswith("/usr/") and str(prefix) != "/usr":
        binds.append(str(prefix))
    return binds


def build_rootfs(
    dest: str | os.PathLike[str],
    *,
    python: bool = False,
    extra_binds: tuple[str, ...] | list[str] = (),
    pad_mb: float = 0.0,
    pad_files: int = 1024,
    overwrite: bool = False,
    uid: int = DEFAULT_UID,
) -> Path:
    """Build the sandbox root file system at ``dest`` and return its path.

    Parameters
    ----------
    dest : the directory to create (it must not exist, unless ``overwrite``).
    python : add mount points for :func:`python_binds` (host ``/usr`` and Python prefix, read-only).
    extra_binds : further host paths whose mount points the image should hold.
    pad_mb : add this many MB of filler files under ``/opt/pad`` (``pad_files`` files), to stand in for a
        realistic image's size and file count (the chroot + full copy baseline copies all of it).
    overwrite : remove an existing ``dest`` first.
    uid : the host uid and gid that own the tree: root inside a sandbox on it (default ``DEFAULT_UID``, an
        unprivileged id; 0 makes a host-root image, which sandboxes run only in privileged mode; a rootless
        owner's own uid for its sandboxes).

    Needs root (device nodes are made with mknod) and the ``busybox-static`` package.
    """
    if not isinstance(python, bool):
        raise TypeError(f"python must be a bool, got {type(python).__name__}")
    if isinstance(pad_mb, bool) or not isinstance(pad_mb, (int, float)) or not (0 <= pad_mb <= 16384):
        raise ValueError(f"pad_mb must be a number in [0, 16384], got {pad_mb!r}")
    if isinstance(pad_files, bool) or not isinstance(pad_files, int) or pad_files < 1:
        raise ValueError(f"pad_files must be a positive integer, got {pad_files!r}")
    if isinstance(extra_binds, (str, bytes)):
        raise TypeError("extra_binds must be a sequence of absolute paths, not one string")
    for b in extra_binds:
        if not isinstance(b, str) or not os.path.isabs(b):
            raise ValueError(f"extra_binds must hold absolute paths, got {b!r}")
    if isinstance(uid, bool) or not isinstance(uid, int) or not 0 <= uid < 2**32 - 65537:
        raise ValueError(f"uid must be an integer in [0, 2**32 - 65537), got {uid!r}")
    if os.geteuid() != 0:
        raise PermissionError("build_rootfs needs root (it makes device nodes with mknod)")
    busybox = find_busybox()
    if busybox is None:
        raise FileNotFoundError(
            "no statically linked busybox found: install the Debian package busybox-static"
        )
    dest = Path(dest)
    if dest.exists():
        if not overwrite:
            raise FileExistsError(f"dest {str(dest)!r} exists (pass overwrite=True to rebuild it)")
        shutil.rmtree(dest)
    tmp = dest.with_name(dest.name + ".building")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    for d in (
        "bin",
        "sbin",
        "etc",
        "proc",
        "sys",
        "dev",
        "dev/pts",
        "dev/shm",
        "root",
        "home",
        "opt",
        "run",
        "mnt",
        "var",
    ):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    (tmp / "tmp").mkdir(mode=0o1777)
    os.chmod(tmp / "tmp", 0o1777)
    (tmp / "root").chmod(0o700)
    shutil.copy2(busybox, tmp / "bin" / "busybox")
    applets = subprocess.run(
        [str(busybox), "--list"], check=True, capture_output=True, text=True, timeout=30
    ).stdout.split()
    for applet in applets:
        if applet in ("busybox", "[", "[["):
            continue
        link = tmp / "bin" / applet
        if not link.exists():
            link.symlink_to("busybox")
    for applet in ("[", "[["):
        (tmp / "bin" / applet).symlink_to("busybox")
    for name, (major, minor) in _DEVICES.items():
        os.mknod(tmp / "dev" / name, 0o020666, os.makedev(major, minor))
        os.chmod(tmp / "dev" / name, 0o666)
    for i, stream in enumerate(("stdin", "stdout", "stderr")):
        (tmp / "dev" / stream).symlink_to(f"/proc/self/fd/{i}")
    (tmp / "dev" / "fd").symlink_to("/proc/self/fd")
    (tmp / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n")
    (tmp / "etc" / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    (tmp / "etc" / "hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
    (tmp / "etc" / "hostname").write_text("sandbox\n")
    (tmp / "etc" / "os-release").write_text('NAME="nitrobox busybox"\nID=nitrobox\n')
    binds = list(python_binds() if python else []) + list(extra_binds)
    for host_path in binds:
        _make_mount_point(tmp, host_path)
    if python or "/usr" in binds:
        for name in ("lib", "lib64"):
            if not (tmp / name).exists() and os.path.islink(f"/{name}"):
                (tmp / name).symlink_to(os.readlink(f"/{name}"))
    n_pad = 0
    if pad_mb > 0:
        n_pad = _pad(tmp / "opt" / "pad", int(pad_mb * 1024 * 1024), pad_files)
    meta = {
        "busybox": str(busybox),
        "applets": len(applets),
        "mount_points": binds,
        "pad_bytes": int(pad_mb * 1024 * 1024),
        "pad_files": n_pad,
    }
    meta["uid"] = uid
    (tmp / IMAGE_META).write_text(json.dumps(meta, indent=1))
    if uid != 0:
        for dirpath, dirnames, filenames in os.walk(tmp):
            for name in dirnames + filenames:
                os.lchown(os.path.join(dirpath, name), uid, uid)
        os.lchown(tmp, uid, uid)
    os.rename(tmp, dest)  # a half-built tree never sits at dest
    return dest


def _make_mount_point(root: Path, host_path: str) -> None:
    host = Path(host_path)
    if not host.exists():
        raise ValueError(f"bind source {host_path!r} does not exist on the host")
    target = root / str(host).lstrip("/")
    if host.is_dir():
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()


def _pad(folder: Path, total_bytes: int, n_files: int) -> int:
    """Exactly ``n_files`` filler files of incompressible bytes summing to ``total_bytes`` (content does not matter)."""
    folder.mkdir(parents=True)
    n_files = max(1, min(n_files, total_bytes))
    per, extra = divmod(total_bytes, n_files)
    block = os.urandom(min(per + 1, 1 << 20))
    for i in range(n_files):
        sub = folder / f"{i // 256:03d}"
        sub.mkdir(exist_ok=True)
        left = per + (1 if i < extra else 0)
        with open(sub / f"f{i:05d}.bin", "wb") as f:
            while left > 0:
                chunk = block[: min(left, len(block))]
                f.write(chunk)
                left -= len(chunk)
    return n_files


def tree_size(path: str | os.PathLike[str]) -> tuple[int, int]:
    """(bytes of regular files, number of entries) under ``path``, symlinks not followed."""
    total, count = 0, 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in filenames + dirnames:
            count += 1
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            if (st.st_mode & 0o170000) == 0o100000:
                total += st.st_size
    return total, count
