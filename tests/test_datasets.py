"""`tf.keras.datasets.mnist.load_data()` in a recorded program, served from the data chain,
and the TF eager guide's MNIST loop run as written (tests/programs/eager_guide_mnist.py)."""
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tapeviz import data  # noqa: E402
from tapeviz.worker import recorder  # noqa: E402

SHARED_MNIST = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mnist"
SEED = (Path(__file__).parent / "programs" / "eager_guide_mnist.py").read_text()
needs_mnist = pytest.mark.skipif(not (SHARED_MNIST / "t10k-images-idx3-ubyte.gz").exists(),
                                 reason="shared MNIST digits not present")


@pytest.fixture
def offline_mnist(monkeypatch, tmp_path):
    monkeypatch.setenv("TAPEVIZ_MNIST_DIR", str(SHARED_MNIST))
    monkeypatch.setenv("HOME", str(tmp_path))          # no Keras cache
    return SHARED_MNIST


@needs_mnist
def test_load_data_serves_the_idx_digits_as_keras_does(offline_mnist):
    program = "import tensorflow as tf\n(x, y), (xt, yt) = tf.keras.datasets.mnist.load_data()\n"
    namespace = {}
    rec = recorder.record(program, namespace=namespace)
    assert rec.error is None
    # The reference: the IDX files' own bytes, split 8,000 / 2,000 as data.split does.
    images = data.read_idx(offline_mnist / "t10k-images-idx3-ubyte.gz")
    labels = data.read_idx(offline_mnist / "t10k-labels-idx1-ubyte.gz")
    assert namespace["x"].dtype == np.uint8 and namespace["x"].shape == (8000, 28, 28)
    np.testing.assert_array_equal(namespace["x"], images[:8000])
    np.testing.assert_array_equal(namespace["xt"], images[8000:])
    np.testing.assert_array_equal(namespace["y"], labels[:8000])
    np.testing.assert_array_equal(namespace["yt"], labels[8000:])
    served = [w for w in rec.warnings if "load_data()" in w["message"]]
    assert len(served) == 1 and served[0]["line"] == 2
    assert str(offline_mnist) in served[0]["message"] and "8,000 training" in served[0]["message"]


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
