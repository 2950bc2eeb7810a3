"""Baselines for the sandbox lifecycle, each behind the same small interface (create / exec / reset / close).

- :class:`CopyRootSandbox`: the "chroot + full copy" ablation: the same namespaces, capability drop and
  command agent as :class:`Sandbox`, but the root is a private full copy of the image (``cp -a``) instead of an
  overlay, so create and reset cost a copy of the whole tree.
- :class:`BwrapOneShot`: bubblewrap (Debian ``bubblewrap``), one fresh sandbox per command (the natural
  daemonless tool without a persistent shell); the image is bound read-only and a per-episode directory is
  the writable ``/tmp``.
- :class:`DockerDaemon` + :class:`DockerSandbox`: Docker Engine (Debian ``docker.io``), driven through its HTTP
  API on a private socket (what the Python SDK does); dockerd runs in its own mount and PID namespaces, so
  killing it takes every container and overlay mount with it. The image is ``docker import`` of the same tree.
- :class:`PlainShell`: ``sh -c`` on the host, no isolation (the lower bound).
- :func:`criu_check`: whether CRIU process snapshots can run here.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from .sandbox import _HOST_PATH, ExecResult, Sandbox, SandboxError, _wait_proc


class CopyRootSandbox(Sandbox):
    """The no-copy-on-write ablation: each create/reset copies the whole image into a private root.

    Everything else (namespaces, pivot_root, user namespace, seccomp, capability drop, command agent, background
    deletion of the old root on reset) is :class:`Sandbox`'s, so the difference measured is the file-system
    strategy alone (its root is a plain directory: no size-limited tmpfs layer).
    Snapshots are not supported.
    """

    def _new_layer(self) -> None:
        self._layer.mkdir()
        root = self._layer / "root"
        done = subprocess.run(
            ["cp", "-a", "--", f"{self.image}/.", str(root)], capture_output=True, env={"PATH": _HOST_PATH}
        )
        if done.returncode != 0:
            raise SandboxError(f"copying the image failed: {done.stderr.decode(errors='replace').strip()}")

    def _root_spec(self) -> dict:
        return {"type": "bind", "source": str(self._layer / "root")}

    def snapshot(self):  # noqa: D102
        raise NotImplementedError("the full-copy baseline has no snapshots")

    def restore(self, snap):  # noqa: D102
        raise NotImplementedError("the full-copy baseline has no snapshots")


class BwrapOneShot:
    """One bubblewrap sandbox per command over a read-only image; ``/tmp`` is a per-episode directory."""

    def __init__(
        self, image_dir: str | os.PathLike[str], *, network: bool = False, base_dir: str | None = None
    ):
        self.bwrap = shutil.which("bwrap", path=_HOST_PATH)
        if self.bwrap is None:
            raise SandboxError("bwrap not found (install the Debian package bubblewrap)")
        self.image = str(Path(image_dir).resolve())
        self.network = network
        self.base_dir = base_dir
        self.work = tempfile.mkdtemp(prefix="bwrap-", dir=base_dir)

    def exec(self, cmd: str, timeout: float | None = 60.0) -> ExecResult:
        argv = [
            self.bwrap,
            "--ro-bind", self.image, "/",
            "--bind", self.work, "/tmp",
            "--proc", "/proc",
            "--dev", "/dev",
            "--unshare-all", *(("--share-net",) if self.network else ()),
            "--hostname", "sandbox",
            "--die-with-parent",
            "--new-session",
            "--cap-drop", "ALL",
            "--chdir", "/tmp",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/root",
            "/bin/sh", "-c", cmd,
        ]  # fmt: skip
        t0 = time.perf_counter()
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as err:
            return ExecResult(
                124, err.stdout or b"", err.stderr or b"", time.perf_counter() - t0, timed_out=True
            )
        return ExecResult(done.returncode, done.stdout, done.stderr, time.perf_counter() - t0)

    def reset(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.work = tempfile.mkdtemp(prefix="bwrap-", dir=self.base_dir)

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self) -> BwrapOneShot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PlainShell:
    """``sh -c`` on the host in a scratch directory: no isolation at all (the lower bound)."""

    def __init__(self, base_dir: str | None = None) -> None:
        self.base_dir = base_dir
        self.work = tempfile.mkdtemp(prefix="plain-", dir=base_dir)

    def exec(self, cmd: str, timeout: float | None = 60.0) -> ExecResult:
        t0 = time.perf_counter()
        done = subprocess.run(
            ["/bin/sh", "-c", cmd],
            cwd=self.work,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
        )
        return ExecResult(done.returncode, done.stdout, done.stderr, time.perf_counter() - t0)

    def reset(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.work = tempfile.mkdtemp(prefix="plain-", dir=self.base_dir)

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------
# Docker


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float = 60.0) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


class DockerDaemon:
    """A private dockerd (``--iptables=false --bridge=none``) in its own mount and PID namespaces.

    ``start()`` raises :class:`SandboxError` with the reason when no daemon can run here. Everything it makes
    (containers, overlay2 mounts, its containerd) lives in those namespaces and dies with ``stop()``; its
    data root and cgroups are removed then.
    """

    def __init__(self, base_dir: str | os.PathLike[str] | None = None, start_timeout: float = 90.0) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="dockerd-", dir=base_dir))
        self.socket = str(self.root / "docker.sock")
        self.cgroup_parent = f"nitrobox-bench-{os.getpid()}-{secrets.token_hex(3)}"
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.startup_seconds = float("nan")

    @staticmethod
    def available() -> tuple[bool, str]:
        if os.geteuid() != 0:
            return False, "dockerd needs root"
        if shutil.which("dockerd", path=_HOST_PATH) is None:
            return False, "dockerd not installed (Debian package docker.io)"
        return True, ""

    def start(self) -> DockerDaemon:
        ok, why = self.available()
        if not ok:
            raise SandboxError(why)
        argv = [
            shutil.which("unshare", path=_HOST_PATH), "-m", "-p", "-f", "--kill-child", "--mount-proc",
            "--propagation", "private", "--",
            shutil.which("dockerd", path=_HOST_PATH),
            "--iptables=false", "--ip6tables=false", "--bridge=none", "--ip-masq=false",
            "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
            "--pidfile", str(self.root / "dockerd.pid"), "-H", f"unix://{self.socket}",
            "--exec-opt", "native.cgroupdriver=cgroupfs", "--cgroup-parent", f"/{self.cgroup_parent}",
        ]  # fmt: skip
        t0 = time.perf_counter()
        log = open(self.root / "dockerd.log", "wb")  # noqa: SIM115 - lives as long as the daemon
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env={"PATH": _HOST_PATH},
        )
        log.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.root / "dockerd.log").read_text(errors="replace").strip().splitlines()[-3:]
                self.stop()
                raise SandboxError(f"dockerd exited: {' | '.join(tail)}")
            try:
                if self.request("GET", "/_ping", timeout=2)[0] == 200:
                    self.startup_seconds = time.perf_counter() - t0
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise SandboxError(f"dockerd did not answer within {self.start_timeout} s")

    def request(self, method: str, url: str, body=None, timeout: float = 120.0, headers=None):
        """(status, parsed JSON or raw bytes) of one API call."""
        conn = _UnixHTTPConnection(self.socket, timeout=timeout)
        try:
            hdrs = dict(headers or {})
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
                hdrs.setdefault("Content-Type", "application/json")
            conn.request(method, url, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        if resp.getheader("Content-Type", "").startswith("application/json") and data:
            try:
                return resp.status, json.loads(data)
            except ValueError:
                pass
        return resp.status, data

    def import_image(self, image_dir: str | os.PathLike[str], repo: str = "nitrobox-bench") -> str:
        """``docker import`` of a tar of ``image_dir``; returns the image reference."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(image_dir), arcname=".")
        status, data = self.request(
            "POST", f"/images/create?fromSrc=-&repo={repo}&tag=latest", body=buf.getvalue(),
            headers={"Content-Type": "application/x-tar"}, timeout=600,
        )  # fmt: skip
        if status != 200:
            raise SandboxError(f"docker import failed: {status} {data!r}")
        return f"{repo}:latest"

    def stop(self) -> None:
        """Kill dockerd's namespace (every container and mount in it), remove its data and cgroups."""
        if self.proc is not None:
            kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
            try:
                for pid in kids.read_text().split():  # dockerd is PID 1 of its namespace
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
            _wait_proc(self.proc)
            self.proc = None
        for controller in Path("/sys/fs/cgroup").glob(f"*/{self.cgroup_parent}"):
            for d in sorted(controller.rglob("*"), key=lambda p: -len(p.parts)):
                if d.is_dir():
                    try:
                        d.rmdir()
                    except OSError:
                        pass
            try:
                controller.rmdir()
            except OSError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> DockerDaemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class DockerSandbox:
    """One container (``--network none``) kept alive by a sleeping PID 1; commands via ``docker exec``."""

    def __init__(self, daemon: DockerDaemon, image: str, *, network: bool = False) -> None:
        self.daemon = daemon
        self.image = image
        self.network = network
        self.id: str | None = None
        self._create(image)

    def _create(self, image: str) -> None:
        body = {
            "Image": image,
            "Cmd": ["/bin/busybox", "sleep", "2147483647"],
            "Hostname": "sandbox",
            "NetworkDisabled": not self.network,
            "HostConfig": {"NetworkMode": "host" if self.network else "none", "Init": False},
        }
        status, data = self.daemon.request("POST", "/containers/create", body)
        if status != 201:
            raise SandboxError(f"docker create failed: {status} {data!r}")
        self.id = data["Id"]
        status, data = self.daemon.request("POST", f"/containers/{self.id}/start")
        if status not in (204, 304):
            raise SandboxError(f"docker start failed: {status} {data!r}")

    def exec(self, cmd: str, timeout: float | None = 60.0) -> ExecResult:
        t0 = time.perf_counter()
        status, data = self.daemon.request(
            "POST", f"/containers/{self.id}/exec",
            {"Cmd": ["/bin/sh", "-c", cmd], "AttachStdout": True, "AttachStderr": True},
        )  # fmt: skip
        if status != 201:
            raise SandboxError(f"docker exec create failed: {status} {data!r}")
        exec_id = data["Id"]
        status, raw = self.daemon.request(
            "POST", f"/exec/{exec_id}/start", {"Detach": False, "Tty": False}, timeout=timeout or 3600
        )
        out, err = _demux(raw if isinstance(raw, bytes) else b"")
        status, info = self.daemon.request("GET", f"/exec/{exec_id}/json")
        return ExecResult(int(info.get("ExitCode") or 0), out, err, time.perf_counter() - t0)

    def reset(self) -> None:
        """``docker rm -f`` + ``docker run -d``: Docker has no cheaper way back to the image."""
        self._remove()
        self._create(self.image)

    def commit(self, repo: str) -> str:
        """``docker commit`` (a GRPO branch point); returns the new image reference."""
        status, data = self.daemon.request("POST", f"/commit?container={self.id}&repo={repo}&tag=latest")
        if status != 201:
            raise SandboxError(f"docker commit failed: {status} {data!r}")
        return f"{repo}:latest"

    def restore(self, image: str) -> None:
        self._remove()
        self._create(image)

    def _remove(self) -> None:
        if self.id is not None:
            self.daemon.request("DELETE", f"/containers/{self.id}?force=true&v=true")
            self.id = None

    def close(self) -> None:
        self._remove()


def _demux(raw: bytes) -> tuple[bytes, bytes]:
    """Split Docker's multiplexed attach stream (8-byte frame headers: stream id, size) into stdout, stderr."""
    out, err, i = bytearray(), bytearray(), 0
    while i + 8 <= len(raw):
        kind, size = raw[i], struct.unpack(">I", raw[i + 4 : i + 8])[0]
        chunk = raw[i + 8 : i + 8 + size]
        (err if kind == 2 else out).extend(chunk)
        i += 8 + size
    return bytes(out), bytes(err)


def criu_check() -> tuple[bool, str]:
    """Whether ``criu check`` passes here (CRIU process snapshots need it), and the reason when not."""
    criu = shutil.which("criu", path=_HOST_PATH)
    if criu is None:
        return False, "criu is not installed"
    try:
        done = subprocess.run([criu, "check"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"criu check could not run: {err}"
    if done.returncode == 0:
        return True, ""
    lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
    return False, "criu check failed: " + (lines[0] if lines else f"exit {done.returncode}")
