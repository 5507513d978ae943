"""Benchmark: how long the debugger page takes, server side, printed as numbers.

1. From pressing Run to the figure being ready, with a warm worker (TensorFlow already
   imported), for the higher_order and mnist_step examples: the runner's round trip to
   a worker plus graph.build, layout and the plotly figure. The cold worker (paying
   TensorFlow's import) is shown beside it for contrast.
2. Building the figure for recordings of about 1.5k and 15k ops (recorded once, timed
   server side only), as the page opens (a line's repeated ops folded into one node) and
   with Fold loops off (every op a node).

    python bench/bench_debugger.py
"""
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tapeviz import examples  # noqa: E402
from tapeviz.draw import figures, graph, layout  # noqa: E402
from tapeviz.page import view  # noqa: E402
from tapeviz.server import runner  # noqa: E402
from tapeviz.recording import Recording  # noqa: E402

LOOP = """
import tensorflow as tf
x = tf.Variable(1.0)
with tf.GradientTape() as tape:
    y = x
    for i in range(N):
        y = y * 1.0001 + 0.0001
g = tape.gradient(y, x)
"""


def draw(rec: Recording, **options):
    G = graph.build(rec, **options)
    return figures.op_graph(G, layout.layered(G))


def run_to_figure(pool: runner.Runner, source: str) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    rec = Recording.from_dict(pool.record(source))
    t1 = time.perf_counter()
    draw(rec, tape=view.default_tape(rec), group=graph.opens_grouped(rec))
    return t1 - t0, time.perf_counter() - t0, len(rec.ops)


def main():
    config = runner.Config.from_env()
    config.warm = 1
    pool = runner.Runner(config)
    try:
        print("Run -> figure ready (server side), seconds; median of 5 with a warm worker:")
        for name in ("higher_order", "mnist_step"):
            source = examples.load(name).source
            cold_pool = runner.Runner(runner.Config(warm=0))
            try:
                _, cold, _ = run_to_figure(cold_pool, source)
            finally:
                cold_pool.close()
            pool.fill()
            times = []
            for _ in range(5):
                for w in list(pool._idle):       # wait until the spare worker has imported TF
                    w.ready.wait(120)
                times.append(run_to_figure(pool, source))
            rec_s = statistics.median(t[0] for t in times)
            total = statistics.median(t[1] for t in times)
            print(f"  {name:13s} warm {total:5.2f} s (worker {rec_s:4.2f} s, drawing "
                  f"{total - rec_s:4.2f} s, {times[0][2]} ops)   cold {cold:5.2f} s")
        print("Figure build for big recordings (graph + layout + figure), seconds:")
        for n in (1000, 10000):
            rec = Recording.from_dict(pool.record(LOOP.replace("N", str(n // 2)), timeout=120))
            # as the page opens (loops folded), and with Fold loops off: every op a node
            for options in ({"tape": 0}, {"tape": 0, "call": 0},
                            {"tape": 0, "fold": False}, {"tape": 0, "call": 0, "fold": False}):
                t0 = time.perf_counter()
                G = graph.build(rec, **options)
                flow = graph.flow_norms(rec, 0, 0, G) if "call" in options else None
                t1 = time.perf_counter()
                pos = layout.layered(G)
                t2 = time.perf_counter()
                figures.op_graph(G, pos, flow=flow)
                t3 = time.perf_counter()
                what = ("gradient flow" if flow else "op graph") + (
                    ", unfolded" if options.get("fold") is False else "")
                print(f"  {len(rec.ops):6d} ops, {what:23s}: {t3 - t0:5.2f} s "
                      f"(graph {t1 - t0:.2f}, layout {t2 - t1:.2f}, figure {t3 - t2:.2f}; "
                      f"{G.number_of_nodes()} nodes)")
    finally:
        pool.close()


if __name__ == "__main__":
    main()
