"""Signed gradients and per-step values on the graph, for programs recorded through a real
worker, checked against plain TensorFlow run in a subprocess (the test process stays TF-free)."""
import json
import textwrap

import pytest

from tapeviz.draw import graph
from tapeviz.page import view
from test_view_worker import plain, recorded

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
    G = graph.build(rec, tape=rec.tapes[0].id, call=0)
    grad_of_value = {}
    for _, d in G.nodes(data=True):
        if d["kind"] == "tensor" and d["grad_text"] is not None:
            assert "size of" not in d["label"], d["label"]
            grad_of_value[rec.tensor(d["ref"]).value] = d["grad_text"]
    for value, grad in reference:      # y = 9: -2, -2y = -18: 1, z = -17: 1, x = 3: -12
        assert grad_of_value[value] == "grad " + graph.number_text(grad), (value, grad_of_value)
    assert any(g.startswith("grad -") for g in grad_of_value.values())
