"""The steward times every call from outside the candidate's process, which holds no input before its call.

The runner in the candidate's process is Python the candidate can rewrite: a program that finds its clocks and
stops them, or reads the calls' inputs at import and does their work while it loads, used to be bounded only by
the parent's deadlines (the limit plus 1 s, and the group's whole budget). Each test here was watched failing on
verifier v6, which timed calls inside the candidate's interpreter and sent it every input with the program.
"""

from __future__ import annotations

import time

import pytest

from dare.harness.sandbox.isolation import detect
from dare.harness.sandbox.pool import SETUP_FAILED

from .verdict_pairs import dare_verdict, evalplus_verdict, task, verifier_fixture

LIMIT = 0.5
code_verifier = verifier_fixture(LIMIT)

# Stops every clock the program can reach in its interpreter: the timers, the time module, and the clock functions
# in the globals of every frame that called it (the runner's modules).
UNCLOCK = """import signal, sys, time
def _stopped(*args):
    return 0.0
def _unclock():
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.setitimer(signal.ITIMER_PROF, 0)
    frame = sys._getframe(1)
    while frame is not None:
        names = frame.f_globals
        for name in ("monotonic", "process_time", "perf_counter", "setitimer", "cpu_seconds"):
            if name in names:
                names[name] = _stopped
        frame = frame.f_back
    for name in ("monotonic", "process_time", "perf_counter", "time"):
        setattr(time, name, _stopped)
_unclock()
"""
SLEEP = "time.sleep(1.2)"  # over the 0.5 s limit, under v6's parent deadline for the step (0.5 s + 1 s)


@pytest.mark.parametrize("where", ["call", "import"])
def test_a_program_that_stops_every_clock_in_its_interpreter_still_times_out(code_verifier, where):
    """v6 passed the 1.2 s call (the runner read stopped clocks; the parent allows the limit plus 1 s). The import
    case sleeps 20 s behind 3.5 MB of comments: v6 ended it only by the load step's deadline, which leaves no
    record; the steward ends it at the group's budget and says so."""
    body = f"    {SLEEP}\n" if where == "call" else ""
    head = "time.sleep(20)\n" + ("#" + "x" * 99 + "\n") * 35_000 if where == "import" else ""
    program = UNCLOCK + head + f"def f(k):\n{body}    return 2 * k\n"
    outcome = code_verifier._run(task([[3]], [6]), program)
    assert (outcome.passed, outcome.failure) == (False, "timeout")
    if where == "import":
        assert outcome.first_failure["message"] == "program did not finish loading"
    assert evalplus_verdict(program, [[3]], [6], LIMIT) in ("fail", "timeout")


# At import, counts the copies of the call's input, as text, in the process's whole memory (the program builds one).
SCAN = """import ctypes
MARK = str(7346829105550 + 1).encode()
def _copies():
    found = 0
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for fields in regions:
        if not fields[1].startswith("r") or fields[-1] in ("[vvar]", "[vvar_vclock]", "[vsyscall]"):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        found += ctypes.string_at(start, end - start).count(MARK)
    return found
SEEN = _copies()
def f(k):
    return SEEN > 1
"""


def test_the_candidate_s_process_holds_no_input_before_its_call(code_verifier):
    """v6 sent the inputs with the program, so a program could read them at import and spend the group's budget
    on a slow input before its call: it found the input in its memory (True here)."""
    assert dare_verdict(code_verifier, SCAN, [[7346829105551]], [False]) == (True, None)


def test_an_answer_sent_before_its_call_is_refused(code_verifier):
    """A program that sends a guess for the next call with each answer (one write) would have the slow next call
    (1.2 s) timed at nothing: the guess is waiting before the call is made. (Watched failing without the check.)"""
    program = """import os, sys, time
def _send_a_guess_with_each_answer():
    frame = sys._getframe(1)
    while frame is not None and "answers" not in frame.f_locals:
        frame = frame.f_back
    if frame is not None:
        answers = frame.f_locals["answers"]
        answers.write = lambda line: os.write(answers.fd, line + b'{"ok":8}\\n')
def f(k):
    if k == 3:
        _send_a_guess_with_each_answer()
    else:
        time.sleep(1.2)
    return 2 * k
"""
    assert dare_verdict(code_verifier, program, [[3], [4]], [6, 8]) == (False, "protocol")


@pytest.mark.parametrize("bare", ["NaN", "Infinity", "1e400"])
def test_a_bare_non_finite_float_in_a_forged_answer_fails_the_call_not_the_steward(code_verifier, bare):
    """The child's encoder tags non-finite floats; a program writing its own answer line with a bare one (which
    JSON may not carry) gets a protocol failure, where the steward used to die on re-encoding it (a crash)."""
    program = f"""import os, sys
def f(k):
    frame = sys._getframe(1)
    while "answers" not in frame.f_locals:
        frame = frame.f_back
    answers = frame.f_locals["answers"]
    answers.write = lambda line: os.write(answers.fd, b'{{"ok":{bare}}}\\n')
    return 2 * k
"""
    assert dare_verdict(code_verifier, program, [[3]], [6]) == (False, "protocol")


def test_an_exit_status_the_candidate_chooses_is_its_own_failure(code_verifier):
    """The job's exit status SETUP_FAILED means the sandbox could not confine it (the verifier's error, which
    leaves the sample out of the metrics); a program exiting with it at import got exactly that."""
    program = f"import os\nos._exit({SETUP_FAILED})\ndef f(k):\n    return 2 * k\n"
    outcome = code_verifier._run(task([[3]], [6]), program)
    assert (outcome.passed, outcome.failure) == (False, "load_error")


def test_a_right_program_that_lingers_after_its_last_answer_passes_as_in_evalplus(code_verifier):
    """EvalPlus ends its process after the last call; so does the steward, whatever the program left running (here
    a thread that ignores the alarms and never ends)."""
    program = ("import signal, threading, time\n"
               "def _linger():\n    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGPROF})\n"
               "    while True:\n        time.sleep(1)\n"
               "threading.Thread(target=_linger).start()\n"
               "def f(k):\n    return 2 * k\n")
    started = time.monotonic()
    assert dare_verdict(code_verifier, program, [[3], [4]], [6, 8]) == (True, None)
    assert time.monotonic() - started < 5
    assert evalplus_verdict(program, [[3], [4]], [6, 8], LIMIT) == "pass"


def test_a_payload_is_its_head_then_its_inputs_and_the_head_is_read_to_its_last_byte():
    """The parent's framing (``pool.framed``) and the job's reader (``child_runner``) agree, and reading the head
    leaves every input byte in the pipe for the steward, after the candidate's process has been started."""
    import os

    from dare.harness.sandbox import child_runner
    from dare.harness.sandbox.pool import framed

    job = {"mode": "call", "program": "def f(k):\n    return k\n", "entry_point": "f", "inputs": [[[7], {}]] * 3,
           "limits": [1.0] * 3, "nonce": "ab"}
    payload = framed(job)
    read, write = os.pipe()
    os.write(write, payload)
    os.close(write)
    head = child_runner.read_head(read)
    assert head == {key: value for key, value in job.items() if key != "inputs"}
    rest = os.read(read, len(payload))
    assert b"[[7]" not in payload[:len(payload) - len(rest)] and rest.startswith(b'{"inputs":')
    assert framed({"mode": "probe"}) == child_runner.PROBE
    read, write = os.pipe()
    os.write(write, rest)
    os.close(write)
    assert child_runner.read_tail(read) == {"inputs": job["inputs"]}


STEWARD_IS_PID_1 = """import os, signal
def f(k):
    for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
        try:
            os.kill(os.getppid(), sig)
        except OSError:
            pass
    return 2 * k if (os.getpid(), os.getppid()) == (2, 1) else -1
"""


@pytest.mark.skipif(detect().backend != "bwrap", reason="pid 1 of the job's own pid namespace needs bubblewrap")
@pytest.mark.parametrize("fresh", [False, True], ids=["zygote", "fresh-sandbox"])
def test_the_steward_is_pid_1_and_no_signal_from_the_candidate_reaches_it(tmp_path, fresh):
    """In both process models the candidate is pid 2 and its steward pid 1, which takes no signal from its own
    namespace: stopping or killing it does nothing (a one-job sandbox ran the runner under bubblewrap's own pid 1,
    so a candidate could kill its steward, a crash)."""
    from dare.harness.verifiers.code import CodeVerifier

    verifier = CodeVerifier("humanevalplus", workers=1, cache_dir=tmp_path, min_time_limit=LIMIT,
                            fresh_sandbox_per_sample=fresh)
    try:
        assert dare_verdict(verifier, STEWARD_IS_PID_1, [[3], [4]], [6, 8]) == (True, None)
    finally:
        verifier.close()
