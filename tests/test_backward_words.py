"""The nan_hunt lesson's backward graph in a student's words, against plain TensorFlow: the
gradient that is Inf or NaN is said so ("grad ⚠ Inf"), the backward pass draws its arithmetic
named after the Python it differentiates, its reshaping folded away unless Plumbing is on."""
import math

import pytest

tf = pytest.importorskip("tensorflow")

from tapeviz import examples  # noqa: E402
from tapeviz.draw import graph, reads  # noqa: E402
from tapeviz.draw.options import View  # noqa: E402
from tapeviz.state import callouts, view  # noqa: E402
from tapeviz.recording import BACKWARD  # noqa: E402
from tapeviz.worker import recorder  # noqa: E402


@pytest.fixture(scope="module")
def nan_hunt():
    rec = recorder.record(examples.load("nan_hunt").source)
    state = callouts.opening(rec)
    tape, call = view.parse_view(state["view"])
    return rec, dict(tape=tape, call=call, fold=state["fold"], backward=state["backward"])


def plain_gradients():
    """The reference: d loss / d d and d loss / d (d * d) by plain TensorFlow."""
    p = tf.Variable([[0.0, 0.0], [1.0, 1.0], [3.0, 4.0]])
    q = tf.constant([[0.0, 0.0], [1.0, 2.0], [0.0, 0.0]])
    with tf.GradientTape() as tape:
        d = p - q
        tape.watch(d)
        squares = d * d
        tape.watch(squares)
        loss = tf.reduce_sum(tf.sqrt(tf.reduce_sum(squares, axis=1)))
    return [g.numpy() for g in tape.gradient(loss, [d, squares])]


def alarm(values) -> str:
    flat = [float(v) for v in values.ravel()]
    return "NaN" if any(math.isnan(v) for v in flat) else "Inf" if any(math.isinf(v) for v in flat) else ""


def test_a_non_finite_gradient_is_said_in_words_not_as_a_size(nan_hunt):
    rec, options = nan_hunt
    G = graph.build(rec, View(**options))
    want_d, want_squares = (alarm(g) for g in plain_gradients())
    assert (want_d, want_squares) == ("NaN", "Inf"), "the lesson: an Inf under sqrt, a NaN from 0 · Inf"
    d = next(n for n, x in G.nodes(data=True) if x["kind"] == "tensor" and rec.tensor(x["ref"]).name == "d")
    mul = next(n for n in G.successors(d) if G.nodes[n].get("op_type") == "Mul" and G.nodes[n]["phase"] != BACKWARD)
    (squares,) = G.successors(mul)
    assert G.nodes[d]["grad_text"] == "grad ⚠ " + want_d
    assert G.nodes[squares]["grad_text"] == "grad ⚠ " + want_squares
    labels = [x["label"] for _, x in G.nodes(data=True)]
    assert not any("size of grad nan" in s.lower() or "size of grad inf" in s.lower() for s in labels)


def test_the_backward_pass_draws_its_arithmetic_in_the_students_words(nan_hunt):
    rec, options = nan_hunt
    G = graph.build(rec, View(**options))
    backward = {n: x for n, x in G.nodes(data=True) if x["kind"] == "op" and x["phase"] == BACKWARD}
    ran = [op for op in rec.ops if op.phase == BACKWARD]
    arithmetic = [op for op in ran if op.type not in reads.GRADIENT_PLUMBING]
    assert len(ran) > len(arithmetic) >= 4, "TensorFlow's backward pass reshapes as well as computes"
    assert sorted(x["ref"] for x in backward.values()) == sorted(op.id for op in arithmetic)
    said = {x["op_type"]: x["label"] for x in backward.values()}
    assert said["SqrtGrad"] == "grad of tf.sqrt" and said["AddN"] == "+" and said["Mul"] == "*"
    assert "TensorFlow op: SqrtGrad" in next(x["hover"] for x in backward.values() if x["op_type"] == "SqrtGrad")
    # the Inf that SqrtGrad makes reaches the two products directly, its broadcast passed through
    (inf,) = G.successors(next(n for n, x in backward.items() if x["op_type"] == "SqrtGrad"))
    assert sum(1 for n in G.successors(inf) if G.nodes[n].get("op_type") == "Mul") == 2
    with_plumbing = graph.build(rec, View(plumbing=True, **options))
    shown = {x["op_type"] for _, x in with_plumbing.nodes(data=True) if x["kind"] == "op" and x["phase"] == BACKWARD}
    assert shown == {op.type for op in ran}


def test_the_ops_one_call_ran_are_named_by_that_call(nan_hunt):
    rec, options = nan_hunt
    G = graph.build(rec, View(**options))
    line = 1 + rec.source.splitlines().index("    dist = tf.norm(d, axis=1)")
    ops = {x["op_type"]: x for _, x in G.nodes(data=True) if x["kind"] == "op" and x["line"] == line}
    assert {"Mul", "Sum", "Sqrt"} <= set(ops), "what tf.norm runs under the hood"
    assert {x["label"] for x in ops.values()} == {"tf.norm"}
    assert "TensorFlow op: Sqrt" in ops["Sqrt"]["hover"]
