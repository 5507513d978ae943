"""A custom loop whose ReLU layer dies at a known step: the streamed summaries, folded as the
live run folds them, chart it dead, and the layer after it alive. A real worker."""
import pytest

from tapeviz.draw import run_figures
from tapeviz.server import jobs, runner
from tapeviz.state.live_steps import LiveSteps

DIE = 1500
LOOP = f"""
import tensorflow as tf
tf.random.set_seed(0)
hidden = tf.keras.layers.Dense(8, activation="relu")
out = tf.keras.layers.Dense(1)
x = tf.random.uniform([32, 4], 0.1, 1.0)
y = tf.reduce_sum(x, axis=1, keepdims=True)
opt = tf.keras.optimizers.SGD(0.01)
for step in range(3000):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((out(hidden(x)) - y) ** 2)
    grads = tape.gradient(loss, hidden.trainable_variables + out.trainable_variables)
    # a learning rate far too large for one step drives every ReLU unit negative: dead
    opt.learning_rate = 1e5 if step == {DIE} else 0.01
    if step == {DIE}:
        hidden.bias.assign(hidden.bias - 1e5)
    opt.apply_gradients(zip(grads, hidden.trainable_variables + out.trainable_variables))
"""


@pytest.mark.slow   # a real worker
def test_a_relu_layer_killed_at_a_known_step_is_marked_dead():
    pool = runner.Runner(runner.Config(workers=1, warm=1))
    try:
        job = pool.submit(jobs.Record(LOOP, timeout=120))
        live = LiveSteps()
        for event in job.stream():
            if isinstance(event, jobs.Steps):
                live.take(event.steps, event.step_sources)
    finally:
        pool.close()
    run = live.snapshot()
    steps = run_figures.site_steps(run)
    assert len(steps) == 3000 - live.thinned
    dead = [w for w in run_figures.judge(steps) if w["kind"] == run_figures.DEAD]
    layers = {w["layer"] for w in dead}
    assert any("dense" in layer and not layer.endswith("_1") for layer in layers), dead
    assert not any(layer.endswith("_1") for layer in layers), dead   # the output layer lives
    # alive before the step that killed it: its kernel's gradient was not zero
    kernel = next(k for k in steps[0]["grad_norms"] if "kernel" in k)
    assert steps[DIE - 10]["grad_norms"][kernel] > 0
