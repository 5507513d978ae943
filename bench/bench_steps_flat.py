"""Benchmark: a recorded loop's time per step does not grow with the number of steps.

Runs a 3,000-step GradientTape loop (TensorFlow's own `backprop.GradientTape`, the class
that was once never closed, and `tf.GradientTape`) under `tapeviz.capture()` in this
process, times each thousand steps, and prints the ratio of the last thousand's time to
the first's, within one run (a shared machine's noise hits both alike). Flat is ~1.0;
before every tape closed at its `__exit__` it was 2-3x.

    python bench/bench_steps_flat.py [--steps 3000]
"""
import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tensorflow.python.eager import backprop  # noqa: E402

import tapeviz  # noqa: E402


def loop(steps: int) -> list:
    """Seconds per thousand steps."""
    w = tf.Variable(tf.random.normal([16, 4]))
    x = tf.random.normal([8, 16])
    times, start = [], time.perf_counter()
    for step in range(1, steps + 1):
        tape_class = backprop.GradientTape if step % 2 else tf.GradientTape
        with tape_class() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
        w.assign_sub(0.01 * tape.gradient(loss, w))
        if step % 1000 == 0:
            now = time.perf_counter()
            times.append(now - start)
            start = now
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    with tapeviz.capture() as rec:
        times = loop(args.steps)
    data = rec.to_dict()
    print("seconds per 1,000 recorded steps:", " ".join(f"{t:.2f}" for t in times))
    print(f"last/first thousand: {times[-1] / times[0]:.2f}x  "
          f"(tapes kept {len(data['tapes'])}, dropped {data['dropped']})")


if __name__ == "__main__":
    main()
