"""Which isolation layers this machine offers, and the command line that applies them to one sandbox.

Detected once at start (:func:`detect`): bubblewrap (namespaces: no network, read-only system, private
size-limited /tmp and /dev/shm, fresh /proc and /dev, cleared environment, new session, die with
parent), else ``unshare`` (network, pid, ipc, uts and mount namespaces only), else nothing. Orthogonal
to that: when the harness is root, every worker slot runs its jobs as its own unprivileged uid
(``uid_base + slot``), so that RLIMIT_NPROC holds (the kernel ignores it for real uid 0) and slots cannot
signal each other. Each job confines itself before reading any untrusted byte (``zygote.confine``).

Inside bubblewrap only the base interpreter, its shared library and its standard library are bound
(never the whole prefix), and every site-packages or dist-packages directory under the binds is covered
by an empty read-only tmpfs, so no installed package or data file is reachable; numpy alone is bound
read-only at a private path when the parent has it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

RUNNER = Path(__file__).resolve().parent / "child_runner.py"
# imported by the runner, stdlib only
HELPERS = tuple(RUNNER.parent / name for name in ("zygote.py", "seccomp.py", "steward.py", "step_limits.py"))
SANDBOX_DIR = "/opt/dare"
SANDBOX_RUNNER = "/opt/dare/child_runner.py"
SANDBOX_SITE = "/opt/dare/site"
PYTHON_ENV = {  # the whole environment the child sees: deterministic hashing, time zone and encoding
    "PATH": "/usr/bin:/bin",
    "PYTHONHASHSEED": "0",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "TZ": "UTC",
    "LANG": "C.UTF-8",
    "HOME": "/tmp",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resource limits of one child. Memory and sizes in bytes, times in seconds."""

    address_space: int = 2 << 30
    cpu_seconds: int = 120
    processes: int = 32
    file_size: int = 16 << 20
    open_files: int = 256
    tmp_size: int = 64 << 20
    stdout_cap: int = 256 << 20  # the result channel (HumanEval+ outputs can be large)
    stderr_cap: int = 64 << 10


@dataclasses.dataclass(frozen=True)
class Isolation:
    """The layers available here. ``backend`` is "bwrap", "unshare" or "none"."""

    backend: str
    bwrap_version: str | None
    drop_uid: bool
    uid_base: int
    python: str
    python_prefix: str
    numpy_dirs: tuple[str, ...]
    host_python: str = ""  # interpreter for the unshare/none backends: one the dropped uid can reach
    host_uid_drop: bool = False

    @property
    def uid_dropped(self) -> bool:
        return self.drop_uid if self.backend == "bwrap" else self.host_uid_drop

    def describe(self, limits: Limits, workers: int, unsafe: bool) -> dict:
        layers = {
            "bwrap": ["bubblewrap " + (self.bwrap_version or "?"), "net/pid/ipc/uts/cgroup namespaces",
                      "read-only /usr and stdlib", f"private /tmp tmpfs {limits.tmp_size >> 20} MiB",
                      "fresh /proc and /dev", "cleared environment", "new session", "die with parent"],
            "unshare": ["unshare: net/pid/ipc/uts/mount namespaces", "cleared environment", "host filesystem visible"],
            "none": ["no namespaces", "cleared environment"],
        }[self.backend]
        if self.uid_dropped:
            layers.append(f"dropped uid {self.uid_base}..{self.uid_base + workers - 1} (one per worker slot)")
        elif os.geteuid() == 0:
            layers.append("NO uid drop: the interpreter is not reachable by an unprivileged uid")
        layers.append(f"rlimits: AS {limits.address_space >> 20} MiB, CPU {limits.cpu_seconds} s, NPROC "
                      f"{limits.processes}, FSIZE {limits.file_size >> 20} MiB, NOFILE {limits.open_files}, CORE 0")
        layers += ["each call timed by the job's steward outside the candidate's process, its input sent as it begins",
                   "parent clocks (job, load, each test) kill from outside", "stdout/stderr byte caps",
                   "comparison in the trusted parent on decoded plain data"]
        return {"backend": self.backend, "unsafe_local_exec": unsafe, "uid_drop": self.uid_dropped,
                "workers": workers,
                "python": self.python if self.backend == "bwrap" else (self.host_python or self.python),
                "numpy": bool(self.numpy_dirs), "layers": layers}


def cgroup2_memory() -> bool:
    """Whether a cgroup v2 hierarchy with the memory controller is mounted (``memory.max`` could bound a
    job's memfd, tmpfs and page cache together). Detected and recorded; the sandbox does not use it yet."""
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        try:
            if "memory" in Path(root, "cgroup.controllers").read_text().split():
                return True
        except OSError:
            continue
    return False


def _bwrap_version() -> str | None:
    exe = shutil.which("bwrap")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.split()[-1] if out.strip() else "unknown"


def _probe(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=20, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def base_python() -> tuple[str, str]:
    """The base interpreter (not the venv shim) and its prefix."""
    prefix = sys.base_prefix
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    exe = Path(sysconfig.get_config_var("BINDIR") or Path(prefix, "bin")) / name
    if not exe.exists():
        exe = Path(sys.executable).resolve()
    return str(exe), prefix


def numpy_dirs() -> tuple[str, ...]:
    try:
        import numpy
    except ImportError:
        return ()
    root = Path(numpy.__file__).resolve().parent
    return tuple(str(p) for p in (root, root.parent / "numpy.libs") if p.is_dir())


def _reachable(path: str) -> bool:
    """Whether any user may traverse to ``path`` (every ancestor directory has o+x)."""
    return all(os.stat(a).st_mode & stat.S_IXOTH for a in ["/", *_ancestors(path)] if os.path.exists(a))


def host_python(python: str) -> str:
    """Outside bwrap the child sees the host tree; a dropped uid needs an interpreter it can reach."""
    if _reachable(python):
        return python
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    return system if os.path.exists(system) and _reachable(system) else python


@functools.cache
def detect(uid_base: int = 61000) -> Isolation:
    python, prefix = base_python()
    is_root = os.geteuid() == 0
    version = _bwrap_version()
    backend = "none"
    outside = host_python(python)
    candidate = Isolation("bwrap", version, is_root, uid_base, python, prefix, numpy_dirs(), outside,
                          is_root and _reachable(outside))
    if version and _probe(bwrap_argv(candidate, Limits(), slot=0) + ["-c", "pass"]):
        backend = "bwrap"
    elif shutil.which("unshare") and _probe(unshare_prefix(is_root) + [outside, "-S", "-c", "pass"]):
        backend = "unshare"
    return dataclasses.replace(candidate, backend=backend)


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def hidden_site_dirs(iso: Isolation) -> list[str]:
    """Directories of installed packages that the binds would expose; each gets an empty read-only tmpfs."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    found = [sysconfig.get_path(kind, vars={"base": iso.python_prefix, "platbase": iso.python_prefix})
             for kind in ("purelib", "platlib")]
    found += ["/usr/lib/python3/dist-packages", f"/usr/local/lib/{version}/dist-packages",
              f"/usr/local/lib/{version}/site-packages", f"/usr/lib/{version}/site-packages"]
    return sorted({p for p in found if p and os.path.isdir(p)})


def interpreter_binds(iso: Isolation) -> list[str]:
    """The base interpreter, its shared library and its standard library: never the whole prefix."""
    if iso.python_prefix.startswith("/usr/"):
        return []
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    lib = Path(iso.python_prefix, "lib")
    paths = [iso.python, str(lib / version), *sorted(str(p) for p in lib.glob("libpython*.so*"))]
    return [p for p in paths if os.path.exists(p)]


def bwrap_argv(iso: Isolation, limits: Limits, slot: int, zygote: bool = False) -> list[str]:
    """Everything up to and including the interpreter; the caller appends the runner arguments.

    ``zygote``: the slot's long-lived zygote (root inside, only the capabilities it needs to start each job
    in fresh namespaces and drop it to the slot uid); otherwise a one-job sandbox."""
    argv = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not iso.drop_uid:  # unprivileged: bwrap needs a user namespace; the real uid is already not root
        argv += ["--unshare-user", "--disable-userns"]
    else:
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        if zygote:
            argv += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_KILL"]
    if not zygote:  # the job's runner is pid 1 itself (a call job's steward: no signal from the candidate reaches it)
        argv += ["--as-pid-1"]
    argv += ["--die-with-parent", "--new-session", "--clearenv"]
    for key, value in PYTHON_ENV.items():
        argv += ["--setenv", key, value]
    argv += ["--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
             "--symlink", "usr/bin", "/bin"]
    binds = interpreter_binds(iso)
    # bwrap creates missing parents with mode 0700, which the dropped uid could not traverse.
    for ancestor in sorted({a for path in binds for a in _ancestors(path)}, key=len):
        if not ancestor.startswith("/usr"):
            argv += ["--perms", "0755", "--dir", ancestor]
    for path in binds:
        argv += ["--ro-bind", path, path]
    for path in hidden_site_dirs(iso):
        argv += ["--perms", "0555", "--tmpfs", path, "--remount-ro", path]
    for folder in ("/opt", "/opt/dare", SANDBOX_SITE):
        argv += ["--perms", "0755", "--dir", folder]
    for source in (RUNNER, *HELPERS):
        argv += ["--ro-bind", str(source), f"{SANDBOX_DIR}/{source.name}"]
    for path in iso.numpy_dirs:
        argv += ["--ro-bind", path, f"{SANDBOX_SITE}/{Path(path).name}"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(limits.tmp_size),
             "--tmpfs", "/dev/shm", "--perms", "1777", "--size", str(limits.tmp_size), "--tmpfs", "/tmp",
             "--chdir", "/tmp", iso.python, "-S", "-s", "-B"]
    return argv


def unshare_prefix(is_root: bool) -> list[str]:
    user = [] if is_root else ["--user", "--map-root-user"]
    return ["unshare", *user, "--net", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--ipc", "--uts"]


def child_argv(iso: Isolation, limits: Limits, slot: int, zygote: bool = False) -> list[str]:
    """The full command line of one sandboxed child (or, with ``zygote``, the zygote) for worker ``slot``."""
    uid = iso.uid_base + slot if iso.uid_dropped else -1
    if iso.backend == "bwrap":
        head, runner = bwrap_argv(iso, limits, slot, zygote), SANDBOX_RUNNER
        site = SANDBOX_SITE if iso.numpy_dirs else ""
    else:
        prefix = unshare_prefix(os.geteuid() == 0) if iso.backend == "unshare" else []
        head, runner = [*prefix, iso.host_python or iso.python, "-S", "-s", "-B"], str(RUNNER)
        site = str(Path(iso.numpy_dirs[0]).parent) if iso.numpy_dirs and iso.host_python == iso.python else ""
    return [*head, runner, str(uid), str(limits.address_space), str(limits.cpu_seconds), str(limits.processes),
            str(limits.file_size), str(limits.open_files), site]
