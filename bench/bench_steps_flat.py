"""Benchmark: a recorded loop's time per step does not grow with the number of steps.

Runs a GradientTape loop (TensorFlow's own `backprop.GradientTape`, the class that was once
never closed, and `tf.GradientTape`) that times each thousand of its steps, and prints the
ratio of the last thousand's time to the first's within one run (a shared machine's noise
hits both alike). Flat is ~1.0; before every tape closed at its `__exit__` it was 2-3x.

    python bench/bench_steps_flat.py [--steps 10000]
        through `python -m tapeviz record` with its defaults (the keep policy), and the
        same loop plainly: each thousand's seconds, last/first, and recorded/plain
    python bench/bench_steps_flat.py --capture [--steps 3000]
        under `tapeviz.capture()` in this process, every step recorded
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

LOOP = """
import time
import tensorflow as tf
from tensorflow.python.eager import backprop
w = tf.Variable(tf.random.normal([16, 4], seed=1))
x = tf.random.normal([8, 16], seed=2)
start = time.perf_counter()
for step in range(1, STEPS + 1):
    tape_class = backprop.GradientTape if step % 2 else tf.GradientTape
    with tape_class() as tape:
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
    w.assign_sub(0.01 * tape.gradient(loss, w))
    if step % 1000 == 0:
        now = time.perf_counter()
        print("THOUSAND", now - start, flush=True)
        start = now
"""


def thousands(text: str) -> list:
    return [float(line.split()[1]) for line in text.splitlines() if line.startswith("THOUSAND ")]


def recorded_and_plain(steps: int) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "loop.py"
        program.write_text(LOOP.replace("STEPS", str(steps)))
        out = program.with_suffix(".json")
        subprocess.run([sys.executable, "-m", "tapeviz", "record", str(program), "-o", str(out),
                        "--timeout", "3600"], env=env, capture_output=True, text=True)
        rec = json.loads(out.read_text())
        plain = subprocess.run([sys.executable, str(program)], env=env, capture_output=True,
                               text=True, check=True).stdout
    recorded, plainly = thousands(rec["stdout"]), thousands(plain)
    print("seconds per 1,000 recorded steps:", " ".join(f"{t:.2f}" for t in recorded))
    print("seconds per 1,000 plain steps:   ", " ".join(f"{t:.2f}" for t in plainly))
    print(f"recorded last/first thousand: {recorded[-1] / recorded[0]:.2f}x; plain "
          f"{plainly[-1] / plainly[0]:.2f}x; recorded/plain in all "
          f"{sum(recorded) / sum(plainly):.2f}x, last thousand {recorded[-1] / plainly[-1]:.2f}x "
          f"(tapes kept {len(rec['tapes'])}, steps summarized {len(rec['steps'])}, "
          f"error {rec['error'] and rec['error']['type']})")


def captured(steps: int) -> None:
    import tapeviz
    namespace = {}
    source = LOOP.replace("STEPS", str(steps)).replace('print("THOUSAND", now - start, '
                                                       'flush=True)', "times.append(now - start)")
    with tapeviz.capture() as rec:
        exec(compile(source, "loop.py", "exec"), dict(namespace, times=(times := [])))
    data = rec.to_dict()
    print("seconds per 1,000 recorded steps:", " ".join(f"{t:.2f}" for t in times))
    print(f"last/first thousand: {times[-1] / times[0]:.2f}x  "
          f"(tapes kept {len(data['tapes'])}, dropped {data['dropped']})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--capture", action="store_true")
    args = parser.parse_args()
    if args.capture:
        captured(args.steps or 3000)
    else:
        recorded_and_plain(args.steps or 10_000)


if __name__ == "__main__":
    main()
