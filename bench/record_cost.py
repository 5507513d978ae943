"""What recording costs: a training loop recorded, against the same loop run plainly.

Every loop times itself (after a few warm-up steps) and prints LOOP_SECONDS and its
process CPU time, LOOP_CPU, so TensorFlow's import and the worker's start are left out.
Two loops:
  cnn    the eager guide's CNN (Conv2D 16, Conv2D 16, pooling, Dense 10, Adam, batch 32
         of 28x28), 100 steps
  small  the custom-training guide's linear regression, 1,000 steps of small ops
  torch  the same CNN in PyTorch, 100 steps (`--loops torch`; PyTorch installed)

    python bench/record_cost.py loops [--pairs 3] [--loops cnn,small] [--all-steps]
        recorded / plain through `tapeviz record` with its defaults (the keep policy:
        a loop's first, newest and anomalous steps whole), in pairs of fresh processes;
        --all-steps records every op of every step
    python bench/record_cost.py tapes [--steps 300]
        `--tapes 100:102` on a long loop, against every tape recorded
    python bench/record_cost.py memory [--loop cnn] [--steps 300] [--every 20]
        the program's resident memory step by step, plain and recorded
    python bench/record_cost.py tfdbg [--steps 100]
        the recorder in-process against tfdbg2's FULL_HEALTH dump; one step's JSON size
    python bench/record_cost.py gc [--loop small]
        the garbage collector's share, plain, through `capture()` and `tapeviz record`
    python bench/record_cost.py profile [--loop small]
        where a recorded loop's time goes, sampled with py-spy (`pip install py-spy`)
    python bench/record_cost.py stats [--reps 300]
        the stats of one big activation, the stats thread's unit of work
    python bench/record_cost.py exits [--lines 20000]
        what streaming a run's printed output to the server costs
    python bench/record_cost.py keras [--pairs 3] [--steps 300]
        model.fit() of the guide's CNN, compiled, with tapeviz.keras.Watch against without
        (the epochs after the first, which traces), in pairs of fresh processes

`--steps` (and `--warmup`) shorten any loop, for a quick check that a command runs.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CNN = textwrap.dedent("""
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
    cpu = time.process_time()
    for _ in range(STEPS):
        train_step(images, labels)
    print("LOOP_SECONDS", time.perf_counter() - start)
    print("LOOP_CPU", time.process_time() - cpu)
""")

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
    cpu = time.process_time()
    for _ in range(STEPS):
        current_loss = train(model, x, y, 0.1)
    print("LOOP_SECONDS", time.perf_counter() - start)
    print("LOOP_CPU", time.process_time() - cpu)
""")

# The same CNN in PyTorch (an optional extra): its capture is worker/autograd/
TORCH_CNN = textwrap.dedent("""
    import time
    import torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 16, 3), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    optimizer = torch.optim.Adam(model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    images, labels = torch.rand(32, 1, 28, 28), torch.randint(0, 10, (32,))

    def train_step(images, labels):
        optimizer.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(WARMUP):
        train_step(images, labels)
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(STEPS):
        train_step(images, labels)
    print("LOOP_SECONDS", time.perf_counter() - start)
    print("LOOP_CPU", time.process_time() - cpu)
""")

# source, warm-up steps, timed steps, the step function's name (for the profile)
LOOPS = {"cnn": (CNN, 5, 100, "train_step"), "small": (SMALL, 20, 1000, "train"),
         "torch": (TORCH_CNN, 5, 100, "train_step")}


def loop_source(args, name: str) -> str:
    source, warmup, steps, _ = LOOPS[name]
    warmup = warmup if args.warmup is None else args.warmup
    steps = args.steps or steps
    return source.replace("WARMUP", str(warmup)).replace("STEPS", str(steps))


def child_env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")


RECORD_FLAGS: list = []      # `loops --all-steps` adds its flag here


def record_command(program: Path) -> list:
    return [sys.executable, "-m", "tapeviz", "record", str(program),
            "-o", str(program.with_suffix(".json")), "--timeout", "1800", *RECORD_FLAGS]


def printed(text: str, key: str) -> str:
    for line in text.splitlines():
        if line.startswith(key + " "):
            return line.split(" ", 1)[1]
    raise RuntimeError(f"no {key} in {text[-500:]!r}")


def plain_seconds(program: Path) -> tuple:
    """(the loop's seconds, its process CPU seconds)."""
    out = subprocess.run([sys.executable, str(program)], env=child_env(), capture_output=True,
                         text=True, check=True).stdout
    return float(printed(out, "LOOP_SECONDS")), float(printed(out, "LOOP_CPU"))


def recorded_seconds(program: Path) -> tuple:
    subprocess.run(record_command(program), env=child_env(), capture_output=True, text=True,
                   cwd=ROOT)
    rec = json.loads(program.with_suffix(".json").read_text())
    if rec.get("error"):
        raise RuntimeError(f"the recorded run failed: {rec['error']}")
    ops = len(rec["ops"]) + rec.get("dropped", {}).get("ops", 0)
    return (float(printed(rec["stdout"], "LOOP_SECONDS")),
            float(printed(rec["stdout"], "LOOP_CPU")), ops)


def loops(args, tmp: Path) -> None:
    """Pairs of fresh processes, one right after the other, the order alternating: the
    machine's speed drifts between processes, so the ratio is taken within each pair."""
    for name in args.loops.split(","):
        program = tmp / f"{name}_loop.py"
        program.write_text(loop_source(args, name))
        ratios, cpu_ratios = [], []
        print(f"{name}: self-timed loop, plain vs `python -m tapeviz record`:")
        for i in range(args.pairs):
            if i % 2 == 0:
                p, p_cpu = plain_seconds(program)
                r, r_cpu, ops = recorded_seconds(program)
            else:
                r, r_cpu, ops = recorded_seconds(program)
                p, p_cpu = plain_seconds(program)
            ratios.append(r / p)
            cpu_ratios.append(r_cpu / p_cpu)
            print(f"  pair {i + 1}: plain {p:6.2f} s, recorded {r:6.2f} s ({ops} ops): "
                  f"{r / p:.2f}x; the loop's process CPU {p_cpu:.2f} s, {r_cpu:.2f} s: "
                  f"{r_cpu / p_cpu:.2f}x", flush=True)
        # On a busy machine the wall clock follows the other jobs; the loop's own CPU time
        # (every thread of the process: the stats thread too) moves far less
        print(f"  median ratio {statistics.median(ratios):.2f}x "
              f"[{min(ratios):.2f}-{max(ratios):.2f}]; of CPU time "
              f"{statistics.median(cpu_ratios):.2f}x "
              f"[{min(cpu_ratios):.2f}-{max(cpu_ratios):.2f}]")


TAPES_LOOP = """
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


def tapes(args, tmp: Path) -> None:
    """One process, three ways, best of 3 each: the window's point is the time outside it."""
    from tapeviz.worker import recorder
    source = TAPES_LOOP.format(steps=args.steps or 300)
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


RSS = ("def _rss():\n"
       "    with open('/proc/self/status') as f:\n"
       "        return [int(l.split()[1]) // 1024 for l in f if l.startswith('VmRSS')][0]\n")


def memory(args, tmp: Path) -> None:
    """The loop reads its own VmRSS, so both figures are the program's own process: plain
    python, and the worker that `tapeviz record` runs it in."""
    source = loop_source(args, args.loop)
    body = source.split("for _ in range(")[-1].split("\n")[1]          # the timed step
    head = source.rsplit("for _ in range(", 1)[0]
    steps = args.steps or LOOPS[args.loop][2]
    program = tmp / "loop.py"
    program.write_text(RSS + head + f"print('RSS', 0, _rss())\nfor _i in range({steps}):\n"
                       f"{body}\n    if (_i + 1) % {args.every} == 0 or _i + 1 == {steps}:\n"
                       f"        print('RSS', _i + 1, _rss())\n")
    print(f"{args.loop} loop, {steps} steps: resident memory (MB) of the program's process")
    for name, command in (("plain", [sys.executable, str(program)]),
                          ("recorded", record_command(program))):
        out = subprocess.run(command, env=child_env(), cwd=ROOT, capture_output=True,
                             text=True).stdout          # `record` prints what it printed
        rss = [tuple(map(int, line.split()[1:])) for line in out.splitlines()
               if line.startswith("RSS")]
        (_, first), (last_step, last) = rss[0], rss[-1]
        trail = " ".join(f"{s}:{m}" for s, m in rss)
        print(f"  {name:9s} start {first:5d}  end {last:5d}  "
              f"growth {(last - first) / last_step:5.2f} MB/step   [{trail}]")


TFDBG_RUNNERS = {
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


def tfdbg(args, tmp: Path) -> None:
    """The CNN loop once each way, each in a fresh process: tfdbg2 is the debugger
    TensorFlow ships, so it is the price to compare with."""
    program = tmp / "loop.py"
    program.write_text(loop_source(args, "cnn"))
    results = {}
    for kind, runner in TFDBG_RUNNERS.items():
        out = subprocess.run([sys.executable, "-c", runner, str(program)], env=child_env(),
                             capture_output=True, text=True, check=True).stdout
        results[kind] = (float(printed(out, "LOOP_SECONDS")),
                         printed(out, "OPS") if kind == "recorder" else None)
    base = results["plain"][0]
    print("eager CNN loop, one run each way:")
    for kind, (seconds, ops) in results.items():
        print(f"  {kind:9s} {seconds:7.2f} s  {seconds / base:5.2f}x plain eager"
              + (f"  ({ops} ops recorded)" if ops else ""))
    from tapeviz.worker import recorder
    one_step = LOOPS["cnn"][0].replace("WARMUP", "0").replace("STEPS", "1")
    rec = recorder.record(one_step, filename="loop.py", timeout=None)
    print(f"recording of one train step: {len(rec.ops)} ops, "
          f"{len(rec.to_json().encode()) / 1024:.0f} KiB of JSON")


# Put just before the timed loop starts: times every collection from there on
GC_TIMED = """import gc as _gc, json as _json, time as _time
_seen = {"count": [0, 0, 0], "seconds": [0.0, 0.0, 0.0], "start": 0.0}
def _timed(phase, info):
    if phase == "start":
        _seen["start"] = _time.perf_counter()
    else:
        _seen["count"][info["generation"]] += 1
        _seen["seconds"][info["generation"]] += _time.perf_counter() - _seen["start"]
_gc.callbacks.append(_timed)
"""
GC_REPORT = 'print("GC", _json.dumps([_seen["count"], _seen["seconds"]]))\n'
CAPTURE = "import tapeviz\n_block = tapeviz.capture()\n_block.__enter__()\n"


def gc(args, tmp: Path) -> None:
    """A recording's records are many small objects, so the collector runs more often, and
    a full collection walks every tracked object in the process."""
    timed = loop_source(args, args.loop).replace(
        "start = time.perf_counter()", GC_TIMED + "start = time.perf_counter()") + GC_REPORT
    print(f"{args.loop} loop: collections by generation, and their seconds")
    for name, before in (("plain", ""), ("tapeviz.capture()", CAPTURE),
                         ("tapeviz record", "")):
        program = tmp / "loop.py"
        program.write_text(before + timed)
        command = (record_command(program) if name == "tapeviz record"
                   else [sys.executable, str(program)])
        out = subprocess.run(command, env=child_env(), cwd=ROOT, capture_output=True,
                             text=True).stdout
        loop = float(printed(out, "LOOP_SECONDS"))
        count, seconds = json.loads(printed(out, "GC"))
        print(f"  {name:18s} loop {loop:5.2f} s  collections {count}  "
              f"took {sum(seconds):.3f} s ({sum(seconds) / loop:.1%} of the loop; "
              f"full ones {seconds[2]:.3f} s)")


NOOP_CALLBACK = ("from tensorflow.python.framework import op_callbacks\n"
                 "op_callbacks.add_op_callback(lambda *args, **kwargs: None)\n")


def profile_split(raw: Path, step: str) -> Counter:
    """py-spy's raw samples inside the step function, by who spent them."""
    parts = Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        inside = [i for i, f in enumerate(frames) if f.startswith(step + " (")]
        if not inside:
            continue
        frames = frames[inside[0]:]        # the step and what it called (py-spy: root first)
        n = int(n)
        parts["total"] += n
        if any(f.startswith("OpsAndTapes.on_op ") for f in frames):
            parts["op callback"] += n
        elif any("tapeviz/" in f for f in frames) and not any(
                f.startswith("GradientTape.gradient (tensorflow") for f in frames):
            parts["tape wrapper"] += n
        elif "/gen_" in frames[-1]:
            parts["TF op calls"] += n      # the C++ fast path, the kernel, the marshalling
        else:
            parts["the rest"] += n         # TensorFlow's Python, the program's own
    return parts


def profile(args, tmp: Path) -> None:
    """Sampled from outside the process, so nothing in the recorder is changed to time it.
    A no-op op callback beside it shows what TensorFlow itself pays to call one."""
    source = loop_source(args, args.loop)
    step = LOOPS[args.loop][3]
    results = {}
    for name in ("plain", "no-op callback", "recorded"):
        program = tmp / f"{name.replace(' ', '_').replace('-', '_')}.py"
        program.write_text(source if name != "no-op callback" else source.replace(
            "import tensorflow as tf\n", "import tensorflow as tf\n" + NOOP_CALLBACK, 1))
        raw = program.with_suffix(".raw")
        command = record_command(program) if name == "recorded" else [sys.executable,
                                                                       str(program)]
        subprocess.run(["py-spy", "record", "-r", str(args.rate), "-f", "raw",
                        "--subprocesses", "-o", str(raw), "--"] + command,
                       env=child_env(), cwd=ROOT, capture_output=True, check=True)
        results[name] = profile_split(raw, step)
    base = results["plain"]["total"]
    names = ["op callback", "tape wrapper", "TF op calls", "the rest", "total"]
    print(f"{args.loop} loop, samples inside `{step}` against the plain run's total:")
    print(f"  {'':16s}" + "".join(f"{n:>14s}" for n in names))
    for name, parts in results.items():
        print(f"  {name:16s}" + "".join(f"{parts[n] / base:14.2f}" for n in names))


def per_call(fn, reps: int) -> float:
    fn()                                    # warm: first-touch pages, NumPy's dispatch
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) / reps


def stats(args, tmp: Path) -> None:
    """An activation of the CNN's first Conv2D; one NumPy pass (max) is the floor any
    stats need. No TensorFlow."""
    import numpy as np
    from tapeviz.worker import numerics
    rng = np.random.default_rng(0)
    activation = np.maximum(rng.standard_normal((32, 26, 26, 16), dtype=np.float32), 0)
    flat = activation.reshape(-1)
    floor = per_call(flat.max, args.reps)
    print(f"a {'x'.join(map(str, activation.shape))} float32 activation, mean of "
          f"{args.reps} calls:")
    for name, fn in (("numerics.stats", lambda: numerics.stats(activation)),
                     ("one NumPy pass (max)", flat.max)):
        seconds = per_call(fn, args.reps)
        print(f"  {name:22s} {seconds * 1e6:7.1f} us  {seconds / floor:5.1f} passes")


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


def exits(args, tmp: Path) -> None:
    """A program that prints, recorded in-process without a channel and with one (each
    message JSON-encoded and written to /dev/null, as the worker writes to its pipe)."""
    from tapeviz.worker import recorder
    sink = open(os.devnull, "w")
    messages = []

    def emit(message):
        messages.append(1)
        sink.write(json.dumps(message) + "\n")
        sink.flush()

    for label, program, n in (("print only", PRINTS, args.lines),
                              ("tape + print", MIXED, max(1, args.lines // 40))):
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


FIT = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import keras
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(32 * STEPS, 28, 28, 1)).astype("float32")
    y = np.random.default_rng(1).integers(0, 10, size=32 * STEPS)
    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    times = []

    class Timed(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t, self.c = time.perf_counter(), time.process_time()

        def on_epoch_end(self, epoch, logs=None):
            times.append((time.perf_counter() - self.t, time.process_time() - self.c))

    callbacks = [Timed()]
    if sys.argv[1] == "watch":
        import tapeviz.keras
        callbacks.append(tapeviz.keras.Watch(sys.argv[2]))
    model.fit(x, y, batch_size=32, epochs=3, verbose=0, callbacks=callbacks)
    print("LOOP_SECONDS", sum(t for t, _ in times[1:]))    # the first epoch traces
    print("LOOP_CPU", sum(c for _, c in times[1:]))
""")


def keras(args, tmp: Path) -> None:
    """Pairs of fresh processes, the order alternating, as `loops` does."""
    program = tmp / "fit_cnn.py"
    program.write_text(FIT.replace("STEPS", str(args.steps or 300)))

    def run(mode: str) -> tuple:
        out = subprocess.run([sys.executable, str(program), mode, str(tmp / "run.json")],
                             env=child_env(), capture_output=True, text=True, check=True).stdout
        return float(printed(out, "LOOP_SECONDS")), float(printed(out, "LOOP_CPU"))

    ratios, cpu_ratios = [], []
    print(f"model.fit(), compiled, {args.steps or 300} steps an epoch: plain vs "
          "tapeviz.keras.Watch (epochs 2 and 3):")
    for i in range(args.pairs):
        order = ("plain", "watch") if i % 2 == 0 else ("watch", "plain")
        got = {mode: run(mode) for mode in order}
        (p, p_cpu), (w, w_cpu) = got["plain"], got["watch"]
        ratios.append(w / p)
        cpu_ratios.append(w_cpu / p_cpu)
        print(f"  pair {i + 1}: plain {p:6.2f} s, watched {w:6.2f} s: {w / p:.2f}x; "
              f"CPU {p_cpu:.2f} s, {w_cpu:.2f} s: {w_cpu / p_cpu:.2f}x", flush=True)
    print(f"  median ratio {statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]; "
          f"of CPU time {statistics.median(cpu_ratios):.2f}x "
          f"[{min(cpu_ratios):.2f}-{max(cpu_ratios):.2f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[7:]))
    sizes = argparse.ArgumentParser(add_help=False)
    sizes.add_argument("--steps", type=int, help="timed steps (each loop has its default)")
    sizes.add_argument("--warmup", type=int, help="untimed steps first")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("loops", parents=[sizes])
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--loops", default="cnn,small")
    p.add_argument("--all-steps", action="store_true")
    sub.add_parser("tapes", parents=[sizes])
    p = sub.add_parser("memory", parents=[sizes])
    p.add_argument("--loop", default="cnn", choices=sorted(LOOPS))
    p.add_argument("--every", type=int, default=20)
    sub.add_parser("tfdbg", parents=[sizes])
    p = sub.add_parser("gc", parents=[sizes])
    p.add_argument("--loop", default="small", choices=sorted(LOOPS))
    p = sub.add_parser("profile", parents=[sizes])
    p.add_argument("--loop", default="small", choices=sorted(LOOPS))
    p.add_argument("--rate", type=int, default=250)
    p = sub.add_parser("stats")
    p.add_argument("--reps", type=int, default=300)
    p = sub.add_parser("exits")
    p.add_argument("--lines", type=int, default=20_000)
    p = sub.add_parser("keras", parents=[sizes])
    p.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    if getattr(args, "all_steps", False):
        RECORD_FLAGS.append("--all-steps")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with tempfile.TemporaryDirectory() as tmp:
        globals()[args.command](args, Path(tmp))


if __name__ == "__main__":
    main()
