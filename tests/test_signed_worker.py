"""Signed gradients and per-step values on the graph, for programs recorded through a real
worker, checked against plain TensorFlow run in a subprocess (the test process stays TF-free)."""
import json
import textwrap

import pytest

from tapeviz.draw import graph
from tapeviz.draw.options import View
from tapeviz.words import values
from tapeviz.state import view
from plain_runs import plain, recorded

SCALARS = textwrap.dedent("""
    import tensorflow as tf
    x = tf.Variable(3.0)
    with tf.GradientTape() as tape:
        y = x * x
        z = -2.0 * y + 1.0
    tape.gradient(z, x)
""").lstrip()

# plain TF's d z / d t for every tensor the program makes, by the value t takes
REFERENCE = textwrap.dedent("""
    import json
    import tensorflow as tf
    x = tf.Variable(3.0)
    with tf.GradientTape(persistent=True) as tape:
        xr = tf.identity(x)
        y = xr * x
        m = -2.0 * y
        z = m + 1.0
    out = [[float(t), float(tape.gradient(z, t))] for t in (y, m, z)]
    out.append([float(x), float(tape.gradient(z, x))])
    print(json.dumps(out))
""").lstrip()


@pytest.mark.slow
def test_an_all_scalar_programs_labels_carry_plain_tfs_signed_gradients(tmp_path):
    reference = json.loads(plain(REFERENCE, tmp_path)[-1])
    rec = recorded(SCALARS, tmp_path)
    G = graph.build(rec, View(tape=rec.tapes[0].id, call=0))
    grad_of_value = {}
    for _, d in G.nodes(data=True):
        if d["kind"] == "tensor" and d["grad_text"] is not None:
            assert "size of" not in d["label"], d["label"]
            grad_of_value[rec.tensor(d["ref"]).value] = d["grad_text"]
    for value, grad in reference:      # y = 9: -2, -2y = -18: 1, z = -17: 1, x = 3: -12
        assert grad_of_value[value] == "grad " + values.number_text(grad), (value, grad_of_value)
    assert any(g.startswith("grad -") for g in grad_of_value.values())


LOOP = textwrap.dedent("""
    import tensorflow as tf
    w = tf.Variable(2.0)
    for step in range(5):
        print(float(w))
        with tf.GradientTape() as tape:
            loss = (w * 3.0 - 1.0) ** 2
        g = tape.gradient(loss, w)
        w.assign_sub(0.1 * g)
""").lstrip()


@pytest.mark.slow
def test_each_steps_graph_shows_the_variable_as_that_step_read_it(tmp_path):
    printed = [float(x) for x in plain(LOOP, tmp_path)]
    rec = recorded(LOOP, tmp_path, keep_steps=None)
    steps = [key for key, label in view.view_choices(rec) if label.startswith("step ")]
    assert len(steps) == len(printed) == 5
    for key, w in zip(steps, printed):
        tape, call = view.parse_view(key)
        G = graph.build(rec, View(tape=tape, call=call))
        node = next(d for _, d in G.nodes(data=True) if d.get("name") == "w")
        first = node["label"].splitlines()[0]   # float32's own digits, as NumPy prints them
        assert first.startswith("w = ") and float(first[4:]) == pytest.approx(w, rel=1e-6), (key, node["label"])
    assert len({values.number_text(w) for w in printed}) == 5, "the steps must differ for the test to tell"
