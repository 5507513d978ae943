"""Big tensors' stats are computed off the op callback's path (capture/deferred.py): the
recording must still carry, for every big tensor, the stats NumPy gives for its plain
value, and the first NaN/Inf per phase must be the op where it appeared."""
import os
import textwrap

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tapeviz.worker import numerics, recorder  # noqa: E402
from tapeviz.worker.capture import tensors as capture_tensors  # noqa: E402
from tapeviz.worker.capture.deferred import Deferred  # noqa: E402


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_big_tensor_stats_equal_numpys_of_the_plain_value():
    n = capture_tensors.BIG * 3
    program = src(f"""
        import numpy as np
        import tensorflow as tf
        x = tf.constant(np.linspace(-2.0, 5.0, {n}, dtype=np.float32))
        y = tf.exp(x) - 3.0
        small = tf.reduce_sum(y)
        """)
    namespace = {}
    rec = recorder.record(program, namespace=namespace)
    assert rec.error is None
    for name in ("x", "y"):
        t = next(t for t in rec.tensors if t.name == name)
        want = numerics.stats(namespace[name].numpy())     # the reference: the plain value
        assert t.stats == want, name
        assert t.value is None                               # big: no full value
    assert next(t for t in rec.tensors if t.name == "small").stats is not None


def test_first_nan_is_the_big_tensors_op_even_when_a_small_one_follows():
    n = capture_tensors.BIG * 2
    program = src(f"""
        import numpy as np
        import tensorflow as tf
        big = tf.constant(np.full({n}, -1.0, dtype=np.float32))
        bad_big = tf.math.log(big)
        bad_small = tf.math.log(tf.constant(-1.0))
        inf_small = tf.math.log(tf.constant(0.0))
        """)
    rec = recorder.record(program)
    nan = [a for a in rec.alerts if a.kind == "nan"]
    assert len(nan) == 1
    assert rec.op(nan[0].op).line == 4                        # bad_big's line, not bad_small's
    assert next(t for t in rec.tensors if t.id == nan[0].tensor).stats.nan == n
    inf = [a for a in rec.alerts if a.kind == "inf"]
    assert len(inf) == 1 and rec.op(inf[0].op).line == 6


def test_deferred_jobs_run_in_order_within_their_byte_budget():
    done, held_max = [], []
    deferred = Deferred(budget=100)

    def job(i):
        def run(_):
            held_max.append(deferred.held)
            done.append(i)
        return run

    for i in range(50):
        deferred.submit(job(i), None, 40)
    deferred.drain()
    assert done == list(range(50))
    assert max(held_max) <= 100 + 40          # never more than the budget and one job
    deferred.submit(job(50), None, 40)        # after drain: done at once, no thread
    assert done[-1] == 50


def test_a_forked_child_drains_without_the_parents_thread():
    deferred = Deferred()
    deferred.submit(lambda _: None, None, 1)
    pid = os.fork()
    if pid == 0:                                  # the child: must not wait for a thread
        deferred.submit(lambda _: None, None, 1)
        deferred.drain()
        os._exit(0 if deferred.idle() else 1)
    _, status = os.waitpid(pid, 0)
    deferred.drain()
    assert os.WEXITSTATUS(status) == 0


def test_mid_size_tensors_held_until_kept_or_dropped():
    # 1000-element tensors are held, not described, until the bounds decide: kept ones
    # get numpy's stats of their value; a dropped op's NaN is still the first alert.
    program = src("""
        import numpy as np
        import tensorflow as tf
        bad = tf.math.log(tf.constant(np.full(1000, -1.0, dtype=np.float32)))
        x = tf.constant(np.linspace(0.0, 1.0, 1000, dtype=np.float32))
        for i in range(60):
            x = x * 1.01 + 0.5
        last = x
        """)
    namespace = {}
    rec = recorder.record(program, max_ops=40, namespace=namespace)
    assert rec.error is None and rec.dropped["ops"] > 0
    nan = [a for a in rec.alerts if a.kind == "nan"]
    assert len(nan) == 1 and nan[0].line == 3        # the log, whose op was dropped
    assert rec.op(nan[0].op) is None
    last = rec.tensor(rec.ops[-1].outputs[0])                 # the loop's last x
    assert last.stats == numerics.stats(namespace["last"].numpy())
    for t in rec.tensors:
        if t.dtype == "float32" and t.kind == "intermediate":
            assert t.stats is not None, t.id


def test_big_gradient_flow_norms_equal_numpys_of_the_plain_gradients():
    n = capture_tensors.BIG * 2
    program = src(f"""
        import tensorflow as tf
        x = tf.Variable(tf.random.normal([{n}], seed=1))
        with tf.GradientTape(persistent=True) as tape:
            h = tf.tanh(x * 2.0)
            y = tf.reduce_sum(h * h)
        g = tape.gradient(y, x)
        dh = tape.gradient(y, h)
        """)
    namespace = {}
    rec = recorder.record(program, namespace=namespace)
    assert rec.error is None
    ids = {t.name: t.id for t in rec.tensors}
    first = rec.tapes[0].gradients[0].flow
    norms = {f.tensor: f.norm for f in first}
    # the reference: NumPy's float64 norm of the gradients the program itself got; a big
    # float32 tensor is summed in float32 blocks (numerics._sums), within ~1e-8 of it
    for name, grad in (("x", "g"), ("h", "dh")):
        want = float(np.linalg.norm(namespace[grad].numpy().astype(np.float64)))
        assert norms[ids[name]] == pytest.approx(want, rel=1e-7), name
