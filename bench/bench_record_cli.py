"""Benchmark: a self-timed training loop run plainly and through `python -m tapeviz record`.

The program times its own loop (after a few warm-up steps) and prints LOOP_SECONDS, so
TensorFlow's import and the worker's start are left out. Each pair runs the program
plainly (`python loop.py`) and recorded (`python -m tapeviz record loop.py`), in fresh
processes, one right after the other (the order alternates between pairs), and the
ratio recorded / plain is taken within the pair. Prints each pair's ratio and their
median, for two loops:
  cnn    the eager guide's CNN loop (bench_recorder.py's LOOP: 100 steps, batch 32)
  small  the custom-training guide's linear regression: many small ops per step

    python bench/bench_record_cli.py [--pairs 3] [--loops cnn,small]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recorder import LOOP as CNN  # noqa: E402

SMALL = textwrap.dedent("""
    import time
    import tensorflow as tf
    TRUE_W, TRUE_B = 3.0, 2.0
    x = tf.random.normal(shape=[1000], seed=1)
    noise = tf.random.normal(shape=[1000], seed=2)
    y = x * TRUE_W + TRUE_B + noise

    class MyModel(tf.Module):
        def __init__(self):
            self.w = tf.Variable(5.0)
            self.b = tf.Variable(0.0)

        def __call__(self, x):
            return self.w * x + self.b

    def loss(target_y, predicted_y):
        return tf.reduce_mean(tf.square(target_y - predicted_y))

    def train(model, x, y, learning_rate):
        with tf.GradientTape() as t:
            current_loss = loss(y, model(x))
        dw, db = t.gradient(current_loss, [model.w, model.b])
        model.w.assign_sub(learning_rate * dw)
        model.b.assign_sub(learning_rate * db)
        return current_loss

    model = MyModel()
    for _ in range(WARMUP):
        train(model, x, y, 0.1)
    start = time.perf_counter()
    for _ in range(STEPS):
        current_loss = train(model, x, y, 0.1)
    print("LOOP_SECONDS", time.perf_counter() - start)
""")

LOOPS = {"cnn": (CNN, 5, 100), "small": (SMALL, 20, 1000)}


def loop_seconds(text: str) -> float:
    for line in text.splitlines():
        if line.startswith("LOOP_SECONDS"):
            return float(line.split()[1])
    raise RuntimeError(f"no LOOP_SECONDS in {text[-500:]!r}")


def plain(program: Path, env: dict) -> float:
    out = subprocess.run([sys.executable, str(program)], env=env, capture_output=True,
                         text=True, check=True).stdout
    return loop_seconds(out)


def recorded(program: Path, env: dict) -> tuple:
    out_json = program.with_suffix(".json")
    subprocess.run([sys.executable, "-m", "tapeviz", "record", str(program), "-o", str(out_json),
                    "--timeout", "1800"], env=env, capture_output=True, text=True, cwd=ROOT)
    rec = json.loads(out_json.read_text())
    if rec.get("error"):
        raise RuntimeError(f"the recorded run failed: {rec['error']}")
    return loop_seconds(rec["stdout"]), len(rec["ops"]) + rec.get("dropped", {}).get("ops", 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--loops", default="cnn,small")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.loops.split(","):
            source, warmup, steps = LOOPS[name]
            program = Path(tmp) / f"{name}_loop.py"
            program.write_text(source.replace("WARMUP", str(warmup)).replace("STEPS", str(steps)))
            ratios = []
            print(f"{name}: {steps}-step self-timed loop, plain vs `python -m tapeviz record`:")
            for i in range(args.pairs):
                if i % 2 == 0:
                    p = plain(program, env)
                    r, ops = recorded(program, env)
                else:
                    r, ops = recorded(program, env)
                    p = plain(program, env)
                ratios.append(r / p)
                print(f"  pair {i + 1}: plain {p:6.2f} s, recorded {r:6.2f} s ({ops} ops): "
                      f"{r / p:.2f}x", flush=True)
            print(f"  median ratio {statistics.median(ratios):.2f}x "
                  f"[{min(ratios):.2f}-{max(ratios):.2f}]")


if __name__ == "__main__":
    main()
