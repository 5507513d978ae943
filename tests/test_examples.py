"""Tests for the example gallery: the TF-free loader, and every program's run and output."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tapeviz import examples

pytestmark = pytest.mark.slow   # the examples run in a fresh interpreter (the `runs` fixture)

EXPECTED = [
    "eager_basics", "fizzbuzz", "linear_gradient", "nonpersistent_error",
    "persistent_tape", "higher_order", "watch_constant", "none_gradients",
    "jacobian", "tf_function", "nan_hunt", "mnist_step", "tf1_vs_eager",
]
ROOT = Path(__file__).resolve().parents[1]

# Runs every example with exec in one child, so TensorFlow is imported once.
# Each program gets fresh globals; its stdout, exception type and the small
# tensors it bound are sent back as JSON on the child's real stdout.
RUNNER = r"""
import contextlib, io, json, sys
from tapeviz import examples
import numpy as np
real_stdout = sys.stdout
report = {}
for name in examples.names():
    ex = examples.load(name)
    out = io.StringIO()
    scope = {"__name__": "__main__"}
    error = None
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(ex.source, name + ".py", "exec"), scope)
    except BaseException as exc:
        error = type(exc).__name__ + ": " + str(exc)[:200]
    values = {}
    for var in ("w", "x", "b"):
        if hasattr(scope.get(var), "numpy"):
            values[var] = np.asarray(scope[var].numpy()).tolist()
    report[name] = {"stdout": out.getvalue(), "error": error, "values": values}
real_stdout.write("REPORT" + json.dumps(report))
"""


def _printed(stdout, label):
    """The numbers printed as `label = ...`, including NumPy's continuation lines."""
    entries, current = {}, None
    for line in stdout.splitlines():
        head, sep, rest = line.partition(" = ")
        if line[:1].isalpha():  # a new print; NumPy continues rows with " [" or " "
            current = [rest] if sep else None
            if sep:
                entries[head] = current
        elif current is not None:
            current.append(line)
    assert label in entries, f"{label} not printed in:\n{stdout}"
    text = " ".join(entries[label]).replace("[", " ").replace("]", " ")
    return np.array(text.split(), dtype=float)


@pytest.fixture(scope="module")
def runs():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", RUNNER], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    assert "REPORT" in proc.stdout, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("REPORT", 1)[1])


def test_every_example_loads_with_title_and_explanation():
    assert set(EXPECTED) <= set(examples.names())
    for name in EXPECTED:
        ex = examples.load(name)
        assert ex.name == name and ex.title and ex.explanation
        assert "\n" not in ex.title
        assert ex.source.startswith('"""') and "import tensorflow as tf" in ex.source
    with pytest.raises(KeyError):
        examples.load("no_such_example")
    with pytest.raises(KeyError):
        examples.load("../__init__")


def test_examples_run(runs):
    for name in EXPECTED:
        if name == "nonpersistent_error":
            assert (runs[name]["error"] or "").startswith("RuntimeError"), runs[name]
        else:
            assert runs[name]["error"] is None, (name, runs[name])


def test_higher_order_prints_first_and_second_derivative(runs):
    out = runs["higher_order"]["stdout"]
    assert _printed(out, "dy_dx") == pytest.approx([3.0])
    assert _printed(out, "d2y_dx2") == pytest.approx([6.0])


def test_linear_gradient_matches_finite_differences(runs):
    run = runs["linear_gradient"]
    w, x, b = (np.array(run["values"][k], dtype=float) for k in ("w", "x", "b"))

    def target(w, b):
        # The tape differentiates the sum of z when z is not a scalar.
        return np.sum(w * x + b)

    def numeric(f, a, eps=1e-3):
        grad = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            step = np.zeros_like(a)
            step[i] = eps
            grad[i] = (f(a + step) - f(a - step)) / (2 * eps)
        return grad

    dz_dw = numeric(lambda w_: target(w_, b), w)
    dz_db = numeric(lambda b_: target(w, b_), b)
    assert _printed(run["stdout"], "dz_dw") == pytest.approx(dz_dw.ravel(), abs=1e-4)
    assert _printed(run["stdout"], "dz_db") == pytest.approx(dz_db.ravel(), abs=1e-4)


def test_persistent_tape_prints_both_gradients(runs):
    out = runs["persistent_tape"]["stdout"]
    assert _printed(out, "dz_dx") == pytest.approx([108.0])
    assert _printed(out, "dy_dx") == pytest.approx([6.0])


def test_none_gradients_prints_three_nones(runs):
    out = runs["none_gradients"]["stdout"]
    assert [line.split("=")[-1].strip() for line in out.splitlines()] == ["None"] * 3


def test_nan_hunt_has_finite_loss_and_nan_gradient(runs):
    out = runs["nan_hunt"]["stdout"]
    assert np.isfinite(_printed(out, "loss")).all()
    assert np.isnan(_printed(out, "grad")).any()


def test_tf1_and_eager_agree(runs):
    lines = runs["tf1_vs_eager"]["stdout"].splitlines()
    assert len(lines) == 2 and lines[0].split(":")[1] == lines[1].split(":")[1]
