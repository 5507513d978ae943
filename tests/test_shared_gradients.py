"""TensorFlow leaks a gradient it returns for several distinct sources; the flow view's
extra sources made that happen on every step. The reference is plain TensorFlow: what it
leaves alive for the program's own sources, a recording must leave alive too, and no more."""
import gc
import textwrap
import weakref

import pytest

tf = pytest.importorskip("tensorflow")

from tapeviz.worker import recorder, shared_gradients  # noqa: E402

# A shape no other test makes, so that the tensors left alive are this test's
SHAPE = (3, 9, 11, 5)

LOOP = textwrap.dedent("""
    import tensorflow as tf
    x = tf.random.stateless_normal([3, 11, 13, 2], seed=[1, 2])
    kernel = tf.Variable(tf.random.stateless_normal([3, 3, 2, 5], seed=[3, 4]))
    bias = tf.Variable(tf.zeros([5]))
    for step in range(STEPS):
        with tf.GradientTape(persistent=PERSISTENT) as tape:
            conv = tf.nn.conv2d(x, kernel, 1, "VALID")
            biased = tf.nn.bias_add(conv, bias)       # d loss / d conv IS d loss / d biased
            loss = tf.reduce_sum(tf.nn.relu(biased) ** 2)
        grads = tape.gradient(loss, SOURCES)
        JACOBIAN
        del tape
    print(float(tf.reduce_sum(grads[0])))
    """)


def program(steps=6, sources="[kernel, bias]", persistent=False, jacobian=""):
    return (LOOP.replace("STEPS", str(steps)).replace("SOURCES", sources)
            .replace("PERSISTENT", str(persistent)).replace("JACOBIAN", jacobian))


def alive() -> int:
    """Tensors of SHAPE still alive once everything that could hold them is gone."""
    gc.collect()
    return sum(1 for o in gc.get_objects()
               if isinstance(o, shared_gradients.EagerTensor) and tuple(o.shape) == SHAPE)


def run_plain(source: str) -> str:
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "plain.py", "exec"), {"__name__": "__main__"})
    return out.getvalue()


def test_the_probe_measures_what_tensorflow_leaks():
    x = tf.constant([[1.0, 2.0]])
    with tf.GradientTape() as tape:
        tape.watch(x)
        a = tf.identity(x)
        b = tf.identity(a)
        y = tf.reduce_sum(b * b)
    grad_a, grad_b = tape.gradient(y, [a, b])
    shared = grad_a is grad_b
    ref = weakref.ref(grad_a)
    del tape, grad_a, grad_b, a, b, y
    gc.collect()
    leaked = ref() is not None
    assert shared and leaked          # TensorFlow 2.21: the bug this module repairs
    assert shared_gradients.leak_per_source() == 1


def test_a_recorded_loop_leaves_no_gradient_alive():
    before = alive()
    source = program()
    assert alive() == before
    rec = recorder.record(source)
    assert rec.error is None, rec.error
    assert rec.stdout == run_plain(source)
    # the flow was still asked for: conv's and biased's gradients have norms
    flow = rec.tapes[-1].gradients[0].flow
    assert len(flow) >= 4 and all(f.norm is not None for f in flow)
    del rec
    assert alive() == before          # before the repair: one per step, never freed


def test_a_jacobians_flow_leaves_no_gradient_alive():
    before = alive()
    rec = recorder.record(program(steps=3, persistent=True,
                                  jacobian="tape.jacobian(loss, bias)"))
    assert rec.error is None, rec.error
    assert any(call.kind == "jacobian" and call.flow for call in rec.tapes[-1].gradients)
    del rec
    assert alive() == before


def test_the_programs_own_shared_sources_leak_as_they_do_plainly():
    """A program that names both tensors of a pair leaks in TensorFlow; tapeviz gives back
    only what its own sources cost, so the same tensors stay alive as in a plain run."""
    source = program(steps=4, sources="[kernel, conv, biased]")
    before = alive()
    run_plain(source)
    plain_left = alive() - before
    assert plain_left == 4            # one per step: TensorFlow's own leak, the reference
    rec = recorder.record(source)
    assert rec.error is None, rec.error
    del rec
    assert alive() - before == 2 * plain_left
