"""Benchmark: does the training page's loop learn, and what do its metrics cost?

Prints: LeNet's held-out accuracy after 1 epoch on 8,000 real digits (2,000 held out;
target >= 95%); the guide model's loss over 3 epochs; and steps/s of training.run
(metrics emitted and JSON-encoded every step) against the same loop as a bare script
(target >= 0.9x), eager and under tf.function: whole runs (median step time after 10
warm-up steps, best of N), and step by step interleaved, which the noise of a shared
machine touches least.

    python bench/training_speed.py [--data DIR] [--repeats 3] [--limit DIGITS]
    python bench/training_speed.py --first-minute [--data DIR]

--first-minute: the training page's defaults (batch 32, 10,000 digits, held-out accuracy
every 50 steps) for each model, stopped after 60 s of training: the held-out accuracy at
each evaluation within that minute (does the demo show learning on this machine?).

The digits come from --data, else the training page's chain (TAPEVIZ_MNIST_DIR, Keras's
cache, Keras's download, scikit-learn's digits); --limit uses fewer, for a quick check.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tapeviz import data  # noqa: E402
from tapeviz.worker import training  # noqa: E402  (imports TensorFlow)

import tensorflow as tf  # noqa: E402

LIMIT = None    # digits used in all (train + held-out); None: every one the source has


def run(config) -> list:
    records = []
    training.run({"download": False, "limit": LIMIT, **config}, records.append)
    return records


def of_type(records, kind):
    return [r for r in records if r["type"] == kind]


def accuracy_after_one_epoch(data_dir):
    records = run({"model": "lenet", "epochs": 1, "eval_every": 0, "data_dir": data_dir})
    start, final = records[0], of_type(records, "eval")[-1]
    print(f"lenet, 1 epoch on {start['train_size']:,} digits ({start['source']}): "
          f"held-out accuracy {final['accuracy']:.2%} on {start['test_size']:,} (target >= 95%)")


def guide_loss_over_epochs(data_dir, epochs=3):
    steps = of_type(run({"model": "guide", "epochs": epochs, "eval_every": 0, "data_dir": data_dir}), "step")
    per_epoch = [[s["loss"] for s in steps if s["epoch"] == e] for e in range(1, epochs + 1)]
    means = [sum(losses) / len(losses) for losses in per_epoch]
    print(f"guide, {epochs} epochs: mean loss per epoch " + " -> ".join(f"{m:.4f}" for m in means)
          + f" ({'falls' if means[-1] < means[0] else 'DOES NOT FALL'})")


WARM_UP = 10  # steps left out: the first ones build the model and trace tf.function


def steady_steps_per_s(times: list) -> float:
    """1 / the median step time after warm-up: robust to bursts of load from other processes."""
    durations = sorted(b - a for a, b in zip(times[WARM_UP:], times[WARM_UP + 1:]))
    return 1.0 / durations[len(durations) // 2]


def metrics_steps_per_s(config) -> float:
    """training.run with every record JSON-encoded, as a worker sends it."""
    times = []

    def emit(record):
        json.dumps(record)
        if record["type"] == "step":
            times.append(time.perf_counter())

    training.run({"download": False, "limit": LIMIT, **config}, emit)
    return steady_steps_per_s(times)


def bare_setup(config):
    """The eager guide's loop with nothing added: same model, data pipeline and step, the
    step written out here rather than imported, since it is the reference being compared to."""
    tf.keras.utils.set_random_seed(config["seed"])
    digits = data.load_mnist(config["data_dir"])
    x_train, y_train, _, _ = data.split(digits, limit=LIMIT)
    model = training.build_model(config["model"], x_train.shape[1:])
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.Adam(learning_rate=1e-3)
    dataset = training.make_dataset(x_train, y_train, config["batch_size"], config["seed"])

    def train_step(images, labels):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss_value = loss_object(labels, logits)
        grads = tape.gradient(loss_value, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss_value

    return (tf.function(train_step) if config["use_tf_function"] else train_step), dataset


def bare_steps_per_s(config) -> float:
    step_fn, dataset = bare_setup(config)
    loss_history, times = [], []
    for images, labels in dataset:
        loss_history.append(step_fn(images, labels).numpy().mean())
        times.append(time.perf_counter())
    return steady_steps_per_s(times)


def interleaved_step_ratio(config, steps=150) -> float:
    """Bare step vs step + metrics, alternating one step each on the same batches, so load
    from other processes falls on both alike: median time ratio."""
    bare_step, dataset = bare_setup(config)
    model = training.build_model(config["model"], dataset.element_spec[0].shape[1:])
    optimizer = tf.keras.optimizers.Adam(learning_rate=1e-3)
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    metrics_step = training.make_train_step(model, loss_object, optimizer, config["use_tf_function"])
    paths = [v.path for v in model.trainable_variables]
    bare, metrics = [], []
    for images, labels in dataset.repeat().take(steps):
        t0 = time.perf_counter()
        bare_step(images, labels).numpy().mean()
        t1 = time.perf_counter()
        loss_value, grads = metrics_step(images, labels)
        json.dumps({"type": "step", "loss": float(loss_value), "grad_norms": training.grad_norms(paths, grads)})
        t2 = time.perf_counter()
        bare.append(t1 - t0)
        metrics.append(t2 - t1)
    bare, metrics = sorted(bare[WARM_UP:]), sorted(metrics[WARM_UP:])
    return bare[len(bare) // 2] / metrics[len(metrics) // 2]


def throughput(data_dir, repeats):
    for use_tf_function in (False, True):
        config = {"model": "guide", "epochs": 1, "batch_size": 32, "eval_every": 0, "seed": 0,
                  "data_dir": data_dir, "use_tf_function": use_tf_function}
        bare, metrics = [], []
        for _ in range(repeats):  # interleaved, so drifting machine load hits both alike
            bare.append(bare_steps_per_s(config))
            metrics.append(metrics_steps_per_s(config))
        mode = "tf.function" if use_tf_function else "eager"
        print(f"guide {mode:11s}: whole runs: bare {max(bare):6.1f} steps/s, training.run {max(metrics):6.1f} "
              f"steps/s, ratio {max(metrics) / max(bare):.2f}x (best of {repeats}; "
              f"all bare {[round(b, 1) for b in bare]}, run {[round(m, 1) for m in metrics]})")
        print(f"guide {mode:11s}: step by step, interleaved: ratio {interleaved_step_ratio(config):.2f}x "
              f"(target >= 0.9x)")


class _StopAfter:
    """training.run's commands: "stop" once `seconds` of wall time have passed."""

    def __init__(self, seconds):
        self.until = time.monotonic() + seconds

    def poll(self):
        return "stop" if time.monotonic() > self.until else None

    def wait(self):
        return "stop"


def first_minute(data_dir, seconds=60.0):
    from tapeviz import metrics
    for model in ("lenet", "guide"):
        records = []
        config = {"model": model, "epochs": 3, "batch_size": 32, "limit": 10_000,
                  "eval_every": 50, "data_dir": data_dir, "download": False}
        training.run(config, lambda r: records.append(metrics.as_dict(r)), _StopAfter(seconds))
        evals = [r for r in records if r["type"] == "eval"]
        done = records[-1]
        print(f"{model}: {done['step']} steps in {seconds:.0f} s; held-out accuracy "
              + ", ".join(f"{e['accuracy']:.0%} at step {e['step']}" for e in evals)
              + f" (chance 10%; load average {os.getloadavg()[0]:.1f})", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="MNIST directory (IDX .gz files or mnist.npz)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, help="digits to use in all")
    parser.add_argument("--first-minute", action="store_true",
                        help="each model for a minute at the page's defaults")
    args = parser.parse_args()
    if args.first_minute:
        return first_minute(args.data)
    global LIMIT
    LIMIT = args.limit
    print(f"TensorFlow {tf.__version__}, data: {data.load_mnist(args.data).source}")
    accuracy_after_one_epoch(args.data)
    guide_loss_over_epochs(args.data)
    throughput(args.data, args.repeats)


if __name__ == "__main__":
    main()
