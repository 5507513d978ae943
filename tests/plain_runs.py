"""The references a recording is checked against: a program run plainly, with no tapeviz (in
this process, in a fresh Python, or many in forks of one; TensorFlow's own check naming the
first non-finite op), and the same program recorded through a real worker."""
import contextlib
import io
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

from tapeviz.recording import Recording
from tapeviz.server import runner
from tapeviz.server.config import Limits

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"


def program(name: str) -> str:
    """The source of tests/programs/<name>.py."""
    return (PROGRAMS / f"{name}.py").read_text()


def run_plain(source: str) -> tuple[dict, str]:
    """The reference: the program under plain TensorFlow in this process, no tapeviz:
    its namespace and what it printed."""
    namespace = {"__name__": "__main__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "plain.py", "exec"), namespace)
    return namespace, out.getvalue()


def plain(source: str, tmp_path, fails: bool = False) -> list:
    """The lines the program prints run as a file in a fresh Python, no tapeviz."""
    return _plain_started(source, tmp_path, fails)()


def _plain_started(source: str, tmp_path, fails: bool):
    path = tmp_path / "plain.py"
    path.write_text(source)
    run = started([sys.executable, str(path)], timeout=300)

    def lines() -> list:
        out = run()
        assert (out.returncode != 0) == fails, out.stderr
        return out.stdout.splitlines()
    return lines


def recorded(source: str, tmp_path, keep_steps=runner.KEEP_STEPS, **limits) -> Recording:
    """The program's recording, made by a real worker of a local Runner."""
    path = tmp_path / "program.py"
    path.write_text(source)
    return Recording.from_dict(_pool(tuple(sorted(limits.items()))).record(
        source, filename=str(path), timeout=300, keep_steps=keep_steps))


def started(args, timeout: float, **popen):
    """`subprocess.run(args, capture_output=True, text=True, timeout=timeout, **popen)`, started
    now and finished by calling what this returns: a program's plain run and its recorded
    run side by side on the two cores, where one after the other left one idle. Its output
    goes to files, not pipes, so a process that prints much never waits for this one to
    read; and no thread runs here meanwhile (an in-process recording counts the garbage and
    tensors this process makes)."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    proc = subprocess.Popen(args, stdout=out, stderr=err, **popen)
    deadline = time.monotonic() + timeout

    def finished() -> subprocess.CompletedProcess:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        texts = []
        for file in (out, err):
            file.seek(0)
            with io.TextIOWrapper(file) as text:   # decoded and newlines as text=True reads a pipe
                texts.append(text.read())
        return subprocess.CompletedProcess(args, proc.returncode, *texts)
    return finished


def finished(*runs) -> list:
    """The CompletedProcess of each `started` run, in order, once all have ended."""
    return [run() for run in runs]


def plain_and_recorded(source: str, tmp_path, fails: bool = False, **recording) -> tuple:
    """`plain(source, tmp_path, fails)` and `recorded(source, tmp_path, **recording)`, the
    fresh Python's run side by side with the worker's."""
    lines = _plain_started(source, tmp_path, fails)
    rec = recorded(source, tmp_path, **recording)
    return lines(), rec


_POOLS: dict = {}


def _pool(limits: tuple) -> runner.Runner:
    """One local Runner per set of limits, kept until the test module is done (tests/conftest.py
    closes them): its zygote imports TensorFlow once and each recording forks from it."""
    if limits not in _POOLS:
        _POOLS[limits] = runner.Runner(runner.Config(warm=0, limits=Limits(**dict(limits))))
    return _POOLS[limits]


def close_pools() -> None:
    while _POOLS:
        _POOLS.popitem()[1].close()


def first_non_finite_op(source: str, tmp_path) -> str:
    """The type of the first op whose output held a NaN or an Inf when the program ran under
    plain TensorFlow, as TensorFlow's own check (tf.debugging.enable_check_numerics) names it."""
    path = tmp_path / "checked.py"
    path.write_text("import tensorflow as tf\ntf.debugging.enable_check_numerics()\n" + source)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    found = re.search(r'Infinity or NaN in output \d+ of [\w-]+ op "(\w+)"', out.stderr)
    assert found, out.stderr[-2_000:]
    return found.group(1)


# `python PROGRAM.py` for many programs at the price of one TensorFlow import: each runs in a
# fork of a Python that imported TensorFlow and nothing of tapeviz, with the program's
# argv, sys.path, cwd and __main__, its stdout (fd 1, so native writes too) to a file, and
# the exit status Python would give it.
_EACH_PLAINLY = r"""
import json, os, runpy, sys, traceback
import tensorflow
out_dir, cwd, paths = sys.argv[1], sys.argv[2], sys.argv[3:]

def run(path):
    fd = os.open(os.path.join(out_dir, os.path.basename(path) + ".out"), os.O_WRONLY | os.O_CREAT)
    os.dup2(fd, 1)
    os.chdir(cwd)
    sys.argv, sys.path[0] = [path], os.path.dirname(path)
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code & 0xFF)

running, status = {}, {}

def wait_one():
    pid, how = os.wait()
    status[running.pop(pid)] = os.waitstatus_to_exitcode(how)

for path in paths:
    if len(running) == 2:        # two at a time (2 cores)
        wait_one()
    pid = os.fork()
    if pid == 0:
        run(path)
    running[pid] = path
while running:
    wait_one()
print(json.dumps(status))
"""


def each_plainly(paths: list, cwd, out_dir, timeout: float) -> dict:
    """{path's name: (exit status, stdout)} of every program run as `python PROGRAM.py`."""
    done = subprocess.run([sys.executable, "-c", _EACH_PLAINLY, str(out_dir), str(cwd), *map(str, paths)],
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert done.returncode == 0, done.stderr[-3_000:]
    status = json.loads(done.stdout.splitlines()[-1])
    return {pathlib.Path(p).name: (code, (pathlib.Path(out_dir) / (pathlib.Path(p).name + ".out")).read_text())
            for p, code in status.items()}
