"""The default keep policy (worker/keep.py): every step keeps its summary; a loop's first
steps, its newest sampled steps and its anomalous steps keep their ops, their gradients
plain TensorFlow's; the old "every op of every step" is a flag away."""
import json
import math
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tapeviz.recording import as_float  # noqa: E402
from tapeviz.worker import recorder  # noqa: E402
from tapeviz.worker.keep import Keep  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent

LOOP = textwrap.dedent("""
    import tensorflow as tf
    w = tf.Variable([1.0, -2.0, 0.5])
    history = []
    for step in range(STEPS):
        x = tf.constant([float(step % 7), 1.0, -1.0])
        if step == NAN_AT:
            x = tf.constant([float("nan"), 1.0, -1.0])
        with tf.GradientTape() as tape:
            y = tf.tanh(w * x)
            loss = tf.reduce_sum(y * y)
        grad = tape.gradient(loss, w)
        w.assign_sub(0.01 * grad)
        history.append((float(loss), grad.numpy()))
""").lstrip()


def loop(steps: int, nan_at: int = -1) -> str:
    return LOOP.replace("STEPS", str(steps)).replace("NAN_AT", str(nan_at))


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def plain_history(source: str) -> list:
    namespace = {"__name__": "__main__"}
    exec(compile(source, "plain.py", "exec"), namespace)
    return namespace["history"]


def kept_steps(rec, source: str) -> dict:
    """Step number -> the loop's tape kept whole for it (a step's number is its gradient
    call's: one call a step)."""
    at = line_of(source, "as tape:")
    number = {s.tape: s.call for s in rec.steps}
    return {number[t.id]: t for t in rec.tapes if t.line == at}


def test_kept_steps_are_the_first_the_newest_and_their_gradients_plain_tfs():
    source = loop(600)
    history = plain_history(source)
    rec = recorder.record(source, keep=Keep(first=3, newest=2, anomalies=2))
    assert rec.error is None
    assert [as_float(s.target) for s in rec.steps] == [loss for loss, _ in history]
    kept = kept_steps(rec, source)
    assert sorted(kept)[:3] == [0, 1, 2] and len(kept) == 5
    newest = sorted(kept)[3:]
    # sampled within a share of the loop's time, the older samples let go: late in the loop
    assert newest[0] > 2 and newest[-1] >= 600 / 2
    tensors = {t.id: t for t in rec.tensors}
    for number, tape in kept.items():
        (call,) = tape.gradients
        grad = tensors[call.results[0].grad]
        np.testing.assert_array_equal(np.array(grad.value, np.float32), history[number][1])
        assert tape.ops, "its ops kept whole"
    # only kept steps' ops are in the recording: the dropped samples' went with them
    kept_ids = {t.id for t in kept.values()}
    assert {i for op in rec.ops for i in op.tapes} <= kept_ids
    assert rec.skipped["recorded"] == 5 and rec.skipped["loop_tapes"] == 600
    assert rec.skipped["kept"] == "steps " + ", ".join(
        ["1–3"] + [f"{n + 1}" for n in newest[:-1]]) + f" and {newest[-1] + 1}"


def test_a_nan_in_the_middle_of_a_long_loop_is_kept_whole():
    source = loop(1500, nan_at=700)
    history = plain_history(source)
    # no time limit: a loaded machine took longer than the default 30 s for 1,500 steps
    rec = recorder.record(source, timeout=None, keep=Keep(first=3, newest=2, anomalies=2))
    assert rec.error is None, rec.error
    kept = kept_steps(rec, source)
    # The check finds the NaN at step 700. Recorded (sampled), it is kept; else the loop
    # records the next step, NaN too (the update made w NaN), and keeps it: two anomalous
    # steps kept whole, the policy's `anomalies`, right where the NaN appeared
    at_nan = sorted(n for n in kept if 700 <= n < 710)
    assert len(at_nan) == 2 and at_nan[0] in (700, 701), sorted(kept)
    assert all(math.isnan(as_float(rec.steps[n].target)) for n in range(700, 1500))
    assert all(math.isnan(history[n][0]) for n in at_nan)
    tensors = {t.id: t for t in rec.tensors}
    for n in at_nan:
        (call,) = kept[n].gradients
        assert tensors[call.results[0].grad].stats.nan, "its NaN gradient, with its stats"
        assert kept[n].ops
    nan_ops = {a.op for a in rec.alerts if a.kind == "nan"}
    assert nan_ops & set(kept[at_nan[0]].ops), "a NaN alert names an op of the kept step"
    assert all(not math.isnan(as_float(rec.steps[n].target)) for n in range(700))


def test_keep_steps_alone_keeps_the_old_first_steps_only():
    source = loop(200)
    rec = recorder.record(source, keep_steps=4)
    assert sorted(kept_steps(rec, source)) == [0, 1, 2, 3]
    assert rec.skipped["note"].startswith("steps 5–200 of the loop at line ")


@pytest.mark.slow   # the command line: a real worker
def test_record_all_steps_records_every_step_and_the_default_does_not(tmp_path):
    source = loop(60)
    program = tmp_path / "loop.py"
    program.write_text(source)
    counts = {}
    for flags in ([], ["--all-steps"]):
        out = tmp_path / "out.json"
        result = subprocess.run([sys.executable, "-m", "tapeviz", "record", str(program),
                                 "-o", str(out), *flags], capture_output=True, text=True,
                                cwd=ROOT, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        rec = json.loads(out.read_text())
        assert len(rec["steps"]) == 60
        counts[bool(flags)] = len([t for t in rec["tapes"] if t["line"] == line_of(source, "as tape:")])
        assert bool(rec["skipped"]) is not bool(flags)
    assert counts[True] == 60 and counts[False] < 60
    result = subprocess.run([sys.executable, "-m", "tapeviz", "record", str(program),
                             "--all-steps", "--keep-steps", "3"], capture_output=True,
                            text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 2 and "give one" in result.stderr


@pytest.mark.slow   # the command line, a real worker, a minute of MNIST
def test_the_seeds_mnist_epochs_cut_at_their_limit_keep_every_summary_and_the_newest_steps(tmp_path):
    import os
    folder = os.environ.get("TAPEVIZ_MNIST_DIR") or str(ROOT.parent / "shared" / "data" / "mnist")
    if not (pathlib.Path(folder) / "t10k-images-idx3-ubyte.gz").is_file():
        pytest.skip("no shared copy of MNIST (TAPEVIZ_MNIST_DIR)")
    program = ROOT / "tests" / "programs" / "seed_mnist_epochs.py"
    out = tmp_path / "run.json"
    result = subprocess.run([sys.executable, "-m", "tapeviz", "record", str(program), "-o",
                             str(out), "--timeout", "20"], capture_output=True, text=True,
                            cwd=tmp_path, env=dict(os.environ, TAPEVIZ_MNIST_DIR=folder,
                                                       PYTHONPATH=str(ROOT)),
                            timeout=600)
    assert result.returncode == 1 and "Timeout" in result.stderr     # as before: stopped
    rec = json.loads(out.read_text())
    assert rec["error"]["type"] == "Timeout" and rec["cut_short"]["why"] == "timeout"
    steps = rec["steps"]
    assert len(steps) > 30 and [s["call"] for s in steps] == list(range(len(steps)))
    assert all(len(s["norms"]) == 6 and all(n > 0 for n in s["norms"]) for s in steps[:-1])
    kept = sorted(n for n, s in enumerate(steps) if s["tape"] in {t["id"] for t in rec["tapes"]})
    assert kept[:20] == list(range(20)) and len(kept) > 20
    assert kept[-1] >= len(steps) * 0.6, "the newest steps kept whole are late in the run"
