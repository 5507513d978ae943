"""A PyTorch program recorded into the tape's recording (tapeviz/worker/autograd/), checked
against PyTorch's own answers: `.grad` after a plain run, what `torch.autograd.grad`
returns, the weights a training loop ends with, and what the program prints. Skipped where
PyTorch is not installed (an optional extra: `pip install .[torch]`)."""
import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tapeviz import examples  # noqa: E402
from tapeviz.matching import match  # noqa: E402
from tapeviz.recording import BACKWARD, FORWARD, PYTORCH, TENSORFLOW  # noqa: E402
from tapeviz.worker import recorder  # noqa: E402


ROOT = Path(__file__).resolve().parent.parent


def plain(source: str) -> tuple:
    """(what it printed, its globals): the program run by plain Python, no tapeviz."""
    namespace = {"__name__": "__main__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "program.py", "exec"), namespace)
    return out.getvalue(), namespace


def recorded(source: str) -> tuple:
    namespace = {}
    rec = recorder.record(source, timeout=None, namespace=namespace)
    return rec, namespace


def value(rec, tensor_id):
    return rec.tensor(tensor_id).value


SEED = examples.load("pytorch_vs_tape").twin


def test_the_seeds_gradients_are_pytorchs_own_and_the_program_prints_the_same():
    printed, plain_ns = plain(SEED)
    rec, ns = recorded(SEED)
    assert rec.error is None and rec.warnings == []
    assert rec.framework == PYTORCH
    assert rec.stdout == printed
    call = rec.tapes[0].gradients[0]
    got = {rec.tensor(r.source).name: value(rec, r.grad) for r in call.results}
    want = {name: plain_ns[name].grad.item() for name in ("x", "w", "b")}
    assert got == want == {"x": 2.0, "w": 10.0, "b": 1.0}
    # and the program's own tensors are what PyTorch made, with the same .grad
    assert [ns[n].grad.item() for n in "xwb"] == [2.0, 10.0, 1.0]


def test_the_backward_ops_are_the_autograd_graphs_nodes_linked_as_they_ran():
    rec, _ = recorded(SEED)
    forward = [op for op in rec.ops if op.phase == FORWARD]
    backward = [op for op in rec.ops if op.phase == BACKWARD]
    assert [op.type for op in forward] == ["mul", "add"]
    assert sorted(op.type for op in backward) == ["AccumulateGrad"] * 3 + ["AddBackward0", "MulBackward0"]
    # at the line of y.backward(), as a tape's backward ops are at tape.gradient's
    call = rec.tapes[0].gradients[0]
    assert {op.line for op in backward} == {call.line} and call.line == SEED.splitlines().index("y.backward()") + 1
    # MulBackward0 reads what mul saved (w and x), and the gradient AddBackward0 sent it
    mul, = [op for op in forward if op.type == "mul"]
    mul_back, = [op for op in backward if op.type == "MulBackward0"]
    add_back, = [op for op in backward if op.type == "AddBackward0"]
    assert set(mul.inputs) < set(mul_back.inputs) and set(add_back.outputs) & set(mul_back.inputs)
    # d y / d (w * x) is 1, as the flow says, and w's gradient is x's value
    tape = rec.tapes[0]
    assert tape.ops == [op.id for op in forward]
    flow = {rec.tensor(f.tensor).name: f.value for f in tape.gradients[0].flow}
    assert flow["y"] == 1.0 and flow["w"] == 10.0


LOOP = textwrap.dedent("""\
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 4)
    target = x.sum(dim=1, keepdim=True)
    norms = []
    for step in range(5):
        opt.zero_grad()
        loss = ((model(x) - target) ** 2).mean()
        loss.backward()
        norms.append([p.grad.norm().item() for p in model.parameters()])
        opt.step()
        print(step, round(loss.item(), 6))
    """)


def test_a_training_loops_steps_hold_each_parameters_gradient_norm_and_change_nothing():
    printed, plain_ns = plain(LOOP)
    rec, ns = recorded(LOOP)
    assert rec.error is None and rec.stdout == printed
    for p_plain, p_rec in zip(plain_ns["model"].parameters(), ns["model"].parameters()):
        assert torch.equal(p_plain, p_rec)            # bit-equal weights after five steps
    assert len(rec.steps) == 5
    names = [rec.step_sources[i].variable for i in rec.steps[0].sources]
    assert names == ["0/weight", "0/bias", "2/weight", "2/bias"]
    for summary, want in zip(rec.steps, plain_ns["norms"]):
        assert summary.norms == pytest.approx(want, rel=1e-5)
        assert summary.scalar and isinstance(summary.target, float)
    assert [round(s.target, 6) for s in rec.steps] == [float(line.split()[1]) for line in printed.splitlines()]


def test_autograd_grad_with_create_graph_gives_the_second_derivative():
    source = textwrap.dedent("""\
        import torch
        x = torch.tensor(3.0, requires_grad=True)
        y = x ** 3
        (dy_dx,) = torch.autograd.grad(y, x, create_graph=True)
        (d2y_dx2,) = torch.autograd.grad(dy_dx, x)
        print(dy_dx.item(), d2y_dx2.item())
        """)
    printed, _ = plain(source)
    rec, _ = recorded(source)
    assert rec.stdout == printed == "27.0 18.0\n"
    first, second = (t.gradients[0] for t in rec.tapes)
    assert value(rec, first.results[0].grad) == 27.0
    assert value(rec, second.results[0].grad) == 18.0
    assert first.line == 4 and second.line == 5
    assert rec.tapes[0].persistent          # create_graph keeps the graph, as persistent=True


def test_a_second_backward_fails_as_plainly_and_keeps_the_first():
    source = textwrap.dedent("""\
        import torch
        w = torch.tensor(2.0, requires_grad=True)
        y = w * w
        y.backward()
        y.backward()
        """)
    with pytest.raises(RuntimeError) as plainly:
        plain(source)
    rec, _ = recorded(source)
    assert rec.error.type == "RuntimeError" and rec.error.line == 5
    assert rec.error.message == str(plainly.value)
    first, second = (t.gradients[0] for t in rec.tapes)
    assert first.error is None and value(rec, first.results[0].grad) == 4.0
    assert second.error.startswith("RuntimeError")


def test_tensors_the_program_lets_go_of_die_as_they_do_plainly():
    source = textwrap.dedent("""\
        import gc, weakref
        import torch
        w = torch.ones(3, requires_grad=True)
        h = torch.ones(3) * 2
        ref = weakref.ref(h)
        loss = (w * h).sum()
        loss.backward()
        del h, loss
        gc.collect()
        print(ref() is None)
        """)
    printed, _ = plain(source)
    rec, _ = recorded(source)
    assert rec.stdout == printed == "True\n"


def test_the_twin_example_matches_the_tape_op_by_op_with_the_same_gradients():
    example = examples.load("pytorch_vs_tape")
    tf_rec, _ = recorded(examples.code("pytorch_vs_tape"))
    torch_rec, _ = recorded(example.twin)
    assert tf_rec.framework == TENSORFLOW and torch_rec.framework == PYTORCH
    cmp = match.compare(tf_rec, torch_rec)
    assert not cmp.differ
    assert [(r.op, r.status) for r in cmp.rows] == [("Mul", match.SAME), ("AddV2", match.SAME)]
    grads = {g.source: (value(tf_rec, g.grad_a), value(torch_rec, g.grad_b)) for g in cmp.gradients}
    assert grads == {"x": (2.0, 2.0), "w": (10.0, 10.0), "b": (1.0, 1.0)}


def test_a_nan_in_the_backward_pass_is_the_backward_alert():
    source = textwrap.dedent("""\
        import torch
        x = torch.tensor(0.0, requires_grad=True)
        y = torch.sqrt(x) * 0.0
        y.backward()
        print(x.grad)
        """)
    printed, _ = plain(source)
    rec, _ = recorded(source)
    assert rec.stdout == printed
    assert rec.tensor(rec.tapes[0].gradients[0].results[0].grad).stats.nan == 1
    (alert,) = [a for a in rec.alerts if a.phase == BACKWARD]
    assert alert.kind == "nan" and rec.op(alert.op).type == "SqrtBackward0" and alert.line == 4


def test_past_the_op_bound_every_step_keeps_its_summary_and_nothing_else_grows():
    printed, plain_ns = plain(LOOP)
    rec = recorder.record(LOOP, timeout=None, max_ops=12)
    assert rec.error is None and rec.stdout == printed
    assert len(rec.steps) == 5                              # every step's summary
    assert 1 <= len(rec.tapes) < 5                          # the first steps' graphs only
    assert rec.dropped.get("ops", 0) > 0
    for summary, want in zip(rec.steps, plain_ns["norms"]):
        assert summary.norms == pytest.approx(want, rel=1e-5)
    # the steps past the bound name the same four parameters as the first
    assert {tuple(s.sources) for s in rec.steps} == {tuple(rec.steps[0].sources)}


WARNS = textwrap.dedent("""\
    import torch
    w = torch.tensor(2.0, requires_grad=True)
    for step in range(3):
        y = w * 3.0
        y.backward()
        print(y.grad)          # not a leaf: PyTorch's C++ warns, once for this line
        p = torch.nn.functional.softmax(torch.ones(2, 2))   # a Python warning, stacklevel 2
    """)


@pytest.mark.slow   # the plain run is a fresh Python
def test_pytorchs_warnings_name_the_programs_line_once_as_plainly(tmp_path):
    program = tmp_path / "warns.py"
    program.write_text(WARNS)
    plainly = subprocess.run([sys.executable, str(program)], capture_output=True, text=True)
    assert "warns.py:6: UserWarning" in plainly.stderr and "warns.py:7: UserWarning" in plainly.stderr
    out = tmp_path / "run.json"
    subprocess.run([sys.executable, "-m", "tapeviz", "record", "-o", str(out), str(program)],
                   capture_output=True, text=True, cwd=tmp_path, check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    rec = json.loads(out.read_text())
    assert rec["stdout"] == plainly.stdout
    assert rec["stderr"] == plainly.stderr


def test_a_grad_read_as_none_says_why_in_pytorchs_terms():
    source = textwrap.dedent("""\
        import torch
        x = torch.tensor(3.0)
        n = torch.tensor(2)
        w = torch.tensor(2.0, requires_grad=True)
        h = w * x
        y = h * n
        y.backward()
        print(x.grad, n.grad, h.grad, w.grad)
        """)
    printed, plain_ns = plain(source)
    rec, _ = recorded(source)
    assert rec.stdout == printed == "None None None tensor(6.)\n"
    call = rec.tapes[0].gradients[0]
    by_name = {rec.tensor(r.source).name: r for r in call.results}
    assert value(rec, by_name["w"].grad) == plain_ns["w"].grad.item() == 6.0
    assert by_name["x"].grad is None and "without requires_grad=True" in by_name["x"].none_reason
    assert by_name["n"].grad is None and "integer tensor (int64)" in by_name["n"].none_reason
    assert by_name["h"].grad is None and "not a leaf" in by_name["h"].none_reason
    assert "h.retain_grad()" in by_name["h"].none_reason


def test_autograd_grad_of_a_modules_parameters_generator_runs_as_plainly():
    # `model.parameters()` is a generator: the recorder must not use it up before PyTorch does
    source = textwrap.dedent("""\
        import torch
        from torch import nn
        torch.manual_seed(0)
        m = nn.Linear(3, 1)
        loss = m(torch.ones(2, 3)).sum()
        grads = torch.autograd.grad(loss, m.parameters())
        print([round(g.sum().item(), 6) for g in grads])
        """)
    printed, _ = plain(source)
    rec, _ = recorded(source)
    assert rec.error is None and rec.stdout == printed
    call = rec.tapes[0].gradients[0]
    assert [rec.tensor(r.grad).shape for r in call.results] == [[1, 3], [1]]
