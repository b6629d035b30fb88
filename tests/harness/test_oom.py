"""How a dead worker's death is named from its last MemoryReport: out of memory only when its cgroup's OOM-kill
count rose since (cgroup v1 and v2 counter files both read), the memory it held in every case."""

from __future__ import annotations

import os
import socket

from dare.harness.oom import MemoryReport, death_cause, oom_counter, oom_kills

V1 = "oom_kill_disable 0\nunder_oom 0\noom_kill {n}\n"
V2 = "low 0\nhigh 0\nmax 3\noom 1\noom_kill {n}\noom_group_kill 0\n"


def _report(counter, kills, host=None) -> MemoryReport:
    return MemoryReport(host or socket.gethostname(), os.getpid(), 300 * 1024, str(counter), kills)


def test_a_count_that_rose_names_the_oom_killer_with_the_memory_held(tmp_path):
    for layout in (V1, V2):
        counter = tmp_path / "memory.events"
        counter.write_text(layout.format(n=2))
        last = _report(counter, oom_kills(str(counter)))
        assert last.kills == 2
        counter.write_text(layout.format(n=3))
        cause = death_cause(last, RuntimeError("ActorDiedError"))
        assert cause.startswith("was killed out of memory by the kernel's OOM killer (its cgroup's oom_kill count "
                                "rose from 2 to 3), holding at least 300 MiB when it last answered"), cause


def test_an_unchanged_count_another_host_or_no_counter_is_a_plain_death(tmp_path):
    counter = tmp_path / "memory.oom_control"
    counter.write_text(V1.format(n=0))
    error = ConnectionError("gone")
    assert death_cause(_report(counter, 0), error) == ("died (ConnectionError), holding at least 300 MiB when it "
                                                       "last answered")
    counter.write_text(V1.format(n=1))
    assert death_cause(_report(counter, 0, host="another-host"), error).startswith("died (ConnectionError)")
    assert death_cause(_report(tmp_path / "missing", 0), error).startswith("died (ConnectionError)")
    assert death_cause(None, error) == "died (ConnectionError) before it first answered"


def test_this_process_reports_its_own_counter_where_the_machine_has_one():
    report = MemoryReport.now()
    assert report.pid == os.getpid() and report.peak_kib > 0
    counter = oom_counter()
    assert report.counter == counter and (counter is None or report.kills == oom_kills(counter) >= 0)
