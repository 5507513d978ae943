"""Benchmark: a loop's resident memory, plain and recorded, step by step.

The loop (bench_record_cli.py's) reads its own VmRSS from /proc every `--every` steps and at
its end, so the figures are the program's process in both runs: `python loop.py`, and the
worker that `python -m tapeviz record loop.py` runs it in. Prints the resident memory when
the timed loop starts and ends, and its growth per step. A recording is bounded (20,000
ops, 64 MiB of held small tensors), so a recorded loop may grow while it fills its bounds,
but not for ever.

    python bench/bench_memory.py [--loop cnn|small] [--steps 100] [--every 20]
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_record_cli import LOOPS  # noqa: E402

PROBE = ("def _rss():\n"
         "    with open('/proc/self/status') as f:\n"
         "        return [int(l.split()[1]) // 1024 for l in f if l.startswith('VmRSS')][0]\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", default="cnn", choices=sorted(LOOPS))
    parser.add_argument("--steps", type=int)
    parser.add_argument("--every", type=int, default=20)
    args = parser.parse_args()
    source, warmup, steps = LOOPS[args.loop]
    steps = args.steps or steps
    step = source.split("for _ in range(STEPS):\n")[1].splitlines()[0]   # the loop's body
    timed = source.replace(
        f"for _ in range(STEPS):\n{step}\n",
        f"print('RSS', 0, _rss())\nfor _i in range(STEPS):\n{step}\n"
        f"    if (_i + 1) % {args.every} == 0:\n        print('RSS', _i + 1, _rss())\n")
    timed = PROBE + timed.replace("WARMUP", str(warmup)).replace("STEPS", str(steps))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    print(f"{args.loop} loop, {steps} steps: resident memory (MB) of the program's process")
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "loop.py"
        program.write_text(timed)
        for name, command in (("plain", [sys.executable, str(program)]),
                              ("recorded", [sys.executable, "-m", "tapeviz", "record",
                                            str(program), "-o", str(Path(tmp) / "run.json"),
                                            "--timeout", "1800"])):
            out = subprocess.run(command, env=env, cwd=ROOT, capture_output=True,
                                 text=True).stdout
            rss = [tuple(map(int, line.split()[1:])) for line in out.splitlines()
                   if line.startswith("RSS")]
            (_, first), (last_step, last) = rss[0], rss[-1]
            trail = " ".join(f"{s}:{m}" for s, m in rss)
            print(f"  {name:9s} start {first:5d}  end {last:5d}  "
                  f"growth {(last - first) / last_step:5.2f} MB/step   [{trail}]")


if __name__ == "__main__":
    main()
