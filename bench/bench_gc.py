"""Benchmark: the garbage collector's time inside a recorded loop.

The recording's records are many small Python objects, so the collector runs more often in
a recorded loop than in a plain one, and a full collection walks every tracked object in
the process. Runs the loop (bench_record_cli.py's) plainly, through `tapeviz.capture()` in
the same process, and through `python -m tapeviz record`, each in a fresh process, and
prints the collections by generation and the seconds they took (timed by `gc.callbacks`
inside the loop's own process), beside the loop's time.

    python bench/bench_gc.py [--loop small|cnn]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_record_cli import LOOPS  # noqa: E402

# Put just before the timed loop starts: times every collection from there, and prints
# the totals after LOOP_SECONDS
TIMED = """import gc as _gc, json as _json, time as _time
_seen = {"count": [0, 0, 0], "seconds": [0.0, 0.0, 0.0], "start": 0.0}
def _timed(phase, info):
    if phase == "start":
        _seen["start"] = _time.perf_counter()
    else:
        _seen["count"][info["generation"]] += 1
        _seen["seconds"][info["generation"]] += _time.perf_counter() - _seen["start"]
_gc.callbacks.append(_timed)
"""
REPORT = 'print("GC", _json.dumps([_seen["count"], _seen["seconds"]]))\n'
CAPTURE = "import tapeviz\n_block = tapeviz.capture()\n_block.__enter__()\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", default="small", choices=sorted(LOOPS))
    args = parser.parse_args()
    source, warmup, steps = LOOPS[args.loop]
    source = source.replace("WARMUP", str(warmup)).replace("STEPS", str(steps))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    ways = {"plain": ([sys.executable], ""),
            "tapeviz.capture()": ([sys.executable], CAPTURE),
            "tapeviz record": ([sys.executable, "-m", "tapeviz", "record"], "")}
    print(f"{args.loop} loop ({steps} steps): collections by generation, and their seconds")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (command, before) in ways.items():
            program = Path(tmp) / "loop.py"
            timed = source.replace("start = time.perf_counter()",
                                   TIMED + "start = time.perf_counter()")
            program.write_text(before + timed + REPORT)
            out = subprocess.run(command + [str(program), "-o", str(program.with_suffix(".json"))]
                                 if "record" in command else command + [str(program)],
                                 env=env, cwd=ROOT, capture_output=True, text=True).stdout
            lines = dict(line.split(" ", 1) for line in out.splitlines()
                         if line.startswith(("LOOP_SECONDS", "GC")))
            loop = float(lines["LOOP_SECONDS"])
            count, seconds = json.loads(lines["GC"])
            print(f"  {name:18s} loop {loop:5.2f} s  collections {count}  "
                  f"took {sum(seconds):.3f} s ({sum(seconds) / loop:.1%} of the loop; "
                  f"full ones {seconds[2]:.3f} s)")


if __name__ == "__main__":
    main()
