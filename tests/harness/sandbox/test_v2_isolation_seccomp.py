"""The job's seccomp filter, installed for real in a forked process: what it denies, and what ordinary
programs still do under it (threads, fork, subprocesses, files)."""

from __future__ import annotations

import ctypes
import errno
import importlib.util
import json
import os
import sys

import pytest

from dare.harness.sandbox import isolation

# the sandbox-side module (stdlib only, imported by path inside the sandbox), loaded from its file
_spec = importlib.util.spec_from_file_location("dare_sandbox_seccomp", isolation.RUNNER.parent / "seccomp.py")
seccomp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(seccomp)

pytestmark = pytest.mark.skipif(not seccomp.supported(), reason="the filter has an x86-64 table only")


def under_filter(probe) -> dict:
    """Run ``probe()`` in a forked child after installing the filter; its JSON-able result."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            seccomp.install()
            os.write(write, json.dumps(probe()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        data = stream.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def test_denied_calls_fail_with_the_right_errno():
    def probe():
        libc = ctypes.CDLL(None, use_errno=True)

        def errno_of(rc):
            return ctypes.get_errno() if rc == -1 else 0
        return {
            "unshare_user": errno_of(libc.unshare(0x10000000)),
            "clone_newuser": errno_of(libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)),
            "clone3": errno_of(libc.syscall(435, 0, 0)),
            "keyctl": errno_of(libc.syscall(250, 0, -3, 0)),
            "add_key": errno_of(libc.syscall(248, b"user", b"k", b"v", 1, -4)),
            "memfd": errno_of(libc.syscall(319, b"x", 0)),
            "shmget": errno_of(libc.shmget(0, 4096, 0o1600)),
            "mount": errno_of(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
            "ptrace": errno_of(libc.ptrace(16, os.getppid(), 0, 0)),
            "setns": errno_of(libc.setns(0, 0)),
        }
    seen = under_filter(probe)
    assert seen.pop("clone3") == errno.ENOSYS  # libc then falls back to clone, whose flags the filter checks
    assert seen == {name: errno.EPERM for name in seen}


def test_ordinary_programs_still_run():
    def probe():
        import subprocess
        import tempfile
        import threading
        box = []
        thread = threading.Thread(target=lambda: box.append(sum(range(10))))
        thread.start()
        thread.join()
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        _, status = os.waitpid(pid, 0)
        run = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
        with tempfile.TemporaryFile() as f:
            f.write(b"x")
        return {"thread": box, "fork": os.waitstatus_to_exitcode(status), "subprocess": run.stdout.strip()}
    assert under_filter(probe) == {"thread": [45], "fork": 7, "subprocess": "42"}
