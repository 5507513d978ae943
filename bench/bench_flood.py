"""Benchmark: what a program flooding its worker's channel costs the server's CPU, printed as
the server's CPU seconds per wall second of the run (the share of a core), for valid stdout
messages of text, and for stdout messages of numbers (refused at the first one). The server
here is this process (the runner's reader threads), in hosted mode, sandboxed when bwrap
works, else unsandboxed (TAPEVIZ_SANDBOX=none).

    python bench/bench_flood.py [SECONDS]
"""
import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tapeviz.server import protocol, runner, sandbox  # noqa: E402

CHANNEL = """
import sys, time
frame = sys._getframe()
while 'channel' not in frame.f_locals:
    frame = frame.f_back
channel = frame.f_locals['channel']
start = time.monotonic()
while time.monotonic() - start < SECONDS:
    channel.send({"type": "stdout", "text": PAYLOAD})
"""
FLOODS = {"text": "'x' * 3_000_000", "numbers": "list(range(400_000))"}


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(seconds: float) -> None:
    env = {"TAPEVIZ_MODE": "hosted", "TAPEVIZ_WORKERS": "1", "TAPEVIZ_WARM": "1",
           "TAPEVIZ_TIMEOUT_S": str(seconds + 20)}
    if not sandbox.probe()[0]:
        env["TAPEVIZ_SANDBOX"] = "none"
    pool = runner.Runner(runner.Config.from_env(env))
    try:
        pool.record("print(1)\n")                    # a warm worker, so the runs below time the flood
        for name, payload in FLOODS.items():
            program = CHANNEL.replace("SECONDS", str(seconds)).replace("PAYLOAD", payload)
            c0, t0 = cpu(), time.monotonic()
            rec = pool.record(program, timeout=seconds + 20)
            c1, t1 = cpu(), time.monotonic()
            error = rec["error"]["type"] if rec["error"] else "none"
            print(f"{name:8s} flood: server CPU {c1 - c0:5.2f} s over {t1 - t0:5.1f} s of run = "
                  f"{(c1 - c0) / (t1 - t0):.2f} of a core (error: {error}); the budget reads "
                  f"{protocol.OUTPUT_BYTES_PER_S / 2**20:.0f} MiB/s past the first "
                  f"{protocol.MAX_MESSAGE // 2**20} MiB")
    finally:
        pool.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seconds", nargs="?", type=float, default=10.0,
                        help="how long each flood runs (default 10)")
    main(parser.parse_args().seconds)
