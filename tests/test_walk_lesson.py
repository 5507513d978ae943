"""The lessons of the guide's training loop and TF1 contrast, said on the page as it opens:
real recordings made in-process, their numbers checked against plain TensorFlow's."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tapeviz import examples  # noqa: E402
from tapeviz.draw import graph  # noqa: E402
from tapeviz.draw.options import View  # noqa: E402
from tapeviz.words import eager_mode, values  # noqa: E402
from tapeviz.state import callouts, view  # noqa: E402
from tapeviz.worker import recorder  # noqa: E402
from plain_runs import program, run_plain  # noqa: E402

TAPE_IN_A_TF_FUNCTION = program("tape_in_a_tf_function")

LINEAR = """import tensorflow as tf
xs = tf.constant([-1.0, 0.0, 1.0, 2.0])
ys = xs * 3.0 + 2.0
W = tf.Variable(5.0)
B = tf.Variable(10.0)
losses = []
for step in range(4):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(xs * W + B - ys))
    dW, dB = tape.gradient(loss, [W, B])
    W.assign_sub(0.1 * dW)
    B.assign_sub(0.1 * dB)
    losses.append(float(loss))
"""

TF1 = """import tensorflow as tf
g = tf.Graph()
with g.as_default():
    a = tf.compat.v1.placeholder(tf.float32, shape=())
    b = tf.compat.v1.placeholder(tf.float32, shape=())
    c = a * b
    with tf.compat.v1.Session(graph=g) as sess:
        print(sess.run(c, feed_dict={a: 3.0, b: 4.0}))
print(tf.constant(3.0) * tf.constant(5.0))
"""


def printed(x) -> str:
    """How `print()` shows a float32 value, escaped as the sentence's markdown writes it."""
    return str(np.array(x, dtype=np.float32)).replace(".", "\\.")


def plain_losses():
    """The linear loop's loss per step, the same program run by plain TensorFlow."""
    return run_plain(LINEAR)[0]["losses"]


def test_a_training_loops_sentence_says_how_its_loss_went_over_the_steps():
    # The loss chart is far below the fold; the sentence above the graph says the trend.
    rec = recorder.record(LINEAR)
    said = view.sentence(rec, callouts.opening(rec)["view"])
    losses = plain_losses()
    assert losses[-1] < losses[0]
    first, last = (values.number_text(x).replace(".", "\\.") for x in (losses[0], losses[-1]))
    assert f"Over the 4 steps recorded, `loss` fell from {first} to {last}." in said


def test_a_tape_opened_once_says_no_trend():
    rec = recorder.record("import tensorflow as tf\nw = tf.Variable(3.0)\nwith tf.GradientTape() as tape:\n"
                          "    y = w * w\ng = tape.gradient(y, w)\n")
    assert "Over the" not in view.sentence(rec, callouts.opening(rec)["view"])


def test_tf1_code_is_said_to_build_a_graph_and_the_eager_line_to_run_at_once():
    rec = recorder.record(TF1)
    said = eager_mode.no_tape_sentence(rec)
    eager = float(tf.constant(3.0) * tf.constant(5.0))     # what the eager line gives
    assert said.startswith("Lines 3–8 are TensorFlow 1's way")
    assert "`sess.run`" in said and "none of them is drawn" in said
    # the number as Python prints the eager result: a float keeps its point ("15.0")
    assert f"line 9's `*` gave {printed(eager)} at once" in said


def test_eager_code_alone_says_nothing_of_tf1():
    rec = recorder.record("import tensorflow as tf\nprint(tf.add(1, 2))\n")
    assert eager_mode.session_sentence(rec) == ""
    said = eager_mode.no_tape_sentence(rec)
    assert said.startswith("Each op ran the moment Python reached it") and "NumPy" not in said


IMMEDIATE = """import numpy as np
import tensorflow as tf
a = tf.constant([[1, 2], [3, 4]])
b = tf.add(a, 1)
doubled = np.multiply(a, 2)
back = a.numpy()
"""


def test_numpy_interop_is_said_since_it_runs_no_op_to_draw():
    rec = recorder.record(IMMEDIATE)
    names, _ = run_plain(IMMEDIATE)
    # the reference: plain TF hands NumPy an array; the recorder saw only tf.add's op
    assert type(names["doubled"]) is np.ndarray and type(names["back"]) is np.ndarray
    assert [op.line for op in rec.ops] == [4]
    said = eager_mode.no_tape_sentence(rec)
    assert "`np.multiply` on line 5 and `.numpy()` on line 6 read tensors as NumPy arrays" in said



def test_a_tape_traced_in_a_tf_function_says_what_each_eager_call_returned():
    # Inside the graph there are no values; each call of the function is one eager op whose
    # answer (d(x²)/dx at 2, at 3) is the lesson, not a blank "grad".
    rec = recorder.record(TAPE_IN_A_TF_FUNCTION)
    said = view.sentence(rec, callouts.opening(rec)["view"])
    names, _ = run_plain(TAPE_IN_A_TF_FUNCTION)
    two, three = (printed(names["grad_of_square"](tf.constant(x)).numpy()) for x in (2.0, 3.0))
    assert (f"Called eagerly on line 8, `grad_of_square(2.0)` returned {two} and on line 9, "
            f"`grad_of_square(3.0)` returned {three}.") in said
    assert "`x`: grad \\(a scalar, computed inside the graph\\)" in said
    assert "graph holds this op," in said



def test_nested_tapes_say_both_derivatives_the_guide_prints():
    program = examples.load("higher_order").source
    rec = recorder.record(program)
    names, _ = run_plain(program)
    first, second = (values.number_text(float(names[n])) for n in ("dy_dx", "d2y_dx2"))
    said = view.sentence(rec, callouts.opening(rec)["view"]).replace("\\", "")
    assert f"so dy/dx = {first} and d²y/dx² = {second} at x = 1." in said


def test_fizzbuzz_s_num_reads_as_its_values_not_a_product():
    """The loop's `num`, drawn once for its steps: "num: 10 values" over their range, where
    "num ×10 = 14" read as a multiplication. The range is that of the numbers it stands for."""
    rec = recorder.record(examples.code("fizzbuzz"))
    G = graph.build(rec, View())
    num = next(d for d in G.nodes.values() if d["kind"] == "tensor" and d.get("stacked"))
    numbers = [rec.tensor(m).value for m in num["stack"]]
    assert rec.tensor(num["ref"]).name == "num" and len(numbers) == num["stacked"] > 1
    assert num["label"].splitlines()[:2] == [
        f"num: {len(numbers)} values", f"{min(numbers):g} … {max(numbers):g}"]


def test_an_unwatched_tape_opens_on_its_own_none_not_the_watched_tape_beside_it():
    """The callout says x's gradient is None: the graph under it is that call's, the block's
    op unrecorded and x's grad None, not the other tape's x = 3 grad 6."""
    program = ("import tensorflow as tf\n\nx = tf.constant(3.0)\nwith tf.GradientTape() as tape:\n"
               "    y = x * x\nprint(tape.gradient(y, x))\n\nwith tf.GradientTape() as tape2:\n"
               "    tape2.watch(x)\n    y2 = x * x\nprint(tape2.gradient(y2, x).numpy())\n")
    _, printed = run_plain(program)
    assert printed.splitlines() == ["None", "6.0"]      # plain TF: the unwatched tape's is None
    rec = recorder.record(program)
    first = callouts.callouts(rec)[0]
    assert view.default_view(rec) == first.view == "call:0:0"
    tape, call = view.parse_view(first.view)
    G = graph.build(rec, View(tape=tape, call=call))
    x = next(d for d in G.nodes.values() if d["kind"] == "tensor" and rec.tensor(d["ref"]).name == "x")
    assert x["label"].splitlines()[-1] == "grad None"
