"""`tf.keras.datasets.mnist.load_data()` in a recorded program (what it is served with:
tests/test_invisible.py), and the TF eager guide's MNIST loop run as written (tests/programs/eager_guide_mnist.py)."""
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tapeviz import data  # noqa: E402
from tapeviz.worker import recorder  # noqa: E402

SHARED_MNIST = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mnist"
SEED = (Path(__file__).parent / "programs" / "eager_guide_mnist.py").read_text()
# load_data() is served only with Keras's very arrays: the training set too
needs_mnist = pytest.mark.skipif(not (SHARED_MNIST / "train-images-idx3-ubyte.gz").exists(),
                                 reason="shared MNIST digits (train and test) not present")


@pytest.fixture
def offline_mnist(monkeypatch, tmp_path):
    monkeypatch.setenv("TAPEVIZ_MNIST_DIR", str(SHARED_MNIST))
    monkeypatch.setenv("HOME", str(tmp_path))          # no Keras cache
    return SHARED_MNIST


def test_load_data_is_keras_own_again_after_the_run():
    before = tf.keras.datasets.mnist.load_data
    recorder.record("x = 1\n")
    assert tf.keras.datasets.mnist.load_data is before


@pytest.mark.slow   # trains until its 12 s time limit, by design
@needs_mnist
def test_the_eager_guide_loop_runs_as_written(offline_mnist):
    # Stopped early on purpose: the loop's 250 steps take longer than a test should.
    rec = recorder.record(SEED, timeout=12)
    assert "Logits:" in rec.stdout
    assert rec.error is None or rec.error.type == "Timeout"
    if rec.error is not None:
        assert "dataset.take(" in rec.error.hint and rec.error.line is not None
    variables = [t for t in rec.tensors if t.kind == "variable" and t.trainable]
    shapes = sorted(tuple(t.shape) for t in variables)
    # A full step: one gradient call whose results cover the model's six trainable
    # variables, each a gradient of the variable's own shape.
    full = []
    for tape in rec.tapes:
        for call in tape.gradients:
            grads = [rec.tensor(r.grad) for r in call.results]
            if len(grads) == 6 and all(g is not None for g in grads):
                full.append(sorted(tuple(g.shape) for g in grads))
    assert full, "no training step's gradients were recorded"
    assert sorted(set(shapes)) == sorted(set(full[-1]))
