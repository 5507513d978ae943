"""Benchmark: variants of the op callback, A/B in one recorded run of the CNN loop.

The machine's speed drifts by up to 2x between processes, which hides changes of 10-20%
in the loop ratio of bench_record_cli.py. Here the variants take turns, in blocks of a few
steps, inside one process and one recording, so drift hits them alike; each prints its
median block time against the first variant's. Variants:
  plain     no op callback, and the instrumented tape passes every call straight to
            TensorFlow's: the loop as it runs unrecorded, for recorded / plain in one process
  noop      the callback returns at once (TensorFlow's cost of calling it stays)
  walk      only the walk out to the user's frame and its line
  lean      the user's line, the TF ids of inputs and outputs, the scope, one tuple kept in
            a bounded deque: the floor of a callback that builds records later
  leantapes lean, and each op put on the tapes as the full recorder does, so the tapes and
            the gradient flow cost what they cost in full: the floor of a callback that
            builds records later but keeps every promise of the recording
  full      the recorder as it is
  nostats   full, but no tensor is described (no held tensors, no stats jobs)
  notapes   full, but no op is put on a tape
  noflow    full, but gradient calls ask TensorFlow for no gradient flow (no intermediate
            gradients, no norms of them)

What lives in the process (records, held tensors) is shared by all variants, so costs
that come from the recording's size show in none of them. `--fresh ROUNDS` measures those:
each round runs the program plainly (no tapeviz at all) and then each variant alone through
the whole loop, each in a fresh process of its own, and prints each variant's ratio to the
plain run of its round, the median over the rounds and their spread.

    python bench/bench_ab.py [--loop cnn|small] [--variants noop,lean,full] [--blocks 60]
                             [--block-steps 4] [--fresh ROUNDS]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_record_cli import SMALL  # noqa: E402
from bench_recorder import LOOP  # noqa: E402

# A loop's set-up, and the statement that runs one of its steps
LOOPS = {"cnn": (LOOP, "train_step(images, labels)"),
         "small": (SMALL, "train(model, x, y, 0.1)")}


def blocks(loop: str) -> str:
    """The loop, in blocks: before each block it tells the harness whose turn it is."""
    source, step = LOOPS[loop]
    return source.split("for _ in range(WARMUP):")[0] + f"""
import sys
turn, take_turn = 0, sys._tapeviz_ab_turn
for _ in range(5):
    {step}
for block in range(BLOCKS):
    take_turn(block)
    start = time.perf_counter()
    for _ in range(BLOCK_STEPS):
        {step}
    take_turn(block, time.perf_counter() - start)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", default="cnn", choices=sorted(LOOPS))
    parser.add_argument("--variants", default="noop,lean,full")
    parser.add_argument("--blocks", type=int, default=60)
    parser.add_argument("--block-steps", type=int, default=4)
    parser.add_argument("--fresh", type=int, metavar="ROUNDS",
                        help="each variant alone in fresh processes, against plain runs")
    parser.add_argument("--alone", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fresh:
        fresh(args)
    elif args.alone and args.variants == "plain":
        alone_plain(args)
    else:
        by_turns(args)


def program_text(args) -> str:
    return (blocks(args.loop).replace("BLOCKS", str(args.blocks))
            .replace("BLOCK_STEPS", str(args.block_steps)))


def fresh(args) -> None:
    """Each variant alone, in a process of its own, as `--alone` runs it; each round runs
    the plain program first and the variants after it in turn, in fresh processes."""
    names = [n for n in args.variants.split(",") if n != "plain"]
    steps = args.blocks * args.block_steps
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")

    def run(variant: str) -> float:
        out = subprocess.run([sys.executable, __file__, "--alone", "--loop", args.loop,
                              "--variants", variant, "--blocks", "1",
                              "--block-steps", str(steps)],
                             env=env, capture_output=True, text=True, check=True).stdout
        return float(out.split("LOOP_SECONDS")[1].split()[0])

    ratios = {name: [] for name in names}
    print(f"{args.loop}: {steps} steps, each variant alone in a fresh process, against a "
          "fresh plain run (no tapeviz) in the same round:")
    for i in range(args.fresh):
        base = run("plain")
        line = [f"  round {i + 1}: plain {base:6.2f} s"]
        for name in names:
            seconds = run(name)
            ratios[name].append(seconds / base)
            line.append(f"{name} {seconds / base:.2f}x")
        print(", ".join(line), flush=True)
    for name in names:
        r = ratios[name]
        print(f"  {name:9s} median {statistics.median(r):.2f}x [{min(r):.2f}-{max(r):.2f}]")


def alone_plain(args) -> None:
    """The same program, with TensorFlow's own tape and no tapeviz in the process."""
    seconds = []

    def take_turn(block, elapsed=None):
        if elapsed is not None:
            seconds.append(elapsed)
    sys._tapeviz_ab_turn = take_turn
    exec(compile(program_text(args), "ab_loop.py", "exec"), {"__name__": "__main__"})
    print("LOOP_SECONDS", sum(seconds))


def by_turns(args) -> None:
    names = args.variants.split(",")

    from tapeviz.worker import recorder
    from tapeviz.worker.capture import gradients, ops, session as session_mod, tensors
    from tapeviz.worker.frames import nearest_user_frame

    now = {"variant": "full", "session": None}
    times = {name: [] for name in names}
    kept = deque(maxlen=20_000)

    full_on_op = ops.OpsAndTapes.on_op
    full_describe = tensors.TensorsAndNames.describe
    full_which_tapes = ops.OpsAndTapes.which_tapes
    full_between = gradients.GradientsAndAlerts.between
    full_init = session_mod.Session.__init__
    full_tape_class = recorder.make_tape_class

    def tape_class(session):
        cls = full_tape_class(session)
        tracked = cls._tracked
        cls._tracked = lambda tape: now["variant"] != "plain" and tracked(tape)
        return cls

    def lean(self, op_type, inputs, attrs, outputs, op_name=None, graph=None):
        if graph is not None or self.quiet:
            return None
        frame, here = nearest_user_frame(sys._getframe(1), self.files)
        kept.append((op_type, [t._id for t in inputs], [t._id for t in outputs],
                     frame.f_lineno if frame is not None else None, here,
                     self.eager_thread.scope_name))
        return None

    def lean_tapes(self, op_type, inputs, attrs, outputs, op_name=None, graph=None):
        if graph is not None or self.quiet:
            return None
        lean(self, op_type, inputs, attrs, outputs, op_name, graph)
        self.next_op += 1            # which_tapes lists the op being recorded as next_op - 1
        if self.active:
            name = op_type.decode() if op_type.__class__ is bytes else op_type
            self.which_tapes(inputs, outputs, ops.function_call(name)[1] == "forward")
        return None

    def on_op(self, *a, **k):
        variant = now["variant"]
        if variant == "noop":
            return None
        if variant == "walk":
            if not self.quiet:
                frame, _ = nearest_user_frame(sys._getframe(1), self.files)
                if frame is not None:
                    frame.f_lineno
            return None
        if variant == "lean":
            return lean(self, *a, **k)
        if variant == "leantapes":
            return lean_tapes(self, *a, **k)
        return full_on_op(self, *a, **k)

    def describe(self, rec, t):
        if now["variant"] != "nostats":
            full_describe(self, rec, t)

    def which_tapes(self, *a):
        return [] if now["variant"] == "notapes" else full_which_tapes(self, *a)

    def between(self, *a):
        return [] if now["variant"] == "noflow" else full_between(self, *a)

    def init(self, *a, **k):
        full_init(self, *a, **k)
        now["session"] = self

    def take_turn(block, seconds=None):
        if seconds is not None:
            times[now["variant"]].append(seconds)
            return
        deferred = now["session"].deferred      # the last turn's stats jobs end first
        while not args.alone and not deferred.idle():
            time.sleep(0.01)
        window = now["window"]
        variant = now["variant"] = names[block % len(names)]
        window._switch(variant != "plain")      # plain: no op callback at all

    full_window_init = recorder.TapeWindow.__init__

    def window_init(self, session, tapes):
        full_window_init(self, session, tapes)
        now["window"] = self

    recorder.TapeWindow.__init__ = window_init
    recorder.make_tape_class = tape_class
    ops.OpsAndTapes.on_op = on_op
    ops.OpsAndTapes.which_tapes = which_tapes
    gradients.GradientsAndAlerts.between = between
    tensors.TensorsAndNames.describe = describe
    session_mod.Session.__init__ = init
    sys._tapeviz_ab_turn = take_turn
    rec = recorder.record(program_text(args), filename="ab_loop.py", timeout=None)
    if rec.error is not None:
        raise SystemExit(f"the recorded loop failed: {rec.error}")
    if args.alone:
        print("LOOP_SECONDS", sum(times[names[0]]))
        return
    base = statistics.median(times[names[0]])
    print(f"median time of a {args.block_steps}-step block, {args.blocks // len(names)} blocks "
          f"each, against {names[0]}:")
    for name in names:
        median = statistics.median(times[name])
        print(f"  {name:9s} {median * 1000:7.1f} ms  {median / base:5.2f}x  "
              f"[{min(times[name]) / base:.2f}-{max(times[name]) / base:.2f}]")


if __name__ == "__main__":
    main()
