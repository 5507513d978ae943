"""What the debugger opens on, for programs recorded through a real worker, checked against
the same programs under plain TensorFlow (run in a subprocess: the test process stays TF-free
only by convention, the worker is the real thing)."""
import textwrap

import pytest

from tapeviz.draw import graph
from tapeviz.draw.options import View
from tapeviz.words import values
from tapeviz.state import callouts, inspector, view
from tapeviz.recording import Recording
from tapeviz.server import runner
from plain_runs import plain_and_recorded

LOOP = textwrap.dedent("""
    import tensorflow as tf
    w = tf.Variable(0.5)
    for step in range(60):
        with tf.GradientTape() as tape:
            loss = (w * 3.0 - 1.0) ** 2
        g = tape.gradient(loss, w)
        w.assign_sub(0.01 * g)
        print(float(g))
""").lstrip()


@pytest.mark.slow
def test_a_loop_past_the_op_bound_opens_on_its_last_step_with_its_ops(tmp_path):
    printed, rec = plain_and_recorded(LOOP, tmp_path, keep_steps=None, max_ops=200)   # every step recorded
    printed = [float(x) for x in printed]
    assert rec.error is None and rec.dropped.get("ops"), "the bound dropped the early steps' ops"
    tape, call = view.parse_view(view.default_view(rec))
    G = graph.build(rec, View(tape=tape, call=call))
    assert any(d["kind"] == "op" for _, d in G.nodes(data=True))
    chosen = graph.gradient_call(rec, tape, call)
    grad = rec.tensor(chosen.results[0].grad).value
    assert grad == pytest.approx(printed[-1], rel=1e-6), "the newest step: plain TF's last gradient"
    label = dict(view.view_choices(rec))[f"call:{tape}:{call}"]
    assert label.startswith("step 60 of 60, tape `tape`, line 6")


SEED_PERSISTENT = textwrap.dedent("""
    import tensorflow as tf
    x = tf.constant(10.0)
    w = tf.Variable(3.0)
    b = tf.Variable(1.0)
    with tf.GradientTape(persistent=True) as tape:
        z = w * x + b
    dz_dx = tape.gradient(z, x)
    dz_dw = tape.gradient(z, w)
    dz_db = tape.gradient(z, b)
    print(dz_dx, float(dz_dw), float(dz_db))
""").lstrip()


@pytest.mark.slow
def test_a_persistent_tapes_three_calls_open_on_one_picture(tmp_path):
    printed, rec = plain_and_recorded(SEED_PERSISTENT, tmp_path)
    none, dw, db = printed[0].split()
    key = view.default_view(rec)
    assert key.startswith("calls:")
    tape, call = view.parse_view(key)
    G = graph.build(rec, View(tape=tape, call=call))
    by_name = {d.get("name"): d for _, d in G.nodes(data=True) if d["kind"] == "tensor"}
    assert none == "None" and by_name["x"]["grad_text"] == "grad None"
    assert by_name["w"]["grad_text"] == "grad " + values.number_text(float(dw))
    assert by_name["b"]["grad_text"] == "grad " + values.number_text(float(db))
    assert "not watched" in by_name["x"]["none_reason"]


@pytest.mark.slow
def test_the_nonpersistent_error_opens_on_the_call_that_worked(tmp_path):
    from tapeviz import examples
    source = open(examples.__path__[0] + "/nonpersistent_error.py").read()
    printed, rec = plain_and_recorded(source, tmp_path, fails=True)
    printed = printed[0]                                         # "dz_dx = 108.0", then the error
    assert rec.error is not None and rec.error.type == "RuntimeError"
    tape, call = view.parse_view(view.default_view(rec))
    chosen = graph.gradient_call(rec, tape, call)
    assert chosen.error is None and rec.tensor(chosen.results[0].grad).value == pytest.approx(float(printed.split("=")[1]))
    freed = [c for c in callouts.callouts(rec) if "freed its recording" in c.text]
    assert freed and freed[0].view == view.default_view(rec)


@pytest.mark.slow
def test_the_nested_tapes_sentence_carries_plain_tfs_second_derivative(tmp_path):
    from tapeviz import examples
    nested = examples.code("higher_order").replace("tf.Variable(1.0)", "tf.Variable(1.5)")
    printed, rec = plain_and_recorded(nested, tmp_path)
    printed = dict(line.split(" = ") for line in printed)
    said = view.sentence(rec, view.default_view(rec))
    expect = f"d²y/dx² = {values.number_text(float(printed['d2y_dx2']))} at x = 1.5"
    assert "y = x·x·x" in said.replace("\\", "") and expect in said.replace("\\", ""), said


PYTHON_OPS = textwrap.dedent("""
    import tensorflow as tf
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    w = tf.Variable([[0.5], [-1.0]])
    with tf.GradientTape() as tape:
        h = x @ w
        g = tf.matmul(x, w)
        s = tf.square(h + g)
        loss = tf.reduce_sum(s * 2.0 - 1.0) / 4.0
    print(tape.gradient(loss, w).numpy().tolist())
""").lstrip()


@pytest.mark.slow
def test_ops_are_named_as_the_python_that_made_them(tmp_path):
    _, rec = plain_and_recorded(PYTHON_OPS, tmp_path)     # the plain run checked to succeed
    G = graph.build(rec, View(tape=rec.tapes[0].id, call=0))
    said = {(d["line"], d["label"]): d["hover"] for _, d in G.nodes(data=True) if d["kind"] == "op"}
    # each op's label is what its line wrote; TensorFlow's op type is in its hover
    for line, python, tf_type in [(5, "@", "MatMul"), (6, "tf.matmul", "MatMul"), (7, "+", "AddV2"),
                                  (7, "tf.square", "Square"), (8, "*", "Mul"), (8, "-", "Sub"),
                                  (8, "tf.reduce_sum", "Sum"), (8, "/", "RealDiv")]:
        assert f"TensorFlow op: {tf_type}" in said[(line, python)], (line, python)


@pytest.mark.slow
def test_a_projects_ops_are_quoted_from_their_own_files(tmp_path):
    from user_project import line_of, plain_run, printed_gradients, write_project
    folder = write_project(tmp_path)
    printed = printed_gradients(plain_run(folder, "--steps", "1"))
    pool = runner.Runner(runner.Config(warm=0))
    try:
        rec = Recording.from_dict(pool.record((folder / "main.py").read_text(), filename=str(folder / "main.py"),
                                              timeout=300, program={"argv": ["main.py", "--steps", "1"],
                                                                    "cwd": str(folder), "path": str(folder)}))
    finally:
        pool.close()
    assert rec.error is None, rec.error
    tape = rec.tapes[0]
    assert [rec.tensor(r.grad).value for r in tape.gradients[0].results] == printed[0]
    G = graph.build(rec, View(tape=tape.id, call=0))
    mean = next(n for n, d in G.nodes(data=True) if d.get("op_type") == "Mean")
    line = line_of(folder, "trainer/losses.py", "tf.reduce_mean")
    assert G.nodes[mean]["label"] == "tf.reduce_mean"
    where, excerpt = inspector.excerpt_for(rec, G, mean, context=0)
    assert where == f"line {line} of trainer/losses.py"
    assert "return tf.reduce_mean(tf.square(err))" in excerpt
    assert inspector.editor_line(rec, G, mean) is None      # main.py's line of that number is not it
    assert f"line {line} of trainer/losses.py" in dict(view.node_choices(G))[mean]


KERAS_LOOP = textwrap.dedent("""
    import numpy as np
    import tensorflow as tf
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)])
    x = tf.constant(np.linspace(-1.0, 1.0, 8).reshape(2, 4), dtype=tf.float32)
    for step in range(8):
        with tf.GradientTape() as tape:
            logits = model(x * (step + 1))
            loss = tf.reduce_mean(logits ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        print(float(tf.norm(logits)))
""").lstrip()


@pytest.mark.slow
def test_a_loops_steps_fold_into_one_picture_showing_the_newest(tmp_path):
    norms, rec = plain_and_recorded(KERAS_LOOP, tmp_path)
    norms = [float(x) for x in norms]
    assert rec.error is None, rec.error
    G = graph.build(rec, View(group=True))
    (logits,) = [d for _, d in G.nodes(data=True) if d.get("name") == "logits"]
    assert logits["stacked"] == 8 and logits["label"].startswith("logits ×8")
    assert logits["label"].endswith("size " + values.number_text(norms[-1])), "the newest step's logits"


@pytest.mark.slow
def test_the_lessons_numbers_on_arrival_are_plain_tfs(tmp_path):
    """The persistent tape's two answers, a jacobian's matrix and a tf.function's input value,
    said by the page as it opens, against the numbers the same programs print under plain TF."""
    import re
    from tapeviz import examples

    def numbers(text):
        return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]

    persistent = examples.code("persistent_tape")
    printed, rec = plain_and_recorded(persistent, tmp_path)
    printed = dict(line.split(" = ") for line in printed)
    said = view.sentence(rec, view.default_view(rec)).replace("\\", "")
    for name, target in (("dz_dx", "z"), ("dy_dx", "y")):
        value = re.escape(values.number_text(float(printed[name])))
        # the opened call's answer ("the gradient of `y` ... gives `x`: grad 6"), or another
        # call's, answer first ("`x`: grad 108 (of `z`, line 10)")
        assert re.search(rf"the gradient of `{target}`[^;]* gives `x`: grad {value}\b", said) or \
            re.search(rf"`x`: grad {value} \(of `{target}`", said), said

    jacobian = examples.code("jacobian")
    out, rec = plain_and_recorded(jacobian, tmp_path)
    out = "\n".join(out)
    matrix = numbers(out.split("dy_dx =")[1].split("dys_dxs")[0])
    said = view.sentence(rec, view.default_view(rec)).replace("\\", "")
    assert "the jacobian of `y` with respect to `x` is" in said, said
    assert numbers(said.split(" is ")[1]) == pytest.approx(matrix)

    function = examples.code("tf_function")
    printed, rec = plain_and_recorded(function, tmp_path)
    printed = dict(line.split(" = ") for line in printed)
    tape, call = view.parse_view(view.default_view(rec))
    G = graph.build(rec, View(tape=tape, call=call))
    labels = sorted(d["label"] for _, d in G.nodes(data=True) if d["kind"] == "tensor")
    # the float input prints as Python prints it: x = 3.0, and the target's own grad 1.0
    assert labels == [f"x = 3.0\ngrad {values.number_text(float(printed['dy_dx']))}",
                      f"y = {values.number_text(float(printed['y']))}\ngrad 1.0"]
