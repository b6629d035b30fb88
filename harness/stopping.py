"""Stopping on request: what a run does when a scheduler preempts it (SIGTERM) or a person presses Ctrl-C.

Slurm sends SIGTERM and kills the job after a grace period; spot machines get a similar notice. Within
:func:`graceful`, the first SIGTERM or SIGINT only marks the run as stopping: the batch or training step
in flight finishes, its results are saved (a cache append, a checkpoint) and the next :func:`safe_point`
raises :class:`~dare.harness.errors.Stopped` (exit 75, one line saying how to resume). The run must stop
within ``grace_s`` seconds of the signal: when the grace runs out, or on a second signal, the main thread
gets :class:`Interrupted` at once (exit 128 + the signal's number, 143 for SIGTERM and 130 for SIGINT),
which loses only the work in flight. Should the main thread not come back to Python for
:data:`HARD_EXIT_AFTER_S` more seconds (stuck in a native call), the process exits from a watchdog thread;
the caches and checkpoints are written so that even that loses only the work in flight.

The handlers are process-wide, so only the tools install them; library code calls :func:`safe_point`
and :func:`requested`, which are no-ops where no tool installed them.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .errors import Stopped

log = logging.getLogger(__name__)

DEFAULT_GRACE_S = 20.0
"""Below Slurm's default KillWait (30 s): time to finish the step in flight and still write the record."""
HARD_EXIT_AFTER_S = 5.0
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(KeyboardInterrupt):
    """A second signal, or the grace period ran out: stop now, losing the work in flight."""

    def __init__(self, signum: int, why: str):
        super().__init__(why)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@dataclass
class StopState:
    grace_s: float
    signum: int | None = None
    at: float | None = None
    expired: bool = False
    timers: list[threading.Timer] = field(default_factory=list)
    wakeup: tuple[int, int] | None = None
    """A pipe that Python's C-level handler writes one byte to per delivered signal (``set_wakeup_fd``)."""
    handled: tuple[int, ...] = ()
    """The signals :func:`graceful` handles (those the process was not started ignoring)."""

    def signal_name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else "no signal"

    def flags(self) -> list[str]:
        """What a run record says of a stop (empty when none was asked for)."""
        return [f"stopped={self.signal_name()}", f"grace_s={self.grace_s:g}"] if self.signum else []


_state: StopState | None = None


def requested() -> bool:
    """Whether a stop was asked for."""
    return _state is not None and _state.signum is not None


def has_time() -> bool:
    """Whether optional work may still start (verifying finished generations for a partial record): always
    without a stop, and in the first half of the grace period after one; the rest is for saving and exiting."""
    return not requested() or time.monotonic() - _state.at < _state.grace_s / 2


def flags() -> list[str]:
    """The run record's flags for a stop that was asked for (``stopped=SIGTERM``, ``grace_s=20``), else none."""
    return _state.flags() if _state is not None else []


def safe_point() -> None:
    """Raise :class:`Stopped` if a stop was asked for; call it where everything before it is saved."""
    if requested():
        waited = time.monotonic() - _state.at
        raise Stopped(f"stopped by {_state.signal_name()} {waited:.1f} s after the signal, at a safe point "
                      f"(grace {_state.grace_s:g} s)")


def reclaim() -> None:
    """Put the handlers back after a library replaced them: ``ray.init`` sets a SIGTERM handler that exits at
    once, and its core worker a native one that logs and aborts, either of which would end the run with no
    safe point. Call it after starting such a library; a no-op outside :func:`graceful`."""
    if _state is None or threading.current_thread() is not threading.main_thread():
        return
    for s in _state.handled:
        signal.signal(s, _handler)  # Python's handler, and its C-level trampoline below it, again


def dropped(why: str) -> Stopped:
    """The stop of a run whose work in flight was lost to the signal itself (``why``: what was lost): a
    scheduler's SIGTERM to the whole job also ends the run's worker processes."""
    waited = time.monotonic() - _state.at
    return Stopped(f"stopped by {_state.signal_name()} {waited:.1f} s after the signal; {why}")


def _hard_exit(signum: int) -> None:
    os.write(2, f"stopped at once by {signal.Signals(signum).name}: the grace period is over and the run did not "
                "return; finished work is saved, rerun the same command to resume\n".encode())
    os._exit(128 + signum)


def _expire(state: StopState) -> None:
    if _state is not state:  # graceful() has ended: the signal would meet Python's default handler
        return
    state.expired = True
    # a real signal to the main thread (not _thread.interrupt_main): it also ends a blocking call such as a sleep
    signal.pthread_kill(threading.main_thread().ident, state.signum)


def _delivered(state: StopState) -> int:
    """Signals delivered since the last call: Python runs a handler once for several deliveries of one
    signal that arrive while the main thread is in a native call, but its C handler writes a byte for each
    to the wakeup fd, so a second signal is never mistaken for the first."""
    if state.wakeup is None:
        return 1
    try:
        return max(1, sum(byte in SIGNALS for byte in os.read(state.wakeup[0], 64)))
    except BlockingIOError:
        return 1


def _handler(signum: int, frame: object) -> None:
    state = _state
    if state is None:  # after graceful() ended: behave as Python does
        raise KeyboardInterrupt
    if state.signum is None and _delivered(state) > 1:  # the first and a second signal at once
        state.signum, state.at = signum, time.monotonic()
        raise Interrupted(signum, f"stopped at once by a second signal ({signal.Signals(signum).name})")
    if state.signum is None:
        state.signum, state.at = signum, time.monotonic()
        for delay, action in ((state.grace_s, lambda: _expire(state)),
                              (state.grace_s + HARD_EXIT_AFTER_S, lambda: _hard_exit(signum))):
            timer = threading.Timer(delay, action)
            timer.daemon = True
            timer.start()
            state.timers.append(timer)
        log.warning("%s: finishing the work in flight, then stopping (grace %g s; a second signal stops at once)",
                    signal.Signals(signum).name, state.grace_s)
        return
    why = (f"the {state.grace_s:g} s grace period after {state.signal_name()} is over" if state.expired
           else f"a second signal ({signal.Signals(signum).name})")
    raise Interrupted(state.signum if state.expired else signum, f"stopped at once by {why}")


@contextmanager
def graceful(grace_s: float = DEFAULT_GRACE_S) -> Iterator[StopState | None]:
    """SIGTERM and SIGINT stop the run at its next safe point within ``grace_s`` seconds (see the module doc).
    Outside the main thread signals cannot be handled: the block runs without."""
    global _state
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    # a signal the process was started ignoring (SIGINT of a background job) stays ignored
    previous = {s: signal.getsignal(s) for s in SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    _state = state = StopState(grace_s, wakeup=os.pipe(), handled=tuple(previous))
    for fd in state.wakeup:
        os.set_blocking(fd, False)
    old_wakeup = signal.set_wakeup_fd(state.wakeup[1], warn_on_full_buffer=False)
    for s in previous:
        signal.signal(s, _handler)
    try:
        yield state
    finally:
        for timer in state.timers:
            timer.cancel()
        for s, handler in previous.items():  # once stopped, the tool exits: a late signal has nothing to stop
            signal.signal(s, signal.SIG_IGN if state.signum is not None else handler)
        signal.set_wakeup_fd(old_wakeup)
        _state = None
        for fd in state.wakeup:
            os.close(fd)
