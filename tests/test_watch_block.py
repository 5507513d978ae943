"""`tapeviz.watch("run.json")` around a custom training loop of one's own: every step
summarized with plain `tape.gradient`'s numbers, the file rewritten while it runs, the
first steps kept whole, and the page's Stop ending the loop as Ctrl+C would. Real
TensorFlow, in this process."""
import json
import os

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import tapeviz  # noqa: E402
from tapeviz import recording_gate  # noqa: E402
from tapeviz.recording import stop_path  # noqa: E402


def variables():
    tf.random.set_seed(4)
    return tf.Variable(tf.random.normal([6, 3]), name="w"), tf.Variable(tf.zeros([3]), name="b")


X = tf.constant(np.random.default_rng(1).normal(size=(16, 6)).astype("float32"))


def step(w, b):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.nn.relu(X @ w + b) ** 2)
    dw, db = tape.gradient(loss, [w, b])
    w.assign_sub(0.1 * dw)
    b.assign_sub(0.1 * db)
    return float(loss), float(tf.norm(dw)), float(tf.norm(db))


def test_each_step_is_summarized_as_plain_tape_gradient_gives_it_and_the_file_follows(tmp_path):
    path = tmp_path / "run.json"
    seen = []
    w, b = variables()
    with tapeviz.watch(path, every_s=0.02) as rec:
        for _ in range(60):
            step(w, b)
            if path.exists():
                seen.append(json.loads(path.read_text()))
    plain_w, plain_b = variables()
    plain = [step(plain_w, plain_b) for _ in range(60)]      # the reference, untouched
    np.testing.assert_array_equal(w.numpy(), plain_w.numpy())
    final, _ = recording_gate.read(path.read_bytes(), path.name)
    assert [s.target for s in final.steps] == pytest.approx([p[0] for p in plain], rel=1e-6)
    assert [n for s in final.steps for n in s.norms] == \
        pytest.approx([n for p in plain for n in p[1:]], rel=1e-5)
    assert not final.running and rec.recording.steps == final.steps
    # while the loop ran the file said so, its steps growing
    assert seen and all(d["running"] for d in seen)
    counts = [len(d["steps"]) for d in seen]
    assert counts == sorted(counts) and 0 < counts[-1] <= 60
    # recorded as `record` does by default: the first 20 steps whole, the rest summarized
    assert 20 <= len(final.tapes) < 60 and final.skipped


def test_the_pages_stop_ends_the_loop_as_ctrl_c_would_and_keeps_every_step(tmp_path):
    path = tmp_path / "run.json"
    w, b = variables()
    done = 0
    with pytest.raises(KeyboardInterrupt):
        with tapeviz.watch(path, every_s=0.02):
            for n in range(100_000):
                step(w, b)
                done = n + 1
                if n == 30:
                    open(stop_path(path), "w").close()     # what the page's Stop leaves
    final, _ = recording_gate.read(path.read_bytes(), path.name)
    assert 30 < done < 100_000 and not final.running
    assert final.error.type == "KeyboardInterrupt"
    assert [s.call for s in final.steps] == list(range(len(final.steps)))
    assert len(final.steps) in (done, done + 1)      # the step the interrupt cut may have its call
    assert not os.path.exists(stop_path(path))
