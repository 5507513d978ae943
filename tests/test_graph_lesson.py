"""graph.build as a lesson: loops folded, plumbing hidden, value and gradient in every label,
and the ops an unwatched input kept off the tape. Hand-built recordings, no TensorFlow."""
import pytest

from tapeviz.draw import fold, gradient_flow, graph
from tapeviz.draw.options import View
from tapeviz.words import values
from tapeviz.recording import (FlowEntry, GradientCall, GradResult, Op, Stats, Tape)
from builders import Builder, loop, o, t, wxb


def test_a_3000_op_loop_folds_into_one_node_per_line_and_type():
    rec, ids = loop(3000)
    G = graph.build(rec, View(tape=1, call=0))
    folds = {n: d for n, d in G.nodes(data=True) if d["kind"] == graph.REPEAT}
    assert sorted(d["op_type"] for d in folds.values()) == ["AddV2", "Mul"]
    assert all(len(d["members"]) == 3000 for d in folds.values())
    assert "* ×3000, line 6" in {d["label"].splitlines()[0] for d in folds.values()}
    # the loop's partial sums are folded away; x, the final y and the folds remain
    assert G.number_of_nodes() == 4
    add = next(n for n, d in folds.items() if d["op_type"] == "AddV2")
    assert add.startswith(fold.FOLD_PREFIX)
    low, high = folds[add]["range"]
    assert low == pytest.approx(0.001) and high == pytest.approx(3.0)
    assert G.has_edge(t(ids["x"]), next(n for n in folds if n != add))
    assert G.has_edge(add, t(ids["y"]))


def test_unfolding_a_fold_shows_every_op():
    rec, _ = loop(10)
    folded = graph.build(rec, View(tape=1))
    mul = next(n for n, d in folded.nodes(data=True) if d.get("op_type") == "Mul")
    G = graph.build(rec, View(tape=1, expand=[mul]))
    assert sum(d.get("label") == "*" for _, d in G.nodes(data=True)) == 10
    assert graph.build(rec, View(tape=1, fold=False)).number_of_nodes() > 3 * 10


def test_a_few_repeats_stay_unfolded():
    # y = x * x * x: two Muls on one line are the lesson, not a loop
    rec, _ = loop(fold.FOLD_AT - 1)
    G = graph.build(rec, View(tape=1))
    assert not any(d["kind"] == graph.REPEAT for _, d in G.nodes(data=True))


def test_labels_carry_the_value_and_the_exact_gradient_of_each_source():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1, call=0))
    assert G.nodes[t(ids["w"])]["label"] == "w = 2.0\ngrad " + values.short_value(rec.tensor(ids["dw"]))
    assert G.nodes[t(ids["x"])]["label"] == "x = 3.0\ngrad None"
    assert G.nodes[t(ids["z"])]["label"] == "z\ngrad 1.0"     # the target (float32); z has no recorded value here
    assert G.nodes[t(ids["wx"])]["label"].endswith("size of grad 1.0")
    # without a call, only values
    assert graph.build(rec, View(tape=1)).nodes[t(ids["w"])]["label"] == "w = 2.0"


def test_big_tensors_show_shape_and_norm():
    b = Builder()
    big = b.tensor("h", shape=(10, 10))
    b.rec.tensor(big).stats = Stats(min=-1.0, max=1.0, mean=0.0, std=1.0)
    assert values.short_value(b.rec.tensor(big)) == "10×10, size 10.0"     # a float norm keeps its point: sqrt(100 * (0 + 1))
    small = b.tensor("v", shape=(3,), value=[1.0, 2.5, 3.0])
    assert values.short_value(b.rec.tensor(small)) == "[1., 2.5, 3.]"     # as NumPy prints np.float32([1, 2.5, 3])


def test_x_times_x_is_one_edge_counting_two_inputs():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1))
    assert G.edges[t(ids["x"]), o(rec, ids["u"])]["count"] == 2


def test_variable_plumbing_is_hidden_unless_asked_for():
    b = Builder()
    handle = b.op("VarHandleOp", [], tapes=(), name="w")
    init = b.tensor(kind="constant", value=1.0)
    b.rec.ops.append(Op(id=b._id(), type="AssignVariableOp", inputs=[handle, init], outputs=[], line=1,
                        scope="Variable", tapes=[]))
    a = b.tensor("a", "constant", value=2.0)
    c = b.op("AddV2", [a, a], tapes=(), name="c")
    G = graph.build(b.rec)
    assert {d["label"] for _, d in G.nodes(data=True) if d["kind"] == "op"} == {"+"}
    shown = graph.build(b.rec, View(plumbing=True))
    assert {"VarHandleOp", "AssignVariableOp"} <= {d["label"] for _, d in shown.nodes(data=True)}
    assert G.nodes[t(c)]["label"] == "c"


def test_an_unwatched_constant_still_shows_the_ops_its_block_ran():
    """x = tf.convert_to_tensor(10.); with tape: y = x * x; tape.gradient(y, x) is None:
    the tape recorded nothing, yet the picture shows x -> Mul -> y, Mul marked unrecorded."""
    b = Builder()
    x = b.tensor("x", "constant", value=10.0)
    y = b.op("Mul", [x, x], tapes=(), name="y", line=4)
    call = GradientCall(line=5, kind="gradient", target=[y], sources=[x],
                        results=[GradResult(x, None, "not watched: x is a constant tensor")])
    b.rec.tapes.append(Tape(id=1, line=3, persistent=False, watch_accessed_variables=True, parent=None,
                            gradients=[call], end_line=4))
    G = graph.build(b.rec, View(tape=1, call=0))
    mul = o(b.rec, y)
    assert G.nodes[mul]["category"] == graph.UNRECORDED_OP
    assert G.has_edge(t(x), mul) and G.has_edge(mul, t(y))
    assert G.nodes[t(x)]["none_reason"].startswith("not watched")
    assert G.nodes[t(x)]["label"].endswith("grad None")
    # what the tape recorded, asked for alone, is still nothing but the source
    assert mul not in graph.build(b.rec, View(tape=1))


def test_backward_ops_of_the_call_on_request():
    rec, ids = wxb()
    rec.ops[-2].call = rec.ops[-1].call = 0
    rec.ops[-2].line = rec.ops[-1].line = 7
    assert o(rec, ids["dw"]) not in graph.build(rec, View(tape=1, call=0))
    assert o(rec, ids["dw"]) in graph.build(rec, View(tape=1, call=0, backward=True))


def test_nan_values_are_marked():
    rec, ids = wxb()
    rec.tensor(ids["wx"]).stats = Stats(min="nan", max="nan", mean="nan", std="nan", nan=1)
    G = graph.build(rec, View(tape=1))
    assert G.nodes[t(ids["wx"])]["nonfinite"] and G.nodes[t(ids["wx"])]["label"].startswith("⚠ NaN")


def test_fold_flow_is_the_largest_of_its_ops():
    rec, ids = loop(6)
    rec.tapes[0].gradients[0].flow.append(FlowEntry(rec.ops[-1].outputs[0], 1.0))
    G = graph.build(rec, View(tape=1, call=0))
    flow = gradient_flow.flow_norms(rec, 1, 0, G)
    add = next(n for n, d in G.nodes(data=True) if d.get("op_type") == "AddV2")
    assert flow[add] == 1.0


def test_a_converted_python_input_says_its_value_not_its_shape():
    b = Builder()
    w = b.tensor("w", "variable", shape=(1, 1), value=[[3.0]])
    lit = b.tensor(kind="constant", shape=(1, 1), value=[[2.0]])   # tf.matmul(w, [[2.]])
    b.op("MatMul", [b.read(w), lit], name="y", line=3)
    G = graph.build(b.rec)
    assert G.nodes[t(lit)]["label"] == "[[2.]]"


def test_a_loops_per_step_tensors_between_layers_draw_as_the_newest_times_n():
    """Eight training steps through two layers: each step's batch and each step's activations
    would stack into columns of eight; folded, the newest of each says ×8."""
    b = Builder()
    w = b.tensor("w", "variable", shape=(2, 1))
    steps = 8
    for i in range(steps):
        images = b.tensor("images", "constant", shape=(4, 2))
        b.rec.tensor(images).line = 5
        h = b.op("MatMul", [images, b.read(w, scope="seq/dense")], scope="seq/dense", line=6, shape=(4, 1))
        b.op("Mean", [h], scope="loss/mean", line=7, name="loss")
    G = graph.build(b.rec, View(group=True))
    tensors = {n: d for n, d in G.nodes(data=True) if d["kind"] == "tensor"}
    stacked = {d["label"].splitlines()[0] for d in tensors.values() if d.get("stacked")}
    assert stacked == {"images ×8 = 4×2", "4×1 ×8", f"loss ×{steps}"}
    newest = max(t for t in (d["ref"] for d in tensors.values()) if b.rec.tensor(t).name == "images")
    assert newest == max(x.id for x in b.rec.tensors if x.name == "images")
    assert len(tensors) == 4        # w, and one of each step's images, activations and losses
    unfolded = graph.build(b.rec, View(group=True, fold=False))
    assert sum(d["kind"] == "tensor" for _, d in unfolded.nodes(data=True)) == 1 + 3 * steps


def test_small_flow_gradients_are_labelled_with_their_signed_values():
    # z = -2 * (w * x) + b: the flow's kept values say d z / d (w*x) is -2, not "size of 2"
    rec, ids = wxb()
    call = rec.tapes[0].gradients[0]
    call.flow = [FlowEntry(ids["w"], 6.0, -6.0), FlowEntry(ids["wx"], 2.0, -2.0),
                 FlowEntry(ids["z"], 1.0, 1.0), FlowEntry(ids["u"], 2.5, [[-1.5], [2.0]])]
    G = graph.build(rec, View(tape=1, call=0, fold=False))
    assert G.nodes[t(ids["wx"])]["grad_text"] == "grad -2.0"
    assert G.nodes[t(ids["z"])]["grad_text"] == "grad 1.0"
    # a source keeps its exact gradient from the call's results, not the flow
    assert G.nodes[t(ids["w"])]["grad_text"] == "grad " + values.short_value(rec.tensor(ids["dw"]))
    # a recording from before the field: the norm in words, as before
    call.flow = [FlowEntry(ids["wx"], 2.0)]
    assert graph.build(rec, View(tape=1, call=0)).nodes[t(ids["wx"])]["grad_text"] == "size of grad 2.0"


def test_a_big_flow_value_is_said_as_its_size():
    rec, ids = wxb()
    rec.tapes[0].gradients[0].flow = [FlowEntry(ids["wx"], 5.0, [1.0, -2.0, 2.0, -2.0, 2.0])]
    assert graph.build(rec, View(tape=1, call=0)).nodes[t(ids["wx"])]["grad_text"] == "size of grad 5.0"


def two_steps():
    """w = Variable(2); two steps, each on its own tape: loss = w * 3, then w.assign_sub(...)
    between them, so step 2's read gives 1.4 while w's own record keeps 2."""
    b = Builder()
    w = b.tensor("w", "variable", value=2.0)
    three = b.tensor(kind="constant", value=3.0)
    reads = []
    for tape_id, seen in ((1, 2.0), (2, 1.4)):
        read = b.op("ReadVariableOp", [w], tapes=(tape_id,), line=5)
        b.rec.tensor(read).value = seen
        reads.append(read)
        loss = b.op("Mul", [read, three], tapes=(tape_id,), line=5, name="loss")
        b.rec.tensor(loss).value = seen * 3.0
        call = GradientCall(line=6, kind="gradient", target=[loss], sources=[w],
                            results=[GradResult(w, three)], flow=[FlowEntry(w, 3.0, 3.0)])
        b.rec.tapes.append(Tape(id=tape_id, line=4, persistent=False, watch_accessed_variables=True,
                                parent=None, watched=[w], ops=[o.id for o in b.rec.ops if tape_id in o.tapes],
                                gradients=[call]))
    return b.rec, w, reads


def test_a_variable_in_a_steps_graph_shows_the_value_that_step_read():
    rec, w, reads = two_steps()
    for tape_id, read in zip((1, 2), reads):
        label = graph.build(rec, View(tape=tape_id, call=0)).nodes[t(w)]["label"]
        assert label.splitlines()[0] == "w = " + values.number_text(rec.tensor(read).value)
        assert graph.build(rec, View(tape=tape_id)).nodes[t(w)]["label"] == label.splitlines()[0]
    assert rec.tensor(w).value == 2.0         # the recording itself is not changed


def test_a_tf_function_call_shows_its_input_variables_value_and_only_its_result():
    # y = f(x) for @tf.function f(x) = x * x + 2 * x at x = 3 under a tape, as the recorder
    # writes it: x's handle goes into the call unread, and the call returns y and, after it,
    # what f's gradient will need (3, 3, 3, 2).
    from tapeviz.recording import GradResult
    b = Builder()
    x = b.tensor("x", "variable", dtype="resource")
    three = b.tensor(kind="constant", value=3.0)
    b.rec.ops.append(Op(id=b._id(), type="AssignVariableOp", inputs=[x, three], outputs=[], line=9, scope=None,
                        tapes=[], phase="forward"))
    y = b.op("f", [x], line=12, name="y")
    call_op = b.rec.ops[-1]
    call_op.function = "f"
    b.rec.tensor(y).value = 15.0
    for v in (3.0, 3.0, 3.0, 2.0):
        call_op.outputs.append(b.tensor(value=v, producer=call_op.id))
    dx = b.tensor(value=8.0)
    b.rec.tapes.append(Tape(id=1, line=11, persistent=False, watch_accessed_variables=True, parent=None,
                            ops=[call_op.id], end_line=12, gradients=[GradientCall(
                                line=14, kind="gradient", target=[y], sources=[x], results=[GradResult(x, dx)],
                                flow=[FlowEntry(x, 8.0, 8.0), FlowEntry(y, 1.0, 1.0)])]))
    G = graph.build(b.rec, View(tape=1, call=0))
    assert G.nodes[t(x)]["label"] == "x = 3.0\ngrad 8.0"
    assert sorted(d["label"] for n, d in G.nodes(data=True) if d["kind"] == "tensor") == ["x = 3.0\ngrad 8.0",
                                                                                         "y = 15.0\ngrad 1.0"]


def test_fizzbuzzs_range_is_named_as_written():
    b = Builder()
    b.rec.source = "for num in tf.range(1, max_num + 1):\n"
    start, stop, step = (b.tensor(kind="constant", value=v) for v in (1, 16, 1))
    b.op("Range", [start, stop, step], line=1, tapes=())
    G = graph.build(b.rec)
    assert [d["label"] for _, d in G.nodes(data=True) if d["kind"] == "op"] == ["tf.range"]

