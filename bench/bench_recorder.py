"""Benchmark: what recording costs on the eager guide's CNN training loop.

Runs the same 100-step Keras CNN loop three ways, each in a fresh process, in one
run, and prints the time ratios against plain eager:
  plain eager | under the tapeviz recorder (graph, stats, gradient flow) |
  under tfdbg2 (tf.debugging.experimental.enable_dump_debug_info, FULL_HEALTH).
Also prints the JSON size of the recording of one train step.

    python bench/bench_recorder.py [--steps 100]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LOOP = textwrap.dedent("""
    import time
    import numpy as np
    import tensorflow as tf
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([
        tf.keras.Input((28, 28, 1)),
        tf.keras.layers.Conv2D(16, 3, activation="relu"),
        tf.keras.layers.Conv2D(16, 3, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(10),
    ])
    optimizer = tf.keras.optimizers.Adam()
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    rng = np.random.default_rng(0)
    images = tf.constant(rng.random((32, 28, 28, 1), dtype=np.float32))
    labels = tf.constant(rng.integers(0, 10, 32))
    loss_history = []

    def train_step(images, labels):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss_value = loss_object(labels, logits)
        loss_history.append(loss_value.numpy().mean())
        grads = tape.gradient(loss_value, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    for _ in range(WARMUP):
        train_step(images, labels)
    start = time.perf_counter()
    for _ in range(STEPS):
        train_step(images, labels)
    print("LOOP_SECONDS", time.perf_counter() - start)
""")

RUNNERS = {
    "plain": """
import sys
exec(compile(open(sys.argv[1]).read(), "loop.py", "exec"), {"__name__": "__main__"})
""",
    "recorder": """
import sys
from tapeviz.worker import recorder
rec = recorder.record(open(sys.argv[1]).read(), filename="loop.py", timeout=None)
assert rec.error is None, rec.error
print(rec.stdout, end="")
print("OPS", len(rec.ops) + rec.dropped.get("ops", 0))
""",
    "tfdbg2": """
import sys, tempfile
import tensorflow as tf
tf.debugging.experimental.enable_dump_debug_info(
    tempfile.mkdtemp(), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
exec(compile(open(sys.argv[1]).read(), "loop.py", "exec"), {"__name__": "__main__"})
""",
}


def run(kind: str, program: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", RUNNERS[kind], str(program)], env=env,
                         capture_output=True, text=True, check=True).stdout
    result = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("LOOP_SECONDS", "OPS"):
            result[parts[0]] = float(parts[1])
    return result


def one_step_json_size() -> tuple[int, int]:
    sys.path.insert(0, str(ROOT))
    from tapeviz.worker import recorder
    source = LOOP.replace("WARMUP", "0").replace("STEPS", "1")
    rec = recorder.record(source, filename="loop.py", timeout=None)
    return len(rec.ops), len(rec.to_json().encode())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "loop.py"
        program.write_text(LOOP.replace("WARMUP", str(args.warmup))
                           .replace("STEPS", str(args.steps)))
        results = {kind: run(kind, program) for kind in ("plain", "recorder", "tfdbg2")}
    base = results["plain"]["LOOP_SECONDS"]
    print(f"{args.steps}-step eager CNN loop (guide model, batch 32, 28x28), one run:")
    for kind, r in results.items():
        t = r["LOOP_SECONDS"]
        print(f"  {kind:9s} {t:7.2f} s  {t / base:5.2f}x plain eager"
              + (f"  ({int(r['OPS'])} ops recorded)" if "OPS" in r else ""))
    ops, size = one_step_json_size()
    print(f"recording of one train step: {ops} ops, {size / 1024:.0f} KiB of JSON")
    print(json.dumps({k: round(v["LOOP_SECONDS"] / base, 3) for k, v in results.items()}))


if __name__ == "__main__":
    main()
