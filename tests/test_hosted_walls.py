"""Hosted mode's hardened walls, each against a hostile program through the real runner and
real sandboxed workers: the seccomp filter (a test per refused call, each checked against
this unsandboxed process where the call works), memory the address-space limit cannot see,
open files, forged and oversized messages, a timeout inside tf.py_function, the refusal to
run unsandboxed, and the usual install (a virtualenv inside the checkout) sandboxed."""
import ctypes
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tapeviz.server import cgroup, protocol, runner, sandbox, seccomp

from hosted_util import STARTS, hosted_pool, one_start, works

ROOT = Path(__file__).resolve().parent.parent
SANDBOXED, WHY_NOT = sandbox.probe()
pytestmark = [pytest.mark.slow,   # sandboxed workers, Runners and `python -m tapeviz`
              pytest.mark.skipif(not SANDBOXED, reason=f"no usable bwrap: {WHY_NOT}")]
HOSTED_ENV = {"TAPEVIZ_MODE": "hosted", "TAPEVIZ_WORKERS": "2", "TAPEVIZ_WARM": "1",
              "TAPEVIZ_TIMEOUT_S": "10"}
libc = ctypes.CDLL(None, use_errno=True)


@pytest.fixture(scope="module", params=STARTS)
def pool(request):
    pool = hosted_pool(HOSTED_ENV, request.param)
    yield pool
    pool.close()


# -- the seccomp filter and no user namespaces ----------------------------------------------

# name: (a Python expression making the call through ctypes' `libc`, whether it works in
# this unsandboxed test process as root: the reference that the call itself is sound)
CALLS = {
    "unshare_user": ("libc.unshare(0x10000000)", False),     # would change this process
    "unshare_mount": ("libc.unshare(0x00020000)", False),
    "clone_newuser": ("libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)", False),
    "setns": ("libc.setns(os.open('/proc/self/ns/net', os.O_RDONLY), 0)", False),
    "mount": ("libc.mount(b'none', b'.', b'tmpfs', 0, b'size=4g')", False),
    "ptrace": ("libc.ptrace(16, os.getppid(), 0, 0)", False),
    "keyctl": ("libc.syscall(250, 0, -3, 1, 0, 0)", True),          # KEYCTL_GET_KEYRING_ID
    "add_key": ("libc.syscall(248, b'user', b'k', b'v', 1, -2)", True),
    "bpf": ("libc.syscall(321, 0, 0, 0)", False),                    # EINVAL here, EPERM there
    "perf_event_open": ("libc.syscall(298, 0, 0, -1, -1, 0)", False),
    "memfd_create": ("libc.memfd_create(b'x', 0)", True),
    "shmget": ("libc.shmget(0, 1 << 30, 0o1600)", False),     # would leave a segment here
    "io_uring_setup": ("libc.syscall(425, 1, ctypes.create_string_buffer(120))", True),
    "userfaultfd": ("libc.syscall(323, 0)", True),
}


@pytest.fixture(scope="module")
def filtered(pool):
    """One run that makes every call in CALLS inside the sandbox: {name: (result, errno)}."""
    program = ("import ctypes, json, os\n"
               "libc = ctypes.CDLL(None, use_errno=True)\n"
               "out = {}\n"
               f"for name, code in {({k: v[0] for k, v in CALLS.items()})!r}.items():\n"
               "    ctypes.set_errno(0)\n"
               "    out[name] = [eval(code), ctypes.get_errno()]\n"
               "print(json.dumps(out))\n"
               "import subprocess\n"
               "p = subprocess.run(['unshare', '--user', '--map-root-user', 'id'],\n"
               "                   capture_output=True, text=True)\n"
               "print('unshare-command', p.returncode, p.stdout.strip(), p.stderr.strip())\n")
    rec = pool.record(program)
    assert rec["error"] is None, rec["error"]
    return rec


@pytest.mark.parametrize("name", list(CALLS))
def test_the_seccomp_filter_refuses(filtered, name):
    results = json.loads(filtered["stdout"].splitlines()[0])
    result, err = results[name]
    assert result == -1 and err == 1, (name, result, os.strerror(err))   # EPERM
    code, works_here = CALLS[name]
    if works_here and os.geteuid() == 0:       # the reference: the same call, unsandboxed
        ctypes.set_errno(0)
        assert eval(code) >= 0, (name, os.strerror(ctypes.get_errno()))


def test_no_user_namespace_from_the_unshare_command(filtered):
    line = next(l for l in filtered["stdout"].splitlines() if l.startswith("unshare-command"))
    assert not line.startswith("unshare-command 0"), line
    assert "uid=0" not in line


def test_the_filter_program_is_well_formed():
    prog = seccomp.program("x86_64")
    assert len(prog) % 8 == 0 and len(prog) // 8 < 4096      # BPF_MAXINSNS
    ops = [prog[i:i + 8] for i in range(0, len(prog), 8)]
    for number in (272, 165, 101, 250, 321, 319):             # unshare mount ptrace keyctl bpf memfd
        assert any(int.from_bytes(op[4:], "little") == number and op[0] == 0x15 for op in ops)
    assert seccomp.program("sparc") is None


# -- memory, files -----------------------------------------------------------------------------

def test_memory_outside_the_address_space_limit_is_refused_or_bounded(pool):
    rec = pool.record(
        "import mmap, os\n"
        "chunk = b'0' * (1 << 20)\n"
        "try:\n"
        "    fd = os.memfd_create('x')\n"
        "    for _ in range(4096):\n"
        "        os.write(fd, chunk)\n"
        "    print('memfd held 4 GiB')\n"
        "except OSError as e:\n"
        "    print('memfd refused', e.errno)\n"
        "try:\n"
        "    with open('/dev/shm/big', 'wb') as f:\n"
        "        for _ in range(4096):\n"
        "            f.write(chunk)\n"
        "except OSError as e:\n"
        "    print('shm stopped at', os.path.getsize('/dev/shm/big') >> 20, 'MiB')\n")
    assert rec["error"] is None, rec["error"]
    assert "memfd refused 1" in rec["stdout"], rec["stdout"]
    stopped = int(re.search(r"shm stopped at (\d+) MiB", rec["stdout"]).group(1))
    assert stopped <= 64
    works(pool)


@pytest.mark.skipif(not cgroup.MemoryCgroups.find().available,
                    reason="no memory cgroup can be made on this machine")
def test_a_worker_is_killed_at_its_memory_cgroup():
    config = runner.Config.from_env(dict(HOSTED_ENV, TAPEVIZ_WARM="0",
                                         TAPEVIZ_CGROUP_MEMORY_GB="0.8"))
    others = set(config_cgroups())          # the module's pool's
    pool = runner.Runner(config)
    try:
        # Under the 3 GiB address-space limit, over the 0.8 GiB cgroup: only the cgroup stops it.
        rec = pool.record("import numpy as np\na = np.ones((1 << 30) // 8)\nprint(a.sum())\n")
        assert rec["error"]["type"] == "WorkerCrash", rec["error"]
        assert "memory limit" in rec["error"]["message"]
        works(pool)
    finally:
        pool.close()
    assert set(config_cgroups()) <= others     # every worker's cgroup was removed


def config_cgroups():
    found = cgroup.MemoryCgroups.find()
    if found.available:
        yield from (p for p in found.parent.iterdir() if p.name.startswith(f"tapeviz-{os.getpid()}-"))


@one_start
def test_open_files_are_bounded(pool):
    rec = pool.record("files = []\nfor i in range(100_000):\n"
                      "    files.append(open('f.txt', 'w'))\n")
    assert rec["error"]["type"] == "OSError" and "Too many open files" in rec["error"]["message"]
    assert pool.config.limits.open_files <= 1024
    works(pool)


# -- the protocol ------------------------------------------------------------------------------

FORGE = """
import json, linecache, sys
SOURCE = ''.join(linecache.cache[__file__][2])    # the program's own text, as the server has it
# The worker's message channel is a local of its main loop, up the program's own stack.
frame = sys._getframe()
while 'channel' not in frame.f_locals:
    frame = frame.f_back
channel = frame.f_locals['channel']
ops = [{{"id": i, "type": "AddV2", "inputs": [], "outputs": [], "line": 1, "scope": None,
        "tapes": [], "phase": "forward", "duration_us": 0}} for i in range({ops})]
forged = {{"schema": "tapeviz.recording/1", "source": SOURCE, "stdout": "", "error": None,
          "ops": ops, "tensors": [], "tapes": [], "alerts": [], "warnings": [], "dropped": {{}},
          "duration_s": 0}}
channel.send({{"type": "recording", "recording": forged}})
"""


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@one_start
def test_a_forged_oversized_recording_is_refused_before_anything_is_built(pool):
    program = FORGE.format(ops=185_000)
    before = rss_mib()
    rec = pool.record(program, timeout=90)      # building 185,000 ops takes a busy machine a while
    assert rec["error"]["type"] == "ProtocolError", rec["error"]
    assert "more ops than the bound" in rec["error"]["message"] and rec["ops"] == []
    assert rss_mib() - before < 300        # the parse is budgeted; nothing was built from it
    works(pool)


@one_start
def test_a_forged_recording_within_the_bounds_must_still_be_of_the_program_sent(pool):
    rec = pool.record(FORGE.format(ops=10).replace('"source": SOURCE', '"source": "print(1)"'))
    assert rec["error"]["type"] == "ProtocolError"
    assert "not of the program that was sent" in rec["error"]["message"]
    works(pool)


@one_start
def test_messages_without_the_secret_or_over_the_size_drop_the_worker(pool):
    no_secret = pool.record(
        "import os\nfor fd in range(3, 30):\n    try:\n"
        "        os.write(fd, b'{\"type\": \"recording\", \"recording\": {}}\\n')\n"
        "    except OSError:\n        pass\nimport time\ntime.sleep(3)\n")
    assert no_secret["error"]["type"] == "ProtocolError", no_secret["error"]
    huge = pool.record(
        "import sys\n"
        "frame = sys._getframe()\n"
        "while 'channel' not in frame.f_locals:\n"
        "    frame = frame.f_back\n"
        "channel = frame.f_locals['channel']\n"
        f"channel._out.write('[' + '0,' * ({protocol.MAX_MESSAGE} // 2 + 10) + '0]\\n')\n"
        "channel._out.flush()\n")
    assert huge["error"]["type"] == "WorkerError" and "64 MiB" in huge["error"]["message"]
    works(pool)


def test_the_parse_budget_stops_a_message_of_many_small_numbers():
    from tapeviz.recording_gate import Budget
    # one number past what any recording within the bounds may hold (its summaries too)
    line = ("[" + "0," * Budget(1000).numbers + "0]").encode()
    with pytest.raises(protocol.ProtocolError, match="numbers"):
        protocol.parse(line, max_ops=1000)
    ok = protocol.parse(b'{"type": "metric", "metric": {"step": 1, "loss": 0.5}}', 1000)
    assert ok["metric"]["loss"] == 0.5


# -- timeouts, refusal, the usual install ------------------------------------------------------

def test_a_timeout_inside_py_function_is_a_timeout(pool):
    rec = pool.record("import tensorflow as tf, time\n"
                      "def slow(x):\n"
                      "    while True:\n"
                      "        time.sleep(0.01)\n"
                      "y = tf.py_function(slow, [tf.constant(1.0)], tf.float32)\n", timeout=3)
    assert rec["error"]["type"] == "Timeout", rec["error"]
    assert rec["error"]["line"] == 5
    assert str(ROOT) not in json.dumps(rec["error"]) and "Traceback" not in rec["error"]["message"]
    works(pool)


def test_hosted_mode_refuses_to_run_unsandboxed_unless_told(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("print('ran')\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), TAPEVIZ_MODE="hosted",
               PATH=str(tmp_path))                     # no bwrap on the PATH
    refused = subprocess.run([sys.executable, "-m", "tapeviz", "record", str(program)],
                             capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert refused.returncode == 2
    assert "refuses to run programs unsandboxed" in refused.stderr
    assert "bubblewrap (bwrap) is not installed" in refused.stderr
    if os.geteuid() == 0:                              # as root, `none` runs, and says so
        told = subprocess.run([sys.executable, "-m", "tapeviz", "record", str(program)],
                              capture_output=True, text=True, cwd=ROOT, timeout=180,
                              env=dict(env, TAPEVIZ_SANDBOX="none"))
        assert told.returncode == 0, told.stderr
        assert "sandbox turned off" in told.stderr
        assert json.loads(told.stdout)["stdout"] == "ran\n"


HOSTILE_IN_VENV = """
import os, socket, sqlite3, statistics
print('uid', os.getuid())
print('app', sorted(os.listdir(APP)))
try:
    socket.create_connection(('1.1.1.1', 53), timeout=3)
    print('network reached')
except OSError as e:
    print('network refused', type(e).__name__)
print('stdlib', sqlite3.sqlite_version is not None, statistics.mean([1, 3]))
import tensorflow as tf
print('tf', float(tf.constant(2.0) * 3.0))
"""


def test_the_usual_install_a_virtualenv_inside_the_checkout_is_sandboxed(tmp_path):
    venv = Path(tempfile.mkdtemp(prefix=".venv-test-", dir=ROOT))
    try:
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       check=True, timeout=120)
        python = venv / "bin" / "python"
        program = tmp_path / "hostile.py"
        program.write_text(HOSTILE_IN_VENV.replace("APP", repr(str(ROOT))))
        out = tmp_path / "out.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TAPEVIZ_")}
        done = subprocess.run([str(python), "-m", "tapeviz", "record", str(program),
                               "-o", str(out)], capture_output=True, text=True, cwd=ROOT,
                              env=dict(env, TAPEVIZ_MODE="hosted"), timeout=300)
        assert done.returncode == 0, done.stderr
        assert "sandbox" not in done.stderr.lower(), done.stderr      # no warning, no refusal
        stdout = json.loads(out.read_text())["stdout"]
        assert f"app [{venv.name!r}]" in stdout, stdout     # only the virtualenv of the app
        assert "network refused" in stdout
        assert "stdlib True 2" in stdout and "tf 6.0" in stdout
        if os.geteuid() == 0:
            assert "uid 0" not in stdout
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def sleepers(tag: str) -> list:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if open(f"/proc/{entry}/cmdline", "rb").read() == f"sleep\0{tag}\0".encode():
                    found.append(int(entry))
            except OSError:
                pass
    return found


def test_a_double_forked_new_session_child_dies_with_its_run(pool):
    tag = str(900 + os.getpid() % 99)
    rec = pool.record("import os\n"
                      "if os.fork() == 0:\n"
                      "    os.setsid()\n"
                      "    if os.fork() == 0:\n"
                      f"        os.execv('/bin/sleep', ['sleep', '{tag}'])\n"
                      "    os._exit(0)\n"
                      "import time\ntime.sleep(1)\nprint('parent done')\n")
    assert rec["error"] is None and "parent done" in rec["stdout"], rec["error"]
    # Out of the worker's process group and session; the run's clean-up (its cgroup, its
    # uid, or its pid namespace) still reached it before record() returned.
    assert sleepers(tag) == []
    works(pool)
