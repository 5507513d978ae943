"""The eager training loop on real MNIST digits: it learns, reports every variable,
obeys pause/resume/stop, runs under tf.function, and its one-step program runs."""
import base64
import contextlib
import io
import json
import math
import os
import queue
import threading
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tapeviz import gradient_watch, metrics
from tapeviz.worker import training

SHARED_MNIST = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mnist"


@pytest.fixture(scope="module")
def mnist_dir():
    where = Path(os.environ.get("TAPEVIZ_MNIST_DIR") or SHARED_MNIST)
    if not (where / "t10k-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"the real MNIST test set is not at {where} (set TAPEVIZ_MNIST_DIR)")
    return str(where)


def train(config, commands=None):
    records = []
    training.run({"download": False, **config}, collect(records), commands)
    return records


def collect(records):
    """An emit that keeps each typed record as the page does (metrics.as_dict), after a trip
    through the contract's strict JSON form, as the worker's channel sends it."""
    def emit(record):
        sent = json.loads(json.dumps(metrics.to_json(record), allow_nan=False))
        records.append(metrics.as_dict(metrics.from_json(sent)))
    return emit


def of_type(records, kind):
    return [r for r in records if r["type"] == kind]


@pytest.fixture(scope="module")
def lenet_run(mnist_dir):
    # 3,200 real digits in batches of 16: 200 steps, held-out accuracy every 50.
    return train({"model": "lenet", "data_dir": mnist_dir, "limit": 4000, "batch_size": 16,
                  "eval_every": 50, "seed": 1})


@pytest.mark.slow   # 200 training steps on real digits (lenet_run)
def test_stream_starts_and_ends_and_is_plain_data(lenet_run):
    assert lenet_run[0]["type"] == "start"
    done = lenet_run[-1]
    assert (done["type"], done["reason"], done["step"]) == ("done", "finished", 200)
    start = lenet_run[0]
    assert (start["train_size"], start["test_size"]) == (3200, 800)
    assert "MNIST" in start["source"] and start["params"] > 0
    json.dumps(lenet_run)  # everything crosses a process boundary as JSON


@pytest.mark.slow   # 200 training steps on real digits (lenet_run)
def test_loss_goes_down(lenet_run):
    losses = [r["loss"] for r in of_type(lenet_run, "step")]
    assert len(losses) == 200
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20])


@pytest.mark.slow   # 200 training steps on real digits (lenet_run)
def test_held_out_accuracy_rises_well_above_chance(lenet_run):
    evals = of_type(lenet_run, "eval")
    assert [e["step"] for e in evals] == [50, 100, 150, 200]
    assert evals[-1]["epoch_end"] and not evals[0]["epoch_end"]
    assert evals[-1]["accuracy"] > 0.8  # chance is 0.1
    assert evals[-1]["loss"] < evals[0]["loss"]


@pytest.mark.slow   # 200 training steps on real digits (lenet_run)
def test_grad_norms_finite_for_every_trainable_variable(lenet_run):
    variables = lenet_run[0]["variables"]
    assert {v.rsplit("/", 1)[1] for v in variables} == {"kernel", "bias"}
    assert len(variables) == 8  # conv1, conv2, dense1, logits: kernel and bias each
    for step in of_type(lenet_run, "step"):
        assert list(step["grad_norms"]) == variables
        assert all(math.isfinite(n) and n >= 0 for n in step["grad_norms"].values())
        assert step["steps_per_s"] > 0 and step["total_steps"] == 200


@pytest.mark.slow   # 200 training steps on real digits (lenet_run)
def test_gradient_histograms_count_every_weight_in_fixed_bins(lenet_run):
    start, steps = lenet_run[0], of_type(lenet_run, "step")
    with_hist = [s["step"] for s in steps if s["grad_hist"]]
    assert with_hist == [1] + list(range(training.HIST_EVERY, 201, training.HIST_EVERY))
    for step in steps:
        if step["grad_hist"]:
            assert list(step["grad_hist"]) == start["variables"]
            assert all(len(c) == metrics.HIST_BINS for c in step["grad_hist"].values())
            # every gradient value of every variable lands in one bin: the model's weights
            assert sum(sum(c) for c in step["grad_hist"].values()) == start["params"]


def test_gradient_histogram_bins_match_numpys_histogram():
    rng = np.random.default_rng(0)
    grad = rng.standard_normal(5000).astype(np.float32) * 10.0 ** rng.uniform(-12, 3, 5000)
    grad[:7] = 0.0
    grad[7] = np.nan                                    # not counted: the norm says NaN
    counts = training.grad_histograms(["v"], [grad])["v"]
    edges = [0.0] + [10.0 ** e for e in metrics.HIST_EDGES_LOG10] + [np.inf]
    reference, _ = np.histogram(np.abs(grad[np.isfinite(grad)]).astype(np.float64), bins=edges)
    assert counts == reference.tolist() and sum(counts) == 4999 and counts[0] >= 7


@pytest.mark.slow   # 200 training steps on real digits (lenet_run)
def test_predictions_are_small_8bit_images(lenet_run):
    predictions = of_type(lenet_run, "predictions")
    assert len(predictions) == len(of_type(lenet_run, "eval"))
    last = predictions[-1]
    images = np.array(last["images"])
    assert images.shape == (16, 28, 28) and 0 <= images.min() and images.max() <= 255
    assert len(last["true"]) == len(last["pred"]) == 16
    assert sum(t == p for t, p in zip(last["true"], last["pred"])) >= 10


class RecordingCommands(training.QueueCommands):
    """Notes when the loop blocks, so a test can act while it is paused."""

    def __init__(self):
        super().__init__(queue.Queue())
        self.waiting = threading.Event()

    def wait(self):
        self.waiting.set()
        return super().wait()


def test_pause_blocks_until_resume_then_stop_keeps_history(mnist_dir):
    commands = RecordingCommands()
    records = []

    keep = collect(records)

    def emit(record):
        keep(record)
        if isinstance(record, metrics.Step) and record.step == 3:
            commands.queue.put("pause")
        if isinstance(record, metrics.Step) and record.step == 8:
            commands.queue.put("stop")

    def resume_when_paused():
        commands.waiting.wait()
        steps_while_paused.append(len(of_type(records, "step")))
        commands.queue.put("resume")

    steps_while_paused = []
    helper = threading.Thread(target=resume_when_paused)
    helper.start()
    training.run({"data_dir": mnist_dir, "limit": 1000, "download": False}, emit, commands)
    helper.join()
    assert steps_while_paused == [3]  # no step ran while paused
    assert [r["step"] for r in of_type(records, "step")] == list(range(1, 9))
    assert records[-1]["type"] == "done" and records[-1]["reason"] == "stopped"


def test_stop_while_paused(mnist_dir):
    commands = training.QueueCommands(queue.Queue())
    for command in ("pause", "stop"):
        commands.queue.put(command)
    records = train({"data_dir": mnist_dir, "limit": 1000}, commands)
    assert of_type(records, "step") == [] and records[-1]["reason"] == "stopped"


def test_tf_function_mode(mnist_dir):
    records = train({"data_dir": mnist_dir, "limit": 1000, "use_tf_function": True, "eval_every": 0})
    steps = of_type(records, "step")
    assert len(steps) == 25 and all(math.isfinite(s["loss"]) for s in steps)
    assert list(steps[-1]["grad_norms"]) == records[0]["variables"]
    assert len(of_type(records, "eval")) == 1  # after the epoch only


def test_nan_loss_warns_and_ends_the_run(mnist_dir):
    records = train({"data_dir": mnist_dir, "limit": 1000, "learning_rate": float("nan")})
    warnings = of_type(records, "warning")
    assert any(w["kind"] == "nan" and w["layer"] is None for w in warnings)
    assert records[-1]["reason"] == "nan" and records[-1]["step"] < 25
    assert math.isnan(of_type(records, "step")[-1]["loss"])     # NaN survives the JSON trip


def test_gradient_watch_flags_collapse_and_explosion_once():
    watch = gradient_watch.GradientWatch()
    for step in range(1, gradient_watch.EARLY_STEPS + 1):
        assert watch.check(step, 2.3, {"m/dense/kernel": 1.0, "m/conv/kernel": 1.0}) == []
    assert watch.check(11, 2.0, {"m/dense/kernel": 0.5, "m/conv/kernel": 2.0}) == []
    warnings = watch.check(12, 2.0, {"m/dense/kernel": 1e-5, "m/conv/kernel": 1e4})
    assert {(w.layer, w.kind) for w in warnings} == {("m/dense", "vanishing"), ("m/conv", "exploding")}
    assert watch.check(13, 2.0, {"m/dense/kernel": 1e-6, "m/conv/kernel": 1e5}) == []


# The guide CNN's gradient norms at learning rate 1.0 on real MNIST (limit 2,000, batch 32),
# as the worker reported them: its layers die at step 4, before the early level is set.
DYING = {"guide/conv1/kernel": [0.0683, 131.0, 37.6] + [0.0] * 9,
         "guide/logits/bias": [0.191, 0.965, 1.03, 0.433, 0.392, 0.388, 0.298, 0.297, 0.128, 0.3,
                               0.269, 0.321]}


def test_gradient_watch_calls_a_layer_that_died_early_dead():
    watch, warnings = gradient_watch.GradientWatch(), []
    for i in range(12):
        warnings += watch.check(i + 1, 2.9, {path: norms[i] for path, norms in DYING.items()})
    assert [(w.layer, w.kind, w.step) for w in warnings] == [("guide/conv1", "vanishing", 10)]
    assert "dead" in warnings[0].message and "37.6" in warnings[0].message   # its level while alive


def test_a_learning_rate_of_one_warns_that_layers_died(mnist_dir):
    """The README's suggestion, on real digits: the worker's own watch says so."""
    records = train({"data_dir": mnist_dir, "limit": 2000, "learning_rate": 1.0, "eval_every": 0})
    warned = {w["layer"] for w in of_type(records, "warning") if w["kind"] == "vanishing"}
    steps = of_type(records, "step")
    dead = {path.rsplit("/", 1)[0] for path in steps[-1]["grad_norms"]
            if all(s["grad_norms"][path] == 0 for s in steps[-10:])}
    assert dead and dead <= warned, (dead, warned)


@pytest.mark.slow   # two epochs of training on scikit-learn's digits
def test_sklearn_digits_train_when_no_mnist(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("TAPEVIZ_MNIST_DIR", raising=False)
    records = train({"model": "lenet", "data_dir": str(tmp_path), "epochs": 2})
    assert "scikit-learn" in records[0]["source"] and records[0]["image_shape"] == [8, 8, 1]
    assert records[-1]["reason"] == "finished"


def test_an_upload_sent_as_base64_trains(tmp_path, monkeypatch):
    """The page sends an uploaded mnist.npz through JSON as config["upload_b64"]."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("TAPEVIZ_MNIST_DIR", raising=False)
    rng = np.random.default_rng(0)
    buffer = io.BytesIO()
    np.savez(buffer, x_train=rng.integers(0, 256, (40, 28, 28), dtype=np.uint8),
             y_train=rng.integers(0, 10, 40, dtype=np.uint8),
             x_test=rng.integers(0, 256, (10, 28, 28), dtype=np.uint8),
             y_test=rng.integers(0, 10, 10, dtype=np.uint8))
    upload_b64 = base64.b64encode(buffer.getvalue()).decode("ascii")
    records = train({"data_dir": str(tmp_path), "upload_b64": upload_b64, "batch_size": 20})
    assert records[0]["source"].startswith("uploaded mnist.npz") and records[0]["train_size"] == 40
    assert records[-1]["reason"] == "finished"


def test_unknown_model_is_refused():
    with pytest.raises(ValueError, match="unknown model"):
        training.build_model("resnet", (28, 28, 1))


@pytest.mark.parametrize("model", sorted(training.MODELS))
def test_one_step_program_runs_under_plain_exec(mnist_dir, model):
    program = training.record_one_step_program({"model": model, "data_dir": mnist_dir, "limit": 100})
    assert "import tensorflow as tf" in program and "tf.GradientTape()" in program
    out = io.StringIO()
    namespace = {"__name__": "__main__"}
    with contextlib.redirect_stdout(out):
        exec(compile(program, "<one step>", "exec"), namespace)
    assert out.getvalue().startswith("loss ")
    assert math.isfinite(float(out.getvalue().split()[1]))
    assert all(g is not None for g in namespace["grads"])


class SnapshotAt(training.QueueCommands):
    """Asks for a snapshot once `after` steps have run, then stops the run."""

    def __init__(self, path, after, records):
        super().__init__(queue.Queue())
        self.path, self.after, self.records = path, after, records

    def poll(self):
        steps = len(of_type(self.records, "step"))
        if steps == self.after and not of_type(self.records, "snapshot"):
            return f"snapshot {self.path}"
        return "stop" if steps > self.after else None


@pytest.mark.parametrize("rate", [1e-3, 1.0])
def test_inspect_this_step_records_the_step_the_run_takes(mnist_dir, tmp_path, rate):
    """The reference: the run's own loss at step 6. The snapshot program, run by the
    recorder, must compute that same loss from the same weights, Adam state and batch,
    including after a learning rate of 1.0 has wrecked the weights."""
    from tapeviz.worker import recorder

    records = []
    path = str(tmp_path / "step.npz")
    training.run({"download": False, "model": "guide", "data_dir": mnist_dir, "limit": 400,
                  "batch_size": 16, "eval_every": 0, "learning_rate": rate},
                 collect(records), SnapshotAt(path, 5, records))
    snapshot = of_type(records, "snapshot")[0]
    assert snapshot["step"] == 5 and "error" not in snapshot
    sixth = of_type(records, "step")[5]
    assert sixth["step"] == 6
    rec = recorder.record(snapshot["step_program"])
    assert rec.error is None, rec.error
    loss = float(rec.stdout.split()[-1])
    assert loss == pytest.approx(sixth["loss"], rel=1e-5, abs=1e-6)
    # Its gradients are the run's step-6 gradients too (what the charts show): the norms of
    # those whose full value the recording keeps (the biases, the small kernels).
    call = rec.tapes[0].gradients[0]
    expected = list(sixth["grad_norms"].values())
    assert len(call.results) == len(expected)
    compared = 0
    for result, norm in zip(call.results, expected):
        value = rec.tensor(result.grad).value
        if value is not None:
            got = np.linalg.norm(np.asarray(value, dtype=np.float64))
            assert got == pytest.approx(norm, rel=1e-4, abs=1e-7)
            compared += 1
    assert compared >= 2


def test_activation_histograms_are_each_weighted_layers_output_as_keras_computes_it():
    rng = np.random.default_rng(1)
    images = rng.random((16, 28, 28, 1), dtype=np.float32)
    model = training.build_model("lenet", [28, 28, 1])
    weighted = [layer for layer in model.layers if layer.weights]
    # the reference: Keras's own forward pass to every weighted layer's output at once
    reference = tf.keras.Model(model.inputs, [layer.output for layer in weighted])(images, training=False)
    counts = training.activation_histograms(model, images)
    assert list(counts) == [layer.name for layer in weighted]
    for layer, output in zip(weighted, reference):
        assert counts[layer.name] == metrics.histogram(output.numpy())
        assert sum(counts[layer.name]) == int(np.prod(output.shape))


@pytest.mark.slow   # 200 training steps on real digits (lenet_run)
def test_activation_histograms_come_on_the_gradient_histograms_steps(lenet_run):
    for step in of_type(lenet_run, "step"):
        assert bool(step["act_hist"]) == bool(step["grad_hist"])
        if step["act_hist"]:
            assert len(step["act_hist"]) == 4       # conv1, conv2, dense1, logits
            assert all(len(c) == metrics.HIST_BINS for c in step["act_hist"].values())
