"""A recording as Model Explorer's JSON graph (google-ai-edge/model-explorer's graph JSON:
a collection of graphs of nodes with `namespace`, `attrs`, `incomingEdges` and
`outputsMetadata`), Keras layers as namespaces, so a run past what the page draws opens
there; values' and gradients' norms go with it as node data. No TensorFlow here."""
from __future__ import annotations

import math
from typing import Optional

from ..draw.graph import group_key
from ..recording import BACKWARD, Recording, as_float
from ..words.values import norm_of, number_text, numbers_text, shape_text
from . import steps
from .gradients import flow_map


def node_id(op_id: int) -> str:
    return f"op{op_id}"


def input_id(tensor_id: int) -> str:
    return f"in{tensor_id}"


def graph(rec: Recording, step: Optional[int] = None, label: str = "tapeviz") -> dict:
    """The GraphCollection Model Explorer opens: one graph of the run (or of one kept step)."""
    part = steps.part(rec, step)
    flows = flow_map(rec, part.tapes) or {}
    made = {t: (op, i) for op in part.ops for i, t in enumerate(op.outputs)}
    nodes, inputs = [], {}
    for op in part.ops:
        edges = []
        for slot, t in enumerate(op.inputs):
            if t in made:
                src, out = made[t]
                edges.append({"sourceNodeId": node_id(src.id), "sourceNodeOutputId": str(out),
                              "targetNodeInputId": str(slot)})
            else:       # a constant or a variable made before the step: an input node of its own
                inputs.setdefault(t, _input_node(rec, t, flows))
                edges.append({"sourceNodeId": input_id(t), "sourceNodeOutputId": "0",
                              "targetNodeInputId": str(slot)})
        nodes.append({"id": node_id(op.id), "label": op.function or op.type,
                      "namespace": _namespace(op), "attrs": _attrs(rec, op),
                      "incomingEdges": edges,
                      "outputsMetadata": [_output(rec, t, i, flows) for i, t in enumerate(op.outputs)]})
    name = "run" if step is None else f"step {part.step}"
    return {"label": label, "graphs": [{"id": name, "nodes": list(inputs.values()) + nodes}]}


def node_data(collection: dict, rec: Recording, step: Optional[int], kind: str) -> dict:
    """Model Explorer's node data for the graph: each op's first output's norm (kind "value")
    or its gradient's norm (kind "gradient"), keyed by node id, the larger the redder."""
    part = steps.part(rec, step)
    flows = flow_map(rec, part.tapes) or {}
    results = {}
    for op in part.ops:
        if not op.outputs:
            continue
        t = op.outputs[0]
        if kind == "value":
            info = rec.tensor(t)
            n = norm_of(info) if info is not None else None
        else:
            n = as_float(flows[t][1]) if t in flows else None
        if n is not None and math.isfinite(n):
            results[node_id(op.id)] = {"value": n}
    gid = collection["graphs"][0]["id"]
    return {gid: {"results": results,
                  "gradient": [{"stop": 0, "bgColor": "#f7fbff"}, {"stop": 1, "bgColor": "#d62728"}]}}


def _namespace(op) -> str:
    layer = group_key(op.scope) or ""
    if op.phase == BACKWARD:
        return "/".join(p for p in ("gradient", layer) if p)
    return layer


def _kv(key: str, value) -> dict:
    return {"key": key, "value": str(value)}


def _attrs(rec: Recording, op) -> list:
    out = [_kv("phase", op.phase), _kv("line", op.line if op.line is not None else "")]
    if op.file:
        out.append(_kv("file", op.file))
    code = steps.line_text(rec, op.file, op.line)
    if code:
        out.append(_kv("code", code))
    if op.tapes:
        out.append(_kv("recorded by tapes", ", ".join(map(str, op.tapes))))
    if op.function:
        out.append(_kv("tf.function", op.function))
    return out


def _tensor_attrs(rec: Recording, t: int, flows: dict) -> list:
    info = rec.tensor(t)
    if info is None:
        return []
    out = [_kv("__tensor_tag", info.name or f"t{t}"), _kv("shape", shape_text(info.shape) or "scalar"),
           _kv("dtype", info.dtype)]
    if info.value is not None:
        out.append(_kv("value", numbers_text(info.value)[:200]))
    if info.stats is not None:
        s = info.stats
        out.append(_kv("stats", f"min {number_text(s.min)} max {number_text(s.max)} mean "
                                f"{number_text(s.mean)} std {number_text(s.std)} nan {s.nan} inf {s.inf}"))
    if t in flows:
        out.append(_kv("gradient norm", number_text(flows[t][1])))
    return out


def _output(rec: Recording, t: int, index: int, flows: dict) -> dict:
    return {"id": str(index), "attrs": _tensor_attrs(rec, t, flows)}


def _input_node(rec: Recording, t: int, flows: dict) -> dict:
    info = rec.tensor(t)
    return {"id": input_id(t), "label": (info.name if info is not None and info.name else f"t{t}"),
            "namespace": "inputs", "attrs": [_kv("kind", info.kind if info is not None else "?")],
            "incomingEdges": [], "outputsMetadata": [_output(rec, t, 0, flows)]}
