"""Profile: where a recorded loop's time goes, against the same loop run plainly.

Samples the loop (bench_record_cli.py's) with py-spy (`pip install py-spy`) three ways, in
fresh processes: plainly; with a TensorFlow op callback that returns at once (what
TensorFlow itself pays to call one); and through `python -m tapeviz record`. Counts only
samples inside the loop's step function, and splits them:
  op callback     tapeviz's on_op and everything it calls
  tape wrapper    the instrumented tape's own work around TensorFlow's gradient
  TF op calls     time in the generated op functions themselves (gen_*_ops.py): the C++
                  fast path that executes each op, its kernel and the callback's marshalling
  the rest        everything else: TensorFlow's Python, the program's own
Samples are relative to the plain run's total, so 1.00 is the plain loop's time.

    python bench/profile_record.py [--loop small|cnn] [--rate 250]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_record_cli import LOOPS  # noqa: E402

STEP = {"small": "train", "cnn": "train_step"}    # the loop's step function
NOOP = ("from tensorflow.python.framework import op_callbacks\n"
        "op_callbacks.add_op_callback(lambda *args, **kwargs: None)\n")


def split(raw: Path, step: str) -> Counter:
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
            parts["TF op calls"] += n
        else:
            parts["the rest"] += n
    return parts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", default="small", choices=sorted(LOOPS))
    parser.add_argument("--rate", type=int, default=250)
    args = parser.parse_args()
    source, warmup, steps = LOOPS[args.loop]
    source = source.replace("WARMUP", str(warmup)).replace("STEPS", str(steps))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        programs = {"plain": source,
                    "no-op callback": source.replace("import tensorflow as tf\n",
                                                     "import tensorflow as tf\n" + NOOP, 1),
                    "recorded": source}
        for name, text in programs.items():
            program = tmp / f"{name.replace(' ', '_')}.py"
            program.write_text(text)
            raw = tmp / f"{program.stem}.raw"
            command = [sys.executable, str(program)]
            if name == "recorded":
                command = [sys.executable, "-m", "tapeviz", "record", str(program),
                           "-o", str(tmp / "run.json"), "--timeout", "1800"]
            subprocess.run(["py-spy", "record", "-r", str(args.rate), "-f", "raw",
                            "--subprocesses", "-o", str(raw), "--"] + command,
                           env=env, cwd=ROOT, capture_output=True, check=True)
            results[name] = split(raw, STEP[args.loop])
    base = results["plain"]["total"]
    names = ["op callback", "tape wrapper", "TF op calls", "the rest", "total"]
    print(f"{args.loop} loop, samples inside `{STEP[args.loop]}` against the plain run's total:")
    print(f"  {'':16s}" + "".join(f"{n:>14s}" for n in names))
    for name, parts in results.items():
        print(f"  {name:16s}" + "".join(f"{parts[n] / base:14.2f}" for n in names))


if __name__ == "__main__":
    main()
