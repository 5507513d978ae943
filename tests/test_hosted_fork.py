"""Hosted mode's fork server: two jobs forked from the same sandboxed zygote, running at the
same time, cannot reach each other or the zygote. The first job makes a file in its working
directory, one in /dev/shm, a SysV message queue, a TCP listener on 127.0.0.1, an abstract
Unix socket and a child process, and reaches each of them itself (the reference: the probe
works); the second job runs the same probes against them, and against the host pids of the
first job's uid and of the fork server's root processes, which this test finds in /proc.
Every probe of the second must fail. Also: the zygote's walls, and a dead zygote's children
dying with it."""
import json
import re
import os
import signal
import time

import pytest

from tapeviz.server import jobs, runner, sandbox

from hosted_util import hosted_pool, works

pytestmark = pytest.mark.slow   # a sandboxed zygote and its forked workers

HOSTED_ENV = {"TAPEVIZ_MODE": "hosted", "TAPEVIZ_WORKERS": "2", "TAPEVIZ_WARM": "1",
              "TAPEVIZ_TIMEOUT_S": "60"}

PROBE = r'''
import ctypes, json, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
ME, TARGET = {me!r}, {target!r}
KEYS = {{"first": 0x7A91, "second": 0x7A92}}


def make(name):
    with open(f"{{os.getcwd()}}/probe-{{name}}", "w") as f:
        f.write(name)
    with open(f"/dev/shm/probe-{{name}}", "w") as f:
        f.write(name)
    assert libc.msgget(KEYS[name], 0o1666) >= 0, ctypes.get_errno()   # IPC_CREAT | 0666
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(f"\0probe-{{name}}")
    unix.listen()
    child = os.fork()
    if child == 0:
        time.sleep(120)
        os._exit(0)
    return {{"tcp": tcp.getsockname()[1], "pid": os.getpid(), "child": child,
            "uid": os.getuid(), "keep": [tcp, unix]}}


def attempt(fn):
    try:
        fn()
        return True
    except OSError:
        return False


def readable(pid):
    return any(attempt(lambda: open(f"/proc/{{pid}}/{{what}}", "rb").read())
               for what in ("status", "environ", "cmdline"))


def reach(name, info, pids):
    pids = [p for p in pids if p and p != os.getpid()]
    out = {{"file": os.path.exists(f"{{os.getcwd()}}/probe-{{name}}"),
           "shm": os.path.exists(f"/dev/shm/probe-{{name}}"),
           "sysv": libc.msgget(KEYS[name], 0) >= 0,
           "tcp": attempt(lambda: socket.create_connection(("127.0.0.1", info["tcp"]), 2)),
           "unix": attempt(lambda: socket.socket(socket.AF_UNIX).connect(f"\0probe-{{name}}")),
           "signal": any(attempt(lambda: os.kill(p, 0)) for p in pids),
           "proc": any(readable(p) for p in pids)}}
    return out


if TARGET is None:
    mine = make(ME)
    mine["reference"] = reach(ME, mine, [mine["child"]])
    mine.pop("keep")
    print("REPORT", json.dumps(mine), flush=True)
    time.sleep(50)
else:
    other = TARGET
    out = reach("first", other, [other["pid"], other["child"]] + other["host_pids"])
    out["root"] = any(attempt(lambda: os.kill(p, 0)) or readable(p)
                      for p in other["root_pids"])
    out["init_signal"] = attempt(lambda: os.kill(1, 0))
    out["init_environ"] = attempt(lambda: open("/proc/1/environ", "rb").read())
    out["visible"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    out["me"] = [os.getpid(), os.getuid()]
    print("REPORT", json.dumps(out), flush=True)
'''
PROBES = ("file", "shm", "sysv", "tcp", "unix", "signal", "proc")


@pytest.fixture(scope="module")
def pool():
    pool = hosted_pool(HOSTED_ENV, "forked")
    yield pool
    pool.close()


def report(text: str) -> dict:
    line = next(l for l in text.splitlines() if l.startswith("REPORT "))
    return json.loads(line[len("REPORT "):])


def root_processes_of(zygote) -> list:
    """Host pids of the fork server's root processes: the zygote and each job's two
    keepers (forks of it, so its command line)."""
    out = []
    for pid in sandbox.processes_of(0):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"tapeviz.worker.zygote" in cmdline and b"--walls" in cmdline \
                and b"bwrap" not in cmdline.split(b"\0")[0]:
            out.append(pid)
    return out


def test_two_forked_jobs_cannot_reach_each_other_or_the_zygote(pool):
    first = pool.submit(runner.Record(PROBE.format(me="first", target=None)), owner="first")
    printed = ""
    # print("REPORT", ...) writes its words one by one, and a loaded machine streamed
    # "REPORT" alone first: wait for the whole line
    while not re.search(r"^REPORT .*\n", printed, re.M):
        event = first.next_event(120)
        assert event is not None and not first.done, first.result
        if isinstance(event, jobs.Output):
            printed += event.text
    mine = report(printed)
    assert mine["reference"] == {p: True for p in PROBES}, mine   # each probe can reach
    host_pids = sandbox.processes_of(mine["uid"])
    assert len(host_pids) >= 2                       # the job and its child, seen from here
    zygote_side = root_processes_of(pool.zygote)
    assert len(zygote_side) >= 3                     # the zygote, the first job's two keepers
    target = dict(mine, host_pids=host_pids, root_pids=zygote_side)
    rec = pool.record(PROBE.format(me="second", target=target), owner="second")
    assert rec["error"] is None, rec["error"]
    seen = report(rec["stdout"])
    assert {p: seen[p] for p in PROBES} == {p: False for p in PROBES}, seen
    assert seen["root"] is False and seen["init_signal"] is False
    assert seen["init_environ"] is False
    pid, uid = seen["me"]
    assert seen["visible"] == [1, pid]               # its keeper and itself, nothing else
    assert uid != mine["uid"] and uid != 0
    assert pool.cancel("first") == 1
    assert first.wait(30)
    assert sandbox.processes_of(mine["uid"]) == []   # the first job's child went with it
    works(pool)


def test_a_job_that_tries_to_leave_its_walls_is_refused(pool):
    rec = pool.record(
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for name, flags in (('mount', 0x20000), ('pid', 0x20000000), ('net', 0x40000000)):\n"
        "    print(name, libc.unshare(flags), ctypes.get_errno())\n"
        "print('mount', libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno())\n"
        "print('setuid', libc.setuid(0), ctypes.get_errno())\n"
        "print('cwd', sorted(os.listdir('.')), os.getcwd())\n"
        "print('tmp', os.access('/tmp', os.W_OK))\n")
    assert rec["error"] is None, rec["error"]
    lines = rec["stdout"].splitlines()
    for line in lines[:5]:
        assert line.endswith(" -1 1"), line            # EPERM: the seccomp filter, no root
    # its own working dir, holding only what TensorFlow's import leaves in a HOME (~/.keras)
    assert lines[5] == f"cwd ['.keras'] {sandbox.FORKED_WORKDIR}"
    assert lines[6] == "tmp False"                     # and nothing else to write


def test_a_dead_zygote_takes_its_jobs_and_is_replaced(pool):
    job = pool.submit(runner.Record("import os, time\nprint(os.getuid(), flush=True)\n"
                                    "time.sleep(50)\n"), owner="doomed")
    printed = ""
    while not printed:
        event = job.next_event(120)
        assert event is not None and not job.done, job.result
        if isinstance(event, jobs.Output):
            printed += event.text
    uid = int(printed.split()[0])
    old = pool.zygote
    os.kill(old.proc.pid, signal.SIGKILL)            # bwrap: its namespace ends with it
    assert job.wait(60)
    assert job.result["error"]["type"] == "WorkerCrash", job.result["error"]
    deadline = time.monotonic() + 10
    while sandbox.processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sandbox.processes_of(uid) == []
    works(pool)
    assert pool.zygote is not old
    pool.zygote.ready.wait(120)     # a loaded machine imports TensorFlow slowly
    assert pool.zygote.usable
    assert pool.status()["workers"] == "forked"
