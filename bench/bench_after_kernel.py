"""Benchmark: what a few lines of Python cost right after a TensorFlow kernel.

The op callback's pieces, timed inside a recorded loop, cost several times what they cost
in a tight loop of their own: a convolution's tensors push the callback's dicts, objects
and bytecode out of the CPU's caches, and every op's callback starts cold. This measures
the effect alone, with no tapeviz in it: the same small piece of Python (a map of TF ids
through a dict, as the callback does for an op's inputs) timed right after each of three
things. Prints the mean per piece and its ratio to the piece after nothing.

    python bench/bench_after_kernel.py [--reps 3000]

It says what to expect of work moved out of the op callback: the same work done later, in
a batch, runs warm; done per op, it pays the cold start each time.
"""
import argparse
import operator
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3000)
    args = parser.parse_args()
    images = tf.random.normal([32, 28, 28, 16], seed=1)       # the CNN loop's second conv
    kernel = tf.random.normal([3, 3, 16, 16], seed=2)
    a, b = tf.constant([1.0]), tf.constant([2.0])
    ids = {t._id: i for i, t in enumerate((a, b))}
    tf_id, inputs, clock = operator.attrgetter("_id"), (a, b), time.perf_counter

    def piece_after(before) -> float:
        spent = 0.0
        for _ in range(args.reps):
            before()
            start = clock()
            list(map(ids.get, map(tf_id, inputs)))
            spent += clock() - start
        return spent / args.reps

    after = {"nothing": lambda: None,
             "a small op (a + b)": lambda: a + b,
             "a conv2d (32x28x28x16)": lambda: tf.nn.conv2d(images, kernel, 1, "SAME")}
    piece_after(after["a conv2d (32x28x28x16)"])      # warm-up: oneDNN picks its kernels
    times = {name: piece_after(before) for name, before in after.items()}
    base = times["nothing"]
    print("two dict lookups by TF id (the callback's inputs), timed right after:")
    for name, seconds in times.items():
        print(f"  {name:24s} {seconds * 1e6:6.2f} us  {seconds / base:5.1f}x")


if __name__ == "__main__":
    main()
