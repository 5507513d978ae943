"""Recordings built by hand, the way the recorder would write them, one op at a time: the
small programs (w*x + b, two Dense layers, a chain, a loop) the graph, figure and view
tests draw, with no TensorFlow."""
from tapeviz.draw import graph
from tapeviz.recording import BACKWARD, FlowEntry, GradientCall, GradResult, Op, Recording, Stats, Tape, Tensor


class Builder:
    """Writes a recording the way the recorder would, one op at a time."""

    def __init__(self):
        self.rec = Recording(source="")
        self.next_id = 1

    def _id(self):
        self.next_id += 1
        return self.next_id - 1

    def tensor(self, name=None, kind="intermediate", shape=(), value=None, producer=None, dtype="float32"):
        t = Tensor(id=self._id(), name=name, shape=list(shape), dtype=dtype, kind=kind, value=value,
                   producer=producer)
        self.rec.tensors.append(t)
        return t.id

    def op(self, type, inputs, scope=None, phase="forward", tapes=(1,), name=None, line=None, shape=()):
        op = Op(id=self._id(), type=type, inputs=list(inputs), outputs=[], line=line, scope=scope,
                tapes=list(tapes), phase=phase)
        self.rec.ops.append(op)
        op.outputs.append(self.tensor(name=name, shape=shape, producer=op.id))
        return op.outputs[0]

    def read(self, variable, scope=None):
        return self.op("ReadVariableOp", [variable], scope=scope)


def wxb():
    """z = w*x + b on tape 1, plus u = x*x that the target does not use.

    gradient(z, [w, b, x]) with x an unwatched constant: its gradient is None.
    """
    b = Builder()
    w = b.tensor("w", "variable", value=2.0)
    x = b.tensor("x", "constant", value=3.0)
    bias = b.tensor("b", "variable", value=1.0)
    wx = b.op("Mul", [b.read(w), x], line=4)
    z = b.op("AddV2", [wx, b.read(bias)], name="z", line=4)
    u = b.op("Mul", [x, x], name="u", line=5)
    ones = b.tensor(kind="constant", value=1.0)
    dw = b.op("Mul", [ones, x], phase=BACKWARD, tapes=())
    db = b.op("Identity", [ones], phase=BACKWARD, tapes=())
    call = GradientCall(line=7, kind="gradient", target=[z], sources=[w, bias, x],
                        results=[GradResult(w, dw), GradResult(bias, db),
                                 GradResult(x, None, "x is not watched: it is a tf.constant")],
                        flow=[FlowEntry(w, 3.0), FlowEntry(wx, 1.0), FlowEntry(bias, 1.0), FlowEntry(z, 1.0)])
    tape_ops = [op.id for op in b.rec.ops if op.tapes]
    b.rec.tapes.append(Tape(id=1, line=3, persistent=False, watch_accessed_variables=True, parent=None,
                            watched=[w, bias], ops=tape_ops, gradients=[call]))
    return b.rec, dict(w=w, x=x, b=bias, wx=wx, z=z, u=u, dw=dw, db=db)


def keras_like():
    """Two Dense layers under "sequential/", a loss outside any layer, and their gradient ops."""
    b = Builder()
    x = b.tensor("x", "constant", shape=(4, 3))
    k1, b1 = b.tensor("kernel", "variable", shape=(3, 5)), b.tensor("bias", "variable", shape=(5,))
    k2, b2 = b.tensor("kernel_1", "variable", shape=(5, 1)), b.tensor("bias_1", "variable", shape=(1,))
    d = "sequential/dense"
    shape = b.op("Shape", [x], scope=d)           # x feeds the first layer twice
    h = b.op("MatMul", [x, b.read(k1, d)], scope=d)
    eps = b.tensor(kind="constant", value=1e-7)   # a layer's own unnamed constant
    h = b.op("BiasAdd", [h, b.read(b1, d), shape, eps], scope=d)
    h = b.op("Relu", [h], scope=d, name="h")
    d1 = "sequential/dense_1"
    y = b.op("MatMul", [h, b.read(k2, d1)], scope=d1)
    y = b.op("BiasAdd", [y, b.read(b2, d1)], scope=d1, name="y")
    loss = b.op("Mean", [b.op("Square", [y])], name="loss")
    g = b.op("OnesLike", [loss], phase=BACKWARD, tapes=())
    g = b.op("MatMul", [g, k2], scope="gradient_tape/sequential/dense_1/MatMul", phase=BACKWARD, tapes=())
    g = b.op("ReluGrad", [g, h], scope="gradient_tape/sequential/dense/Relu", phase=BACKWARD, tapes=())
    dk1 = b.op("MatMul", [x, g], scope="gradient_tape/sequential/dense/MatMul", phase=BACKWARD, tapes=())
    call = GradientCall(line=9, kind="gradient", target=[loss], sources=[k1], results=[GradResult(k1, dk1)])
    b.rec.tapes.append(Tape(id=1, line=3, persistent=False, watch_accessed_variables=True, parent=None,
                            watched=[k1, b1, k2, b2], ops=[op.id for op in b.rec.ops if op.tapes],
                            gradients=[call]))
    return b.rec, dict(x=x, k1=k1, b1=b1, k2=k2, h=h, y=y, loss=loss, dk1=dk1, eps=eps)


def chain(n, scope_every=0):
    """A chain of n ops on one tape; with scope_every, runs of ops share a layer scope."""
    b = Builder()
    t = b.tensor("x0", "variable")
    for i in range(n):
        scope = f"model/layer{i // scope_every}" if scope_every else None
        t = b.op("Mul" if i % 2 else "AddV2", [t], scope=scope)
    b.rec.tapes.append(Tape(id=1, line=1, persistent=False, watch_accessed_variables=True, parent=None))
    return b.rec


def t(i):
    return graph.tensor_node(i)


def o(rec, tensor_id):
    """The node of the op that made a tensor."""
    return graph.op_node(rec.tensor(tensor_id).producer)


def loop(n, line=6):
    """x = Variable(1); y = 0; for i in range(n): y = y + x * 0.001 (on one tape), then
    gradient(y, x): the recorder's ops per iteration are ReadVariableOp, Mul, AddV2."""
    b = Builder()
    x = b.tensor("x", "variable", value=1.0)
    y = b.tensor(kind="constant", value=0.0)
    for i in range(n):
        step = b.tensor(kind="constant", value=0.001)
        prod = b.op("Mul", [b.read(x), step], line=line)
        b.rec.tensor(prod).stats = Stats(0.001, 0.001, 0.001, 0.0)
        y = b.op("AddV2", [y, prod], line=line, name="y" if i == n - 1 else None)
        b.rec.tensor(y).stats = Stats(0.001 * (i + 1), 0.001 * (i + 1), 0.001 * (i + 1), 0.0)
    dx = b.tensor(kind="intermediate", value=n * 0.001)
    call = GradientCall(line=line + 1, kind="gradient", target=[y], sources=[x], results=[GradResult(x, dx)],
                        flow=[FlowEntry(x, n * 0.001), FlowEntry(y, 1.0)])
    b.rec.tapes.append(Tape(id=1, line=3, persistent=False, watch_accessed_variables=True, parent=None,
                            ops=[op.id for op in b.rec.ops], gradients=[call], end_line=line))
    return b.rec, dict(x=x, y=y)


def step_summary(call, loss, norms):
    """A streamed step summary (a recording's `steps` entry) at train.py line 7."""
    return {"call": call, "tape": call, "index": 0, "kind": "gradient", "line": 7,
            "file": "train.py", "target": loss, "scalar": True,
            "sources": list(range(len(norms))), "norms": norms}


STEP_SOURCES = [{"tensor": 1, "name": "w", "variable": "dense/kernel", "layer": "dense"},
                {"tensor": 2, "name": "b", "variable": "dense/bias", "layer": "dense"}]
