"""Benchmark: what streaming a run's printed output costs (exits.py), printed as ratios
measured in one run: a program that prints N lines, recorded in-process without a channel
and with one (each message JSON-encoded and written to /dev/null, as the worker's channel
writes to its pipe).

    python bench/bench_exits.py
"""
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tapeviz.worker import recorder  # noqa: E402

PRINTS = """
import tensorflow as tf
x = tf.Variable(1.0)
for i in range(N):
    print("step", i, "value", i * 0.5)
"""
MIXED = """
import tensorflow as tf
x = tf.Variable(1.0)
for i in range(N):
    with tf.GradientTape() as tape:
        y = x * x + 1.0
    g = tape.gradient(y, x)
    print("step", i, float(g))
"""


def main():
    sink = open(os.devnull, "w")
    messages = []

    def emit(message):
        messages.append(1)
        sink.write(json.dumps(message) + "\n")
        sink.flush()

    for label, program, n in (("print only", PRINTS, 20_000), ("tape + print", MIXED, 500)):
        source = program.replace("N", str(n))
        plain, streamed = [], []
        for _ in range(5):
            t = time.perf_counter()
            recorder.record(source, timeout=None)
            plain.append(time.perf_counter() - t)
            messages.clear()
            t = time.perf_counter()
            recorder.record(source, timeout=None, emit=emit)
            streamed.append(time.perf_counter() - t)
        a, b = statistics.median(plain), statistics.median(streamed)
        print(f"{label:>13}, {n} lines: without channel {a * 1e3:.0f} ms, streamed "
              f"{b * 1e3:.0f} ms ({len(messages)} messages), ratio {b / a:.2f}")


if __name__ == "__main__":
    main()
