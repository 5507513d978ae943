"""Benchmark: what the stats of one big tensor cost, the stats thread's unit of work.

Times `numerics.stats` on an activation of the eager CNN loop's first Conv2D (32x26x26x16
float32, ReLU'd random values) and, inside it, the sums (`numerics._sums`); beside them,
one NumPy pass over the same tensor (`max`), the floor any stats need. Prints the mean per
call over `--reps` calls and each as a multiple of that pass. No TensorFlow.

    python bench/bench_stats.py [--reps 300]

Run it from an older checkout to compare (the file uses no newer API than `stats`).
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tapeviz.worker import numerics  # noqa: E402


def per_call(fn, reps: int) -> float:
    fn()                                    # warm: first-touch pages, NumPy's dispatch
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    activation = np.maximum(rng.standard_normal((32, 26, 26, 16), dtype=np.float32), 0)
    flat = activation.reshape(-1)
    floor = per_call(lambda: flat.max(), args.reps)
    print(f"a {'x'.join(map(str, activation.shape))} float32 activation, mean of "
          f"{args.reps} calls:")
    for name, fn in (("numerics.stats", lambda: numerics.stats(activation)),
                     ("  its sums (_sums)", lambda: numerics._sums(flat)),
                     ("one NumPy pass (max)", lambda: flat.max())):
        seconds = per_call(fn, args.reps)
        print(f"  {name:22s} {seconds * 1e6:7.1f} us  {seconds / floor:5.1f} passes")


if __name__ == "__main__":
    main()
