"""Worker side: the eager custom training loop of TensorFlow's eager guide, on MNIST.

`run` trains and streams one typed record per step (tapeviz.metrics) through `emit`; the
page charts them. Imports TensorFlow: only a worker (or the command line) imports this.
"""
from __future__ import annotations

import base64
import math
import os
import queue
import time
from typing import Callable, Optional

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

from tapeviz import data, metrics  # noqa: E402
from tapeviz.gradient_watch import GradientWatch  # noqa: E402

from . import keras_download  # noqa: E402

DEFAULTS = {
    "model": "guide",
    "epochs": 1,
    "batch_size": 32,
    "learning_rate": 1e-3,
    "use_tf_function": False,
    "eval_every": 100,      # steps between held-out evaluations; 0 = only after each epoch
    "seed": 0,
    "limit": None,          # digits used in all (train + held-out)
    "data_dir": None,       # else $TAPEVIZ_MNIST_DIR, then the rest of data.load_mnist's chain
    "upload": None,         # bytes of an uploaded mnist.npz
    "upload_b64": None,     # the same as base64 text: how the page sends it through JSON
    "download": True,
}

# One description per model, rendered both into a Keras model and into program text
# (record_one_step_program), so the two cannot drift apart.
MODELS = {
    "guide": [
        ("Conv2D", {"filters": 16, "kernel_size": 3, "activation": "relu", "name": "conv1"}),
        ("Conv2D", {"filters": 16, "kernel_size": 3, "activation": "relu", "name": "conv2"}),
        ("GlobalAveragePooling2D", {"name": "pool"}),
        ("Dense", {"units": 10, "name": "logits"}),
    ],
    # LeNet's shape (conv-pool-conv-pool-dense) with wider layers: classic LeNet-5 sizes
    # sit at ~95% after one epoch on 8,000 digits; these reach ~97%, ~20% slower per step.
    "lenet": [
        ("Conv2D", {"filters": 32, "kernel_size": 3, "padding": "same", "activation": "relu", "name": "conv1"}),
        ("MaxPooling2D", {"pool_size": 2, "name": "pool1"}),
        ("Conv2D", {"filters": 64, "kernel_size": 3, "padding": "same", "activation": "relu", "name": "conv2"}),
        ("MaxPooling2D", {"pool_size": 2, "name": "pool2"}),
        ("Flatten", {"name": "flatten"}),
        ("Dense", {"units": 128, "activation": "relu", "name": "dense1"}),
        ("Dense", {"units": 10, "name": "logits"}),
    ],
}
# Steps between gradient histograms: binning every value of LeNet's 400k-weight dense
# kernel costs a few milliseconds, a tenth of a step, so every step would slow the run.
HIST_EVERY = 5
PREDICTION_MAX_SIDE = 28


def build_model(name: str, input_shape) -> tf.keras.Sequential:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    layers = [getattr(tf.keras.layers, cls)(**kwargs) for cls, kwargs in MODELS[name]]
    return tf.keras.Sequential([tf.keras.Input(shape=tuple(input_shape)), *layers], name=name)


def model_source(name: str, input_shape_expr: str) -> str:
    """The same model as Python source, for a program the recorder runs."""
    lines = [f"    tf.keras.Input(shape={input_shape_expr}),"]
    for cls, kwargs in MODELS[name]:
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        lines.append(f"    tf.keras.layers.{cls}({args}),")
    return "model = tf.keras.Sequential([\n" + "\n".join(lines) + f"\n], name={name!r})\n"


def make_train_step(model, loss_object, optimizer, use_tf_function: bool):
    """The guide's step: forward under a tape, gradient, Adam update.

    Returns the loss and the gradients, whose norms `grad_norms` takes afterwards.
    """

    def train_step(images, labels):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss_value = loss_object(labels, logits)
        grads = tape.gradient(loss_value, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss_value, grads

    return tf.function(train_step) if use_tf_function else train_step


def grad_norms(paths: list, grads: list) -> dict:
    """L2 norm of each variable's gradient, in numpy: a few microseconds each, where an
    eager tf.norm per variable would cost an op dispatch each."""
    return {path: float(np.linalg.norm(np.asarray(grad))) for path, grad in zip(paths, grads)}


def grad_histograms(paths: list, grads: list) -> dict:
    """Each variable's gradient values counted in the fixed bins of |value| the metrics
    contract names (metrics.histogram): bounded, whatever the layer's size."""
    return {path: metrics.histogram(grad) for path, grad in zip(paths, grads)}


def activation_histograms(model, images) -> dict:
    """Each weighted layer's output on this batch (after its activation), in the same
    fixed bins of |value|: a dead ReLU layer is a strip all in the lowest bin. One more
    forward pass, in inference mode, on the steps that bin: the step's own forward pass
    ran inside the train step, where its outputs are not kept."""
    out, x = {}, images
    for layer in model.layers:
        x = layer(x, training=False)
        if layer.weights:
            out[layer.name] = metrics.histogram(x.numpy())
    return out


def make_dataset(images, labels, batch_size: int, seed: int) -> tf.data.Dataset:
    return (
        tf.data.Dataset.from_tensor_slices((images, labels))
        .shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
        .batch(batch_size)
        .prefetch(tf.data.AUTOTUNE)
    )


def evaluate(model, loss_object, images, labels, batch_size: int = 500):
    """Held-out accuracy and mean loss, plus the predicted classes."""
    preds, total_loss = [], 0.0
    for start in range(0, len(labels), batch_size):
        logits = model(images[start:start + batch_size], training=False)
        total_loss += float(loss_object(labels[start:start + batch_size], logits)) * len(logits)
        preds.append(np.argmax(logits.numpy(), axis=1))
    preds = np.concatenate(preds)
    return float(np.mean(preds == labels)), total_loss / len(labels), preds


def small_images(images) -> list:
    """8-bit nested lists, downsampled by striding when larger than the page needs."""
    side = max(images.shape[1], images.shape[2])
    stride = max(1, math.ceil(side / PREDICTION_MAX_SIDE))
    pixels = np.round(images[:, ::stride, ::stride, 0] * 255).astype(np.uint8)
    return pixels.tolist()


class Clock:
    """Training time: wall time minus evaluation and pauses, so steps/s means training speed."""

    def __init__(self):
        self.start = time.perf_counter()
        self.excluded = 0.0

    def elapsed(self) -> float:
        return time.perf_counter() - self.start - self.excluded

    def exclude_since(self, t0: float):
        self.excluded += time.perf_counter() - t0


class QueueCommands:
    """`commands` for `run` over any queue with get_nowait()/get() (queue.Queue,
    multiprocessing.Queue): the sender puts "pause", "resume" or "stop"."""

    def __init__(self, commands_queue):
        self.queue = commands_queue

    def poll(self) -> Optional[str]:
        try:
            return self.queue.get_nowait()
        except queue.Empty:  # multiprocessing.Queue raises the same class
            return None

    def wait(self) -> str:
        return self.queue.get()


def _told_to_stop(commands, clock: Clock, on_snapshot=None) -> bool:
    """Check for a command between steps. A pause blocks here, on `commands.wait()`, until
    "resume" or "stop"; its time is left out of steps/s. "snapshot PATH", running or
    paused, saves the state of this step there (`on_snapshot(PATH)`)."""
    if commands is None:
        return False
    command, paused_at = commands.poll(), None
    while True:
        if command and command.startswith("snapshot "):
            if on_snapshot is not None:
                on_snapshot(command.split(" ", 1)[1])
        elif command == "pause" and paused_at is None:
            paused_at = time.perf_counter()
        elif paused_at is None or command in ("resume", "stop"):
            break
        command = commands.wait() if paused_at is not None else commands.poll()
    if paused_at is not None:
        clock.exclude_since(paused_at)
    return command == "stop"


def save_snapshot(path: str, model, optimizer, images, labels) -> None:
    """The model's weights, the optimizer's state (Adam's moments and step count) and the
    batch about to be trained, for the one-step program of "Inspect this step"."""
    arrays = {f"weight_{i}": w for i, w in enumerate(model.get_weights())}
    if optimizer.built:
        arrays.update({f"optimizer_{i}": v.numpy() for i, v in enumerate(optimizer.variables)})
    np.savez(path, images=images.numpy(), labels=labels.numpy(), **arrays)


def run(config: dict, emit: Callable[[dict], None], commands=None) -> None:
    """Train as `config` says (keys: DEFAULTS), emitting start, step, eval, predictions,
    warning and done records. `commands.poll()` is checked once per step: "pause" blocks
    on `commands.wait()` until "resume" or "stop"; "stop" ends the run early."""
    cfg = {**DEFAULTS, **(config or {})}
    tf.keras.utils.set_random_seed(int(cfg["seed"]))
    upload = cfg["upload"] or (base64.b64decode(cfg["upload_b64"]) if cfg["upload_b64"] else None)
    digits = data.load_mnist(cfg["data_dir"], upload=upload,
                             download=keras_download.load if cfg["download"] else None)
    training = _Training(cfg, digits, emit)
    training.start(digits)
    reason = training.train(commands)
    emit(metrics.Done(step=training.step, reason=reason, elapsed_s=training.clock.elapsed()))


class _Training:
    """One run of the loop: the model, its data and the records it emits as it trains."""

    def __init__(self, cfg: dict, digits, emit: Callable[[dict], None]):
        self.cfg, self.emit = cfg, emit
        x_train, y_train, self.x_test, self.y_test = data.split(digits, limit=cfg["limit"])
        self.x_train, self.y_train = x_train, y_train
        self.model = build_model(cfg["model"], x_train.shape[1:])
        self.loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.optimizer = tf.keras.optimizers.Adam(learning_rate=float(cfg["learning_rate"]))
        self.train_step = make_train_step(self.model, self.loss_object, self.optimizer,
                                          bool(cfg["use_tf_function"]))
        self.dataset = make_dataset(x_train, y_train, int(cfg["batch_size"]), int(cfg["seed"]))
        self.paths = [v.path for v in self.model.trainable_variables]
        self.steps_per_epoch = math.ceil(len(y_train) / int(cfg["batch_size"]))
        self.total_steps = self.steps_per_epoch * int(cfg["epochs"])
        self.eval_every = int(cfg["eval_every"] or 0)
        self.shown = slice(0, min(metrics.PREDICTION_COUNT, len(self.y_test)))
        self.shown_images = small_images(self.x_test[self.shown])
        self.step = 0
        self.clock = self.watch = None           # from the first step on (train)

    def start(self, digits) -> None:
        cfg, x_train = self.cfg, self.x_train
        self.emit(metrics.Start(
            source=digits.source, notes=list(digits.notes), model=cfg["model"],
            params=int(self.model.count_params()), train_size=int(len(self.y_train)),
            test_size=int(len(self.y_test)), image_shape=list(x_train.shape[1:]),
            epochs=int(cfg["epochs"]), batch_size=int(cfg["batch_size"]),
            total_steps=self.total_steps, variables=self.paths,
            step_program=record_one_step_program(cfg)))

    def train(self, commands) -> str:
        """Every epoch, each ending in a held-out evaluation; why the run ended."""
        self.clock, self.watch = Clock(), GradientWatch()
        for epoch in range(1, int(self.cfg["epochs"]) + 1):
            reason = self.epoch(epoch, commands)
            if reason != "finished":
                return reason
            self.held_out_eval(epoch, epoch_end=True)
        return "finished"

    def epoch(self, epoch: int, commands) -> str:
        """One pass over the batches: "finished", or "stopped" / "nan" when it ended early."""
        for images, labels in self.dataset:
            if _told_to_stop(commands, self.clock,
                             lambda path: self.snapshot(path, images, labels)):  # noqa: B023
                return "stopped"
            loss = self.train_one(epoch, images, labels)
            if not math.isfinite(loss):
                return "nan"  # nothing more to learn once the weights are NaN
            step = self.step
            if self.eval_every and step % self.eval_every == 0 \
                    and step % self.steps_per_epoch != 0:
                self.held_out_eval(epoch, epoch_end=False)
        return "finished"

    def train_one(self, epoch: int, images, labels) -> float:
        """One step, its record and its gradient warnings; its loss."""
        loss_value, grads = self.train_step(images, labels)
        self.step = step = self.step + 1
        loss = float(loss_value)
        arrays = [g.numpy() for g in grads]
        norms = grad_norms(self.paths, arrays)
        binned = step == 1 or step % HIST_EVERY == 0
        hist = grad_histograms(self.paths, arrays) if binned else {}
        activations = {}
        if binned:
            t0 = time.perf_counter()          # the extra forward pass is not training time
            activations = activation_histograms(self.model, images)
            self.clock.exclude_since(t0)
        elapsed = self.clock.elapsed()
        self.emit(metrics.Step(step=step, epoch=epoch, loss=loss, grad_norms=norms,
                               steps_per_s=step / elapsed if elapsed > 0 else 0.0,
                               elapsed_s=elapsed, total_steps=self.total_steps, grad_hist=hist,
                               act_hist=activations))
        for warning in self.watch.check(step, loss, norms):
            self.emit(warning)
        return loss

    def held_out_eval(self, epoch: int, epoch_end: bool) -> None:
        t0 = time.perf_counter()
        accuracy, loss, preds = evaluate(self.model, self.loss_object, self.x_test, self.y_test)
        self.emit(metrics.Eval(step=self.step, epoch=epoch, accuracy=accuracy, loss=loss,
                               epoch_end=epoch_end))
        self.emit(metrics.Predictions(step=self.step, images=self.shown_images,
                                      true=self.y_test[self.shown].tolist(),
                                      pred=preds[self.shown].tolist()))
        self.clock.exclude_since(t0)

    def snapshot(self, path: str, images, labels) -> None:
        step = self.step
        try:
            save_snapshot(path, self.model, self.optimizer, images, labels)
        except Exception as exc:  # noqa: BLE001 - e.g. a sandbox that cannot write there
            self.emit(metrics.Snapshot(step=step, error=f"{type(exc).__name__}: {exc}"))
            return
        self.emit(metrics.Snapshot(step=step, path=path, step_program=record_one_step_program(
            self.cfg, snapshot=(path, step))))


def record_one_step_program(config: dict, snapshot=None) -> str:
    """A self-contained TF2 program: the same model, one batch, one tape, one Adam step.

    Pure text (no data or TF touched here); the `start` record carries it too, so the
    page can get it without importing this module.
    """
    cfg = {**DEFAULTS, **(config or {})}
    if snapshot is not None:
        return _snapshot_step_program(cfg, *snapshot)
    return (
        '"""One training step with the training page\'s model, batch size and learning rate.\n'
        "It starts from freshly initialised weights and the first batch, not from the weights\n"
        'the run has reached: a layer that died during training looks healthy here."""\n'
        "import tensorflow as tf\n"
        "from tapeviz import data\n\n"
        f"tf.keras.utils.set_random_seed({int(cfg['seed'])})\n"
        f"digits = data.load_mnist({cfg['data_dir']!r})\n"
        f"x_train, y_train, _, _ = data.split(digits, limit={cfg['limit']!r})\n"
        f"images = tf.constant(x_train[:{int(cfg['batch_size'])}])\n"
        f"labels = tf.constant(y_train[:{int(cfg['batch_size'])}])\n\n"
        + model_source(cfg["model"], "tuple(images.shape[1:])")
        + "loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)\n"
        f"optimizer = tf.keras.optimizers.Adam(learning_rate={float(cfg['learning_rate'])!r})\n\n"
        + _STEP_SOURCE
    )


# The one step both programs record: the eager guide's, as the training loop takes it.
_STEP_SOURCE = (
    "with tf.GradientTape() as tape:\n"
    "    logits = model(images, training=True)\n"
    "    loss_value = loss_object(labels, logits)\n"
    "grads = tape.gradient(loss_value, model.trainable_variables)\n"
    "optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
    'print("loss", float(loss_value))\n'
)


def _snapshot_step_program(cfg: dict, path: str, step: int) -> str:
    """The step after `step` as the run takes it: its weights, Adam's state and its batch,
    loaded from the snapshot the training worker saved at `path`."""
    return (
        f'"""Training step {step + 1} of the training page\'s run, for the recorder: the model\n'
        f"as trained for {step} steps, Adam's state and the batch of step {step + 1}.\"\"\"\n"
        "import numpy as np\n"
        "import tensorflow as tf\n\n"
        f"state = np.load({path!r})\n"
        'images = tf.constant(state["images"])\n'
        'labels = tf.constant(state["labels"])\n\n'
        + model_source(cfg["model"], "tuple(images.shape[1:])")
        + 'model.set_weights([state[f"weight_{i}"] for i in range(len(model.weights))])\n'
        "loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)\n"
        f"optimizer = tf.keras.optimizers.Adam(learning_rate={float(cfg['learning_rate'])!r})\n"
        'if "optimizer_0" in state:      # Adam\'s moments and step count, as the run left them\n'
        "    optimizer.build(model.trainable_variables)\n"
        "    for i, variable in enumerate(optimizer.variables):\n"
        '        variable.assign(state[f"optimizer_{i}"])\n\n'
        + _STEP_SOURCE
    )
