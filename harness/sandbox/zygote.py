"""Inside the sandbox: confining one job, and the per-slot zygote that starts each job in fresh namespaces.

Standalone (stdlib only, imported by ``child_runner.py``). The zygote is a clean process per worker slot:
it imported only this trusted code and never receives a job's payload or results. It runs as root inside
the slot's bubblewrap sandbox with just CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID and CAP_KILL, is
non-dumpable, and is a child subreaper. Per job, over its control socket (SOCK_SEQPACKET), the parent sends
``run ID`` with three descriptors it created for this job alone (payload to read, results and stderr to
write). The zygote forks; the fork enters new pid, mount, IPC and UTS namespaces and forks again, so the
job's first process is pid 1 of its own namespace: when it dies the kernel kills every process of the job,
and the namespaces (its /tmp and /dev/shm tmpfs, its SysV/POSIX IPC objects) go with them. That process
mounts a fresh /tmp, /dev/shm and /proc, drops to the slot uid (no capabilities left), joins a new session
keyring, installs the seccomp filter and the rlimits, and runs its payload. The zygote waits on
the job (a pidfd), kills it on ``kill ID``, and reports ``end ID STATUS``. Jobs cannot signal, ptrace or
see the zygote (another uid, another pid namespace), and nothing they hold outlives them.
"""

import ctypes
import json
import os
import resource
import select
import signal
import socket

import seccomp

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID = 0x20000, 0x04000000, 0x08000000, 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
KEYCTL_JOIN_SESSION_KEYRING, SYS_KEYCTL_X86_64 = 1, 250
SETUP_FAILED = 121  # exit status of a job whose confinement failed before any payload byte was read
libc = ctypes.CDLL(None, use_errno=True)


def _check(rc, what):
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return rc


def _mount(source, target, fstype, flags, data=None):
    def enc(s):
        return s.encode() if s is not None else None

    _check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), "mount " + target)


def new_session_keyring():
    """Join a fresh anonymous session keyring (x86-64 syscall number; elsewhere the seccomp layer is off)."""
    if not seccomp.supported():
        return False
    return _check(libc.syscall(SYS_KEYCTL_X86_64, KEYCTL_JOIN_SESSION_KEYRING, None), "keyctl join") > 0


def confine(uid, rlimits):
    """Drop to ``uid`` (when root), new session keyring, seccomp, rlimits. Returns which layers hold."""
    if uid >= 0 and os.getuid() == 0:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # clears every capability: no way back to root
    keyring = new_session_keyring()
    filtered = seccomp.install()
    for which, value in rlimits:
        if value >= 0:
            resource.setrlimit(which, (value, value))
    return {"session_keyring": keyring, "seccomp": filtered}


def fresh_mounts(tmp_size):
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    for target in ("/tmp", "/dev/shm"):
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmp_size},mode=1777")
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _start(fds, uid, rlimits, tmp_size, run_job):
    """Fork the job's pid-1 process in fresh namespaces; returns its pid (it is our child: subreaper)."""
    pid_read, pid_write = os.pipe()
    middle = os.fork()
    if middle == 0:
        code = SETUP_FAILED
        try:
            os.close(pid_read)
            _check(libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWUTS), "unshare")
            job = os.fork()
            if job == 0:
                os.close(pid_write)
                _job_main(fds, uid, rlimits, tmp_size, run_job)
            os.write(pid_write, str(job).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(pid_write)
    with os.fdopen(pid_read, "rb") as stream:
        text = stream.read()
    os.waitpid(middle, 0)
    return int(text) if text else None


def _job_main(fds, uid, rlimits, tmp_size, run_job):
    try:
        payload_fd, result_fd, stderr_fd = fds
        fresh_mounts(tmp_size)
        null = os.open(os.devnull, os.O_RDONLY)
        for target, source in ((0, null), (1, stderr_fd), (2, stderr_fd)):
            os.dup2(source, target)
        keep = sorted({payload_fd, result_fd})
        os.closerange(3, keep[0])
        os.closerange(keep[0] + 1, keep[1])
        os.closerange(keep[1] + 1, 65536)
        layers = confine(uid, rlimits)
    except BaseException:
        os._exit(SETUP_FAILED)
    run_job(payload_fd, result_fd, layers)
    os._exit(0)


def _wait(ctl, pid, job_id):
    """Wait for the job's pid 1 to exit, killing it when the parent asks; its wait status."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # kernels before 5.3: poll the exit status instead
        pidfd = None
    try:
        while True:
            watched, timeout = ([ctl], 0.002) if pidfd is None else ([pidfd, ctl], None)
            ready, _, _ = select.select(watched, [], [], timeout)
            if pidfd is None:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    return status
            elif pidfd in ready:
                return os.waitpid(pid, 0)[1]
            if ctl not in ready:
                continue
            message = ctl.recv(256)
            if not message or message == f"kill {job_id}".encode():
                os.kill(pid, signal.SIGKILL)
                if not message:
                    os.waitpid(pid, 0)
                    os._exit(0)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def serve(ctl_fd, uid, rlimits, tmp_size, run_job, probe):
    """The zygote's loop. ``run_job(payload_fd, result_fd, layers)`` runs in the job; ``probe`` is a payload
    whose run reports the job's confinement (sent to the parent with ``ready``)."""
    _check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
    ctl = socket.socket(fileno=ctl_fd)
    ctl.send(b"ready " + _self_test(uid, rlimits, tmp_size, run_job, probe))
    while True:
        message, fds, _, _ = socket.recv_fds(ctl, 256, 3)
        if not message:
            os._exit(0)
        words = message.decode().split()
        if words[0] != "run" or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            continue
        try:
            pid = _start(fds, uid, rlimits, tmp_size, run_job)
        finally:
            for fd in fds:
                os.close(fd)
        status = _wait(ctl, pid, words[1]) if pid else SETUP_FAILED << 8
        _reap()
        ctl.send(f"end {words[1]} {status}".encode())


def _reap():
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _self_test(uid, rlimits, tmp_size, run_job, probe):
    """Run the probe job through the real path once; its report (or the failure) goes to the parent."""
    payload_r, payload_w = os.pipe()
    result_r, result_w = os.pipe()
    err_r, err_w = os.pipe()
    os.write(payload_w, probe)
    os.close(payload_w)
    fds = [payload_r, result_w, err_w]
    try:
        pid = _start(fds, uid, rlimits, tmp_size, run_job)
    except OSError as exc:
        pid, report = None, {"error": str(exc)[:200]}
    finally:
        for fd in fds:
            os.close(fd)
    if not pid:
        os.close(result_r)
    else:
        os.waitpid(pid, 0)
        with os.fdopen(result_r, "rb") as stream:
            text = stream.read()
        try:
            report = next(r for r in map(json.loads, text.decode().splitlines()) if r.get("probe"))
        except (ValueError, StopIteration):
            report = {"error": "the probe job gave no report"}
    os.close(err_r)
    report["zygote_ipc_ns"] = os.readlink("/proc/self/ns/ipc")
    return json.dumps(report).encode()
