"""view: what the debugger opens on (the lesson's view, tapes by their Python names, callouts
for None/NaN/Inf) and how a step reveals, from hand-built recordings; no Streamlit, no TF."""
from tapeviz.words import eager_mode, problems, reasons, sentences, tapes
from tapeviz.draw import gradient_flow, graph
from tapeviz.draw.options import View
from tapeviz.words import markdown
from tapeviz.state import callouts, inspector, view
from tapeviz.recording import Alert, GradientCall, Recording, Tape
from builders import Builder, loop, o, t, wxb

NESTED = """import tensorflow as tf
x = tf.Variable(1.0)
with tf.GradientTape() as outer_tape:
    with tf.GradientTape(persistent=True) as inner_tape:
        y = x * x * x
    dy_dx = inner_tape.gradient(y, x)
d2y = outer_tape.gradient(dy_dx, x)
"""


def nested():
    rec = Recording(source=NESTED)
    rec.tapes = [Tape(id=0, line=3, persistent=False, watch_accessed_variables=True, parent=None),
                 Tape(id=1, line=4, persistent=True, watch_accessed_variables=True, parent=0)]
    return rec


def test_tapes_are_named_by_the_users_python_names():
    assert tapes.tape_names(nested()) == {0: "outer_tape", 1: "inner_tape"}
    one_line = Recording(source="with tf.GradientTape() as t1, tf.GradientTape(watch_accessed_variables=False) as t2:\n")
    one_line.tapes = [Tape(id=i, line=1, persistent=False, watch_accessed_variables=True, parent=None)
                      for i in (4, 5)]
    assert tapes.tape_names(one_line) == {4: "t1", 5: "t2"}
    anonymous = Recording(source="tape = tf.GradientTape()\n")
    anonymous.tapes = [Tape(id=2, line=1, persistent=False, watch_accessed_variables=True, parent=None)]
    assert tapes.tape_names(anonymous) == {2: "tape 2"}


def test_opens_on_the_gradient_call_with_the_none_result_and_picks_its_source():
    rec, ids = wxb()
    rec.source = "\n\nwith tf.GradientTape() as tape:\n"
    assert view.default_view(rec) == "call:1:0"
    state = callouts.opening(rec)
    assert state["view"] == "call:1:0" and state["focus"] == ids["x"] and state["fold"] is True
    (callout,) = callouts.callouts(rec)
    assert "`x`'s gradient is None" in callout.text and "not watched" in callout.text and "line 7" in callout.text
    assert "`tape`" in callout.full and callout.view == "call:1:0"


def test_a_none_callout_says_the_reason_and_the_fix_in_short_words():
    # Three Nones in full took 4-5 lines each and pushed the graph off a 720 px screen: the
    # callout keeps the reason's kind and its fix, two lines; the whole story stays on hover.
    rec, ids = wxb()
    rec.tensor(ids["x"]).dtype = "int32"
    tp = rec.tapes[0]
    reason = reasons.none_reason(ops=rec.ops, tensors={x.id: x for x in rec.tensors}, tape=tp,
                                 targets=[ids["z"]], source=ids["x"])
    tp.gradients[0].results[2].none_reason = reason
    kind, fix = reason.split(":")[0], reason.split(". ")[-1].split(" (")[0]
    (callout,) = callouts.callouts(rec)
    assert callout.text.startswith("**`x`'s gradient is None** (line 7): ")
    assert markdown.literal(kind) in callout.text and markdown.literal(fix) in callout.text
    assert len(callout.text) < 150 < len(callout.full)          # two lines of a 1280 px page
    assert markdown.literal(reason) in callout.full and "`z`" in callout.full
    # a reason with no separate fix is short already, and is kept whole
    assert problems.none_short("every gradient on the path to x is None.") == "every gradient on the path to x is None."
    assert problems.none_short("the path left TensorFlow at line 13 (`y = f(x.numpy())`): values. "
                           "Keep it in TensorFlow ops (tf.square, ...).") == \
        "the path left TensorFlow at line 13. Keep it in TensorFlow ops."


def test_without_a_none_the_outermost_tapes_last_call_is_the_lesson():
    rec, _ = loop(10)
    assert view.default_view(rec) == "call:1:0" and callouts.callouts(rec) == []
    choices = dict(view.view_choices(rec))
    assert list(choices)[0] == "call:1:0" and "gradient of y with respect to x" in choices["call:1:0"]
    assert view.parse_view("call:1:0") == (1, 0) and view.parse_view("tape:1") == (1, None)
    assert view.parse_view(view.ALL_OPS) == (None, None)


def test_a_program_without_a_tape_opens_on_every_op_and_says_why():
    rec, _ = wxb()
    rec.tapes = []
    assert view.default_view(rec) == view.ALL_OPS
    assert view.view_choices(rec) == [(view.ALL_OPS, "every op the program ran")]
    assert "no `tf.GradientTape`" in eager_mode.no_tape_sentence(rec)
    assert eager_mode.branch_sentence(rec) == ""      # no `if` of this program read a tensor


FIZZ = """import tensorflow as tf
n = tf.constant(9)
for i in tf.range(3):
    if int(n % 3) == 0:
        print("Fizz")
    elif int(n % 5) == 0:
        print("Buzz")
"""


def test_python_branching_on_tensors_is_the_lesson_of_a_tapeless_program():
    # FizzBuzz opens no tape: what it shows is Python reading each tensor's value to
    # choose a branch, eager mode's dynamic control flow, said before the graph
    b = Builder()
    b.rec.source = FIZZ
    n = b.tensor("n", "constant", value=9, dtype="int32")
    b.op("Range", [b.tensor(kind="constant", value=3, dtype="int32")], line=3)
    for line in (4, 6, 4, 6, 4, 6):
        b.op("FloorMod", [n, b.tensor(kind="constant", value=3, dtype="int32")], line=line)
    said = eager_mode.no_tape_sentence(b.rec)
    assert said.startswith("Python branched on tensors' values: the `for` on line 3 and the "
                           "`if`/`elif` on lines 4 and 6 read each result as soon as its op ran.")
    assert "dynamic control flow" in said and "no `tf.GradientTape`" in said
    assert "dynamic control flow" in view.sentence(b.rec, view.ALL_OPS)


def test_a_nan_born_in_the_backward_pass_opens_its_call_with_the_backward_ops():
    rec, ids = wxb()
    dw_op = rec.op(rec.tensor(ids["dw"]).producer)
    dw_op.call, dw_op.line = 0, 7
    rec.alerts = [Alert(kind="nan", op=dw_op.id, tensor=ids["dw"], line=7, phase="backward")]
    nan = callouts.callouts(rec)[-1]
    assert nan.view == "call:1:0" and nan.backward and nan.tensor == ids["dw"]
    assert nan.text.startswith("**NaN** first appeared at line 7")
    G = graph.build(rec, View(tape=1, call=0, backward=True))
    assert view.node_for_tensor(rec, G, ids["dw"]) == t(ids["dw"])
    # the op that made it in the student's words: `*`, and TensorFlow's SqrtGrad as the
    # gradient of tf.sqrt
    assert nan.text.endswith("backward pass, made by `*`."), nan.text
    dw_op.type = "SqrtGrad"
    assert callouts.callouts(rec)[-1].text.endswith("made by the gradient of `tf.sqrt`.")


def test_a_gradient_holding_a_nan_says_nan_not_the_size_of_its_finite_part():
    from tapeviz.recording import Stats
    rec, ids = wxb()
    dw = rec.tensor(ids["dw"])
    dw.value, dw.shape = None, [3, 2]
    dw.stats = Stats(min=0.0, max=1.0, mean=0.5, std=0.3, nan=2)
    assert "`w`: grad ⚠ NaN \\(3×2\\)" in view.sentence(rec, "call:1:0")


def test_steps_follow_the_drawn_ops_and_reveal_what_ran():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1, call=0))
    order = view.step_nodes(G)
    assert order == [o(rec, ids["wx"]), o(rec, ids["z"]), o(rec, ids["u"])]
    first = view.revealed(G, order[0])
    assert {t(ids["w"]), t(ids["x"]), o(rec, ids["wx"]), t(ids["wx"])} <= first
    assert t(ids["z"]) not in first and view.revealed(G, order[-1]) == set(G)
    assert view.step_words(G, order[1]) == markdown.literal("+ (forward, line 4)")


def test_a_fold_offers_unfolding_in_the_inspector():
    rec, _ = loop(10)
    G = graph.build(rec, View(tape=1, call=0))
    fold = next(n for n, d in G.nodes(data=True) if d["kind"] == graph.REPEAT)
    d = inspector.details(rec, G, fold)
    assert d.unfold == fold and "×10" in d.title


def steps_loop(n, kept_from):
    """n steps of `with tf.GradientTape() as tape: loss = w * w; tape.gradient(loss, w)`, one
    tape per step on line 3; the op bound dropped the ops of steps before `kept_from`."""
    from tapeviz.recording import CallSummary, FlowEntry, GradientCall, GradResult
    b = Builder()
    b.rec.source = "import tensorflow as tf\nw = tf.Variable(2.0)\nfor i in range(9):\n" \
                   "    with tf.GradientTape() as tape:\n        loss = w * w\n    g = tape.gradient(loss, w)\n"
    w = b.tensor("w", "variable", value=2.0)
    for step in range(n):
        first = len(b.rec.ops)
        loss = b.op("Mul", [b.read(w), b.read(w)], name="loss", line=5, tapes=(step,))
        ops = [op.id for op in b.rec.ops[first:]]
        call = GradientCall(line=6, kind="gradient", target=[loss], sources=[w],
                            results=[GradResult(w, b.tensor(value=4.0))], flow=[FlowEntry(w, 4.0)])
        b.rec.tapes.append(Tape(id=step, line=4, persistent=False, watch_accessed_variables=True,
                                parent=None, ops=ops, gradients=[call], end_line=5))
        b.rec.steps.append(CallSummary(call=step, tape=step, index=0, kind="gradient", line=6,
                                       target=4.0, scalar=True, sources=[0], norms=[4.0]))
    dropped = {i for tp in b.rec.tapes[:kept_from] for i in tp.ops}
    b.rec.ops = [op for op in b.rec.ops if op.id not in dropped]
    return b.rec


def test_a_long_loop_opens_on_its_newest_step_that_kept_its_ops():
    rec = steps_loop(5, kept_from=3)
    assert view.default_view(rec) == "call:4:0" and view.default_tape(rec) == 4
    assert callouts.opening(rec)["view"] == "call:4:0"
    G = graph.build(rec, View(tape=4, call=0))
    assert any(d["kind"] == "op" for _, d in G.nodes(data=True)), "its picture has its ops"
    choices = dict(view.view_choices(rec))
    assert choices["call:4:0"].startswith("step 5 of 5, tape `tape`, line 6: gradient of loss")
    assert "dropped" in choices["call:0:0"] and "dropped" not in choices["call:3:0"]
    # every step kept: still the newest; a lone tape is no loop and says no step
    assert view.default_view(steps_loop(3, kept_from=0)) == "call:2:0"
    one = steps_loop(1, kept_from=0)
    assert not dict(view.view_choices(one))["call:0:0"].startswith("step")


def test_a_step_in_another_file_names_its_file():
    rec = steps_loop(2, kept_from=0)
    rec.program = "main.py"
    for tp in rec.tapes:
        tp.file = tp.gradients[0].file = "mylib/train.py"
    assert "tape `tape`, line 6 of mylib/train.py:" in dict(view.view_choices(rec))["call:1:0"]


def three_calls():
    """The seed's persistent tape: z = w*x + b, then dz_dx, dz_dw, dz_db, one call each (x an
    unwatched constant)."""
    rec, ids = wxb()
    rec.tensor(ids["dw"]).value, rec.tensor(ids["db"]).value = 3.0, 1.0   # x's value, 1
    (call,) = rec.tapes[0].gradients
    rec.tapes[0].persistent = True
    rec.tapes[0].gradients = [
        GradientCall(line=7 + k, kind="gradient", target=[ids["z"]], sources=[s], results=[r],
                     flow=[f for f in call.flow if f.tensor != s or r.grad is not None])
        for k, (s, r) in enumerate(zip([ids["x"], ids["w"], ids["b"]], [call.results[2], call.results[0],
                                                                       call.results[1]]))]
    return rec, ids


def test_every_call_of_a_tape_on_one_target_is_one_picture():
    rec, ids = three_calls()
    assert view.default_view(rec) == "calls:1" and view.parse_view("calls:1") == (1, graph.ALL_CALLS)
    state = callouts.opening(rec)
    assert state["focus"] == ids["x"], "the None is still the one picked"
    choices = dict(view.view_choices(rec))
    assert choices["calls:1"] == "every gradient of z: x, w, b (tape 1.gradient, lines 7–9)"
    assert {"call:1:0", "call:1:1", "call:1:2"} <= set(choices), "each call still on its own"
    G = graph.build(rec, View(tape=1, call=graph.ALL_CALLS))
    grads = {G.nodes[t(ids[n])]["grad_text"] for n in ("w", "b", "x")}
    assert grads == {"grad 3.0", "grad 1.0", "grad None"}
    assert "not watched" in G.nodes[t(ids["x"])]["none_reason"]
    flow = gradient_flow.flow_norms(rec, 1, graph.ALL_CALLS, G)
    assert flow[t(ids["w"])] == 3.0 and flow[t(ids["z"])] == 1.0


def test_a_failed_second_call_opens_on_the_call_that_worked_and_says_the_tape_was_freed():
    rec, ids = three_calls()
    tp = rec.tapes[0]
    tp.persistent = False
    tp.gradients = [tp.gradients[1], GradientCall(line=9, kind="gradient", target=[ids["z"]], sources=[ids["b"]],
                                                  error="RuntimeError: A non-persistent GradientTape can only "
                                                        "be used to compute one set of gradients")]
    assert view.default_view(rec) == "call:1:0"
    (freed,) = callouts.callouts(rec)
    assert freed.view == "call:1:0" and "line 9 failed" in freed.text
    assert "freed its recording after the call at line 8" in freed.text
    # the run's error is that call's: the callout states it, so its full box folds away
    from tapeviz.recording import Error
    rec.error = Error(type="RuntimeError", message="A non-persistent GradientTape ...", line=9)
    assert callouts.error_called_out(rec)
    rec.error.line = 12     # an error of another line has no callout: shown in full
    assert not callouts.error_called_out(rec)


def test_one_sentence_says_what_the_picture_shows():
    rec, ids = three_calls()
    said = view.sentence(rec, "calls:1")
    assert said.startswith("`tape 1` recorded")
    assert "`w`: grad 3" in said and "`b`: grad 1" in said and "`x`: grad None" in said
    assert view.sentence(rec, view.ALL_OPS).startswith("Every op")


def test_a_persistent_tapes_other_answers_are_in_the_sentence():
    # the seed's persistent tape asked for dz/dx then dy/dx: the picture is one call's, the
    # sentence carries the other's number too (dz/dx = 108, dy/dx = 6)
    from tapeviz.recording import GradResult
    b = Builder()
    x = b.tensor("x", "constant", value=3.0)
    y = b.op("Mul", [x, x], line=7, name="y")
    z = b.op("Mul", [y, y], line=8, name="z")
    dz, dy = b.tensor(value=108.0), b.tensor(value=6.0)
    b.rec.source = "\n" * 4 + "with tf.GradientTape(persistent=True) as tape:\n"
    b.rec.tapes = [Tape(id=0, line=5, persistent=True, watch_accessed_variables=True, parent=None,
                        watched=[x], ops=[op.id for op in b.rec.ops], gradients=[
                            GradientCall(line=10, kind="gradient", target=[z], sources=[x], results=[GradResult(x, dz)]),
                            GradientCall(line=11, kind="gradient", target=[y], sources=[x], results=[GradResult(x, dy)])])]
    said = view.sentence(b.rec, view.default_view(b.rec))
    assert "the gradient of `y` gives `x`: grad 6\\.0" in said
    assert "the same tape gives `x`: grad 108\\.0 (of `z`, line 10)" in said
    # a tape asked once says nothing more
    b.rec.tapes[0].gradients.pop()
    assert "same tape" not in view.sentence(b.rec, "call:0:0")


def test_three_none_answers_are_said_each_once_in_two_lines():
    # none_gradients: one persistent tape asked three times, each answer None. Each call
    # said in full ("the same tape at line 16: the gradient of `b` gives `u`: grad None")
    # wrapped over three lines at 1280x720: the answers first, their targets after.
    from tapeviz.recording import GradResult
    b = Builder()
    k, v, u, x = (b.tensor(name, kind, value=value) for name, kind, value in
                  (("k", "constant", 3), ("v", "variable", 2.0), ("u", "variable", 5.0), ("x", "variable", 4.0)))
    a = b.op("Mul", [k, k], line=10, name="a")
    bb = b.op("Mul", [b.read(v), b.tensor(kind="constant", value=2.0)], line=11, name="b")
    y = b.op("Mul", [b.tensor(kind="constant", value=4.0), b.tensor(kind="constant", value=2.0)], line=13, name="y")
    b.rec.source = "\n" * 7 + "with tf.GradientTape(persistent=True) as tape:\n"
    asked = [(15, a, k), (16, bb, u), (17, y, x)]
    b.rec.tapes = [Tape(id=0, line=8, persistent=True, watch_accessed_variables=True, parent=None,
                        watched=[k], ops=[op.id for op in b.rec.ops], gradients=[
                            GradientCall(line=line, kind="gradient", target=[t], sources=[s],
                                         results=[GradResult(s, None, none_reason="no path")])
                            for line, t, s in asked])]
    said = view.sentence(b.rec, "call:0:0")
    for line, t, s in asked:
        name = b.rec.tensor(s).name
        assert said.count(f"`{name}`: grad None") == 1, said
        if line != 15:
            assert f"(of `{b.rec.tensor(t).name}`, line {line})" in said, said
    plain = said.replace("`", "").replace("\\", "")
    assert len(plain) <= 160, plain      # two lines of the graph's column at 1280 px


def test_a_jacobian_says_its_matrix_not_its_norm():
    from tapeviz.recording import FlowEntry, GradResult
    b = Builder()
    x = b.tensor("x", "variable", value=[1.0, 2.0, 3.0], shape=(3,))
    h = b.op("Mul", [b.read(x), b.read(x)], line=6)
    y = b.op("Mul", [h, b.tensor(kind="constant", value=1.0)], line=7, name="y")
    jac = b.tensor(value=[[2.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 6.0]], shape=(3, 3))
    b.rec.source = "\n" * 4 + "with tf.GradientTape(persistent=True) as tape:\n"
    for op in b.rec.ops:
        op.tapes = [0]
    # a jacobian's flow is d sum(y) / d t (the recorder asks for it in a second call)
    b.rec.tapes = [Tape(id=0, line=5, persistent=True, watch_accessed_variables=True, parent=None,
                        ops=[op.id for op in b.rec.ops], gradients=[
                            GradientCall(line=9, kind="jacobian", target=[y], sources=[x], results=[GradResult(x, jac)],
                                         flow=[FlowEntry(x, 7.483), FlowEntry(h, 1.732, [1.0, 1.0, 1.0]),
                                               FlowEntry(y, 1.732, [1.0, 1.0, 1.0])])])]
    said = view.sentence(b.rec, "call:0:0")
    assert said.endswith("the jacobian of `y` with respect to `x` is "
                         + markdown.literal("[[2., 0., 0.], [0., 4., 0.], [0., 0., 6.]]") + "."), said
    G = graph.build(b.rec, View(tape=0, call=0))
    assert G.nodes[t(x)]["grad_text"] == "jacobian 3×3"
    # y's own d sum(y)/dy is all ones, which read as y's gradient or the jacobian: not drawn;
    # between x and y the flow is said for what it is, and the legend says so too
    assert "grad" not in G.nodes[t(y)]["label"] and G.nodes[t(y)]["grad_text"] is None
    assert G.nodes[t(h)]["grad_text"] == "grad of sum(y) [1., 1., 1.]"
    legend = view.legend_text(b.rec, "call:0:0")
    assert "sum(y)" in legend.replace("\\", "") and "jacobian" in legend


def nested_recording():
    """NESTED as the recorder writes it: y = x * x * x on both tapes, the inner call's ops
    (backward, recorded by the outer tape), then the outer call of dy_dx."""
    from tapeviz.recording import BACKWARD, GradResult
    b = Builder()
    b.rec.source = NESTED
    x = b.tensor("x", "variable", value=1.5)
    xx = b.op("Mul", [b.read(x), b.read(x)], line=5, tapes=(0, 1))
    y = b.op("Mul", [xx, b.read(x)], line=5, tapes=(0, 1), name="y")
    dy = b.op("Mul", [xx, xx], phase=BACKWARD, tapes=(0,), line=6, name="dy_dx")
    d2 = b.tensor(value=9.0)
    inner = GradientCall(line=6, kind="gradient", target=[y], sources=[x], results=[GradResult(x, dy)])
    outer = GradientCall(line=7, kind="gradient", target=[dy], sources=[x], results=[GradResult(x, d2)])
    b.rec.tapes = [Tape(id=0, line=3, persistent=False, watch_accessed_variables=True, parent=None,
                        ops=[op.id for op in b.rec.ops if 0 in op.tapes], gradients=[outer]),
                   Tape(id=1, line=4, persistent=True, watch_accessed_variables=True, parent=0,
                        ops=[op.id for op in b.rec.ops if 1 in op.tapes], gradients=[inner])]
    return b.rec


def test_the_nested_tapes_sentence_is_read_off_the_recording():
    rec = nested_recording()
    said = view.sentence(rec, "call:0:0")
    assert said == ("The inner tape `inner_tape` recorded " + markdown.literal("y = x·x·x")
                    + "; the outer tape `outer_tape` recorded the inner gradient's ops, so "
                    + markdown.literal("d²y/dx² = 9.0 at x = 1.5") + ".")
    # the inner call alone is no second derivative: the plain sentence
    assert view.sentence(rec, "call:1:0").startswith("`inner_tape`, inside `outer_tape` recorded")


def test_expressions_keep_their_brackets():
    b = Builder()
    a, c = b.tensor("a", "constant", value=1.0), b.tensor("c", "constant", value=2.0)
    s = b.op("AddV2", [a, c])
    d = b.op("Sub", [a, b.op("Sub", [c, a])])
    assert sentences.expression(b.rec, b.op("Mul", [s, c], name="m")) == "(a + c)·c"
    assert sentences.expression(b.rec, d) == "a - (c - a)"
    assert sentences.expression(b.rec, b.op("Square", [s])) == "(a + c)²"


def two_files():
    """main.py calls mylib/model.py's loss: the Mean op is the module's line 3, and main.py's
    line 3 is something else entirely."""
    b = Builder()
    b.rec.program = "main.py"
    b.rec.source = "import tensorflow as tf\nfrom mylib.model import loss\nw = tf.Variable([1.0, 2.0])\n"
    b.rec.files = {"main.py": b.rec.source,
                   "mylib/model.py": "import tensorflow as tf\ndef loss(w):\n    return tf.reduce_mean(w * w)\n"}
    w = b.tensor("w", "variable", shape=(2,), value=[1.0, 2.0])
    b.rec.tensor(w).line, b.rec.tensor(w).file = 3, "main.py"
    sq = b.op("Mul", [b.read(w), b.read(w)], line=3, shape=(2,))
    mean = b.op("Mean", [sq], line=3, name="l")
    for op in b.rec.ops:
        op.file = "mylib/model.py"
    b.rec.tapes.append(Tape(id=1, line=4, persistent=False, watch_accessed_variables=True, parent=None,
                            ops=[op.id for op in b.rec.ops], file="main.py"))
    return b.rec, mean


def test_an_op_in_another_file_is_quoted_from_that_file():
    rec, mean = two_files()
    G = graph.build(rec, View(tape=1))
    node = o(rec, mean)
    assert G.nodes[node]["label"] == "tf.reduce_mean"     # read off the module's line, not main.py's
    where, excerpt = inspector.excerpt_for(rec, G, node, context=0)
    assert where == "line 3 of mylib/model.py"
    assert "tf.reduce_mean" in excerpt and "tf.Variable" not in excerpt
    assert view.step_words(G, node) == markdown.literal("tf.reduce_mean (forward, line 3 of mylib/model.py)")
    assert dict(view.node_choices(G))[node].endswith("line 3 of mylib/model.py)")
    assert inspector.details(rec, G, node).file == "mylib/model.py"
    # the editor holds main.py: its line 3 is not the op's, so nothing is marked there
    assert inspector.editor_line(rec, G, node) is None
    assert inspector.editor_line(rec, G, t(rec.tensors[0].id)) == 3       # w is main.py's line 3


def test_a_loop_cut_mid_step_opens_on_the_last_step_that_took_its_gradient():
    b = Builder()
    b.rec.source = "import tensorflow as tf\nw = tf.Variable(2.0)\nfor i in range(3):\n    with tf.GradientTape() as tape:\n        loss = w * w\n    g = tape.gradient(loss, w)\n"
    w = b.tensor("w", "variable", value=2.0)
    for step in range(3):
        loss = b.op("Mul", [b.read(w), b.read(w)], line=5, tapes=(step,), name="loss")
        calls = [GradientCall(line=6, kind="gradient", target=[loss], sources=[w])] if step < 2 else []
        b.rec.tapes.append(Tape(id=step, line=4, persistent=False, watch_accessed_variables=True, parent=None,
                                ops=[op.id for op in b.rec.ops if step in op.tapes], gradients=calls))
    # the third step was cut (a time limit) before its gradient call: the second is the lesson
    assert view.default_view(b.rec) == "call:1:0"
    said = view.sentence(b.rec, "call:1:0")
    assert said.startswith("One step of a loop whose `with` ran ×3 steps: step 2 is drawn; in it `tape`")


def test_a_loop_whose_later_steps_ran_uninstrumented_counts_every_step():
    """The debugger records a loop's first steps; the sentence and the note still speak of the
    whole loop, and the note is not mistaken for --tapes."""
    from tapeviz.words import notes
    rec = Recording(source="for step in range(313):\n    with tf.GradientTape() as tape:\n")
    rec.tapes = [Tape(id=i, line=2, persistent=False, watch_accessed_variables=True, parent=None,
                      file="program.py") for i in range(20)]
    assert tapes.loop_words(rec, rec.tapes[-1]).startswith(
        "one step of a loop whose `with` ran ×20 steps: step 20")
    rec.skipped = {"keep_steps": 20, "file": "program.py", "line": 2, "loop_tapes": 313,
                   "recorded": 20, "note": "steps 21–313 of the loop at line 2 ran uninstrumented"}
    assert tapes.loop_words(rec, rec.tapes[-1]).startswith(
        "one step of a loop whose `with` ran ×313 steps: step 20")
    assert notes.skipped_note(rec.skipped).startswith("**Later steps:** steps 21–313")
    assert notes.skipped_note({"tapes": "100:102", "note": "x"}).startswith("**--tapes:**")


def test_a_training_steps_sentence_gives_its_loss_and_the_range_of_its_gradients():
    # six norms in a row were a wall of numbers: the loss's value, then the smallest and the
    # largest gradient, by name (each one is on its own node)
    from tapeviz.recording import GradResult, Stats
    b = Builder()
    names = ["k1", "b1", "k2", "b2"]
    sources = [b.tensor(n, "variable", shape=(10, 10)) for n in names]
    loss = b.op("AddN", [b.read(s) for s in sources], line=6, name="loss")
    b.rec.tensor(loss).value = 2.329
    grads = []
    for k in range(4):
        g = b.tensor(shape=(10, 10))
        b.rec.tensor(g).stats = Stats(min=-1.0, max=1.0, mean=0.0, std=0.01 * (k + 1))   # size 0.1 (k + 1)
        grads.append(g)
    b.rec.source = "\n" * 4 + "with tf.GradientTape() as tape:\n"
    b.rec.tapes = [Tape(id=0, line=5, persistent=False, watch_accessed_variables=True, parent=None,
                        ops=[op.id for op in b.rec.ops], gradients=[GradientCall(
                            line=8, kind="gradient", target=[loss], sources=sources,
                            results=[GradResult(s, g) for s, g in zip(sources, grads)])])]
    said = view.sentence(b.rec, "call:0:0")
    assert said.endswith("the gradient of `loss` (value 2" + markdown.literal(".") + "329) gives all 4 sources a "
                         "gradient, from size 0.1 (`k1`) to size 0.4 (`b2`)."), said
