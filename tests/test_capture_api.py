"""`tapeviz.capture()` and `tapeviz.figure()` in a user's own script, run as a script would
be: its recording holds what plain TensorFlow computes, and the block behaves as without it."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow   # a user's script and a fresh interpreter, each a Python of its own

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = '''
import gc
import json
import tensorflow as tf
import tapeviz

PlainTape = tf.GradientTape
w = tf.Variable([[0.5, -1.0], [2.0, 0.25]])
x = tf.constant([[1.0, 2.0]])


def loss_of(w):
    h = tf.nn.relu(tf.matmul(x, w))
    return tf.reduce_sum(h * h)


with tapeviz.capture() as rec:
    with tf.GradientTape() as tape:
        loss = loss_of(w)
    grad = tape.gradient(loss, w)
    print("inside", float(loss))
    frozen_inside = gc.get_freeze_count()

with PlainTape() as plain_tape:          # the reference: plain TensorFlow, outside the block
    plain_loss = loss_of(w)
plain_grad = plain_tape.gradient(plain_loss, w)

try:
    with tapeviz.capture() as failed:
        y = x * 2.0
        tf.matmul(y, tf.constant([1.0]))
except Exception as e:
    print("raised", type(e).__name__)

rec.save("run.json")
fig = tapeviz.figure(rec)
flow = tapeviz.figure("run.json", call=0)
print(json.dumps({
    "grad": grad.numpy().tolist(), "plain_grad": plain_grad.numpy().tolist(),
    "restored": tf.GradientTape is PlainTape, "figure": type(fig).__module__ + "." + type(fig).__name__,
    "nodes": sum(len(t.customdata) for t in fig.data if t.customdata is not None),
    "flow_title": flow.layout.title.text, "failed": failed.to_dict()["error"],
    "failed_ops": [op["type"] for op in failed.to_dict()["ops"]],
    "frozen_inside": frozen_inside, "frozen_after": gc.get_freeze_count(),
}))
'''


def test_capture_and_figure_in_a_users_script(tmp_path):
    script = tmp_path / "experiment.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip("\n"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "experiment.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("inside ") and lines[1] == "raised InvalidArgumentError"
    out = json.loads(lines[-1])
    # The block's results are TensorFlow's own, and the plain tape is back after it.
    assert out["grad"] == out["plain_grad"] and out["restored"] is True
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["schema"] == "tapeviz.recording/1" and data["error"] is None
    assert data["stdout"] == lines[0] + "\n"          # printed, and kept
    tensors = {t["id"]: t for t in data["tensors"]}
    (tape,) = data["tapes"]
    (result_,) = tape["gradients"][0]["results"]
    assert tensors[result_["grad"]]["value"] == out["plain_grad"]
    # Ops are attributed to the user's script, at the lines that ran them.
    source = script.read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if "tf.matmul(x, w)" in text)
    assert any(op["type"] == "MatMul" and op["line"] == line and op["file"] == "experiment.py"
               for op in data["ops"])
    assert data["program"] == "experiment.py" and "experiment.py" in data["files"]
    # A plotly figure of the tape's graph, and one coloured by its gradient call.
    assert out["figure"] == "plotly.graph_objs._figure.Figure" and out["nodes"] >= 5
    assert "gradient flow of call 0" in out["flow_title"]
    # A block that raised keeps what it recorded and says where it failed.
    bad_line = next(i for i, text in enumerate(source, 1) if "tf.constant([1.0])" in text)
    assert out["failed"]["type"] == "InvalidArgumentError"
    assert (out["failed"]["line"], out["failed"]["file"]) == (bad_line, "experiment.py")
    assert out["failed_ops"][0] == "Mul"
    # The collector sees the whole heap inside the block, as without it: nothing frozen
    # (a program that looks for its own objects in gc.get_objects() finds them).
    assert out["frozen_inside"] == 0 and out["frozen_after"] == 0


def test_importing_tapeviz_does_not_import_tensorflow():
    code = ("import sys, tapeviz\n"
            "assert callable(tapeviz.capture) and callable(tapeviz.figure)\n"
            "sys.exit(','.join(m for m in sys.modules if m.startswith('tensorflow')) or None)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
