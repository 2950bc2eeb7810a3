"""NitroBox exec protocol: for generated command lines, ``Sandbox.exec(cmd)`` returns exactly what
``sh -c cmd`` returns in a fresh shell on the host (the same static busybox, the same environment):
exit status, stdout and stderr, including subshell errors, redefined builtins, exec redirections, closed
descriptors, signals and late background output. Hypothesis runs a small, derandomized sample (the ``ci``
profile of tests/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurips26.systems.nitrobox import Sandbox, build_rootfs, sandbox_support
from neurips26.systems.nitrobox.rootfs import find_busybox

SUPPORTED, WHY = sandbox_support() if os.name == "posix" else (False, "not Linux")
pytestmark = pytest.mark.skipif(not SUPPORTED, reason=f"sandboxes cannot run here: {WHY}")

ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "USER": "root",
    "HOSTNAME": "sandbox",
    "TERM": "dumb",
    "LANG": "C.UTF-8",
}
ATOMS = [
    "echo a",
    "echo b >&2",
    "false",
    "true",
    "exit 3",
    "( : ${x?boom} )",
    "(. /nonexistent)",
    "x=$(: ${u?e})",
    "exec >/dev/null",
    "exec 2>/dev/null",
    "exec 1>&-",
    "(sleep 0.1; echo late) &",
    "printf() { echo forged; }",
    "command() { echo forged; }",
    "printf '%s\\n' p",
    "alias echo=false",
    "set -e",
    "set -u",
    "trap 'echo trapped' EXIT",
    "kill -TERM $$",
    "printf '\\377\\n'",
    "cat",
    "read v; echo r=$v",
    "{ echo g; false; }",
    "echo $((1/0))",
    "unset PATH",
    "wait",
    "echo ${undefined_var}",
    "return 2",
    "if then",
]
SEPARATORS = ["; ", " && ", " || ", "\n", " | "]


@st.composite
def command_lines(draw) -> str:
    n = draw(st.integers(1, 4))
    parts = [draw(st.sampled_from(ATOMS))]
    for _ in range(n - 1):
        parts.append(draw(st.sampled_from(SEPARATORS)))
        parts.append(draw(st.sampled_from(ATOMS)))
    return "".join(parts)


def _host(cmd: str) -> tuple[int, bytes, bytes]:
    done = subprocess.run(
        ["sh", "-c", cmd],
        executable=str(find_busybox()),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=ENV,
        cwd="/",
        timeout=30,
    )
    rc = done.returncode if done.returncode >= 0 else 128 - done.returncode
    return rc, done.stdout, done.stderr


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    img = build_rootfs(tmp_path_factory.mktemp("nbx-proto") / "image")
    with Sandbox(img, base_dir=tmp_path_factory.mktemp("nbx-proto-layers")) as s:
        yield s


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cmd=command_lines())
def test_exec_returns_what_sh_c_returns(sandbox, cmd):
    r = sandbox.exec(cmd, timeout=20)
    assert not r.timed_out and not r.shell_restarted, cmd
    rc, out, err = _host(cmd)
    if re.search(r"(?<![|])[|](?![|])", cmd) or re.search(r"(?<![&>])&(?![&>])", cmd):
        # concurrent writers (a background job, a pipeline) race for the pipes, and busybox writes an error
        # message in pieces: the same bytes, maybe in another order, on either side
        got = (r.exit_code, sorted(r.stdout_bytes), sorted(r.stderr_bytes))
        assert got == (rc, sorted(out), sorted(err)), cmd
    else:
        assert (r.exit_code, r.stdout_bytes, r.stderr_bytes) == (rc, out, err), cmd


@pytest.mark.parametrize(
    "cmd",
    [
        "( : ${x?boom} ); echo main-after",
        "(. /nonexistent); echo yes",
        "x=$(: ${u?e}); echo yes",
        "exec >/dev/null; echo gone",
        "(sleep 0.3; echo late-output) & echo first",
        'printf() { command printf "$1" "$2" 0; }; false',
        "exec 1>&- 2>&-; exit 5",
        "kill -TERM $$",
    ],
)
def test_review_commands_return_what_sh_c_returns(sandbox, cmd):
    r = sandbox.exec(cmd, timeout=20)
    assert (r.exit_code, r.stdout_bytes, r.stderr_bytes) == _host(cmd)
    assert sandbox.exec("echo next").stdout == "next\n"  # and the next command is its own
