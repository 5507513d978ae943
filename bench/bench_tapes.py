"""Benchmark: `--tapes A:B` on a long loop: only two steps recorded, the rest at full speed.

Runs a 300-step eager loop (a small dense layer, tape, gradient, update) in one process
three ways, best of 3 each, and prints the time ratios against plain eager:
  plain eager | recorded with tapes=(100, 102) | every tape recorded.

    python bench/bench_tapes.py [--steps 300]
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LOOP = """
import tensorflow as tf
w = tf.Variable(tf.ones([8, 8]))
x = tf.ones([4, 8])
for i in range({steps}):
    with tf.GradientTape() as tape:
        y = tf.nn.relu(tf.matmul(x, w)) * 0.5 + 1.0
        loss = tf.reduce_mean(y * y)
    g = tape.gradient(loss, w)
    w.assign_sub(0.01 * g)
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    steps = parser.parse_args().steps
    from tapeviz.worker import recorder
    source = LOOP.format(steps=steps)
    code = compile(source, "plain.py", "exec")
    exec(code, {})                      # warm TensorFlow's kernels up
    times = {"plain eager": [], "tapes 100:102": [], "every tape": []}
    for _ in range(3):
        started = time.perf_counter()
        exec(code, {})
        times["plain eager"].append(time.perf_counter() - started)
        started = time.perf_counter()
        window = recorder.record(source, tapes=(100, 102), max_ops=10**6, timeout=None)
        times["tapes 100:102"].append(time.perf_counter() - started)
        started = time.perf_counter()
        full = recorder.record(source, max_ops=10**6, timeout=None)
        times["every tape"].append(time.perf_counter() - started)
    base = min(times["plain eager"])
    for name, runs in times.items():
        print(f"{name:>14}: {min(runs):.3f} s  {min(runs) / base:.2f}x")
    print(f"{len(window.ops)} ops recorded with tapes 100:102, {len(full.ops)} with every tape")
    print(window.skipped["note"])


if __name__ == "__main__":
    main()
