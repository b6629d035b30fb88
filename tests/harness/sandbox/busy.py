"""Busy processes that load the machine for the timing tests, each in a session of its own: the scheduler
shares the CPU between sessions (autogroups), not processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time


def busy_processes(count: int, *, one_per_core: bool = False) -> list[subprocess.Popen]:
    """``count`` spinning processes, running when this returns. ``one_per_core`` holds them on the cores in
    turn, so a job's share of its core no longer depends on where the kernel places it (a busy process held on
    each core leaves any job half of the core it runs on); unheld, the kernel may leave a job a core of its own."""
    cores = sorted(os.sched_getaffinity(0))
    hold = "import os; os.sched_setaffinity(0, {{{core}}})\n" if one_per_core else ""
    hogs = [subprocess.Popen([sys.executable, "-c", hold.format(core=cores[i % len(cores)]) + "while True: pass"],
                             start_new_session=True) for i in range(count)]
    time.sleep(0.5)  # running before the jobs start
    return hogs
