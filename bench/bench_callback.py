"""Benchmark: the op callback's own time per op, on the eager guide's CNN loop (or the
small-op loop of bench_record_cli.py).

The loop ratio (bench_record_cli.py) swings with the machine's speed; the callback's own
time per op moves less, so it is the number to watch while working on the callback. The
loop (bench_recorder.py's LOOP) is recorded in-process, with `on_op` wrapped by a timer;
prints the mean per op, the ops it saw, and the loop's time, for each of `--runs` fresh
processes. Beside it, the CPU time the stats thread spent on big tensors' stats, as a
share of the loop's time: on a 2-core machine that time is taken from TensorFlow's
kernels, which use both cores. `--by-type N` also prints, from the last run, the N kinds of
op whose callbacks cost most in all, by where each ran (under a tape, outside any, or in a
gradient call's backward pass): which ops a cheaper callback would have to serve.

    python bench/bench_callback.py [--runs 3] [--steps 100] [--loop cnn|small] [--by-type 12]
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_record_cli import LOOPS  # noqa: E402

# TensorFlow's own GradientTape.gradient, timed per call: the instrumented tape calls it
# through super(), so the same timer serves the plain run and the recorded one.
GRADIENT_TIMER = """
import time
from tensorflow.python.eager import backprop
tf_gradient, in_gradient = backprop.GradientTape.gradient, [0.0, 0]

def timed_gradient(self, *args, **kwargs):
    start = time.perf_counter()
    try:
        return tf_gradient(self, *args, **kwargs)
    finally:
        in_gradient[0] += time.perf_counter() - start
        in_gradient[1] += 1

backprop.GradientTape.gradient = timed_gradient
"""

PLAIN = GRADIENT_TIMER + """
import sys
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), {"__name__": "__main__"})
print("GRADIENT", in_gradient[0] / max(1, in_gradient[1]) * 1e6)
"""

RUNNER = GRADIENT_TIMER + """
import sys, time
from tapeviz.worker import recorder
from tapeviz.worker.capture import deferred, ops
on_op, spent = ops.OpsAndTapes.on_op, [0.0, 0]
submit, stats_cpu = deferred.Deferred.submit, [0.0]
by_type = {}                              # (where, op type) -> [seconds, calls]

def timed(self, op_type, *args, **kwargs):
    where = "backward" if self.grad_depth else "tape" if self.active else "no tape"
    start = time.perf_counter()
    try:
        return on_op(self, op_type, *args, **kwargs)
    finally:
        took = time.perf_counter() - start
        spent[0] += took
        spent[1] += 1
        name = op_type.decode() if isinstance(op_type, bytes) else op_type
        kind = by_type.setdefault((where, name), [0.0, 0])   # TF passes bytes or str
        kind[0] += took
        kind[1] += 1

def timed_submit(self, fn, tensor, nbytes):
    def job(held):
        start = time.thread_time()        # this job's thread only
        try:
            fn(held)
        finally:
            stats_cpu[0] += time.thread_time() - start
    submit(self, job, tensor, nbytes)

ops.OpsAndTapes.on_op = timed
deferred.Deferred.submit = timed_submit
rec = recorder.record(open(sys.argv[1]).read(), filename=sys.argv[1], timeout=None)
assert rec.error is None, rec.error
loop = [l for l in rec.stdout.splitlines() if l.startswith("LOOP_SECONDS")][0].split()[1]
print("CALLBACK", spent[0] / spent[1] * 1e6, spent[1], loop, stats_cpu[0])
print("GRADIENT", in_gradient[0] / max(1, in_gradient[1]) * 1e6)
for (where, name), (took, calls) in by_type.items():
    print("TYPE", where.replace(" ", "_"), name, took, calls)
"""


def _gradient_us(out: str) -> float:
    return float([l for l in out.splitlines() if l.startswith("GRADIENT")][0].split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, help="default: the loop's own (cnn 100, small 1000)")
    parser.add_argument("--loop", default="cnn", choices=sorted(LOOPS))
    parser.add_argument("--by-type", type=int, default=0, metavar="N")
    args = parser.parse_args()
    source, warmup, steps = LOOPS[args.loop]
    per_op, stats_share, gradient_us = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "loop.py"
        program.write_text(source.replace("WARMUP", str(warmup))
                           .replace("STEPS", str(args.steps or steps)))
        for i in range(args.runs):
            out = subprocess.run([sys.executable, "-c", RUNNER, str(program)], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout
            line = [l for l in out.splitlines() if l.startswith("CALLBACK")][0].split()
            us, calls, loop, stats = (float(line[1]), int(line[2]), float(line[3]),
                                      float(line[4]))
            per_op.append(us)
            stats_share.append(stats / loop)
            kinds = [(row[1].replace("_", " "), row[2], float(row[3]), int(row[4]))
                     for row in map(str.split, out.splitlines()) if row[0] == "TYPE"]
            gradient = _gradient_us(out)
            plain = _gradient_us(subprocess.run(
                [sys.executable, "-c", PLAIN, str(program)], cwd=ROOT, capture_output=True,
                text=True, check=True).stdout)
            gradient_us.append((gradient, plain))
            print(f"  run {i + 1}: {us:5.1f} us per op over {calls} ops (loop {loop:.2f} s); "
                  f"stats thread {stats:.2f} s CPU")
    print(f"op callback, own time per op: median {statistics.median(per_op):.1f} us "
          f"[{min(per_op):.1f}-{max(per_op):.1f}]")
    print(f"stats thread CPU, share of the loop's time: median "
          f"{statistics.median(stats_share):.1%} [{min(stats_share):.1%}-{max(stats_share):.1%}]")
    recorded, plain = (statistics.median(g[i] for g in gradient_us) for i in (0, 1))
    print(f"TensorFlow's own gradient() per call, backward ops' callbacks included: median "
          f"{recorded:.0f} us recorded, {plain:.0f} us in a plain run of the loop after it")
    if args.by_type:
        total = sum(took for _, _, took, _ in kinds)
        steps_run = (args.steps or steps) + warmup
        print(f"the last run's costliest kinds of op ({steps_run} steps, warm-up included):")
        for where, name, took, calls in sorted(kinds, key=lambda k: -k[2])[:args.by_type]:
            print(f"  {where:8s} {name:24s} {took / calls * 1e6:6.1f} us per op, "
                  f"{calls / steps_run:5.1f} a step, {took / total:5.1%} of the callback")


if __name__ == "__main__":
    main()
