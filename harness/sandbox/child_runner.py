"""The child side of the sandbox: a standalone script, run by a fresh interpreter inside the isolation.

It imports nothing from dare (the package is not visible inside the sandbox), only its stdlib siblings
``zygote.py``, ``seccomp.py``, ``steward.py`` and ``step_limits.py`` (the steward that times each call from
outside the candidate's process). Start-up, before any untrusted byte is read: drop to the worker slot's uid
(when started as root), join a new session keyring, install the seccomp filter and the rlimits, close stray file
descriptors (``zygote.confine``), then read one job from stdin: a head (the job but its inputs, JSON, after its
length in :data:`HEAD_DIGITS` digits) and the inputs (JSON), which a ``call`` job's steward reads only after it
has started the candidate's process. Results go to a private
duplicate of the original stdout as one JSON line per record, each carrying the job's nonce, the last one
``{"end": true}``; fd 1 and 2 both point at the capped stderr pipe, so whatever the candidate prints is
only diagnostics. The child never receives expected outputs: it cannot know whether it passed, and
anything it forges on the result channel is merely its own output, judged by the parent.

argv: child_runner.py UID AS_BYTES CPU_SECONDS NPROC FSIZE_BYTES NOFILE EXTRA_SYS_PATH [zygote CTL_FD TMP_SIZE]
(UID -1: keep; a negative limit: leave unset). With ``zygote`` it is the worker slot's zygote
(``zygote.serve``), which starts each job as a fresh process tree; otherwise it runs the single job read
from stdin and exits.
Modes: ``call`` (the program runs in a process of its own, the job's first process its steward: it sends each
input, times the call from outside and forwards the answer), ``record`` (run a trusted
reference program plus the rewritten assert tests, recording every call of the tested function), ``judge``
(run the rewritten tests with the candidate's outputs replayed in place of the calls: no candidate code).
"""

import builtins
import json
import math
import os
import resource
import signal
import sys
from signal import ITIMER_REAL, setitimer
from time import process_time

HEAD_DIGITS = 12  # a payload is the length of its head, the head (the job but its inputs) and the inputs

try:  # run as a script: its siblings are on the path
    import steward
    from step_limits import Timeout, _alarm
except ImportError:  # imported from the package (tests)
    from . import steward
    from .step_limits import Timeout, _alarm

# Bound here, before any candidate code runs: a program may rebind names in ``builtins`` or patch ``time`` and
# ``signal``, which would otherwise change how this module encodes its results or keeps its time.
globals().update({name: getattr(builtins, name) for name in (
    "type", "isinstance", "issubclass", "getattr", "str", "int", "float", "complex", "bool", "bytes", "bytearray",
    "list", "tuple", "dict", "set", "frozenset", "len", "format", "zip", "enumerate", "iter", "next", "min", "max",
    "round")})

OUTPUT_CAP = 32 << 20  # bytes of encoded output per call; beyond it the call counts as an error
MAX_DEPTH = 200
INT_BOUND = 1 << 63
NUMPY_KINDS = "biufcUSMm"  # dtypes sent as raw bytes; object and structured ones are opaque


def rlimits(argv):
    as_bytes, cpu_s, nproc, fsize, nofile = (int(a) for a in argv[2:7])
    return [(resource.RLIMIT_AS, as_bytes), (resource.RLIMIT_CPU, cpu_s), (resource.RLIMIT_NPROC, nproc),
            (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_NOFILE, nofile), (resource.RLIMIT_CORE, 0)]


# ---- encoding of plain data (mirrors dare.harness.sandbox.codec.decode) ----

def enc(x, depth=0):
    if depth > MAX_DEPTH:
        raise ValueError("output nested too deeply")
    t = type(x)
    if x is None or t is bool or t is str:
        return x
    if t is int:  # beyond 64 bits as hex: linear both ways, and free of the int-to-str digit limit
        return x if -INT_BOUND <= x < INT_BOUND else {"i": format(x, "x")}
    if t is float:
        return x if math.isfinite(x) else {"f": float.__repr__(x)}
    if t is list:
        return [enc(v, depth + 1) for v in x]
    if t is tuple:
        return {"t": [enc(v, depth + 1) for v in x]}
    if t is dict:
        return {"d": [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in x.items()]}
    if t is set or t is frozenset:
        return {"s" if t is set else "z": [enc(v, depth + 1) for v in x]}
    if t is complex:
        return {"c": [enc(x.real), enc(x.imag)]}
    if t is bytes or t is bytearray:
        return {"b": bytes(x).hex()}
    return enc_other(x, t, depth)


def enc_other(x, t, depth):
    # A value of a subclass of a builtin type is encoded from the builtin storage it holds, read through the
    # base type's own slots: what a subclass overrides (__iter__, items, __index__, __float__, __str__, __eq__,
    # ...) never decides the value, as EvalPlus's == reads the stored items too. type(x), never x.__class__.
    # np.str_ and np.bytes_ are str and bytes: read as such, since their fixed-width numpy buffer loses trailing
    # NULs ('abc\0' would arrive as 'abc', which Python's == does not take for 'abc\0').
    np = sys.modules.get("numpy")
    if np is not None and issubclass(t, (np.ndarray, np.generic)) and not issubclass(t, (str, bytes)):
        return enc_numpy(np, x)
    for base, stored in STORAGE:
        if issubclass(t, base):
            return stored(x, depth)
    return {"x": type_name(t)}


def type_name(t):
    return str(type.__dict__["__qualname__"].__get__(t))[:80]  # type's own slot: no metaclass property runs


def _items(values, depth):
    return [enc(v, depth + 1) for v in values]


# bool cannot be subclassed; each reader takes the builtin storage, whatever the subclass defines.
STORAGE = (
    (int, lambda x, d: enc(int.__index__(x), d)),
    (float, lambda x, d: enc(float.__float__(x), d)),
    (complex, lambda x, d: enc(complex(complex.real.__get__(x), complex.imag.__get__(x)), d)),
    (str, lambda x, d: str.__str__(x)),
    (bytes, lambda x, d: {"b": bytes.hex(x)}),
    (bytearray, lambda x, d: {"b": bytearray.hex(x)}),
    (list, lambda x, d: _items(list.__iter__(x), d)),
    (tuple, lambda x, d: {"t": _items(tuple.__iter__(x), d)}),
    (dict, lambda x, d: {"d": [[enc(k, d + 1), enc(v, d + 1)] for k, v in dict.items(x)]}),
    (frozenset, lambda x, d: {"z": _items(frozenset.__iter__(x), d)}),
    (set, lambda x, d: {"s": _items(set.__iter__(x), d)}),
)


def enc_numpy(np, x):
    # Arrays and numpy scalars keep their type (an array is not a list, np.bool_ is not True): dtype, shape, bytes.
    a = np.asarray(x)
    if a.dtype.kind not in NUMPY_KINDS or a.dtype.fields is not None or a.dtype.subdtype is not None:
        return {"x": type_name(type(x))}
    if issubclass(type(x), np.generic):
        return {"n": [a.dtype.str, a.tobytes().hex()]}
    return {"a": [a.dtype.str, list(a.shape), a.tobytes().hex()]}


def dec_numpy(tag, body):
    import numpy as np
    if tag == "n":
        return np.frombuffer(bytes.fromhex(body[1]), np.dtype(body[0]))[0]
    return np.frombuffer(bytes.fromhex(body[2]), np.dtype(body[0])).reshape(body[1]).copy()


def dec(v):
    if isinstance(v, list):
        return [dec(i) for i in v]
    if not isinstance(v, dict):
        return v
    (tag, body), = v.items()
    if tag == "t":
        return tuple(dec(i) for i in body)
    if tag == "d":
        return {dec(k): dec(w) for k, w in body}
    if tag == "s":
        return {dec(i) for i in body}
    if tag == "z":
        return frozenset(dec(i) for i in body)
    if tag == "f":
        return float(body)
    if tag == "c":
        return complex(dec(body[0]), dec(body[1]))
    if tag == "b":
        return bytes.fromhex(body)
    if tag == "i":
        return int(body, 16)
    if tag in ("a", "n"):
        return dec_numpy(tag, body)
    raise ValueError("unknown tag " + tag)


class Channel:
    def __init__(self, fd, nonce=None):
        self.fd, self.nonce = fd, nonce

    def line(self, record):
        """The record as its line on this channel (bytes)."""
        return (json.dumps({"n": self.nonce, **record}, separators=(",", ":"), allow_nan=False) + "\n").encode()

    def write(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def send(self, record):
        self.write(self.line(record))


def describe_error(exc):
    return {"err": type(exc).__name__[:80], "msg": str(exc)[:300]}


# The parent refuses a record whose decoding would cost more than codec.MAX_RECORD_COST (codec.record_cost);
# this is the same quick bound with 1 MiB to spare for the record around the output, so an output the child
# sends is never refused there (a reference's output either becomes an expected value or an error here).
COST_CAP, CONTAINER_COST, STRING_COST, VALUE_COST = (160 << 20) - (1 << 20), 384, 80, 40


def output_cost(text):
    return (len(text) + CONTAINER_COST * (text.count("[") + text.count("{")) + STRING_COST * (text.count('"') // 2)
            + VALUE_COST * (text.count(",") + 1))


def answer_too_costly(line):
    """Whether an answer line (bytes) costs more than any output :func:`encoded_output` lets through, with 1 MiB
    for the record around it: the steward does not parse it."""
    return len(line) > OUTPUT_CAP + (1 << 20) or output_cost(line.decode("latin-1")) > COST_CAP + (1 << 20)


def encoded_text(value):
    """The value's wire encoding as JSON text, within the sandbox's caps."""
    text = json.dumps(enc(value), separators=(",", ":"), allow_nan=False)
    if len(text) > OUTPUT_CAP or output_cost(text) > COST_CAP:
        raise ValueError("output larger than the sandbox cap")
    return text


def encoded_output(value):
    return json.loads(encoded_text(value))


def load_program(source, name):
    namespace = {"__name__": "__candidate__", "__builtins__": __builtins__}
    exec(compile(source, name, "exec"), namespace)
    return namespace


def load_for_calls(job):
    namespace = load_program(job["program"], "<program>")
    if job.get("setup"):  # trusted set-up code that builds object inputs (no asserts, no expected values)
        exec(compile(job["setup"], "<setup>", "exec"), namespace)
    return namespace, namespace[job["entry_point"]]


def cpu_seconds():
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return process_time() + reaped.ru_utime + reaped.ru_stime


def serve_calls(job, inbox_fd, answers_fd):
    """The candidate's process (``steward.py`` times it from outside): load the program, then answer each call
    the steward sends, one JSON line each way. ``t``, the call's CPU time as this process sees it, is kept for
    a trusted reference's limits; the candidate's own limits are the steward's measures."""
    answers = Channel(answers_fd)
    try:
        namespace, fn = load_for_calls(job)
    except BaseException as exc:  # SystemExit included: exiting before the tests is a load failure
        answers.send({"load_error": type(exc).__name__[:80], "msg": str(exc)[:300]})
        os._exit(0)
    answers.send({"ready": True})
    with os.fdopen(inbox_fd, "rb") as inbox:
        for line in inbox:
            call = json.loads(line)
            try:
                args, kwargs = eval(call["expr"], namespace) if isinstance(call, dict) else dec(call)
                start = cpu_seconds()
                value = fn(*args, **kwargs)
                elapsed = cpu_seconds() - start
                answers.write(('{"ok":' + encoded_text(value) + ',"t":' + float.__repr__(elapsed) + "}\n").encode())
            except BaseException as exc:
                answers.send(describe_error(exc))
    os._exit(0)


def run_calls(job, payload_fd, channel):
    """Start the candidate's process, then steward it (``steward.run_calls``); the calls' inputs are read from
    the payload only once it runs, so its memory never holds them."""
    candidate = steward.start(job, serve_calls, payload_fd, channel, bool(job.get("own_pid_namespace")))
    return steward.run_calls(job, candidate, lambda: read_tail(payload_fd)["inputs"], channel, answer_too_costly)


def run_tests(job, channel, site_factory):
    import random
    namespace = load_program(job["program"], "<reference>")
    namespace["__dare_site__"] = site_factory(namespace)
    random.seed(job.get("seed", 0))
    setitimer(ITIMER_REAL, job["test_limit"])
    try:
        exec(compile(job["test"], "<test>", "exec"), namespace)
        result = {"passed": True}
    except Timeout:
        result = {"passed": False, "err": "Timeout", "msg": "tests ran past their limit"}
    except BaseException as exc:
        result = {"passed": False, **describe_error(exc)}
    finally:
        setitimer(ITIMER_REAL, 0)
    channel.send(result)


def recorder(job, channel):
    def factory(namespace):
        target = namespace[job["entry_point"]]

        def site(k):
            def call(*args, **kwargs):
                record = {"site": k, "args": enc([list(args), dict(kwargs)])}
                start = process_time()
                try:
                    value = target(*args, **kwargs)
                except Exception as exc:
                    channel.send({**record, **describe_error(exc), "t": process_time() - start})
                    raise
                channel.send({**record, "ok": encoded_output(value), "t": process_time() - start})
                return value
            return call
        return site
    return factory


def replayer(job, channel):
    outputs = iter(job["outputs"])

    def factory(namespace):
        def site(k):
            def call(*args, **kwargs):
                recorded = next(outputs, None)
                if recorded is None or recorded["args"] != enc([list(args), dict(kwargs)]):
                    raise AssertionError("the test's calls diverged from the recorded inputs")
                if "ok" not in recorded:
                    raise RuntimeError("candidate raised " + recorded.get("err", "an error"))
                return dec(recorded["ok"])
            return call
        return site
    return factory


def run_job(job, channel):
    run_tests(job, channel, recorder(job, channel) if job["mode"] == "record" else replayer(job, channel))


def probe_report(layers):
    """Facts about the confinement as the job itself sees it (the zygote's self-test and ``describe``)."""
    import ctypes
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    libc = ctypes.CDLL(None, use_errno=True)
    mounts = [line.split() for line in open("/proc/self/mounts").read().splitlines()]
    fstypes = {m[1]: m[2] for m in mounts if len(m) > 2}
    return {"probe": True, "uid": os.getuid(), "pid": os.getpid(), "cap_eff": status["CapEff"].strip(),
            "no_new_privs": status["NoNewPrivs"].strip() == "1", "seccomp_mode": status["Seccomp"].strip(),
            "ipc_ns": os.readlink("/proc/self/ns/ipc"), "tmp": fstypes.get("/tmp"), "shm": fstypes.get("/dev/shm"),
            "userns_creatable": libc.unshare(0x10000000) == 0, **layers}


def read_exact(fd, size):
    chunks = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError("the payload ended early")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_head(fd):
    """The job but its inputs: read to its last byte and no further (the inputs wait in the pipe)."""
    return json.loads(read_exact(fd, int(read_exact(fd, HEAD_DIGITS))).decode("utf-8"))


def read_tail(fd):
    """The rest of the payload: the keys held back from the head (``{"inputs": [...]}``), or {}."""
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    return json.loads(b"".join(chunks).decode("utf-8")) if chunks else {}


def run_payload(payload_fd, result_fd, layers):
    """Run one job (framed on ``payload_fd``) with results on ``result_fd``; in a fresh process, never the
    zygote."""
    import random
    job = read_head(payload_fd)
    channel = Channel(result_fd, job.get("nonce"))
    random.seed()
    if job["mode"] == "call":
        code = run_calls(job, payload_fd, channel)
        if code is not None:  # the candidate's process ended by itself: the job ends as it did, unfinished
            os._exit(code)
    else:
        job.update(read_tail(payload_fd))
        if job["mode"] == "probe":
            channel.send(probe_report(layers))
        else:
            run_job(job, channel)
    channel.send({"end": True})
    sys.stdout.flush()
    os._exit(0)


def framed(head, tail=b""):
    """A payload as ``run_payload`` reads it."""
    return b"%0*d" % (HEAD_DIGITS, len(head)) + head + tail


PROBE = framed(json.dumps({"mode": "probe"}, separators=(",", ":")).encode())


def main():
    argv = sys.argv
    if argv[7]:
        sys.path.append(argv[7])
    signal.signal(signal.SIGALRM, _alarm)
    signal.signal(signal.SIGPROF, _alarm)
    import zygote
    if len(argv) > 8 and argv[8] == "zygote":
        zygote.serve(int(argv[9]), int(argv[1]), rlimits(argv), int(argv[10]), run_payload, PROBE)
    layers = zygote.confine(int(argv[1]), rlimits(argv))
    os.closerange(3, 65536)
    payload_fd = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    result_fd = os.dup(1)
    os.dup2(2, 1)  # candidate prints land in the capped stderr pipe, never on the result channel
    run_payload(payload_fd, result_fd, layers)


if __name__ == "__main__":
    main()
