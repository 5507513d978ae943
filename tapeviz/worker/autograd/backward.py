"""The backward side of a PyTorch run: each `backward()` or `torch.autograd.grad` call as
a gradient call on a tape of its own.

Before the call, the autograd graph is walked from the target (`next_functions`) and a hook
put on each node; the hooks see each node run, in the engine's order, with the gradient
that reached its forward output (the recording's flow) and the gradients it passed on (the
backward op's outputs). After it, the hooks are removed: the program's graph is as it was.
The tape is the forward ops whose nodes the walk met; the results are `.grad` of the leaves
(or what `grad` returned).
"""
from __future__ import annotations

from typing import Optional

import torch

from .. import numerics
from ..frames import nearest_user_frame
from ...recording import BACKWARD, FlowEntry, GradientCall, GradResult, Op, Tape, encode_float
from . import plainly
from .tensors import SMALL, array

GRADIENT_CALLS = frozenset({torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad})
META = "tapeviz"         # forward.py's key in a node's metadata: (op id, {output_nr: tensor id})


def _flat(value) -> list:
    if value is None:
        return []
    if isinstance(value, torch.Tensor):
        return [value]
    return [v for v in value if isinstance(v, torch.Tensor)]


def _arg(args, kwargs, i: int, name: str):
    return args[i] if len(args) > i else kwargs.get(name)


def _walk(roots: list) -> list:
    """The autograd nodes reachable from `roots`, each once."""
    seen, nodes, todo = set(), [], [r for r in roots if r is not None]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        todo.extend(n for n, _ in node.next_functions if n is not None)
    return nodes


_SAVES: dict = {}


def _saves(node) -> bool:
    """Whether a node's kind saves forward tensors (MulBackward0 does, AddBackward0 not)."""
    kind = type(node)
    if kind not in _SAVES:
        _SAVES[kind] = any(a.startswith("_saved_") for a in dir(node))
    return _SAVES[kind]


def _norm_value(g: torch.Tensor):
    a = array(g)
    norm = numerics.norm(a)
    return (None if norm is None else encode_float(norm)), \
        (numerics.plain_value(a) if a.size <= SMALL else None), a


class _Call:
    """One gradient call while it runs: its nodes, their hooks, what the hooks saw."""

    def __init__(self, backward: "Backward", tape: int, line, file, ops_by_id: dict):
        self.b, self.tape, self.line, self.file = backward, tape, line, file
        self.ops_by_id = ops_by_id
        self.handles, self.ops, self.flow = [], [], []
        self.nodes: list = []            # held while the call runs: their ids stay theirs
        self.passed: dict = {}           # (id(node), input nr) -> the gradients sent to it
        self.leaf_ops: dict = {}         # id(leaf) -> its AccumulateGrad op
        self.leaves: list = []           # the leaves whose AccumulateGrad ran, in order
        self.forward_ops: set = set()
        self.retain = False              # retain_graph: the tape is "persistent"
        self.light = False               # past the op bound: no hooks, the summary alone
        self.fills_grad = True           # backward(), not torch.autograd.grad

    def hook_all(self, nodes: list) -> None:
        self.nodes = nodes
        for node in nodes:
            meta = node.metadata.get(META)
            if meta is not None:
                self.forward_ops.add(meta[0])
            self.handles.append(node.register_hook(self._hook(node, meta)))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def _hook(self, node, meta):
        def hook(grad_inputs, grad_outputs):
            try:
                self._ran(node, meta, grad_inputs, grad_outputs)
            except Exception as e:     # noqa: BLE001 - the program's backward runs on
                self.b.session.fault("could not record a PyTorch backward node", e, self.line)
        return hook

    def _ran(self, node, meta, grad_inputs, grad_outputs) -> None:
        s, tensors = self.b.session, self.b.tensors
        fwd = self.ops_by_id.get(meta[0]) if meta else None
        # at the line of the gradient call that ran it, as a tape's backward ops are
        line, file = self.line, self.file
        op_id = s.next_op
        s.next_op += 1
        inputs = []
        for nr, g in enumerate(grad_outputs):
            if g is None:
                continue
            # what the nodes before it sent (the engine sums them), else the seed gradient
            inputs.extend(self.passed.pop((id(node), nr), None) or [
                tensors.rid(g, line, file, phase=BACKWARD)])
            target = meta[1].get(nr) if meta else None
            leaf = getattr(node, "variable", None)
            if target is None and isinstance(leaf, torch.Tensor):
                target = tensors.known(leaf)
            if target is not None:
                norm, value, _ = _norm_value(g)
                self.flow.append(FlowEntry(target, norm, value))
        if fwd is not None and _saves(node):
            inputs.extend(fwd.inputs)        # what it saved to compute its gradients
        outputs = []
        for (after, nr), g in zip(node.next_functions, grad_inputs):
            if g is not None:
                rid = tensors.rid(g, line, file, producer=op_id, phase=BACKWARD, op=op_id)
                if after is not None:
                    self.passed.setdefault((id(after), nr), []).append(rid)
                outputs.append(rid)
        op = Op(op_id, node.name().rsplit("::", 1)[-1], inputs, outputs, line, None, [], BACKWARD,
                None, call=0, file=file)
        leaf = getattr(node, "variable", None)
        if isinstance(leaf, torch.Tensor):
            self.leaf_ops[id(leaf)] = op
            self.leaves.append(leaf)
        s.ops.append(op)
        self.ops.append(op)


class Backward:
    """Records the program's gradient calls (forward.py routes GRADIENT_CALLS here)."""

    def __init__(self, session, tensors, full, ops_by_id: dict):
        self.session, self.tensors, self.ops_by_id = session, tensors, ops_by_id
        self.full = full                 # () -> whether the op bound is reached
        self.module_paths: dict = {}     # id(parameter) -> its path in its module ("fc1/weight")
        self.last = None                 # the newest recorded backward()'s tape

    def call(self, func, args, kwargs, ops_by_id: dict, caller):
        """The gradient call `func` made from frame `caller`, run as plainly and recorded."""
        s = self.session
        if s.quiet:
            return plainly.call(func, args, kwargs, caller)
        frame, file = nearest_user_frame(caller, s.files)
        line = frame.f_lineno if frame is not None else None
        try:
            call, targets, sources = self._before(func, args, kwargs, line, file, ops_by_id)
        except Exception as e:           # noqa: BLE001 - the call runs as it would plainly
            s.fault("could not follow a PyTorch gradient call", e, line)
            return plainly.call(func, args, kwargs, caller)
        try:
            result = plainly.call(func, args, kwargs, caller)
        except BaseException as exc:
            call.remove()
            self._after(call, func, targets, sources, None, frame, f"{type(exc).__name__}: {exc}")
            raise
        call.remove()
        self._after(call, func, targets, sources, result, frame, None)
        return result

    def _before(self, func, args, kwargs, line, file, ops_by_id):
        if func is torch.autograd.grad:
            targets = _flat(_arg(args, kwargs, 0, "outputs"))
            sources = _flat(_arg(args, kwargs, 1, "inputs"))
            retain, create = _arg(args, kwargs, 3, "retain_graph"), _arg(args, kwargs, 4,
                                                                          "create_graph")
        else:   # Tensor.backward(self, gradient, retain_graph, create_graph, inputs), and
                # autograd.backward(tensors, grad_tensors, retain_graph, create_graph, ...)
            targets = _flat(_arg(args, kwargs, 0, "tensors" if func is not
                                 torch.Tensor.backward else "self"))
            sources = _flat(_arg(args, kwargs, 4 if func is torch.Tensor.backward else 5,
                                 "inputs"))
            retain, create = _arg(args, kwargs, 2, "retain_graph"), _arg(args, kwargs, 3,
                                                                          "create_graph")
        call = _Call(self, self.session.new_tape_id(), line, file, ops_by_id)
        call.retain = bool(create if retain is None else retain)
        call.fills_grad = func is not torch.autograd.grad
        nodes = _walk([t.grad_fn for t in targets])
        if self.full():
            # past the op bound: the step's summary alone, from the leaves it reaches
            call.light = True
            call.leaves = [n.variable for n in nodes
                           if isinstance(getattr(n, "variable", None), torch.Tensor)]
        else:
            call.hook_all(nodes)
        return call, targets, sources

    def _after(self, call: _Call, func, targets, sources, result, frame, error) -> None:
        try:
            self._record(call, func, targets, sources, result, frame, error)
        except Exception as e:           # noqa: BLE001 - what the program got stays as it was
            self.session.fault("could not record a PyTorch gradient call", e, call.line)

    def _record(self, call: _Call, func, targets, sources, result, frame, error) -> None:
        s, tensors = self.session, self.tensors
        if not sources:                  # backward(): the leaves whose .grad it filled
            sources = sorted(call.leaves, key=lambda t: tensors.origin(t, call.line, call.file))
        grads = list(result) if func is torch.autograd.grad and result is not None else \
            [t.grad for t in sources]
        if error is not None:
            grads = [None] * len(sources)
        if not call.light:
            self._tape(call, targets, sources, grads, error)
            self._name(frame)
        norms, arrays = [], []
        for g in grads:
            norm, _, a = _norm_value(g) if g is not None else (None, None, None)
            norms.append(None if norm is None else float(norm))
            arrays.append(a)
        variables = [(tensors.origin(src, call.line, call.file), self._path(src, frame))
                     for src in sources]
        loss = targets[0] if len(targets) == 1 and targets[0].numel() == 1 else None
        where = (call.file, call.line)
        s.steps.add_call(call.tape, 0, where, None if loss is None else float(loss.detach()),
                         variables, norms, s.steps.histograms(where, arrays), error)

    def _tape(self, call: _Call, targets, sources, grads, error) -> None:
        """The call's tape, its gradient call and its results, into the recording."""
        s, tensors = self.session, self.tensors
        target_ids = [tensors.rid(t, call.line, call.file) for t in targets]
        results = []
        for src, g in zip(sources, grads):
            rid = tensors.rid(src, call.line, call.file)
            grad_id = None
            if g is not None:
                op = call.leaf_ops.get(id(src))
                grad_id = tensors.rid(g, call.line, call.file,
                                      producer=op.id if op is not None else None,
                                      phase=BACKWARD, op=op.id if op is not None else None)
                if op is not None:
                    op.outputs.append(grad_id)
            reason = None if g is not None or error else (
                "no path from the target to it: it was not used in computing the target")
            results.append(GradResult(rid, grad_id, reason))
        forward = sorted(call.forward_ops)
        for op_id in forward:
            op = call.ops_by_id.get(op_id)
            if op is not None:
                op.tapes.append(call.tape)
        gradient = GradientCall(call.line, "gradient", target_ids, [r.source for r in results],
                                results, call.flow, error, file=call.file)
        spans = [[forward[0], forward[-1] + 1]] if forward else []
        tape = Tape(call.tape, self._first_line(call, forward), call.retain, True,
                    None, [r.source for r in results], forward, [gradient],
                    recording_spans=spans, file=call.file)
        s.tapes.append(tape)
        self.last = tape if call.fills_grad else None

    def explain_none(self, t: torch.Tensor, caller) -> None:
        """The program read `t.grad` and got None: when t took part in the newest
        backward()'s graph, why, as that call's result for t (the page's None callout)."""
        tape, tensors = self.last, self.tensors
        if tape is None or not tape.gradients:
            return
        rid = tensors.known(t)
        ops = [self.ops_by_id.get(i) for i in tape.ops]
        if rid is None or not any(op is not None and (rid in op.inputs or rid in op.outputs)
                                  for op in ops):
            return
        call = tape.gradients[0]
        if rid in call.sources:
            return
        name = next((n for n, v in _frame_items(caller) if v is t), None) if caller else None
        call.sources.append(rid)
        call.results.append(GradResult(rid, None, _none_reason(t, name or "this tensor")))
        rec = self.session.tensors.get(rid)
        if rec is not None and rec.name is None and name:
            rec.name = name


    def _first_line(self, call: _Call, forward: list):
        for op_id in forward:
            op = call.ops_by_id.get(op_id)
            if op is not None and op.line is not None:
                return op.line
        return call.line

    def _path(self, t: torch.Tensor, frame) -> Optional[str]:
        """A parameter's path in the module the program holds ("fc1/weight"), else None."""
        if id(t) not in self.module_paths and frame is not None:
            for value in _frame_values(frame):
                if isinstance(value, torch.nn.Module):
                    for name, p in value.named_parameters():
                        self.module_paths.setdefault(id(p), name.replace(".", "/"))
        return self.module_paths.get(id(t))

    def _name(self, frame) -> None:
        """Name the tensors bound in the caller's frame (first binding wins)."""
        if frame is None:
            return
        for name, value in _frame_items(frame):
            if isinstance(value, torch.Tensor) and not name.startswith("_"):
                rid = self.tensors.known(value)
                rec = self.session.tensors.get(rid) if rid is not None else None
                if rec is not None and rec.name is None:
                    rec.name = name
        for p_id, path in self.module_paths.items():
            held = self.tensors.ids.get(p_id)
            rec = self.session.tensors.get(held[1]) if held is not None else None
            if rec is not None and rec.name is None:
                rec.name = path.replace("/", ".")


def _none_reason(t: torch.Tensor, name: str) -> str:
    """Why `name`.grad is None after backward(), in PyTorch's terms and the tape's."""
    if t.grad_fn is not None:
        return (f"{name} is not a leaf: it was computed ({t.grad_fn.name()}), and backward() "
                f"fills .grad only on leaves; call {name}.retain_grad() before backward() to "
                f"keep it (a tape gives any watched tensor's gradient: tape.gradient(y, {name}))")
    if not (t.dtype.is_floating_point or t.dtype.is_complex):
        return (f"{name} is an integer tensor ({str(t.dtype).replace('torch.', '')}): only "
                f"floating point tensors can require gradients, so autograd did not track it; "
                f"make it a float, as torch.tensor(2.0, requires_grad=True) (the tape, too, "
                f"gives None for an integer source)")
    return (f"{name} was made without requires_grad=True, so autograd did not track it and "
            f"backward() left its .grad None; make it with requires_grad=True, or call "
            f"{name}.requires_grad_() before using it (the tape's way: tape.watch({name}))")


def _frame_items(frame) -> list:
    items = list(frame.f_locals.items())
    if frame.f_globals is not frame.f_locals:
        items += list(frame.f_globals.items())
    return items


def _frame_values(frame) -> list:
    return [v for _, v in _frame_items(frame)]
