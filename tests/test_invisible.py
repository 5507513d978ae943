"""The recorder is invisible: a program recorded (in-process, through `tapeviz.capture()`, and
through the worker with `python -m tapeviz record`) frees what it lets go of, closes every
tape, and prints what plain Python prints. The reference is always the same program run
plainly; TensorFlow's own checkers (`test_util.assert_no_new_tensors`,
`assert_no_garbage_created`) and `weakref`s do the counting."""
import json
import os
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow   # every test compares with the program run plainly, in its own process

tf = pytest.importorskip("tensorflow")
from tapeviz.worker import recorder  # noqa: E402

from plain_runs import finished, started  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# A user's shell: none of the TAPEVIZ_ settings of the shell the tests run in.
ENV = dict({k: v for k, v in os.environ.items() if not k.startswith("TAPEVIZ_")},
           PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# The reference and the recording run side by side (plain_runs.started): each returns the
# run started, and calling it waits for its CompletedProcess.

def plain_run(tmp_path, name: str, text: str, *args, env=ENV):
    """`python NAME ARGS` in tmp_path: the reference."""
    (tmp_path / name).write_text(text)
    return started([sys.executable, name, *args], cwd=tmp_path, env=env, timeout=300)


def program_part(stderr: str) -> str:
    """stderr without the lines TensorFlow's C++ logging writes at import (timestamped)."""
    return "".join(line for line in stderr.splitlines(True)
                   if not line.startswith(("I0000 ", "WARNING: All log messages before absl")))


def cli_record(tmp_path, name: str, *args, flags=(), env=ENV):
    """`python -m tapeviz record FLAGS -o run.json NAME -- ARGS` in tmp_path."""
    return started([sys.executable, "-m", "tapeviz", "record", *flags, "-o", "run.json", name,
                    "--", *args], cwd=tmp_path, env=env, timeout=600)


def in_process(text: str, filename: str):
    """Record `text` in this process, as the worker does; returns (recording, stdout)."""
    rec = recorder.record(text, filename=filename, timeout=300)
    return rec, rec.stdout


# -- every tape closes at its __exit__ ----------------------------------------------------------

TAPES_FREED = src("""
    import gc, weakref
    import tensorflow as tf
    from tensorflow.python.eager import backprop
    x = tf.random.normal([200_000])
    small = tf.constant([1.0, 2.0])
    refs = []
    for step in range(3):
        with backprop.GradientTape(persistent=True) as tape:
            tape.watch(x)
            tape.watch(small)
            y = tf.exp(x)
            z = small * 3.0
        tape.gradient(y, x)
        tape.gradient(z, small)
        refs.append(weakref.ref(y))
        refs.append(weakref.ref(z))
        del tape, y, z
    gc.collect()
    print("tape outputs freed:", [r() is None for r in refs])
""")


def test_a_tape_of_tensorflows_own_class_closes_and_frees_its_tensors(tmp_path):
    reference = plain_run(tmp_path, "tapes.py", TAPES_FREED)
    rec, out = in_process(TAPES_FREED, str(tmp_path / "tapes.py"))
    plain = reference()
    assert plain.returncode == 0 and "False" not in plain.stdout, plain.stderr
    assert rec.error is None and out == plain.stdout
    assert len(rec.tapes) == 3
    assert [t.parent for t in rec.tapes] == [None] * 3, "each tape closed before the next"
    assert all((t.line, t.end_line) == (8, 12) for t in rec.tapes)


# -- nothing outlives the program's own references ----------------------------------------------

CHECKED = src("""
    import unittest
    import tensorflow as tf
    from tensorflow.python.eager import backprop
    from tensorflow.python.framework import test_util


    class Case(unittest.TestCase):      # TensorFlow's checkers decorate a test method
        def runTest(self):
            pass


    @test_util.assert_no_new_tensors
    @test_util.assert_no_garbage_created
    def tape_of_tensorflows_class(self):
        a = tf.constant(2.0, shape=[2, 2])
        with backprop.GradientTape(persistent=True) as tape:
            tape.watch(a)
            b = a * a + 1.0
        print("grad", tape.gradient(b, [a])[0].numpy().tolist())


    @test_util.assert_no_new_tensors
    def small_outputs_and_a_class_per_call(self):
        for step in range(20):
            Layer = type(f"Layer{step}", (), {"scale": tf.constant(float(step))})
            layer = Layer()
            with tf.GradientTape() as tape:
                w = tf.constant([1.0, 2.0, 3.0])
                tape.watch(w)
                loss = tf.reduce_sum(w * layer.scale)
            tape.gradient(loss, w)
        print("loss", float(loss))


    for check in (tape_of_tensorflows_class, small_outputs_and_a_class_per_call):
        try:
            check(Case())
            print(check.__name__, "passed")
        except AssertionError as e:
            print(check.__name__, "failed:", str(e).splitlines()[0][:200])
""")


def test_tensorflows_own_checkers_pass_recorded_in_process(tmp_path):
    reference = plain_run(tmp_path, "checked.py", CHECKED)
    rec, out = in_process(CHECKED, str(tmp_path / "checked.py"))
    plain = reference()
    assert plain.returncode == 0 and plain.stdout.count("passed") == 2, plain.stdout + plain.stderr
    assert rec.error is None and out == plain.stdout
    assert len(rec.tapes) == 21 and all(t.parent is None for t in rec.tapes)


def test_tensorflows_own_checkers_pass_recorded_through_the_worker(tmp_path):
    plain, recorded = finished(plain_run(tmp_path, "checked.py", CHECKED),
                               cli_record(tmp_path, "checked.py"))
    assert plain.returncode == 0 and plain.stdout.count("passed") == 2, plain.stdout + plain.stderr
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == plain.stdout
    rec = json.loads((tmp_path / "run.json").read_text())
    assert len(rec["tapes"]) == 21


# A tensor a function passes to a library call and then deletes: reading the function's
# f_locals to name tensors left a snapshot on its frame that kept the tensor alive (found by
# TensorFlow's forwardprop tests, which weakref a tensor inside a ForwardAccumulator).
DELETED_IN_A_FUNCTION = src("""
    import weakref
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.eager import forwardprop


    def under_an_accumulator():
        x = tf.ones([100])
        x_weak = weakref.ref(x)
        with forwardprop.ForwardAccumulator(x, tf.zeros([100])) as acc:
            y = 2.0 * x
            jvp = acc.jvp(y)
            del x
            return x_weak() is None, float(tf.reduce_sum(jvp))


    def passed_to_a_call():
        x = tf.constant([1.0, 2.0, 3.0])
        x_weak = weakref.ref(x)
        np.testing.assert_allclose(tf.ones([3]) * x, [1.0, 2.0, 3.0])
        del x
        freed = x_weak() is None
        names = sorted(locals())        # the program's own locals() is left as it is
        return freed, names


    print("accumulator:", under_an_accumulator())
    print("call:", passed_to_a_call())
""")


def test_a_tensor_a_function_deletes_is_freed_recorded(tmp_path):
    runs = plain_run(tmp_path, "deleted.py", DELETED_IN_A_FUNCTION), cli_record(tmp_path, "deleted.py")
    rec, out = in_process(DELETED_IN_A_FUNCTION, str(tmp_path / "deleted.py"))
    plain, recorded = finished(*runs)
    assert plain.returncode == 0 and "False" not in plain.stdout, plain.stdout + plain.stderr
    assert rec.error is None and out == plain.stdout
    assert recorded.returncode == 0 and recorded.stdout == plain.stdout, recorded.stderr


# -- the terminal shows what plain Python shows -------------------------------------------------

def test_record_shows_all_output_and_the_traceback_as_plain_python(tmp_path):
    (tmp_path / "helper.py").write_text(src("""
        def f(n):
            x = n * 2
            raise ValueError(f"boom {x}")
    """))
    main = src("""
        import sys
        import helper
        import tensorflow as tf
        for i in range(3000):
            print(f"step {i} " + "x" * 60)
            print(f"log {i} " + "y" * 60, file=sys.stderr)
        print(float(tf.reduce_sum(tf.constant([1.0, 2.0]))))
        helper.f(2)
    """)
    plain, recorded = finished(plain_run(tmp_path, "main.py", main), cli_record(tmp_path, "main.py"))
    assert plain.returncode == 1 and len(plain.stderr) > 200_000
    assert recorded.returncode == plain.returncode
    assert recorded.stdout == plain.stdout
    # the program's stderr whole, traceback included; then tapeviz's own summary lines
    assert program_part(plain.stderr) in program_part(recorded.stderr), recorded.stderr[-2000:]
    assert "tapeviz record: ValueError at helper.py line 3: boom 4" in recorded.stderr
    data = json.loads((tmp_path / "run.json").read_text())
    assert (data["error"]["file"], data["error"]["line"]) == ("helper.py", 3)
    assert [(f["file"], f["line"]) for f in data["error"]["stack"]] == [("main.py", 8),
                                                                         ("helper.py", 3)]
    assert data["stderr"].startswith("[... ") and data["stderr"].endswith(
        plain.stderr[-5000:]), "what the recording stores is bounded, and says so"


def test_a_misspelt_name_is_reported_with_pythons_suggestion_as_plainly(tmp_path):
    """Python 3.11 adds "Did you mean: ...?" to an AttributeError or NameError in its own
    display, not in the traceback module: a recorded program's misspelt Keras name (a real
    Keras 2 program's `tf.keras.losses.mean_squared_error` under Keras 3), raised inside a
    recorded tape and chained to an earlier NameError, reads as plain Python prints it."""
    main = src("""
        import tensorflow as tf
        weights = tf.Variable([1.0, 2.0])
        try:
            totl = 0
            print(totall)
        except NameError:
            with tf.GradientTape() as tape:
                loss = tf.keras.losses.mean_squared_eror(weights, weights * 2.0)
    """)
    plain, recorded = finished(plain_run(tmp_path, "main.py", main), cli_record(tmp_path, "main.py"))
    assert plain.returncode == 1 and "Did you mean: 'totl'?" in plain.stderr
    assert "Did you mean: 'MeanSquaredError'?" in plain.stderr
    assert recorded.returncode == plain.returncode and recorded.stdout == plain.stdout
    assert program_part(plain.stderr) in program_part(recorded.stderr), recorded.stderr[-3000:]


FIT_ON_ARRAYS = src("""
    import numpy as np
    import tensorflow as tf
    import keras
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(32, 3)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(x, y, batch_size=8, epochs=2, verbose=0)   # Keras maps the arrays' batches
    doubled = tf.data.Dataset.from_tensor_slices(x).map(lambda row: row * 2.0)
    print(len(history.history["loss"]), [round(float(v), 1) for v in next(iter(doubled))])
""")


def test_eager_prints_what_plain_python_running_functions_eagerly_prints(tmp_path):
    """`record --eager` is plain Python with tf.config.run_functions_eagerly(True): the
    reference is the program that calls it itself, run plainly. fit() on NumPy arrays maps
    its batches with tf.data, which then warns that the setting does not apply to it: that
    warning is in both."""
    eagerly = "import tensorflow as tf\ntf.config.run_functions_eagerly(True)\n" + FIT_ON_ARRAYS
    (tmp_path / "fit.py").write_text(FIT_ON_ARRAYS)
    plain, recorded = finished(plain_run(tmp_path, "fit_eagerly.py", eagerly),
                               cli_record(tmp_path, "fit.py", flags=["--eager"]))
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert "does not apply to tf.data functions" in plain.stderr, "the reference warns"
    assert recorded.returncode == 0 and recorded.stdout == plain.stdout, recorded.stderr[-2000:]
    said = program_part(recorded.stderr)
    assert said.startswith(program_part(plain.stderr)) and "tapeviz record: ok" in said
    assert said.count("\n") == program_part(plain.stderr).count("\n") + 1, said
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["stderr"] == program_part(plain.stderr)
    assert len(data["tapes"]) == 4 * 2, "one tape per step of fit(), its ops recorded"
    ops = {op["id"]: op["type"] for op in data["ops"]}
    assert "MatMul" in {ops.get(i) for i in data["tapes"][-1]["ops"]}


# -- TensorFlow's C++ logging is the user's ------------------------------------------------------

# Two failing ops caught: TensorFlow's C++ logs a WARNING line for each (at levels 0 and 1)
CAUGHT_OP_ERRORS = src("""
    import os
    import tensorflow as tf
    print("TF_CPP_MIN_LOG_LEVEL:", os.environ.get("TF_CPP_MIN_LOG_LEVEL"))
    for indices in (5, 7):
        try:
            tf.gather(tf.constant([1, 2]), indices)
        except tf.errors.InvalidArgumentError:
            print("caught", indices)
""")
_LOG_PREFIX = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ ", re.M)


def cpp_lines(stderr: str) -> list:
    """TensorFlow's C++ log lines, without their time and thread id."""
    return [line for line in _LOG_PREFIX.sub(r"\1 ", stderr).splitlines()
            if line[:2] in ("I ", "W ", "E ", "F ") or line.startswith("WARNING: All log")]


@pytest.mark.parametrize("level", ["0", "3", None])
def test_tensorflows_cpp_log_lines_are_as_plain_under_the_users_level(tmp_path, level):
    """The user's TF_CPP_MIN_LOG_LEVEL is the worker's, and none where they set none: the
    program sees the same os.environ, and TensorFlow's C++ lines (at import, from the
    zygote; the failed ops' warnings, from the program) are plain Python's."""
    env = {k: v for k, v in ENV.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    plain, recorded = finished(plain_run(tmp_path, "caught.py", CAUGHT_OP_ERRORS, env=env),
                               cli_record(tmp_path, "caught.py", env=env))
    assert (recorded.returncode, recorded.stdout) == (plain.returncode, plain.stdout)
    assert cpp_lines(recorded.stderr) == cpp_lines(plain.stderr)
    warned = [line for line in cpp_lines(plain.stderr) if line.startswith("W ")]
    assert len(warned) == (0 if level == "3" else 2), plain.stderr
    stored = json.loads((tmp_path / "run.json").read_text())["stderr"]
    assert [line for line in cpp_lines(stored) if line.startswith("W ")] == warned


def test_a_hosted_worker_defaults_tensorflows_log_level_a_local_one_keeps_the_users(
        monkeypatch):
    from tapeviz.server import process
    from tapeviz.server.config import Config
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.setenv("TF_CPP_VMODULE", "local_rendezvous=1")
    assert "TF_CPP_MIN_LOG_LEVEL" not in process.worker_env(Config())
    assert process.worker_env(Config())["TF_CPP_VMODULE"] == "local_rendezvous=1"
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert process.worker_env(Config())["TF_CPP_MIN_LOG_LEVEL"] == "0"
    hosted = process.worker_env(Config(mode="hosted"))
    assert hosted["TF_CPP_MIN_LOG_LEVEL"] == "2" and "TF_CPP_VMODULE" not in hosted


# -- never substitute data ----------------------------------------------------------------------

LOAD = src("""
    import numpy as np
    import tensorflow as tf
    (x, y), (xt, yt) = tf.keras.datasets.mnist.load_data()
    print(x.shape, x.dtype, y.shape, xt.shape, yt.dtype, int(x.sum()), int(yt.sum()))
""")


def test_load_data_offline_fails_as_plainly(tmp_path):
    env = {k: v for k, v in ENV.items() if k != "TAPEVIZ_MNIST_DIR"}
    # no Keras cache, no local copy: Keras's own; a home each, as the two run side by side
    homes = [tmp_path / "plain", tmp_path / "recorded"]
    for home in homes:
        home.mkdir()
    plain, recorded = finished(plain_run(tmp_path, "load.py", LOAD, env=dict(env, HOME=str(homes[0]))),
                               cli_record(tmp_path, "load.py", env=dict(env, HOME=str(homes[1]))))
    assert (recorded.returncode, recorded.stdout) == (plain.returncode, plain.stdout)
    if plain.returncode == 0:
        pytest.skip("this machine reaches Keras's download: nothing to compare offline")
    error = json.loads((tmp_path / "run.json").read_text())["error"]
    assert plain.stderr.strip().splitlines()[-1] == f"{error['type']}: {error['message']}"


def test_load_data_is_served_only_with_kerass_own_arrays(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    arrays = {"x_train": rng.integers(0, 256, (60_000, 28, 28), dtype=np.uint8),
              "y_train": rng.integers(0, 10, 60_000, dtype=np.uint8),
              "x_test": rng.integers(0, 256, (10_000, 28, 28), dtype=np.uint8),
              "y_test": rng.integers(0, 10, 10_000, dtype=np.uint8)}
    np.savez(tmp_path / "mnist.npz", **arrays)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))      # no Keras cache
    monkeypatch.setenv("TAPEVIZ_MNIST_DIR", str(tmp_path))
    namespace = {}
    rec = recorder.record(LOAD, namespace=namespace, timeout=300)
    assert rec.error is None
    for name, key in (("x", "x_train"), ("y", "y_train"), ("xt", "x_test"), ("yt", "y_test")):
        np.testing.assert_array_equal(namespace[name], arrays[key], strict=True)
    (served,) = [w for w in rec.warnings if w.get("kind") == "data"]
    assert served["line"] == 3 and "60,000 training" in served["message"]
    # A copy that is not what Keras returns (the 10k test set alone) is not served: the
    # program gets Keras's own answer, here its failure offline
    np.savez(tmp_path / "mnist.npz", x=arrays["x_test"], y=arrays["y_test"])
    try:
        tf.keras.datasets.mnist.load_data()
        plain_error = None
    except Exception as e:
        plain_error = (type(e).__name__, str(e))
    rec = recorder.record(LOAD, timeout=300)
    assert not [w for w in rec.warnings if w.get("kind") == "data"]
    if plain_error is None:
        assert rec.error is None
    else:
        assert (rec.error.type, rec.error.message) == plain_error


# -- never lose a run to size --------------------------------------------------------------------

def tape_loop(steps: int, layers: int, rows: int) -> str:
    """A training loop of `steps` tapes, each `layers` MatMul+Tanh pairs on a rows x 8
    tensor, printing its loss each step."""
    return src(f"""
        import tensorflow as tf
        w = tf.Variable(tf.eye(8) + 0.05 * tf.random.stateless_normal([8, 8], seed=[1, 2]))
        x = tf.random.stateless_normal([{rows}, 8], seed=[3, 4])
        for step in range({steps}):
            with tf.GradientTape() as tape:
                h = x
                for i in range({layers}):
                    h = tf.tanh(h @ w)
                loss = tf.reduce_sum(h * h)
            w.assign_sub(0.01 * tape.gradient(loss, w))
            print(step, f"{{float(loss):.6f}}")
    """)


# Tapes of 20,000 ops on 8x8 tensors (whose values are kept): the newest tape alone, its ops,
# their tensors and its gradient flow, is past the 64 MiB a message may be. Such a run ended
# in "WorkerError: the recording was too large to send back", with nothing recorded.
BIG = tape_loop(steps=2, layers=10_000, rows=8)


def test_a_recording_over_the_message_size_is_cut_not_lost(tmp_path):
    from tapeviz.server import protocol
    # every op of every step (the default keeps a loop's steps that fit the op bound whole)
    plain, recorded = finished(plain_run(tmp_path, "big.py", BIG),
                               cli_record(tmp_path, "big.py", flags=["--all-steps"]))
    assert plain.returncode == 0, plain.stderr
    assert recorded.returncode == 0, recorded.stderr[-2000:]
    assert recorded.stdout == plain.stdout
    raw = (tmp_path / "run.json").read_bytes()
    assert len(raw) <= protocol.MAX_MESSAGE
    rec = json.loads(raw)
    assert rec["error"] is None and rec["stdout"] == plain.stdout
    assert rec["dropped"]["tensors"] > 0, "the byte bound was needed (only it counts tensors)"
    assert len(rec["tapes"]) == 2
    # the newest tape ops stay, in one run up to the last gradient's last op: the update
    # after it, outside any tape, went first
    ids = [op["id"] for op in rec["ops"]]
    assert ids == list(range(ids[0], ids[0] + len(ids))) and len(ids) > 1000
    assert all(op["tapes"] or op["phase"] == "backward" for op in rec["ops"])
    assert rec["ops"][-1]["phase"] == "backward", "the last step's gradient"
    assert rec["dropped"]["ops"] > ids[0], "every op before the kept ones went, and the update"


LOOP = tape_loop(steps=12, layers=25, rows=1)


def test_tapes_whose_ops_the_op_bound_dropped_keep_no_flow(tmp_path):
    reference = plain_run(tmp_path, "loop.py", LOOP)
    rec = recorder.record(LOOP, filename=str(tmp_path / "loop.py"), timeout=300, max_ops=300)
    plain = reference()
    assert rec.error is None and rec.stdout == plain.stdout
    assert len(rec.tapes) == 12 and rec.dropped["ops"] > 0
    kept = {op.id for op in rec.ops}
    flows = [sum(len(c.flow) for c in t.gradients) for t in rec.tapes]
    for tape, flow in zip(rec.tapes, flows):
        assert (flow > 0) == bool(tape.ops), "a flow is kept exactly for tapes with kept ops"
        assert set(tape.ops) <= kept
    assert flows[-1] > 0 and flows[0] == 0
    # every step has the same graph: each emptied tape had the flow the newest has
    assert rec.dropped["flow entries"] == flows[-1] * flows.count(0)
    named = {f.tensor for t in rec.tapes for c in t.gradients for f in c.flow}
    assert named <= {t.id for t in rec.tensors}


# -- the op bound keeps the tapes' ops ahead of the rest ------------------------------------------

PPO = ROOT / "tests" / "programs" / "ppo_rollout.py"


def test_long_rollouts_outside_any_tape_never_empty_the_traced_train_steps(tmp_path):
    """Keras's PPO example's shape: tapes only inside @tf.function train steps, and eager
    rollouts of more ops than the op bound between them. Recorded, it prints what plain
    Python prints, and every traced tape keeps the ops it recorded: the rollouts' go."""
    plain, recorded = finished(plain_run(tmp_path, "ppo.py", PPO.read_text()),
                               cli_record(tmp_path, "ppo.py"))
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert (recorded.returncode, recorded.stdout) == (0, plain.stdout), recorded.stderr[-2000:]
    assert program_part(recorded.stderr).startswith(program_part(plain.stderr))
    rec = json.loads((tmp_path / "run.json").read_text())
    assert rec["dropped"]["ops"] > 0, "the rollouts were past the op bound"
    assert rec["tapes"] and all(t["function"] for t in rec["tapes"]), "traced tapes only"
    kept = {op["id"] for op in rec["ops"]}
    for tape in rec["tapes"]:
        assert tape["ops"] and set(tape["ops"]) <= kept, (tape["line"], tape["ops"])
    for start, end in (span for t in rec["tapes"] for span in t["recording_spans"]):
        assert set(range(start, end)) <= kept, "each traced block whole"


ROLLOUTS_AND_STEPS = src("""
    import tensorflow as tf
    w = tf.Variable([0.5, -0.5])
    state = tf.constant([1.0, 2.0])
    for epoch in range(4):
        for t in range(150):                    # outside any tape
            state = tf.tanh(state * w + 0.1)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum((state * w) ** 2)
        w.assign_sub(0.1 * tape.gradient(loss, w))
    print([round(float(v), 6) for v in w])
""")


def test_the_op_bound_drops_ops_outside_any_tape_first(tmp_path):
    reference = plain_run(tmp_path, "steps.py", ROLLOUTS_AND_STEPS)
    namespace = {}
    rec = recorder.record(ROLLOUTS_AND_STEPS, filename=str(tmp_path / "steps.py"), timeout=300,
                          max_ops=100, namespace=namespace)
    plain = reference()
    assert rec.error is None and rec.stdout == plain.stdout
    assert len(rec.tapes) == 4 and rec.dropped["ops"] > 0 and len(rec.ops) == 100, "full"
    kept = {op.id for op in rec.ops}
    for tape in rec.tapes:
        assert tape.ops and set(tape.ops) <= kept
        (start, end), = tape.recording_spans
        assert set(range(start, end)) <= kept, "each tape's block whole"
    assert [op.id for op in rec.ops] == sorted(kept)
    present = {t.id for t in rec.tensors}
    for op in rec.ops:
        assert set(op.inputs) | set(op.outputs) <= present, "a kept op's tensors stay"
