"""`tapeviz.keras.Watch()`: fit() with the callback trains and prints as without it, and its
step summaries hold what plain `tape.gradient` gives for the same steps (norms, histograms,
loss). Real Keras, real fit(), in this process."""
import json
import re

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import tapeviz.keras  # noqa: E402
from tapeviz import metrics, recording_gate  # noqa: E402
from tapeviz.recording import STEP_HIST_EVERY  # noqa: E402


def data(n=96):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 6, 6, 1)).astype("float32")
    y = (x.mean(axis=(1, 2, 3)) > 0).astype("int32")
    return x, y


def cnn():
    keras.utils.set_random_seed(3)
    model = keras.Sequential([
        keras.Input((6, 6, 1)),
        keras.layers.Conv2D(3, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(2),
    ])
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def fit(model, callbacks=(), epochs=2, **kwargs):
    x, y = data()
    return model.fit(x, y, batch_size=32, epochs=epochs, shuffle=False, verbose=2,
                     callbacks=list(callbacks), **kwargs)


def without_times(text: str) -> str:
    return re.sub(r"\d+(\.\d+)?(ms|s|us)(/step)?", "T", text)


def test_fit_prints_trains_and_ends_as_without_the_callback(tmp_path, capsys):
    plain = cnn()
    plain_history = fit(plain).history
    plain_out = capsys.readouterr().out
    watched = cnn()
    watch = tapeviz.keras.Watch(tmp_path / "run.json")
    watched_history = fit(watched, [watch]).history
    watched_out = capsys.readouterr().out
    assert watched_history == plain_history
    assert without_times(watched_out) == without_times(plain_out)
    for a, b in zip(plain.weights, watched.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # fit() is left as it was: the instances' wrappers gone, the next fit() traces anew
    assert "apply" not in vars(watched.optimizer) and "compute_loss" not in vars(watched)
    assert watched.train_function is None
    assert len(watch.recording.steps) == 6


def test_each_step_holds_plain_tape_gradients_norms_histograms_and_loss(tmp_path):
    model = cnn()
    path = tmp_path / "run.json"
    fit(model, [tapeviz.keras.Watch(path)], epochs=4)      # 12 steps: histograms at 0 and 10
    rec, _ = recording_gate.read(path.read_bytes(), path.name)

    reference = cnn()                  # the same seeded model, trained by hand, step by step
    x, y = data()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    variables = reference.trainable_variables
    assert [s.variable for s in rec.step_sources] == \
        [v.path for v in model.trainable_variables]
    for step, summary in enumerate(rec.steps):
        batch = slice((step % 3) * 32, (step % 3 + 1) * 32)
        with tf.GradientTape() as tape:
            loss = loss_fn(y[batch], reference(x[batch], training=True))
        grads = tape.gradient(loss, variables)
        reference.optimizer.apply(grads, variables)
        assert summary.target == pytest.approx(float(loss), rel=1e-5)
        assert summary.norms == pytest.approx([float(tf.norm(g)) for g in grads], rel=1e-5)
        if step % STEP_HIST_EVERY == 0:
            assert summary.hist == [metrics.histogram(g.numpy()) for g in grads]
        else:
            assert summary.hist == []
    assert [s.call for s in rec.steps] == list(range(12))
    assert {s.line for s in rec.steps} == {fit.__code__.co_firstlineno + 2}   # the fit() line


def test_a_train_step_of_its_own_charts_the_logged_loss_and_says_so(tmp_path):
    class Custom(keras.Model):
        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                logits = self(x, training=True)
                loss = tf.reduce_mean(
                    keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            return {"loss": loss}

    keras.utils.set_random_seed(3)
    inputs = keras.Input((6, 6, 1))
    model = Custom(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(inputs)))
    model.compile(optimizer="sgd")
    watch = tapeviz.keras.Watch(tmp_path / "run.json")
    fit(model, [watch], epochs=1)
    rec = watch.recording
    assert len(rec.steps) == 3 and all(s.norms and None not in s.norms for s in rec.steps)
    assert any("running mean" in w["message"] for w in rec.warnings)


def test_the_file_is_rewritten_while_fit_runs_and_read_by_the_gate(tmp_path):
    seen = []
    path = tmp_path / "run.json"

    class Peek(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if path.exists():
                seen.append(len(json.loads(path.read_text())["steps"]))

    fit(cnn(), [tapeviz.keras.Watch(path, every_s=0.0), Peek()], epochs=1)
    assert seen == [1, 2, 3]            # each step written before fit() goes on
    recording_gate.read(path.read_bytes(), path.name)
    assert not list(tmp_path.glob("*.part"))


FIT_PROGRAM = '''
import numpy as np
import keras
import tapeviz.keras

keras.utils.set_random_seed(3)
rng = np.random.default_rng(0)
x = rng.normal(size=(96, 6, 6, 1)).astype("float32")
y = (x.mean(axis=(1, 2, 3)) > 0).astype("int32")
model = keras.Sequential([keras.Input((6, 6, 1)), keras.layers.Flatten(), keras.layers.Dense(2)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=2,
          callbacks=[tapeviz.keras.Watch()])
print("weights", float(np.sum(model.layers[-1].kernel.numpy())))
'''


@pytest.mark.slow          # `tapeviz record` and a plain `python`, each a process
@pytest.mark.parametrize("eager", [False, True], ids=["compiled", "eager"])
def test_under_record_the_steps_join_the_recording(tmp_path, eager):
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    program = tmp_path / "fit_small.py"
    program.write_text(FIT_PROGRAM)
    env = {**__import__("os").environ, "PYTHONPATH": str(root)}
    plain = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=300)
    out = tmp_path / "run.json"
    recorded = subprocess.run([sys.executable, "-m", "tapeviz", "record", str(program), "-o",
                               str(out), *(["--eager"] if eager else [])], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=300)
    assert plain.returncode == 0 and recorded.returncode == 0, recorded.stderr[-2000:]
    assert without_times(recorded.stdout) == without_times(plain.stdout)
    rec, _ = recording_gate.read(out.read_bytes(), out.name)
    fit_line = FIT_PROGRAM.splitlines().index("model.fit(x, y, batch_size=32, epochs=2, "
                                              "shuffle=False, verbose=2,") + 1
    assert len(rec.steps) == 6 and {(s.file, s.line) for s in rec.steps} == \
        {("fit_small.py", fit_line)}
    assert {s.variable for s in rec.step_sources} >= {"sequential/dense/kernel",
                                                      "sequential/dense/bias"}
    # eager: the recorder's own tape summarizes each step, and the callback says it stood by
    assert any("ran eagerly" in w["message"] for w in rec.warnings) == eager
    assert not list(tmp_path.glob("*.json.part")) and sorted(p.name for p in tmp_path.glob(
        "*.json")) == ["run.json"]
    if not eager:     # the callback's own ops are not the program's: the same graph drawn
        program.write_text(FIT_PROGRAM.replace("callbacks=[tapeviz.keras.Watch()]", ""))
        without = tmp_path / "without.json"
        subprocess.run([sys.executable, "-m", "tapeviz", "record", str(program), "-o",
                        str(without)], capture_output=True, env=env, cwd=tmp_path, timeout=300)
        plain_rec, _ = recording_gate.read(without.read_bytes(), without.name)
        assert sorted((o.type, o.line) for o in rec.ops) == \
            sorted((o.type, o.line) for o in plain_rec.ops)


class GAN(keras.Model):
    """Keras's GAN pattern: compile() takes two optimizers, train_step applies each."""

    def __init__(self):
        super().__init__()
        self.d = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)], name="d")
        self.g = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8)], name="g")

    def compile(self, d_optimizer, g_optimizer):
        super().compile()
        self.d_optimizer, self.g_optimizer = d_optimizer, g_optimizer

    def train_step(self, real):
        z = real[:, :4] * 0.5
        with tf.GradientTape() as tape:
            fake = self.g(z)
            d_loss = tf.reduce_mean(tf.nn.softplus(-self.d(real)) + tf.nn.softplus(self.d(fake)))
        grads = tape.gradient(d_loss, self.d.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.d.trainable_weights))   # D_LINE
        with tf.GradientTape() as tape:
            g_loss = tf.reduce_mean(tf.nn.softplus(-self.d(self.g(z))))
        grads = tape.gradient(g_loss, self.g.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.g.trainable_weights))   # G_LINE
        return {"d_loss": d_loss, "g_loss": g_loss}


def gan():
    keras.utils.set_random_seed(5)
    model = GAN()
    model.compile(keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3))
    return model


def test_a_gans_two_optimizers_are_two_series_at_their_lines(tmp_path, capsys):
    real = np.random.default_rng(2).normal(size=(64, 8)).astype("float32")
    plain = gan()
    plain.fit(real, batch_size=16, epochs=2, shuffle=False, verbose=2)
    plain_out = capsys.readouterr().out
    watched, watch = gan(), tapeviz.keras.Watch(tmp_path / "run.json")
    watched.fit(real, batch_size=16, epochs=2, shuffle=False, verbose=2, callbacks=[watch])
    assert without_times(capsys.readouterr().out) == without_times(plain_out)
    for a, b in zip(plain.weights, watched.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    rec = watch.recording
    source = open(__file__).read().splitlines()
    lines = {name: next(i + 1 for i, text in enumerate(source) if text.endswith(f"# {name}"))
             for name in ("D_LINE", "G_LINE")}
    by_line = {}
    for s in rec.steps:
        by_line.setdefault(s.line, []).append(s)
    assert sorted(by_line) == sorted(lines.values())
    assert all(len(steps) == 8 for steps in by_line.values())      # 4 batches, 2 epochs
    names = {line: {rec.step_sources[i].variable for i in steps[0].sources}
             for line, steps in by_line.items()}
    assert names[lines["D_LINE"]] == {v.path for v in watched.d.trainable_weights}
    assert names[lines["G_LINE"]] == {v.path for v in watched.g.trainable_weights}
    assert all(n is not None and n > 0 for s in rec.steps for n in s.norms)
    assert any("each optimizer's loss is not known" in w["message"] for w in rec.warnings)
