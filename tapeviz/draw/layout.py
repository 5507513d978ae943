"""Layered layout for a directed graph: inputs on one side, the target on the other.

Longest-path layers, a few barycentric sweeps against crossings, then coordinates.
Linear-ish pure Python so that a 10,000-op recording lays out in well under a second.
"""
from __future__ import annotations

from collections import deque

import networkx as nx

SWEEPS = 4


def layered(G: nx.DiGraph, direction: str = "LR", layer_gap: float = 1.0, node_gap: float = 1.0) -> dict:
    """{node: (x, y)}: every edge points to a later layer ("LR": rightwards, "TB": downwards).

    Cycles (a recording should have none, but a hand-made graph may) are broken by
    reversing the edges that close them, so every node still gets a place.
    """
    if direction not in ("LR", "TB"):
        raise ValueError(f"direction must be 'LR' or 'TB', not {direction!r}")
    nodes = list(G.nodes)
    if not nodes:
        return {}
    index = {n: i for i, n in enumerate(nodes)}
    succ, pred = _acyclic(len(nodes), [(index[u], index[v]) for u, v in G.edges])
    topo = _topological(succ, pred)
    layer = _layers(topo, succ, pred)
    rows = _order(topo, layer, succ, pred)

    pos = {}
    for depth, row in enumerate(rows):
        middle = (len(row) - 1) / 2
        for k, v in enumerate(row):
            along, across = depth * layer_gap, (middle - k) * node_gap
            pos[nodes[v]] = (along, across) if direction == "LR" else (-across, -along)
    return pos


def _acyclic(n: int, edges: list):
    """Adjacency with every cycle broken: a depth-first search's back edges are reversed."""
    out = [[] for _ in range(n)]
    for u, v in edges:
        if u != v:
            out[u].append(v)
    indegree = [0] * n
    for u in range(n):
        for v in out[u]:
            indegree[v] += 1
    # Starting from true inputs keeps the search from calling a forward edge "back".
    roots = [v for v in range(n) if indegree[v] == 0] + list(range(n))
    state = [0] * n            # 0 unseen, 1 on the search path, 2 done
    succ = [[] for _ in range(n)]
    for root in roots:
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, iter(out[root]))]
        while stack:
            u, rest = stack[-1]
            for v in rest:
                if state[v] == 1:
                    succ[v].append(u)
                    continue
                succ[u].append(v)
                if state[v] == 0:
                    state[v] = 1
                    stack.append((v, iter(out[v])))
                    break
            else:
                state[u] = 2
                stack.pop()
    pred = [[] for _ in range(n)]
    for u in range(n):
        for v in succ[u]:
            pred[v].append(u)
    return succ, pred


def _topological(succ: list, pred: list) -> list:
    waiting = [len(p) for p in pred]
    ready = deque(v for v in range(len(succ)) if waiting[v] == 0)
    order = []
    while ready:
        u = ready.popleft()
        order.append(u)
        for v in succ[u]:
            waiting[v] -= 1
            if waiting[v] == 0:
                ready.append(v)
    return order


def _layers(topo: list, succ: list, pred: list) -> list:
    layer = [0] * len(topo)
    for u in topo:
        for v in succ[u]:
            layer[v] = max(layer[v], layer[u] + 1)
    # Then as late as its first use allows: a bias added at the end, or a kernel
    # reshaped just before it is used, sits next to that use, not in the first
    # columns with a long edge across the picture.
    for u in reversed(topo):
        if succ[u]:
            layer[u] = min(layer[v] for v in succ[u]) - 1
    return layer


def _order(topo: list, layer: list, succ: list, pred: list) -> list:
    """Rows of node indices, one per layer, sorted so that edges cross less."""
    rows = [[] for _ in range(max(layer) + 1)]
    for v in topo:
        rows[layer[v]].append(v)
    place = [0.0] * len(topo)
    for row in rows:
        _centre(row, place)
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        neighbours = pred if downward else succ
        for row in (rows[1:] if downward else reversed(rows[:-1])):
            # A node with no neighbour on the fixed side keeps its place.
            key = {v: (sum(place[w] for w in neighbours[v]) / len(neighbours[v]) if neighbours[v] else place[v])
                   for v in row}
            row.sort(key=key.__getitem__)
            _centre(row, place)
    return rows


def _centre(row: list, place: list) -> None:
    # Centred so that barycentres compare across layers of different widths.
    middle = (len(row) - 1) / 2
    for k, v in enumerate(row):
        place[v] = k - middle
