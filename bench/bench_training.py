"""Benchmark: does the training page's loop learn, and what do its metrics cost?

Prints: LeNet's held-out accuracy after 1 epoch on 8,000 real digits (2,000 held out;
target >= 95%); the guide model's loss over 3 epochs; and steps/s of training.run
(metrics emitted and JSON-encoded every step) against the same loop as a bare script
(target >= 0.9x), eager and under tf.function: median step time after 10 warm-up steps,
runs interleaved, best of N, against the noise of a shared machine.

    python bench/bench_training.py [--data DIR] [--repeats 3]
"""
import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tapeviz import data, training  # noqa: E402  (imports TensorFlow)

import tensorflow as tf  # noqa: E402

SHARED_MNIST = ROOT.parent / "shared" / "data" / "mnist"


def run(config) -> list:
    records = []
    training.run({"download": False, **config}, records.append)
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

    training.run({"download": False, **config}, emit)
    return steady_steps_per_s(times)


def bare_steps_per_s(config) -> float:
    """The eager guide's loop with nothing added: same model, data pipeline and step, the
    step written out here rather than imported, since it is the reference being compared to."""
    tf.keras.utils.set_random_seed(config["seed"])
    digits = data.load_mnist(config["data_dir"], download=False)
    x_train, y_train, _, _ = data.split(digits)
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

    step_fn = tf.function(train_step) if config["use_tf_function"] else train_step
    loss_history, times = [], []
    for images, labels in dataset:
        loss_history.append(step_fn(images, labels).numpy().mean())
        times.append(time.perf_counter())
    return steady_steps_per_s(times)


def throughput(data_dir, repeats):
    for use_tf_function in (False, True):
        config = {"model": "guide", "epochs": 1, "batch_size": 32, "eval_every": 0, "seed": 0,
                  "data_dir": data_dir, "use_tf_function": use_tf_function}
        bare, metrics = [], []
        for _ in range(repeats):  # interleaved, so drifting machine load hits both alike
            bare.append(bare_steps_per_s(config))
            metrics.append(metrics_steps_per_s(config))
        mode = "tf.function" if use_tf_function else "eager"
        print(f"guide {mode:11s}: bare {max(bare):6.1f} steps/s, with metrics {max(metrics):6.1f} steps/s, "
              f"ratio {max(metrics) / max(bare):.2f}x (target >= 0.9x; best of {repeats}; "
              f"all bare {[round(b, 1) for b in bare]}, metrics {[round(m, 1) for m in metrics]})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(SHARED_MNIST), help="MNIST directory (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"TensorFlow {tf.__version__}, data: {data.load_mnist(args.data, download=False).source}")
    accuracy_after_one_epoch(args.data)
    guide_loss_over_epochs(args.data)
    throughput(args.data, args.repeats)


if __name__ == "__main__":
    main()
