"""Hostile completions for HumanEval/0 (``has_close_elements``), each a whole program.

Every attack must be graded fail. Where an attack could *achieve* something (read a secret, reach the
network, touch a host file), it returns a string starting with ``LEAK`` on success, so the test can also
check that the capability itself was denied, not merely that the answer was wrong. ``{canary}`` is a
host file, ``{secret_name}`` a parent environment variable and ``{cache}`` the plan cache, filled in by the test.
"""

HEADER = "from typing import List\nimport os, sys\n"

ATTACKS = {
    "infinite_loop": "def has_close_elements(numbers, threshold):\n    while True:\n        pass\n",
    "infinite_loop_at_import": "while True:\n    pass\ndef has_close_elements(numbers, threshold):\n    return True\n",
    "ignore_alarm_and_spin": (
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "def has_close_elements(numbers, threshold):\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "    while True:\n        pass\n"),
    "catch_timeout_and_continue": (
        "def has_close_elements(numbers, threshold):\n    while True:\n        try:\n"
        "            while True:\n                pass\n        except BaseException:\n            pass\n"),
    "fork_bomb": (
        "def has_close_elements(numbers, threshold):\n    while True:\n        try:\n            os.fork()\n"
        "        except OSError:\n            pass\n"),
    "ctypes_fork_bomb": (
        "import ctypes\nlibc = ctypes.CDLL(None)\n"
        "def has_close_elements(numbers, threshold):\n    for _ in range(10000):\n        libc.fork()\n    return True\n"),
    "memory_bomb": "def has_close_elements(numbers, threshold):\n    x = bytearray(1 << 40)\n    return True\n",
    "memory_growth": (
        "def has_close_elements(numbers, threshold):\n    hog = []\n    while True:\n"
        "        hog.append(bytearray(1 << 24))\n"),
    "stdout_flood": "def has_close_elements(numbers, threshold):\n    while True:\n        print('x' * 65536)\n",
    "stderr_flood_raw_fd": (
        "def has_close_elements(numbers, threshold):\n    block = b'y' * 65536\n    while True:\n"
        "        os.write(2, block)\n"),
    "huge_return_value": "def has_close_elements(numbers, threshold):\n    return ['z' * 1000] * 400000\n",
    "write_outside_workdir": (
        "import io\ndef has_close_elements(numbers, threshold):\n    try:\n"
        "        with io.open({canary!r}, 'w') as f:\n            f.write('owned')\n        return 'LEAK-write'\n"
        "    except OSError as e:\n        return 'blocked ' + type(e).__name__\n"),
    "delete_outside_workdir": (
        "import shutil\ndef has_close_elements(numbers, threshold):\n    try:\n        os.remove({canary!r})\n"
        "        return 'LEAK-delete'\n    except OSError:\n        pass\n"
        "    shutil.rmtree('/usr/lib/python3', ignore_errors=True)\n    return False\n"),
    "write_system_dirs": (
        "def has_close_elements(numbers, threshold):\n    for path in ('/usr/evil', '/etc/evil', '/root/evil', sys.prefix + '/evil'):\n"
        "        try:\n            open(path, 'w').write('x')\n            return 'LEAK-' + path\n"
        "        except OSError:\n            pass\n    return False\n"),
    "read_parent_secret": (
        "def has_close_elements(numbers, threshold):\n    value = os.environ.get({secret_name!r})\n"
        "    if value:\n        return 'LEAK-env ' + value\n    for pid in os.listdir('/proc'):\n"
        "        try:\n            data = open('/proc/%s/environ' % pid, 'rb').read()\n        except (OSError, ValueError):\n"
        "            continue\n        if {secret_name!r}.encode() in data:\n            return 'LEAK-proc ' + data.decode('latin1')\n"
        "    return sorted(os.environ)\n"),
    "network_connect": (
        "import socket\ndef has_close_elements(numbers, threshold):\n    for host in ('1.1.1.1', '8.8.8.8', '127.0.0.1'):\n"
        "        try:\n            socket.create_connection((host, 53 if host != '127.0.0.1' else 22), timeout=0.5)\n"
        "            return 'LEAK-net ' + host\n        except OSError:\n            pass\n    return False\n"),
    "kill_parent_and_siblings": (
        "import signal\ndef has_close_elements(numbers, threshold):\n    killed = []\n"
        "    for pid in [os.getppid(), 1, -1] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
        "        if pid == os.getpid():\n            continue\n        try:\n            os.kill(pid, signal.SIGKILL)\n"
        "            killed.append(pid)\n        except OSError:\n            pass\n    return killed\n"),
    "posix_kill_and_reimport_os": (
        "import importlib, posix\nos.kill = None\nos = importlib.reload(os)\n"
        "def has_close_elements(numbers, threshold):\n    for pid in range(2, 400):\n        try:\n"
        "            posix.kill(pid, 9)\n        except OSError:\n            pass\n"
        "    try:\n        posix.unlink({canary!r})\n        return 'LEAK-posix'\n    except OSError:\n        return None\n"),
    "ctypes_libc_calls": (
        "import ctypes\nlibc = ctypes.CDLL(None)\n"
        "def has_close_elements(numbers, threshold):\n    libc.kill(-1, 9)\n"
        "    rc = libc.system(b'touch ' + {canary!r}.encode() + b'.new; echo owned > ' + {canary!r}.encode())\n"
        "    return 'LEAK-system' if os.path.exists({canary!r} + '.new') else rc\n"),
    "os_exit_before_tests": "os._exit(0)\ndef has_close_elements(numbers, threshold):\n    return True\n",
    "sys_exit_before_tests": "sys.exit(0)\ndef has_close_elements(numbers, threshold):\n    return True\n",
    "sys_exit_inside_call": "def has_close_elements(numbers, threshold):\n    sys.exit(0)\n",
    "eq_spoof_object": (
        "class Always:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n"
        "    def __hash__(self):\n        return 0\n    def __bool__(self):\n        return True\n"
        "def has_close_elements(numbers, threshold):\n    return Always()\n"),
    "subclass_spoof": (
        "class FakeBool(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "    def __str__(self):\n        return 'True'\n    __repr__ = __str__\n"
        "def has_close_elements(numbers, threshold):\n    return FakeBool(7)\n"),
    "frame_walk_forge_channel": (
        "def has_close_elements(numbers, threshold):\n    frame = sys._getframe(1)\n    while frame is not None:\n"
        "        channel = frame.f_locals.get('channel')\n        job = frame.f_locals.get('job')\n"
        "        if channel is not None and job is not None:\n            for i in range(len(job['inputs'])):\n"
        "                channel.send({{'i': i, 'ok': True, 't': 0.0}})\n"
        "            channel.send({{'done': len(job['inputs'])}})\n            os._exit(0)\n"
        "        frame = frame.f_back\n    return True\n"),
    "forge_records_on_result_fd": (
        "import json\ndef has_close_elements(numbers, threshold):\n    for fd in range(3, 64):\n        try:\n"
        "            os.write(fd, b'{{\"done\": 7}}\\n')\n        except OSError:\n            pass\n    os._exit(0)\n"),
    "fake_pass_markers": (
        "print('{{\"done\": 7}}')\nprint('All tests passed! 7/7 OK')\n"
        "def has_close_elements(numbers, threshold):\n    print('PASSED')\n    sys.stdout.write('{{\"passed\": true}}\\n')\n"
        "    return None\n"),
    "monkeypatch_builtins_and_json": (
        "import builtins, json, unittest\nbuiltins.isinstance = lambda *a: True\nbuiltins.len = lambda x: 0\n"
        "json.dumps = lambda *a, **k: '{{\"done\": 7}}'\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"
        "def has_close_elements(numbers, threshold):\n    return 'spoofed'\n"),
    "time_manipulation": (
        "import time\ntime.time = lambda: 0.0\ntime.perf_counter = lambda: 0.0\ntime.monotonic = lambda: 0.0\n"
        "def has_close_elements(numbers, threshold):\n    while True:\n        time.sleep(0.01)\n"),
    "recursion_bomb": "def has_close_elements(numbers, threshold):\n    return has_close_elements(numbers, threshold)\n",
    "deep_recursion_segfault": (
        "sys.setrecursionlimit(10 ** 8)\ndef deep(n):\n    return deep(n + 1) + 1\n"
        "def has_close_elements(numbers, threshold):\n    return deep(0)\n"),
    "detached_background_process": (
        "def has_close_elements(numbers, threshold):\n    if os.fork() == 0:\n        os.setsid()\n"
        "        import time\n        time.sleep(30)\n        os._exit(0)\n    return None\n"),
    "fill_tmp": (
        "def has_close_elements(numbers, threshold):\n    block = b'0' * (1 << 20)\n    n = 0\n    try:\n"
        "        while True:\n            with open('/tmp/fill%d' % n, 'wb') as f:\n"
        "                for _ in range(8):\n                    f.write(block)\n            n += 1\n"
        "    except OSError:\n        pass\n    return n\n"),
    "read_expected_via_gc_and_host_files": (
        "import gc\ndef has_close_elements(numbers, threshold):\n"
        "    found = [o for o in gc.get_objects() if isinstance(o, dict) and 'results' in o]\n"
        "    hits = [p for p in ('/work', {canary!r}, {cache!r}) if os.path.exists(p)]\n"
        "    return 'LEAK-files ' + str(hits) if hits else 'seen %d dicts' % len(found)\n"),
}


def render(name: str, canary: str, secret_name: str, cache: str) -> str:
    body = ATTACKS[name].format(canary=canary, secret_name=secret_name, cache=cache)
    return "```python\n" + HEADER + body + "```\n"
