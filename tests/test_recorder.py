"""The recorder against plain TensorFlow: the same program run both ways must give the
same results, and the recording must say what TensorFlow's tape really did."""
import json
import pathlib
import re
import textwrap

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
from tensorflow.python.eager import context  # noqa: E402

from tapeviz import examples  # noqa: E402
from tapeviz.worker import recorder  # noqa: E402
from tapeviz.recording import BACKWARD, Recording  # noqa: E402
from plain_runs import program, run_plain  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def run_recorded(source: str, **kwargs) -> tuple[Recording, dict]:
    namespace = {}
    rec = recorder.record(source, namespace=namespace, **kwargs)
    # Every recording must survive its JSON form unchanged.
    assert Recording.from_json(rec.to_json()).to_dict() == rec.to_dict()
    return rec, namespace


def same(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def by_name(rec: Recording, name: str):
    matches = [t for t in rec.tensors if t.name == name]
    assert matches, f"no tensor named {name!r}: {[t.name for t in rec.tensors if t.name]}"
    return matches[-1]


def op_types(rec, ids):
    return [rec.op(i).type for i in ids]


# -- the eager guide's programs ---------------------------------------------------------------

def test_matmul_on_a_list_matches_plain_tf():
    program = src("""
        import tensorflow as tf
        m = tf.matmul([[2.0]], [[3.0]])
        print("hello, {}".format(m))
    """)
    plain, out = run_plain(program)
    rec, ns = run_recorded(program)
    assert rec.error is None
    assert rec.stdout == out
    matmul = [o for o in rec.ops if o.type == "MatMul"]
    assert len(matmul) == 1 and matmul[0].line == 2 and matmul[0].tapes == []
    result = rec.tensor(matmul[0].outputs[0])
    assert result.name == "m" and result.value == [[6.0]]
    same(ns["m"], plain["m"])


def test_fizzbuzz_prints_the_same_and_records_each_iteration():
    program = src("""
        import tensorflow as tf
        counter = tf.constant(0)
        for num in range(1, 16):
            num = tf.constant(num)
            if int(num % 3) == 0 and int(num % 5) == 0:
                print('FizzBuzz')
            elif int(num % 3) == 0:
                print('Fizz')
            elif int(num % 5) == 0:
                print('Buzz')
            else:
                print(num.numpy())
            counter += 1
    """)
    _, out = run_plain(program)
    rec, ns = run_recorded(program)
    assert rec.error is None and rec.stdout == out
    assert ns["counter"].numpy() == 15
    adds = [o for o in rec.ops if o.type == "AddV2" and o.line == 13]
    assert len(adds) == 15
    assert {o.line for o in rec.ops if o.type == "FloorMod"} <= {5, 7, 9}


LINEAR = src("""
    import tensorflow as tf
    w = tf.Variable([[1.0, 2.0]])
    x = tf.constant([[3.0], [4.0]])
    b = tf.Variable(0.5)
    with tf.GradientTape(persistent=PERSISTENT) as tape:
        wx = tf.matmul(w, x)
        z = wx + b
    dz_dw, dz_db = tape.gradient(z, [w, b])
""")


@pytest.mark.parametrize("persistent", [False, True])
def test_linear_gradient_equals_plain_tape_gradient(persistent):
    program = LINEAR.replace("PERSISTENT", str(persistent))
    if persistent:
        program += "dz_dx_again = tape.gradient(z, w)\n"
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program)
    assert rec.error is None
    same(ns["dz_dw"], plain["dz_dw"])
    same(ns["dz_db"], plain["dz_db"])
    (tape,) = rec.tapes
    assert tape.persistent is persistent and tape.line == 5 and tape.parent is None
    assert tape.end_line == 7
    assert sorted(op_types(rec, tape.ops)) == ["AddV2", "MatMul", "ReadVariableOp", "ReadVariableOp"]
    call = tape.gradients[0]
    assert call.kind == "gradient" and call.line == 8
    assert [r.source for r in call.results] == [by_name(rec, "w").id, by_name(rec, "b").id]
    grad_w = rec.tensor(call.results[0].grad)
    assert grad_w.value == plain["dz_dw"].numpy().tolist()
    assert [o.phase for o in rec.ops if o.line == 8] and \
        all(o.phase == BACKWARD for o in rec.ops if o.line == 8)
    # Backward ops of a call outside the block are on no tape.
    assert all(o.tapes == [] for o in rec.ops if o.phase == BACKWARD)
    if persistent:
        assert len(tape.gradients) == 2
        same(ns["dz_dx_again"], plain["dz_dw"])


@pytest.mark.parametrize("sources", [
    "[w, b]", "(w, b)", "[w]", "w", "x", "[x, w]", "{'w': w, 'b': b}", "[w, [b, x]]",
    "[[w, b]]", "[{'w': w}]", "(w, (b,))"])
def test_gradient_results_keep_the_structure_of_the_sources(sources):
    # tapeviz asks TensorFlow with one flat list and packs the results back itself; what
    # the program gets must be what plain TensorFlow returns, structure and values alike
    program = src(f"""
        import tensorflow as tf
        w = tf.Variable([2.0, 3.0])
        b = tf.Variable(1.0)
        x = tf.constant([4.0, 5.0])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(w * x * x + b)
        grads = tape.gradient(y, {sources})
        """)
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program)
    assert rec.error is None
    shape = tf.nest.map_structure(lambda t: type(t).__name__, plain["grads"])
    assert tf.nest.map_structure(lambda t: type(t).__name__, ns["grads"]) == shape
    assert type(ns["grads"]) is type(plain["grads"])
    for got, want in zip(tf.nest.flatten(ns["grads"]), tf.nest.flatten(plain["grads"])):
        same(got, want)


def test_flow_norms_equal_gradients_of_the_intermediates():
    program = LINEAR.replace("PERSISTENT", "False")
    rec, _ = run_recorded(program)
    # The reference: plain TF asked for d z / d wx and d z / d w directly.
    ref = src("""
        import tensorflow as tf
        w = tf.Variable([[1.0, 2.0]])
        x = tf.constant([[3.0], [4.0]])
        b = tf.Variable(0.5)
        with tf.GradientTape() as tape:
            wx = tf.matmul(w, x)
            z = wx + b
        d_wx, d_w = tape.gradient(z, [wx, w])
    """)
    plain, _ = run_plain(ref)
    flow = {f.tensor: f.norm for f in rec.tapes[0].gradients[0].flow}
    assert flow[by_name(rec, "wx").id] == pytest.approx(float(np.linalg.norm(plain["d_wx"])))
    assert flow[by_name(rec, "w").id] == pytest.approx(float(np.linalg.norm(plain["d_w"])))
    assert by_name(rec, "x").id not in flow      # a constant that nothing watched


def test_nested_tapes_second_derivative_with_backward_ops_on_the_outer_tape():
    program = src("""
        import tensorflow as tf
        x = tf.Variable(1.0)
        with tf.GradientTape() as t:
            with tf.GradientTape() as t2:
                y = x * x * x
            dy_dx = t2.gradient(y, x)
        d2y_dx2 = t.gradient(dy_dx, x)
        print(dy_dx.numpy(), d2y_dx2.numpy())
    """)
    plain, out = run_plain(program)
    rec, ns = run_recorded(program)
    assert rec.stdout == out == "3.0 6.0\n"
    same(ns["d2y_dx2"], plain["d2y_dx2"])
    outer, inner = rec.tapes
    assert inner.parent == outer.id and outer.parent is None
    backward_on_outer = [rec.op(i) for i in outer.ops if rec.op(i).phase == BACKWARD]
    assert backward_on_outer, "the outer tape must record the inner gradient's ops"
    assert all(o.line == 6 for o in backward_on_outer)
    assert all(inner.id not in o.tapes for o in backward_on_outer)
    assert by_name(rec, "dy_dx").value == 3.0 and by_name(rec, "d2y_dx2").value == 6.0


def test_keras_cnn_train_step_with_adam_matches_plain_tf():
    # The gallery's mnist_step example itself, seeded so both runs start from one model.
    program = examples.load("mnist_step").source.replace(
        "import tensorflow as tf\n", "import tensorflow as tf\ntf.keras.utils.set_random_seed(0)\n", 1)
    program += "after = [v.numpy() for v in model.trainable_variables]\n"
    apply_line = 1 + program.splitlines().index(
        "optimizer.apply_gradients(zip(grads, model.trainable_variables))")
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program)
    assert rec.error is None, rec.error
    same(ns["loss"], plain["loss"])
    for got, want in zip(ns["grads"], plain["grads"]):
        same(got, want)
    for got, want in zip(ns["after"], plain["after"]):
        same(got, want)
    (tape,) = rec.tapes
    call = tape.gradients[0]
    assert len(call.results) == 6 and all(r.grad is not None for r in call.results)
    # Big tensors keep stats, not values; the stats describe the real gradient.
    kernel_grad = rec.tensor(call.results[0].grad)
    assert kernel_grad.value is None
    assert kernel_grad.stats.max == pytest.approx(float(np.max(plain["grads"][0])), rel=1e-6)
    scopes = {rec.op(i).scope for i in tape.ops}
    # Keras numbers models per process ("sequential_1" after the plain run's "sequential").
    assert any(s and re.match(r"sequential(_\d+)?/conv2d", s) for s in scopes), scopes
    backward_scopes = {o.scope for o in rec.ops if o.phase == BACKWARD and o.scope}
    assert any(re.match(r"gradient_tape/sequential(_\d+)?/conv2d", s) for s in backward_scopes)
    assert len(call.flow) > 10
    # The optimizer's update runs outside the tape: on no tape.
    assert all(o.tapes == [] for o in rec.ops if o.line == apply_line)
    assert any(o.line == apply_line for o in rec.ops)
    size = len(rec.to_json())
    assert size < 2_000_000, f"recording JSON is {size} bytes"


# -- jacobian, tf.function, stop_recording, watch -----------------------------------------------

def test_jacobian_matches_plain_tf():
    program = src("""
        import tensorflow as tf
        x = tf.Variable([1.0, 2.0, 3.0])
        with tf.GradientTape(persistent=True) as tape:
            y = x * x
        j = tape.jacobian(y, x)
    """)
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program)
    same(ns["j"], plain["j"])
    call = rec.tapes[0].gradients[0]
    assert call.kind == "jacobian"
    assert rec.tensor(call.results[0].grad).value == plain["j"].numpy().tolist()
    flow = {f.tensor: f.norm for f in call.flow}
    assert flow[by_name(rec, "y").id] == pytest.approx(np.sqrt(3.0))   # d sum(y) / d y = ones


def test_tf_function_call_is_one_op_named_after_the_function():
    program = src("""
        import tensorflow as tf
        @tf.function
        def cube(a):
            return a * a * a
        x = tf.Variable(2.0)
        with tf.GradientTape() as tape:
            y = cube(x)
        dy_dx = tape.gradient(y, x)
    """)
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program)
    same(ns["dy_dx"], plain["dy_dx"])
    calls = [o for o in rec.ops if o.function == "cube"]
    forward = [o for o in calls if o.phase != BACKWARD]
    assert len(forward) == 1 and forward[0].type == "cube" and forward[0].line == 7
    assert forward[0].tapes == [0]
    assert not any(o.type in ("Mul",) and o.line == 4 for o in rec.ops), "traced ops leaked"
    backward = [o for o in calls if o.phase == BACKWARD]
    assert len(backward) == 1 and backward[0].line == 8      # the function's own gradient


@pytest.mark.parametrize("op_type,expect", [
    ("__inference_cube_25", ("cube", "inference")),
    ("__forward_train_step_32", ("train_step", "forward")),
    ("__inference___backward_cube_23_33", ("cube", "backward")),
])
def test_tf_function_op_names_give_the_python_name(op_type, expect):
    from tapeviz.worker.capture import function_call
    assert function_call(op_type) == expect


def test_stop_recording_records_nothing_and_explains_the_none():
    program = src("""
        import tensorflow as tf
        x = tf.Variable(3.0)
        with tf.GradientTape(persistent=True) as tape:
            a = x * 2.0
            with tape.stop_recording():
                y = a * a
        dy_dx = tape.gradient(y, x)
        da_dx = tape.gradient(a, x)
    """)
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program)
    assert plain["dy_dx"] is None and ns["dy_dx"] is None
    same(ns["da_dx"], plain["da_dx"])
    tape = rec.tapes[0]
    stopped = [o for o in rec.ops if o.line == 6]
    assert stopped and all(tape.id not in o.tapes for o in stopped)
    reason = tape.gradients[0].results[0].none_reason
    assert "stop_recording" in reason


def test_watch_makes_a_constant_differentiable():
    program = src("""
        import tensorflow as tf
        x = tf.constant(3.0)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = x * x
        dy_dx = tape.gradient(y, x)
    """)
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program)
    same(ns["dy_dx"], plain["dy_dx"])
    tape = rec.tapes[0]
    assert tape.watched == [by_name(rec, "x").id]
    assert op_types(rec, tape.ops) == ["Mul"]


def test_unwatched_constant_is_not_on_the_tape():
    program = src("""
        import tensorflow as tf
        x = tf.constant(3.0)
        with tf.GradientTape() as tape:
            y = x * x
        dy_dx = tape.gradient(y, x)
    """)
    plain, _ = run_plain(program)
    rec, _ = run_recorded(program)
    assert plain["dy_dx"] is None
    tape = rec.tapes[0]
    assert tape.ops == []
    assert tape.gradients[0].results[0].none_reason.startswith("not watched")


def test_integer_and_unconnected_sources_give_none_with_reasons():
    program = src("""
        import tensorflow as tf
        k = tf.constant(3)
        u = tf.Variable(1.0)
        x = tf.Variable(2.0)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(k)
            a = k * k
            y = x * x
        da_dk = tape.gradient(a, k)
        dy_du = tape.gradient(y, u)
    """)
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program)
    assert plain["da_dk"] is None and ns["da_dk"] is None
    assert plain["dy_du"] is None and ns["dy_du"] is None
    tape = rec.tapes[0]
    int_mul = [o for o in rec.ops if o.line == 7]
    assert int_mul and all(o.tapes == [] for o in int_mul), "int ops are not differentiable"
    assert "integer" in tape.gradients[0].results[0].none_reason
    assert "not watched" in tape.gradients[1].results[0].none_reason or \
        "no path" in tape.gradients[1].results[0].none_reason


@pytest.mark.parametrize("body,expect", [
    ("y = tf.constant(x.numpy() ** 2)", "left TensorFlow"),
    ("y = tf.round(x * x)", "non-differentiable"),
    ("y = tf.cast(tf.cast(x, tf.int32) * 2, tf.float32)", "non-differentiable"),
    ("y = tf.constant(5.0) * 2.0", "no path"),
])
def test_none_reasons_name_the_case(body, expect):
    program = src(f"""
        import tensorflow as tf
        x = tf.Variable(2.0)
        with tf.GradientTape() as tape:
            {body}
        g = tape.gradient(y, x)
    """)
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program)
    assert plain["g"] is None and ns["g"] is None
    reason = rec.tapes[0].gradients[0].results[0].none_reason
    assert expect in reason, reason


def test_replaced_variable_is_explained():
    program = src("""
        import tensorflow as tf
        x = tf.Variable(1.0)
        x = x + 1
        with tf.GradientTape() as tape:
            y = x * x
        g = tape.gradient(y, x)
    """)
    plain, _ = run_plain(program)
    rec, _ = run_recorded(program)
    assert plain["g"] is None
    reason = rec.tapes[0].gradients[0].results[0].none_reason
    assert "replaced" in reason and "line 3" in reason


def test_non_trainable_variable_is_explained():
    program = src("""
        import tensorflow as tf
        x = tf.Variable(2.0, trainable=False)
        with tf.GradientTape() as tape:
            y = x * x
        g = tape.gradient(y, x)
    """)
    plain, _ = run_plain(program)
    rec, _ = run_recorded(program)
    assert plain["g"] is None
    assert by_name(rec, "x").trainable is False
    assert "trainable=False" in rec.tapes[0].gradients[0].results[0].none_reason


def test_autograph_sees_the_program_source():
    program = src("""
        import tensorflow as tf
        @tf.function
        def relu_ish(x):
            if tf.reduce_sum(x) > 0:
                return x
            return -x
        y = relu_ish(tf.constant([-1.0, -2.0]))
    """)
    rec, ns = run_recorded(program)
    assert rec.error is None, rec.error
    assert ns["y"].numpy().tolist() == [1.0, 2.0]
    assert [o.type for o in rec.ops if o.function] == ["relu_ish"]


def test_watch_accessed_variables_false_matches_tf():
    program = src("""
        import tensorflow as tf
        x = tf.Variable(2.0)
        v = tf.Variable(3.0)
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(v)
            y = x * v
        gx, gv = tape.gradient(y, [x, v])
    """)
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program)
    assert plain["gx"] is None and ns["gx"] is None
    same(ns["gv"], plain["gv"])
    results = rec.tapes[0].gradients[0].results
    assert "watch_accessed_variables=False" in results[0].none_reason


# -- numerics ---------------------------------------------------------------------------------

def test_nan_from_log_of_zero_alerts_at_the_op_and_line():
    program = src("""
        import tensorflow as tf
        x = tf.Variable([0.0, 1.0])
        with tf.GradientTape() as tape:
            y = tf.math.log(x)
            z = y * 0.0
        g = tape.gradient(z, x)
    """)
    rec, _ = run_recorded(program)
    alerts = {(a.kind, a.phase): a for a in rec.alerts}
    inf = alerts[("inf", "forward")]
    assert rec.op(inf.op).type == "Log" and inf.line == 4
    nan = alerts[("nan", "forward")]
    assert rec.op(nan.op).type == "Mul" and nan.line == 5
    assert rec.tensor(inf.tensor).stats.inf == 1
    assert rec.alerts == sorted(rec.alerts, key=lambda a: a.op)
    assert by_name(rec, "y").value == ["-inf", 0.0]


# -- errors, limits, output ----------------------------------------------------------------------

def test_syntax_error_reports_its_line():
    rec, _ = run_recorded("import tensorflow as tf\nx = tf.constant(1.0)\ny = (x +\n")
    assert rec.error.type == "SyntaxError" and rec.error.line == 3
    assert rec.ops == []


def test_exception_keeps_the_partial_recording():
    program = src("""
        import tensorflow as tf
        x = tf.Variable(2.0)
        with tf.GradientTape() as tape:
            y = x * x
        raise ValueError("boom")
    """)
    rec, _ = run_recorded(program)
    assert rec.error.type == "ValueError" and rec.error.line == 5 and rec.error.message == "boom"
    assert any(o.type == "Mul" for o in rec.ops) and rec.tapes[0].ops


def test_infinite_loop_is_stopped_as_a_timeout_keeping_what_ran():
    program = src("""
        import tensorflow as tf
        x = tf.constant(1.0) * 2.0
        while True:
            pass
    """)
    rec, _ = run_recorded(program, timeout=1.0)
    assert rec.error.type == "Timeout" and rec.error.line in (3, 4)   # in the loop
    assert "time limit" in rec.error.message
    assert [o.type for o in rec.ops] == ["Mul"]


def test_a_timeout_keeps_the_line_the_first_alarm_interrupted():
    # On a busy machine the re-armed alarm can fire while the first Timeout unwinds, and
    # that Timeout's traceback no longer passes through the program: the line comes from
    # where the first alarm stopped it.
    session = recorder.Session("x = 1\ny = 2\nwhile True:\n    pass\n", "program.py")
    timer = recorder._Timer()
    timer.line = 3
    try:
        raise recorder.Timeout()
    except recorder.Timeout as exc:     # raised here, in the test file: no program frame
        error = recorder._error(session, exc, "program.py", 1.0, timer)
    assert error.type == "Timeout" and error.line == 3


def test_an_alarm_after_the_program_returned_is_not_a_timeout():
    # A program that ends just before its limit: the alarm may fire while tapeviz closes
    # the run (its context managers), outside the program. That is not the program timing
    # out, and a Timeout there would have no line of the program.
    import time
    with recorder._time_limit(0.05, "program.py") as timer:
        exec(compile("x = 1\n", "program.py", "exec"), {})
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:      # tapeviz's own code, the program returned
            pass
    assert not timer.fired


def test_huge_recordings_keep_the_newest_ops_and_say_what_was_dropped():
    program = src("""
        import tensorflow as tf
        x = tf.constant(0.0)
        for i in range(3000):
            x = x + 1.0
        print("x =", float(x))
    """)
    rec, _ = run_recorded(program, max_ops=500)
    assert rec.error is None and rec.stdout == "x = 3000.0\n"
    assert len(rec.ops) == 500 and rec.dropped["ops"] == 2500
    assert rec.ops[-1].id == 2999
    assert len(rec.tensors) < 1600    # tensors of dropped ops are forgotten too
    assert rec.tensor(rec.ops[-1].outputs[0]).value == 3000.0


def test_a_new_tape_each_step_is_a_new_tape_and_old_ones_are_bounded():
    program = src("""
        import tensorflow as tf
        w = tf.Variable(1.0)
        for step in range(400):
            with tf.GradientTape() as tape:
                loss = w * w
            w.assign_sub(0.01 * tape.gradient(loss, w))
    """)
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program, max_ops=500)
    same(ns["w"].numpy(), plain["w"].numpy())
    ids = [t.id for t in rec.tapes]
    assert len(ids) == len(set(ids)) == 25 and ids[-1] == 399
    assert rec.dropped["tapes"] == 375
    assert all(len(t.gradients) == 1 for t in rec.tapes), "steps' tapes were merged"
    kept = {o.id for o in rec.ops}
    assert all(set(t.ops) <= kept for t in rec.tapes)


def test_stdout_is_capped_keeping_the_newest():
    rec, _ = run_recorded("for i in range(10000):\n    print(i)\n", max_stdout=1000)
    assert rec.stdout.endswith("9999\n")
    assert "earlier characters dropped" in rec.stdout
    assert len(rec.stdout) < 1100


@pytest.mark.parametrize("program,hint", [
    (LINEAR.replace("PERSISTENT", "False") + "again = tape.gradient(z, w)\n", "persistent=True"),
    ("import tensorflow as tf\nx = tf.placeholder(tf.float32)\n", "tf.compat.v1"),
    ("import tensorflow as tf\ny = tf.matmul(tf.ones((2, 3)), tf.ones((2, 3)))\n", "transpose"),
])
def test_learner_mistakes_get_a_hint(program, hint):
    rec, _ = run_recorded(program)
    assert rec.error is not None and rec.error.hint and hint in rec.error.hint
    assert rec.error.line == len(program.rstrip("\n").splitlines())


def test_tf_error_messages_lose_tfs_internal_routing():
    rec, _ = run_recorded("import tensorflow as tf\ny = tf.matmul(tf.ones((1, 2)), tf.ones((1, 2)))\n")
    assert rec.error.type == "InvalidArgumentError"
    assert rec.error.message.startswith("Matrix size-incompatible: In[0]: [1,2], In[1]: [1,2]")
    assert rec.error.message.endswith("(in the MatMul op)")
    assert "function_node" not in rec.error.message and "name:" not in rec.error.message


def test_gradient_inside_a_persistent_tape_block_warns():
    program = src("""
        import tensorflow as tf
        x = tf.Variable(2.0)
        with tf.GradientTape(persistent=True) as tape:
            y = x * x
            g = tape.gradient(y, x)
    """)
    rec, _ = run_recorded(program)
    call = rec.tapes[0].gradients[0]
    assert call.warning and "inside" in call.warning
    assert rec.warnings and rec.warnings[0]["line"] == 5
    # TensorFlow records those gradient ops on the (still recording) tape itself.
    assert any(rec.op(i).phase == BACKWARD for i in rec.tapes[0].ops)


def test_no_global_patch_survives_a_run():
    before = tf.GradientTape
    rec1, ns1 = run_recorded("import tensorflow as tf\nT = tf.GradientTape\nt = T()\n")
    rec2, ns2 = run_recorded("import tensorflow\nfrom tensorflow import GradientTape as T\n")
    assert tf.GradientTape is before
    import sys
    assert sys.modules["tensorflow"].GradientTape is before
    assert ns1["T"] is not before and issubclass(ns1["T"], before)
    assert isinstance(ns1["t"], before)
    assert ns1["T"] is not ns2["T"], "each run gets its own tape class"
    assert context.context().op_callbacks == [], "the op callback was left behind"
    assert not {"__enter__", "__exit__"} & {k for k, v in vars(before).items()
                                            if getattr(v, "__qualname__", "").startswith("adopt_tapes")}


def test_recording_json_is_strict_and_carries_the_schema():
    rec, _ = run_recorded("import tensorflow as tf\nx = tf.constant([1.0, float('nan')])\ny = x * 2\n")
    data = json.loads(rec.to_json())
    assert data["schema"] == "tapeviz.recording/1"
    assert "NaN" not in rec.to_json()
    assert data["tensors"][-1]["value"] == [2.0, "nan"]


# -- real TensorFlow code: strings, big values, aliases of the tape, reset, faults -------------

def test_string_tensors_tf_print_and_string_arguments_record_without_stats():
    program = src("""
        import tensorflow as tf
        s = tf.constant("hello")
        words = tf.strings.split(tf.constant("a bb ccc"))
        tf.print("total:", tf.reduce_sum(tf.constant([1.0, 2.0])))
        @tf.function
        def scale(x, label):
            return x * 2.0
        y = scale(tf.constant(3.0), "three")
        print(s.numpy(), words.numpy(), y.numpy())
    """)
    plain, out = run_plain(program)
    rec, ns = run_recorded(program)
    assert rec.error is None, rec.error
    assert rec.stdout == out
    strings = [t for t in rec.tensors if t.dtype == "string"]
    assert strings and all(t.stats is None for t in strings)
    assert any(t.preview and "total:" in t.preview for t in strings)
    assert rec.to_json()


def test_big_values_keep_float64_stats_and_strict_json():
    program = src("""
        import tensorflow as tf
        big = tf.constant([1e20, 3e20, -2e20, 5e20] * 1000) * 1.0
        huge = tf.constant([1e300, -1e300, 3e300], tf.float64) * 1.0
        near = tf.constant(1000.0) + 0.01 * tf.random.normal([10000], seed=3)
    """)
    rec, ns = run_recorded(program)
    data = json.loads(rec.to_json())      # strict JSON: no NaN/Infinity literals
    assert data["error"] is None
    for name in ("big", "near"):
        a = ns[name].numpy().astype(np.float64)
        stats = by_name(rec, name).stats
        assert stats.mean == pytest.approx(a.mean(), rel=1e-9)
        assert stats.std == pytest.approx(a.std(), rel=1e-6)
    huge = ns["huge"].numpy()       # NumPy's own std overflows here: compare scaled
    assert by_name(rec, "huge").stats.std == pytest.approx((huge / 1e300).std() * 1e300,
                                                           rel=1e-9)


FAULT_PROGRAM = src("""
    import tensorflow as tf
    s = tf.constant("label")
    x = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(x * x)
    tf.print(s)
    print("grad", tape.gradient(y, x).numpy(), s.numpy())
""")


@pytest.mark.parametrize("where", ["stats", "plain_value", "preview", "scan"])
def test_a_fault_inside_tapeviz_never_changes_the_program(monkeypatch, where):
    _, out = run_plain(FAULT_PROGRAM)
    from tapeviz.worker import numerics
    from tapeviz.worker.capture import names

    def broken(*args, **kwargs):
        raise RuntimeError("injected fault")

    if where == "scan":
        monkeypatch.setattr(names.Names, "_name_one", broken)
    else:
        monkeypatch.setattr(numerics, where, broken)
    rec, ns = run_recorded(FAULT_PROGRAM)
    assert rec.error is None, rec.error
    assert rec.stdout == out
    assert any("injected fault" in w["message"] for w in rec.warnings), rec.warnings
    assert len(rec.tapes) == 1 and rec.tapes[0].gradients[0].results[0].grad is not None
    if where != "scan":
        assert any(t.warning and "injected fault" in t.warning for t in rec.tensors)


def test_a_fault_in_the_op_callback_never_reaches_the_program(monkeypatch):
    """TensorFlow raises an op callback's exception from the op itself, in the program: the
    callback's own faults must end as warnings, with the program's output unchanged."""
    plain_ns, out = run_plain(FAULT_PROGRAM)
    from tapeviz.worker.capture import ops

    def broken(*args, **kwargs):
        raise RuntimeError("injected fault")

    monkeypatch.setattr(ops.OpsAndTapes, "which_tapes", broken)   # runs inside the tape only
    rec, ns = run_recorded(FAULT_PROGRAM)
    assert rec.error is None, rec.error
    assert rec.stdout == out
    # The three ops run inside the tape fail to be recorded, each named; the others are kept.
    assert [(w["line"], w["message"]) for w in rec.warnings if "injected fault" in w["message"]] \
        == [(5, f"tapeviz could not record a {op} op (RuntimeError: injected fault)")
            for op in ("ReadVariableOp", "Mul", "Sum")], rec.warnings   # line 5: y = ...
    np.testing.assert_array_equal(ns["y"].numpy(), plain_ns["y"].numpy())
    assert not {"Mul", "Sum"} & {op.type for op in rec.ops if op.phase != BACKWARD}
    assert any(op.phase == BACKWARD for op in rec.ops)


@pytest.mark.parametrize("imports,tape", [
    ("import tensorflow.compat.v1 as tf", "tf.GradientTape"),
    ("import tensorflow.compat.v2 as tf", "tf.GradientTape"),
    ("from tensorflow.compat import v1 as tf", "tf.GradientTape"),
    ("import tensorflow as tf", "tf.compat.v1.GradientTape"),
    ("import tensorflow as tf\nfrom tensorflow import GradientTape", "GradientTape"),
    ("import tensorflow as tf\nfrom tensorflow.python.eager.backprop import GradientTape",
     "GradientTape"),
])
def test_every_alias_of_the_tape_is_instrumented(imports, tape):
    program = imports + "\n" + src(f"""
        x = tf.constant(3.0)
        with {tape}() as g:
            g.watch(x)
            y = x * x
        dy_dx = g.gradient(y, x)
        print(dy_dx)
    """)
    plain, out = run_plain(program)
    rec, ns = run_recorded(program)
    assert rec.stdout == out
    same(ns["dy_dx"], plain["dy_dx"])
    assert len(rec.tapes) == 1 and rec.tapes[0].gradients, rec.warnings
    grad = rec.tensor(rec.tapes[0].gradients[0].results[0].grad)
    assert grad.value == float(plain["dy_dx"].numpy())


TAPE_IN_A_TF_FUNCTION = program("tape_in_a_tf_function")


def test_a_tape_inside_a_tf_function_is_listed_with_its_function():
    plain, out = run_plain(TAPE_IN_A_TF_FUNCTION)
    rec, _ = run_recorded(TAPE_IN_A_TF_FUNCTION)
    assert rec.error is None and rec.stdout == out
    assert len(rec.tapes) == 1, "traced once, listed once"
    # the line and file of its `with`, not of the call that traced it
    tape = rec.tapes[0]
    assert tape.function == "grad_of_square" and (tape.file, tape.line) == (rec.program, 4)
    assert any(o.function == "grad_of_square" for o in rec.ops)
    said = [w for w in rec.warnings if w.get("line") == 4]
    assert len(said) == 1 and "--eager" in said[0]["message"]


def test_eager_records_a_tf_functions_tape_op_by_op_and_is_undone_after():
    plain, out = run_plain(TAPE_IN_A_TF_FUNCTION)
    rec, _ = run_recorded(TAPE_IN_A_TF_FUNCTION, eager=True)
    assert not tf.config.functions_run_eagerly(), "the switch is undone after the run"
    assert rec.error is None and rec.stdout == out and rec.eager
    assert any(w.get("kind") == "eager" for w in rec.warnings)
    assert [tp.line for tp in rec.tapes] == [4, 4] and not any(tp.function for tp in rec.tapes)
    for tape, x in zip(rec.tapes, (2.0, 3.0)):
        assert "Mul" in {rec.op(i).type for i in tape.ops}
        grad = rec.tensor(tape.gradients[0].results[0].grad)
        assert np.isclose(grad.value, 2 * x)


TRACED_STEP = src("""
    import tensorflow as tf
    w = tf.Variable([[1.0], [-2.0]])
    b = tf.Variable(0.5)
    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            pred = tf.nn.relu(x @ w + b)
            loss = tf.reduce_mean((pred - y) ** 2)
        dw, db = tape.gradient(loss, [w, b])
        w.assign_sub(0.1 * dw)
        b.assign_sub(0.1 * db)
        return loss
    x = tf.constant([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])
    y = tf.constant([[1.0], [0.0], [2.0]])
    print([float(train_step(x, y)) for _ in range(3)])
    graph = train_step.get_concrete_function(x, y).graph
    built = [(op.type, op.name, [o.shape.as_list() for o in op.outputs])
             for op in graph.get_operations()]
""")


def test_a_traced_tape_shows_the_ops_traced_into_its_graph():
    """Without --eager, a tape in a @tf.function shows the ops TensorFlow built into the
    function's graph in its block and gradient call, in the order, types and shapes of the
    graph plain TensorFlow builds; the graph itself, the results and the output unchanged."""
    from tapeviz.draw import gradient_flow, graph, overview
    from tapeviz.draw.options import View
    from tapeviz.state import view
    plain, out = run_plain(TRACED_STEP)
    rec, ns = run_recorded(TRACED_STEP)
    assert rec.error is None and rec.stdout == out
    assert ns["built"] == plain["built"], "the function's graph is the one TF builds plainly"
    same(ns["w"].numpy(), plain["w"].numpy())
    (tape,) = rec.tapes
    assert tape.function == "train_step" and (tape.line, tape.end_line) == (6, 8)
    traced = [op for op in rec.ops if op.traced]
    assert traced and all(op.traced == "train_step" for op in traced)
    # plain TF's graph, Placeholders and Consts aside (a constant is a tensor, as eagerly):
    # the tape's block, then its gradient, then what follows (not the tape's)
    reference = [(t, shapes) for t, _, shapes in plain["built"] if t not in ("Placeholder", "Const")]
    drawn = [(op.type, [rec.tensor(o).shape for o in op.outputs]) for op in traced]
    assert drawn == reference[:len(drawn)] and reference[len(drawn)][0] == "Mul"   # 0.1 * dw
    forward = [op for op in traced if op.phase != BACKWARD]
    assert [op.id for op in forward] == tape.ops and {op.line for op in forward} == {7, 8}
    assert [op.type for op in forward][:2] == ["ReadVariableOp", "MatMul"]
    assert {rec.tensor(op.inputs[0]).name for op in forward if op.type == "ReadVariableOp"} \
        == {"w", "b"}, "the graph's reads are of the program's variables"
    assert {"ReluGrad", "MatMul"} <= {op.type for op in traced if op.phase == BACKWARD}
    assert all(rec.tensor(t).value is None for op in traced for t in op.outputs)
    (call,) = tape.gradients
    assert [rec.tensor(t).name for t in call.target] == ["loss"] and call.line == 9
    assert [rec.tensor(r.grad).shape for r in call.results] == [[2, 1], []]
    assert gradient_flow.flow_norms(rec, tape.id, 0) is None, "no flow was computed: nothing to colour"
    said = view.sentence(rec, view.default_view(rec))
    assert "was traced into tf.function `train_step`" in said and "`w`: grad 2×1" in said
    fig = overview.figure(rec, tape=tape.id, call=0)
    assert "traced in tf.function train_step" in fig.layout.title.text
    drawn_graph = graph.build(rec, View(tape=tape.id, call=0))
    assert drawn_graph.graph["traced"] == "train_step"
    assert any("traced into tf.function train_step" in data.get("hover", "")
               for _, data in drawn_graph.nodes(data=True))


def _variable_names_and_keras(program: str) -> tuple[set, list]:
    """The recording's names of the variables a program made, and Keras's own names for
    them (layer and weight, from the paths the program put in `paths`)."""
    rec, ns = run_recorded(program)
    assert rec.error is None
    kept = {t.name for t in rec.tensors if t.kind == "variable"}
    return kept, ["/".join(p.split("/")[-2:]) for p in ns["paths"]]


def test_variables_of_a_subclassed_keras_model_are_named_by_their_layer():
    """A subclassed model builds its layers in its first call, where TensorFlow's name for
    each variable keeps only the model ("actor_critic/kernel"): the recording names them as
    Keras's own path does, layer and weight ("actor/kernel")."""
    program = src("""
        import tensorflow as tf
        import keras
        class ActorCritic(keras.Model):
            def __init__(self):
                super().__init__()
                self.common = keras.layers.Dense(4, activation="relu", name="common")
                self.actor = keras.layers.Dense(2, name="actor")
            def call(self, x):
                return self.actor(self.common(x))
        model = ActorCritic()
        x = tf.ones([1, 3])
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        paths = [v.path for v in model.trainable_variables]
    """)
    kept, keras_names = _variable_names_and_keras(program)
    assert keras_names == ["common/kernel", "common/bias", "actor/kernel", "actor/bias"]
    assert set(keras_names) <= kept, kept


def test_a_loop_variable_does_not_name_every_weight_it_held():
    """`for w in model.trainable_weights` binds `w` to each weight in turn: the weights keep
    Keras's own names (its paths, as the program reads them), the program's own unique name
    for one of them wins, and a name assigned each weight in turn names none."""
    program = src("""
        import tensorflow as tf
        import keras
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="hidden"),
                                  keras.layers.Dense(1, name="out")])
        for w in model.trainable_weights:
            print(w.shape)
        for w in model.trainable_weights:
            print(float(tf.reduce_sum(w)))
            total = tf.reduce_sum(w * w)
        for i in range(4):
            weight = model.trainable_weights[i]
            norm = tf.norm(weight)
        x = tf.ones([2, 3])
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x))
        grads = tape.gradient(loss, model.trainable_weights)
        out_kernel = model.layers[1].kernel
        y = tf.reduce_sum(out_kernel)
        paths = [v.path for v in model.trainable_weights]
    """)
    names, keras_names = _variable_names_and_keras(program)
    assert keras_names == ["hidden/kernel", "hidden/bias", "out/kernel", "out/bias"]
    assert names == {"hidden/kernel", "hidden/bias", "out_kernel", "out/bias"}, names


def test_loop_variables_keep_their_names_when_nothing_names_better():
    """A loop over tf.Variables the program made without names (TF calls each "Variable"), or
    over tensors: the loop's name is the only one there is, and stays."""
    program = src("""
        import tensorflow as tf
        for v in [tf.Variable(1.0), tf.Variable(2.0)]:
            y = v * v
        for i, t in enumerate([tf.constant(3.0), tf.constant(4.0)]):
            z = t + 1.0
        a = tf.Variable(5.0)
        b = tf.Variable(6.0)
        for v in [a, b]:
            q = v * 2.0
    """)
    rec, _ = run_recorded(program)
    assert rec.error is None
    assert sorted(t.name for t in rec.tensors if t.kind == "variable") == ["a", "b", "v", "v"]
    assert [t.value for t in rec.tensors if t.name == "t"] == [3.0, 4.0]


def test_a_tape_tapeviz_cannot_follow_is_named_in_warnings():
    program = src("""
        import tensorflow as tf
        from tensorflow.python.eager import backprop
        def plain_tape():
            return backprop.GradientTape()
        print("traced", tf.function(lambda x: x * 2.0)(tf.constant(1.0)).numpy())
        GradientTape = None
    """)
    rec, _ = run_recorded(program)
    assert rec.tapes == [] and rec.error is None
    assert any("no tape" in w["message"] for w in rec.warnings)


def test_reset_starts_a_new_span_and_explains_the_none():
    program = src("""
        import tensorflow as tf
        x = tf.Variable(2.0)
        w = tf.Variable(5.0)
        with tf.GradientTape(persistent=True) as tape:
            y = x * x
            tape.reset()
            z = y * w
        dz_dx, dz_dw = tape.gradient(z, [x, w])
    """)
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program)
    assert plain["dz_dx"] is None and ns["dz_dx"] is None
    same(ns["dz_dw"], plain["dz_dw"])
    tape = rec.tapes[0]
    assert len(tape.recording_spans) == 2 and len(tape.resets) == 1
    assert tape.resets[0]["line"] == 6
    assert all(rec.op(i).line >= 7 for i in tape.ops), "the ops reset() discarded are gone"
    reason = tape.gradients[0].results[0].none_reason
    assert "reset()" in reason and "line 6" in reason, reason


@pytest.mark.parametrize("program,expect", [
    # the seed's case: a constant that only met a variable on the tape was never watched
    ("""
        import tensorflow as tf
        w = tf.Variable(2.0)
        b = tf.Variable(1.0)
        x = tf.convert_to_tensor(10.)
        with tf.GradientTape() as tape:
            z = w * x + b
        g = tape.gradient(z, x)
    """, ["`x` was never watched"]),
    # NumPy on a line of its own, the result turned back into a tensor later
    ("""
        import numpy as np
        import tensorflow as tf
        x = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
        with tf.GradientTape() as tape:
            x2 = x ** 2
            y = np.mean(x2, axis=0)
            y = tf.reduce_mean(y, axis=0)
        g = tape.gradient(y, x)
    """, ["NumPy", "line 6", "np.mean(x2"]),
    # a stateful op cuts the path
    ("""
        import tensorflow as tf
        x0 = tf.Variable(3.0)
        x1 = tf.Variable(0.0)
        with tf.GradientTape() as tape:
            x1.assign_add(x0)
            y = x1 ** 2
        g = tape.gradient(y, x0)
    """, ["stateful", "x1.assign_add(x0)", "line 5", "AssignAddVariableOp"]),
    # used inside the block, but while recording was stopped
    ("""
        import tensorflow as tf
        x = tf.Variable(2.0)
        y = tf.Variable(3.0)
        with tf.GradientTape() as t:
            x_sq = x * x
            with t.stop_recording():
                y_sq = y * y
            z = x_sq + y_sq
        g = t.gradient(z, {"x": x, "y": y})["y"]
    """, ["`y` was used while recording was stopped at line 7"]),
])
def test_none_reasons_name_the_variable_the_cause_and_the_line(program, expect):
    program = src(program)
    plain, _ = run_plain(program)
    rec, ns = run_recorded(program)
    assert plain["g"] is None and ns["g"] is None
    results = [r for r in rec.tapes[0].gradients[0].results if r.grad is None]
    assert len(results) == 1
    for words in expect:
        assert words in results[0].none_reason, results[0].none_reason


def test_raise_base_exception_keeps_output_and_recording():
    program = src("""
        import tensorflow as tf
        x = tf.Variable(1.0)
        with tf.GradientTape() as tape:
            y = x * 3.0
        print("so far", tape.gradient(y, x).numpy())
        raise BaseException("stop here")
    """)
    rec, _ = run_recorded(program)
    assert rec.error.type == "BaseException" and rec.error.line == 6
    assert rec.stdout == "so far 3.0\n" and len(rec.tapes) == 1


def test_os_exit_sends_the_output_and_the_recording_made_so_far(monkeypatch):
    import os

    class Exited(BaseException):
        pass

    def process_exit(code):          # stands in for the real exit, which would end pytest
        raise Exited(code)

    monkeypatch.setattr(os, "_exit", process_exit)
    program = src("""
        import os
        import tensorflow as tf
        x = tf.Variable(2.0)
        with tf.GradientTape() as tape:
            y = x * x
        print("grad", tape.gradient(y, x).numpy())
        tf.print("tf.print, to stderr")
        os._exit(3)
        print("never")
    """)
    sent = []
    recorder.record(program, emit=sent.append)
    assert os._exit is process_exit, "the hook is undone after the run"
    printed = "".join(m["text"] for m in sent if m["type"] == "stdout")
    assert printed == "grad 4.0\n"
    final = [m for m in sent if m["type"] == "recording"]
    assert len(final) == 1 and final[0]["exit_status"] == 3
    rec = Recording.from_dict(final[0]["recording"])
    assert rec.error.type == "SystemExit" and rec.error.line == 8
    assert rec.stdout == "grad 4.0\n" and len(rec.tapes) == 1
    assert rec.stderr == "tf.print, to stderr\n"
    assert rec.tapes[0].gradients[0].results[0].grad is not None


NATIVE_STDOUT = src("""
    import os
    import subprocess
    import sys
    import tensorflow as tf

    @tf.function
    def double(x):
        tf.print("inside the function:", x, output_stream=sys.stdout)
        return x * 2

    print("before")
    y = double(tf.constant(3.0))
    tf.print("eager:", y, output_stream=sys.stdout)
    sys.stdout.flush()
    os.write(1, b"os.write\\n")
    subprocess.run([sys.executable, "-c", "print('from a subprocess')"], check=True)
    print("after", y.numpy())
""")


@pytest.mark.slow   # plain Python, the reference, runs as a program of its own
def test_writes_below_python_to_stdout_are_the_programs_output_in_order(tmp_path):
    """tf.print inside a tf.function (no op callback sees it), os.write(1, ...) and a
    subprocess write to file descriptor 1: the reference is the same program's real stdout,
    run plainly in its own process."""
    program = tmp_path / "native.py"
    program.write_text(NATIVE_STDOUT)
    import subprocess
    import sys
    plain = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                           check=True).stdout
    assert "inside the function: 3" in plain          # the reference shows what is at stake
    rec, _ = run_recorded(NATIVE_STDOUT)
    assert rec.error is None, rec.error
    assert rec.stdout == plain


STDERR = src("""
    import os, sys, warnings
    import tensorflow as tf
    print("BEGIN", file=sys.stderr, flush=True)   # what TensorFlow's import wrote comes before
    print("to stdout")
    tf.print("tf.print's default stream:", tf.constant([1, 2]))
    print("Python's stderr", file=sys.stderr)
    os.write(2, b"file descriptor 2\\n")
    warnings.warn("a warning")
    with tf.GradientTape(persistent=True) as tape:
        x = tf.constant(2.0)
        tape.watch(x)
        y = x * x
        dy_dx = tape.gradient(y, x)                # TensorFlow warns: inside the block
    print("done", dy_dx.numpy())
""")


@pytest.mark.slow   # plain Python, the reference, runs as a program of its own
def test_stderr_is_the_programs_stderr_as_python_writes_it(tmp_path):
    """tf.print without output_stream, Python's sys.stderr, fd 2 and warnings (Python's and
    TensorFlow's): the reference is the same program run plainly, with the worker's
    TensorFlow log level. Recorded through the command line, in a worker as the app runs
    it (in-process, pytest would catch the warnings itself). A learner's tf.print showed
    nowhere before."""
    import os
    import subprocess
    import sys
    program = tmp_path / "program.py"
    program.write_text(STDERR)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    plain = subprocess.run([sys.executable, str(program)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=True)
    plain_stderr = plain.stderr[plain.stderr.index("BEGIN\n"):]
    assert "tf.print's default stream: [1 2]" in plain_stderr
    assert "WARNING:tensorflow:Calling GradientTape.gradient on a persistent tape" in plain_stderr
    recorded = subprocess.run([sys.executable, "-m", "tapeviz", "record", str(program),
                               "-o", str(tmp_path / "run.json")], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    rec = json.loads((tmp_path / "run.json").read_text())
    assert rec["stdout"] == plain.stdout and recorded.stdout == plain.stdout
    assert rec["stderr"] == plain_stderr
    assert plain_stderr in recorded.stderr              # the terminal shows it as plainly


def test_tf_print_to_sys_stdout_is_in_the_recorded_output_in_order():
    program = src("""
        import sys
        import tensorflow as tf
        print("before")
        tf.print("tensor:", tf.constant([1, 2]), output_stream=sys.stdout)
        tf.print("end-less", output_stream=sys.stdout, end="")
        tf.print("to stderr")
        print("after")
    """)
    rec, _ = run_recorded(program)
    assert rec.error is None, rec.error
    assert rec.stdout == "before\ntensor: [1 2]\nend-lessafter\n"


def test_a_tape_the_program_dropped_holds_no_tensors():
    # tapeviz keeps each tape's tensors (for its gradient-flow questions) on the tape itself:
    # once the program lets a persistent tape go, they must go with it.
    import gc
    from tapeviz.worker.capture.ops import _TapeState
    program = src("""
        import tensorflow as tf
        x = tf.Variable(2.0)
        for _ in range(3):
            with tf.GradientTape(persistent=True) as tape:
                y = x * x
            g = tape.gradient(y, x)
        del tape
    """)
    rec, _ = run_recorded(program)
    assert len(rec.tapes) == 3 and all(t.ops for t in rec.tapes)
    gc.collect()
    holding = [s for s in gc.get_objects() if isinstance(s, _TapeState) and s.held]
    assert holding == []
