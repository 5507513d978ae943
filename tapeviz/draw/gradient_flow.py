"""How much gradient reaches each node of a walked graph (graph.py): one gradient call's
flow, as a norm per tensor, op, layer group or fold, the colour the figures give it."""
from __future__ import annotations

from typing import Optional

import networkx as nx

from ..recording import Recording, as_float
from . import graph, reads
from .nodes import GROUP, REPEAT


def flow_norms(rec: Recording, tape_id: Optional[int], call_index: int,
               G: Optional[nx.DiGraph] = None) -> Optional[dict]:
    """{node id: norm of d target / d node} for one gradient call; None for a traced one,
    whose gradients were never computed here (nothing to colour, rather than all grey).

    Tensors take their flow entry; an op takes the norm at its outputs, a layer group
    the largest over its ops (a NaN or Inf wins: it is what the view must show). With
    G, the result is keyed by G's nodes only.
    """
    alias, _ = reads.read_aliases(rec)
    by_tensor: dict = {}
    chosen = graph.gradient_call(rec, tape_id, call_index)
    if not chosen.flow and graph.traced_function(rec, tape_id if tape_id is not None
                                                 else rec.tapes[0].id):
        return None
    for entry in chosen.flow:
        t = alias(entry.tensor)
        by_tensor[t] = _worst([by_tensor[t], as_float(entry.norm)]) if t in by_tensor else as_float(entry.norm)
    norms = {graph.tensor_node(t): n for t, n in by_tensor.items()}
    for op in rec.ops:
        values = [by_tensor[alias(t)] for t in op.outputs if alias(t) in by_tensor]
        if values:
            norms[graph.op_node(op.id)] = _worst(values)
    if G is None:
        return norms
    out = {}
    for node, data in G.nodes(data=True):
        if node in norms:
            out[node] = norms[node]
        elif data.get("kind") in (GROUP, REPEAT):
            values = [norms[graph.op_node(m)] for m in data["members"] if graph.op_node(m) in norms]
            if values:
                out[node] = _worst(values)
    return out


def _worst(values: list) -> float:
    """The norm a node shows: NaN, then Inf, then the largest."""
    if any(v != v for v in values):
        return float("nan")
    return max(values)
