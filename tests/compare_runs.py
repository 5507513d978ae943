"""Pairs of real programs the compare tests record with `python -m tapeviz record` (the real
worker), and what plain Python prints for them (`REF {...}`), the reference their recordings'
numbers are checked against."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NAN_LOOP = """
import json
import tensorflow as tf

w = tf.Variable(2.0)
x = tf.constant(3.0)
ref = {"w": [], "loss": [], "grad": []}
for step in range(2):
    with tf.GradientTape() as tape:
        y = tf.math.log(w) * x
        loss = y * y
    g = tape.gradient(loss, w)
    ref["w"].append(float(w.numpy())); ref["loss"].append(float(loss)); ref["grad"].append(float(g))
    w.assign_sub(1.5 * g)
print("REF", json.dumps(ref))
"""

STOPPED = """
import json
import tensorflow as tf

w = tf.Variable(0.83)
b = tf.Variable(0.5)
x = tf.constant(2.0)
with tf.GradientTape() as tape:
    frozen = tf.stop_gradient(w)
    h = frozen * x
    y = h + b
grads = tape.gradient(y, [w, b])
print("REF", json.dumps([None if g is None else float(g) for g in grads]))
"""
# the edit: the stop_gradient line removed, so every later line moves up one
FLOWING = STOPPED.replace("    frozen = tf.stop_gradient(w)\n", "").replace("frozen * x", "w * x")

TRACED = """
import json
import tensorflow as tf

w = tf.Variable([[0.5, -1.0], [2.0, 0.25]])
x = tf.constant([[1.0, 2.0]])

@tf.function
def step(x):
    with tf.GradientTape() as tape:
        y = tf.matmul(x, w)
        loss = tf.reduce_sum(tf.nn.relu(y))
    return loss, tape.gradient(loss, w)

loss, g = step(x)
print("REF", json.dumps({"loss": float(loss), "grad": g.numpy().tolist()}))
"""

SEEDED = """
import json
import tensorflow as tf

tf.random.set_seed(7)
w = tf.Variable(tf.random.normal([3, 2]))
x = tf.random.normal([4, 3])
with tf.GradientTape() as tape:
    y = tf.nn.tanh(tf.matmul(x, w))
    loss = tf.reduce_mean(y * y)
g = tape.gradient(loss, w)
print("REF", json.dumps({"loss": float(loss), "grad": g.numpy().tolist()}))
"""


def env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def tapeviz(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "tapeviz", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env(), timeout=timeout)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def record(folder: Path, name: str, text: str, *options) -> Path:
    """The program recorded by the real worker into NAME.json."""
    program = write(folder, f"{name}.py", text)
    out = folder / f"{name}.json"
    result = tapeviz("record", *options, str(program), "-o", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    return out


def plain(folder: Path, name: str, text: str) -> object:
    """What the program prints after REF when plain Python runs it: the reference."""
    program = write(folder, f"{name}_plain.py", text)
    result = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("REF "))
    return json.loads(line[4:])


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the program (as written to its file) that holds `needle`."""
    lines = textwrap.dedent(text).lstrip("\n").splitlines()
    return next(i for i, x in enumerate(lines, 1) if needle in x)
