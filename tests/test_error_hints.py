"""Error hints from the recorder: Python's own name suggestion kept, PyTorch imports, and
a loop over a dataset stopped at its time limit."""
import subprocess
import sys

import pytest

pytest.importorskip("tensorflow")

from tapeviz import examples  # noqa: E402
from tapeviz.words import hints  # noqa: E402
from tapeviz.worker import recorder  # noqa: E402


def python_says(source: str) -> str:
    """The reference: the last line of Python's own traceback for the program run plainly."""
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True)
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.slow   # plain Python, the reference, runs as a program of its own
def test_name_error_keeps_pythons_did_you_mean():
    program = "dy_dx = 3.0\nprint(dy_dz)\n"
    rec = recorder.record(program)
    assert rec.error.type == "NameError" and rec.error.line == 2
    reference = python_says(program)
    assert reference.endswith("Did you mean: 'dy_dx'?")
    assert rec.error.message.endswith("Did you mean: 'dy_dx'?")
    assert "`dy_dx`" in rec.error.hint


@pytest.mark.slow   # plain Python, the reference, runs as a program of its own
def test_name_error_without_a_close_name_has_no_suggestion():
    rec = recorder.record("print(zzz_unknown)\n")
    assert "Did you mean" not in python_says("print(zzz_unknown)\n")
    assert "Did you mean" not in rec.error.message


def test_import_torch_gets_the_tape_version():
    import importlib.util
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("PyTorch is installed here: its import succeeds, so there is no hint to give")
    rec = recorder.record("import torch\nx = torch.tensor(1.0)\n")
    assert rec.error.type == "ModuleNotFoundError" and rec.error.line == 1
    assert rec.error.hint == hints.TORCH_HINT


def test_timeout_in_a_loop_over_a_dataset_suggests_take():
    program = ("import tensorflow as tf\nds = tf.data.Dataset.range(10**9)\n"
               "for x in ds:\n    y = x * 2\n")
    rec = recorder.record(program, timeout=2)
    assert rec.error.type == "Timeout"
    assert "dataset.take(3)" in rec.error.hint
    assert rec.ops, "the steps before the stop are kept"


def test_timeout_elsewhere_keeps_the_general_hint():
    rec = recorder.record("while True:\n    pass\n", timeout=1)
    assert rec.error.type == "Timeout" and "take(" not in rec.error.hint


INPUT = "import subprocess\nprint(repr(subprocess.run(['cat'], capture_output=True).stdout))\n" \
        "name = input('name? ')\nprint('hi', name)\n"


@pytest.mark.slow   # plain Python, the reference, runs as a program of its own
def test_input_meets_the_end_of_its_input_at_once_as_with_no_keyboard():
    """The reference: the same program under plain Python with its stdin at its end (a
    browser has no keyboard). Before, input() waited on the worker's job channel until the
    time limit, whose hint then blamed a loop."""
    plain = subprocess.run([sys.executable, "-c", INPUT], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True)
    assert plain.stderr.strip().endswith("EOFError: EOF when reading a line")
    rec = recorder.record(INPUT, timeout=20)
    assert rec.stdout == plain.stdout                 # a child process met the end too
    assert (rec.error.type, rec.error.line) == ("EOFError", 3)
    assert "`input()`" in rec.error.hint and "keyboard" in rec.error.hint


@pytest.mark.slow   # a Runner's worker
def test_input_in_a_forked_worker_does_not_wait_for_the_time_limit():
    from tapeviz.server.runner import Config, Runner
    runner = Runner(Config(warm=1))
    try:
        rec = runner.record(INPUT, timeout=20)
    finally:
        runner.close()
    assert rec["error"]["type"] == "EOFError", rec["error"]


def test_other_eof_errors_get_no_input_hint():
    rec = recorder.record("import io, pickle\npickle.load(io.BytesIO(b''))\n")
    assert rec.error.type == "EOFError" and rec.error.hint is None


def test_a_program_of_constants_is_told_what_it_did():
    said = hints.no_graph_note(None, 0)
    assert "tf.constant" in said and "no op" in said and "ran no TensorFlow op" not in said
    assert "stopped" in hints.no_graph_note("ValueError", 0)


NOT_PERSISTENT = "A non-persistent GradientTape can only be used to compute one set of gradients"


def test_asking_a_tape_twice_is_explained_in_the_programs_own_names():
    # one target, two sources: one call gives both, written with the student's names
    program = ("w = tf.Variable(2.0)\nb = tf.Variable(1.0)\nwith tf.GradientTape() as g:\n"
               "    z = w * 3.0 + b\ndz_dw = g.gradient(z, w)\ndz_db = g.gradient(z, b)\n")
    hint = hints.error_hint("RuntimeError", NOT_PERSISTENT, "dz_db = g.gradient(z, b)", program)
    assert "`g.gradient(z, [w, b])`" in hint and "`del g`" in hint
    # two targets: a persistent tape, and what it is asked for
    lesson = examples.load("nonpersistent_error").source
    hint = hints.error_hint("RuntimeError", NOT_PERSISTENT, "dy_dx = tape.gradient(y, x)", lesson)
    assert "persistent=True" in hint and "dz/dx and dy/dx" in hint and "[" not in hint
    # the calls cannot be read back: the general hint
    assert hints.error_hint("RuntimeError", NOT_PERSISTENT, "", "") == hints.NONPERSISTENT_HINT


def test_an_integer_source_is_told_its_own_line_as_a_float():
    from tapeviz.words import reasons
    from tapeviz.recording import Tape, Tensor
    program = "import tensorflow as tf\nw = tf.Variable(2)\n"
    w = Tensor(id=1, name="w", shape=[], dtype="int32", kind="variable", line=2)
    said = reasons.none_reason(ops=[], tensors={1: w}, tape=Tape(0, 3, False, True, None), targets=[2], source=1,
                               program=program)
    assert "`w = tf.Variable(2.0)`" in said and "tf.constant(3.0)" not in said
    # a line that did not make it (another file's line numbers): the general advice
    elsewhere = Tensor(id=1, name="w", shape=[], dtype="int32", kind="variable", line=1)
    said = reasons.none_reason(ops=[], tensors={1: elsewhere}, tape=Tape(0, 3, False, True, None), targets=[2],
                               source=1, program=program)
    assert "tf.constant(3.0)" in said


def test_mnist_offline_says_how_to_give_tapeviz_a_local_copy(tmp_path, monkeypatch):
    """Offline, with no Keras cache and no TAPEVIZ_MNIST_DIR, `mnist.load_data()` fails in
    Keras's own words, and the hint names both ways to give it a copy."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("TAPEVIZ_MNIST_DIR", raising=False)
    rec = recorder.record("import tensorflow as tf\n"
                          "(x, y), _ = tf.keras.datasets.mnist.load_data()\n", timeout=120)
    if rec.error is None:
        pytest.skip("this machine reaches Keras's download")
    assert "URL fetch failure" in rec.error.message and rec.error.line == 2
    assert rec.error.hint == hints.MNIST_OFFLINE_HINT
    assert "TAPEVIZ_MNIST_DIR" in rec.error.hint and "~/.keras/datasets/mnist.npz" in rec.error.hint
