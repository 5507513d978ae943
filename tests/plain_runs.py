"""The references a recording is checked against: a program run plainly (in this process
or in a fresh Python, no tapeviz), and the same program recorded through a real worker."""
import contextlib
import io
import pathlib
import re
import subprocess
import sys

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
    path = tmp_path / "plain.py"
    path.write_text(source)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert (out.returncode != 0) == fails, out.stderr
    return out.stdout.splitlines()


def recorded(source: str, tmp_path, keep_steps=runner.KEEP_STEPS, **limits) -> Recording:
    """The program's recording, made by a real worker of a local Runner."""
    path = tmp_path / "program.py"
    path.write_text(source)
    pool = runner.Runner(runner.Config(warm=0, limits=Limits(**limits)))
    try:
        return Recording.from_dict(pool.record(source, filename=str(path), timeout=300,
                                               keep_steps=keep_steps))
    finally:
        pool.close()


def first_non_finite_op(source: str, tmp_path) -> str:
    """The type of the first op whose output held a NaN or an Inf when the program ran under
    plain TensorFlow, as TensorFlow's own check (tf.debugging.enable_check_numerics) names it."""
    path = tmp_path / "checked.py"
    path.write_text("import tensorflow as tf\ntf.debugging.enable_check_numerics()\n" + source)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    found = re.search(r'Infinity or NaN in output \d+ of [\w-]+ op "(\w+)"', out.stderr)
    assert found, out.stderr[-2_000:]
    return found.group(1)
