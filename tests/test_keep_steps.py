"""A loop's first steps recorded whole, the rest uninstrumented (worker/window.py's
keep_steps): the program's results and output are plain TensorFlow's, every step keeps its
summary (loss and gradient norms, checked against the plain run's gradients), and the
recording says which steps ran uninstrumented. The slow test types the eager guide's MNIST
loop into a real worker with the debugger's limits."""
import contextlib
import io
import math
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tapeviz.recording import Recording, as_float  # noqa: E402
from tapeviz.worker import recorder, window  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent

LOOP = textwrap.dedent("""
    import tensorflow as tf
    w = tf.Variable([1.0, 2.0])
    b = tf.Variable(0.5)
    history = []
    for step in range(10):
        x = tf.constant([float(step), 1.0])
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(w * x) + b * b
        grads = tape.gradient(loss, [w, b, x])
        w.assign_sub(0.01 * grads[0])
        b.assign_sub(0.01 * grads[1])
        history.append((float(loss), [g.numpy() for g in grads]))
        print(step, float(loss))
    with tf.GradientTape() as after:
        y = w * w
    dy = after.gradient(y, w)
    print(dy.numpy())
""").lstrip()


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def run_plain(source: str) -> tuple:
    namespace = {"__name__": "__main__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "plain.py", "exec"), namespace)
    return namespace, out.getvalue()


def test_a_loops_later_steps_run_uninstrumented_and_keep_their_summaries():
    plain, printed = run_plain(LOOP)
    namespace = {}
    rec = recorder.record(LOOP, namespace=namespace, keep_steps=3)
    assert rec.error is None and rec.stdout == printed
    assert [loss for loss, _ in namespace["history"]] == [loss for loss, _ in plain["history"]]
    loop = line_of(LOOP, "as tape:")
    looped = [t for t in rec.tapes if t.line == loop]
    assert len(looped) == 3                       # the first 3 steps' tapes, recorded whole
    assert all(t.gradients and t.ops for t in looped)
    # The ops of the loss line are those 3 steps' only: the later ones ran unrecorded
    loss_ops = [op for op in rec.ops if op.line == line_of(LOOP, "loss = ")]
    assert {t for op in loss_ops for t in op.tapes} == {t.id for t in looped}
    # The tape after the loop records again
    (after,) = [t for t in rec.tapes if t.line == line_of(LOOP, "as after:")]
    assert after.ops and after.gradients[0].results[0].grad is not None
    # Every step's summary: its loss and each gradient's norm, as the plain run had them
    steps = [s for s in rec.steps if s.line == line_of(LOOP, "tape.gradient")]
    assert len(steps) == 10
    assert len({s.tape for s in steps}) == 10
    assert not {s.tape for s in steps[3:]} & {t.id for t in rec.tapes}
    for s, (loss, grads) in zip(steps, plain["history"]):
        assert s.scalar and as_float(s.target) == loss
        want = [math.sqrt(float(np.sum(np.square(g, dtype=np.float64)))) for g in grads]
        assert [as_float(n) for n in s.norms] == pytest.approx(want, rel=1e-6)
        assert s.none == [] and s.error is None
    # The same sources name every step's norms (x, made anew each step, keeps its series)
    names = [[rec.step_sources[i].name for i in s.sources] for s in steps]
    assert names == [["w", "b", "x"]] * 10
    assert rec.skipped["loop_tapes"] == 10 and rec.skipped["recorded"] == 3
    assert rec.skipped["note"] == (f"steps 4–10 of the loop at line {loop} ran uninstrumented: "
                                   "their losses and gradient norms are charted, their ops are "
                                   "not drawn")
    assert rec.tapes_opened("program.py", loop) == 10
    assert Recording.from_json(rec.to_json()).to_dict() == rec.to_dict()


def test_without_keep_steps_every_step_is_recorded():
    rec = recorder.record(LOOP)
    assert len([t for t in rec.tapes if t.line == line_of(LOOP, "as tape:")]) == 10
    assert rec.skipped == {}


def test_a_loop_stops_recording_once_its_steps_fill_most_of_the_op_bound():
    max_ops = 200
    rec = recorder.record(LOOP, keep_steps=100, max_ops=max_ops)
    loop = line_of(LOOP, "as tape:")
    looped = [t for t in rec.tapes if t.line == loop]
    assert 1 <= len(looped) < 10 and rec.skipped["recorded"] == len(looped)
    # Its last recorded step began under the share, and the next one would have begun past
    # it: the steps recorded are whole, and their ops fit the bound
    (after,) = [t for t in rec.tapes if t.line == line_of(LOOP, "as after:")]
    first = looped[0].ops[0]
    end = max(op.id for op in rec.ops if op.id < after.ops[0]) + 1
    assert looped[-1].ops[0] - first < window.KEEP_OPS_SHARE * max_ops <= end - first
    assert "ops" not in rec.dropped
    assert len([s for s in rec.steps if s.line == line_of(LOOP, "tape.gradient")]) == 10


def test_the_command_line_takes_keep_steps_or_tapes_not_both(tmp_path, capsys):
    from tapeviz.__main__ import main, parse
    assert parse(["record", "main.py", "--keep-steps", "20"]).keep_steps == 20
    assert parse(["record", "main.py"]).keep_steps is None     # the default keep policy's
    program = tmp_path / "main.py"
    program.write_text("print(1)\n")
    assert main(["record", str(program), "--keep-steps", "5", "--tapes", "0:2"]) == 2
    assert "give one" in capsys.readouterr().err


# -- the eager guide's MNIST loop in a real worker, with the debugger's limits -------------------

def mnist_dir():
    """The shared copy of MNIST the tests use; here only its 10k test set is needed."""
    for folder in (os.environ.get("TAPEVIZ_MNIST_DIR"), ROOT.parent / "shared" / "data" / "mnist"):
        if folder and (pathlib.Path(folder) / "t10k-images-idx3-ubyte.gz").is_file():
            return pathlib.Path(folder)
    return None


DIGITS = 4_800


def guide_loop(folder: pathlib.Path) -> str:
    """The seed's MNIST loop as written, but for its data: the first DIGITS of the shared
    copy's 10k test digits are the dataset (150 batches of 32 where the guide takes 400:
    enough for the keep policy's first, sampled and newest steps, and short enough that a
    loaded CI machine finishes inside the debugger's 30 s), read from the IDX files; seeded,
    and printing its loss history at the end, so a plain run is a reference."""
    source = (ROOT / "tests" / "programs" / "eager_guide_mnist.py").read_text()
    load = "(mnist_images, mnist_labels), _ = tf.keras.datasets.mnist.load_data()"
    assert load in source
    reader = textwrap.dedent(f"""
        import gzip
        import numpy as np
        tf.keras.utils.set_random_seed(0)
        tf.config.experimental.enable_op_determinism()
        def idx(name, offset):
          with gzip.open({str(folder)!r} + '/' + name) as f:
            return np.frombuffer(f.read(), np.uint8, offset=offset)
        mnist_images = idx('t10k-images-idx3-ubyte.gz', 16).reshape(-1, 28, 28)[:{DIGITS}]
        mnist_labels = idx('t10k-labels-idx1-ubyte.gz', 8)[:{DIGITS}]""").strip()
    return source.replace(load, reader) + "\nprint()\nprint([float(x) for x in loss_history])\n"


@pytest.mark.slow   # a real worker, and a plain run of the loop in a fresh Python
def test_the_guides_mnist_loop_settles_with_every_step_charted(tmp_path):
    from tapeviz.server import runner
    folder = mnist_dir()
    if folder is None:
        pytest.skip("no shared copy of MNIST (TAPEVIZ_MNIST_DIR)")
    source = guide_loop(folder)
    (tmp_path / "loop.py").write_text(source)
    plain = subprocess.run([sys.executable, "loop.py"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=600)
    assert plain.returncode == 0, plain.stderr[-2000:]
    losses = eval(plain.stdout.splitlines()[-1])      # the list of floats it printed
    pool = runner.Runner(runner.Config(workers=1, warm=0))
    try:
        rec = pool.record(source)                      # as the debugger asks: its limits, its keep_steps
    finally:
        pool.close()
    assert rec["error"] is None, rec["error"]
    assert rec["stdout"] == plain.stdout
    loop = line_of(source, "with tf.GradientTape() as tape:")
    steps = [s for s in rec["steps"] if s["line"] == line_of(source, "tape.gradient")]
    assert [as_float(s["target"]) for s in steps] == losses      # every step, plain TF's loss
    assert len(losses) == math.ceil(DIGITS / 32)
    # each step's gradient norms: a kernel and a bias for each of the 3 layers with weights
    assert all(len(s["norms"]) == 6 and all(n and n > 0 for n in s["norms"]) for s in steps)
    recorded = [t for t in rec["tapes"] if t["line"] == loop]
    # the default keep policy: the first KEEP_STEPS steps whole, and the NEWEST_STEPS newest
    # sampled ones (recorded within a share of the loop's time, the older let go)
    assert len(recorded) == runner.KEEP_STEPS + runner.NEWEST_STEPS
    assert not rec["dropped"].get("ops")
    assert rec["skipped"]["note"].startswith(f"steps {runner.KEEP_STEPS + 1}–")
    assert rec["skipped"]["kept"].startswith(f"steps 1–{runner.KEEP_STEPS}, ")
    assert f"of the loop at line {loop} ran uninstrumented or were dropped" in rec["skipped"]["note"]
    assert Recording.from_dict(rec).tapes_opened("program.py", loop) == len(losses)
