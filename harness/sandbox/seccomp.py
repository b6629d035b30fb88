"""A seccomp filter for the job process, built as raw BPF with ctypes (the child has only the stdlib).

Standalone: imported inside the sandbox by ``zygote.py``, like ``child_runner.py`` it imports nothing
from dare. The filter allows everything except the calls a job could use to reach beyond its own process
tree: new namespaces (``unshare``, ``setns``, ``clone`` with a namespace flag; ``clone3``, whose flags
live in memory a filter cannot read, answers ENOSYS so libc falls back to ``clone``), kernel keyrings,
``memfd_create`` and SysV/POSIX-mqueue IPC (memory outside RLIMIT_AS), mounts, ``ptrace`` and
cross-process memory, BPF, io_uring, ``userfaultfd``, modules, kexec, and the x32 ABI. Only x86-64
has a table here; elsewhere :func:`install` returns False and the layer is recorded as absent.
"""

import ctypes
import os
import platform

AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
RET_ALLOW, RET_KILL_PROCESS, RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
EPERM, ENOSYS = 1, 38
CLONE_NS_FLAGS = 0x7E020080  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
X86_64_DENIED = {  # name -> syscall number (arch/x86/entry/syscalls/syscall_64.tbl)
    "ptrace": 101, "syslog": 103, "personality": 135, "pivot_root": 155, "chroot": 161, "acct": 163,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "init_module": 175,
    "delete_module": 176, "quotactl": 179, "kexec_load": 246, "add_key": 248, "request_key": 249,
    "keyctl": 250, "unshare": 272, "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "finit_module": 313, "memfd_create": 319, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_getfd": 438,
    "mount_setattr": 442, "memfd_secret": 447,
    # SysV and POSIX message-queue IPC: segments outlive their attachments and sit outside RLIMIT_AS
    "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66, "shmdt": 67,
    "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "semtimedop": 220, "mq_open": 240,
    "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245,
}
SYS_CLONE, SYS_CLONE3 = 56, 435
# BPF opcodes
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def program() -> list:
    """The filter as (code, jt, jf, k) tuples; jumps are relative, so the deny targets sit at the end."""
    denied = sorted(X86_64_DENIED.values())
    body = [(LD_W_ABS, 0, 0, 4)]  # seccomp_data.arch
    n = len(denied)
    # layout: [arch check][load nr][x32][denied x n][clone3][clone][allow][load arg0][jset][allow][EPERM][ENOSYS][KILL]
    tail = {"eperm": 10 + n, "enosys": 11 + n, "kill": 12 + n}

    def jump(at: int, label: str) -> int:
        return tail[label] - at - 1

    body.append((JEQ_K, 0, jump(1, "kill"), AUDIT_ARCH_X86_64))
    body.append((LD_W_ABS, 0, 0, 0))  # seccomp_data.nr
    body.append((JGE_K, jump(3, "eperm"), 0, X32_BIT))
    for i, nr in enumerate(denied):
        at = 4 + i
        body.append((JEQ_K, jump(at, "eperm"), 0, nr))
    at = 4 + n
    body.append((JEQ_K, jump(at, "enosys"), 0, SYS_CLONE3))
    body.append((JEQ_K, 1, 0, SYS_CLONE))  # -> load clone flags
    body.append((RET_K, 0, 0, RET_ALLOW))
    body.append((LD_W_ABS, 0, 0, 16))  # seccomp_data.args[0], low 32 bits: the clone flags
    body.append((JSET_K, 1, 0, CLONE_NS_FLAGS))
    body.append((RET_K, 0, 0, RET_ALLOW))
    body.append((RET_K, 0, 0, RET_ERRNO | EPERM))
    body.append((RET_K, 0, 0, RET_ERRNO | ENOSYS))
    body.append((RET_K, 0, 0, RET_KILL_PROCESS))
    assert tail["kill"] == len(body) - 1
    return body


def supported() -> bool:
    return platform.machine() in ("x86_64", "AMD64") and os.uname().sysname == "Linux"


def install() -> bool:
    """Install the filter on the calling thread (inherited by every child); False where unsupported."""
    if not supported():
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    rows = program()
    filters = (_Filter * len(rows))(*[_Filter(*row) for row in rows])
    prog = _Program(len(rows), filters)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
    return True
