"""Drawn graphs kept for reuse, shared by every session of one server process and bounded in
bytes across all of them (and in entries per session): the least recently used go first, so
many tabs of large recordings cost at most `total_bytes`. No Streamlit, no TensorFlow.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable, Optional

# Measured with tracemalloc on a 20,000-op CNN recording: a drawn graph and its layout hold
# ~1.5 KB per node and well under 0.4 KB per edge, besides its labels' and hovers' text.
NODE_BYTES = 1_500
EDGE_BYTES = 400


def graph_bytes(G) -> int:
    """About what a drawn graph (networkx) and its layout hold in memory."""
    text = sum(len(d.get("hover") or "") + len(d.get("label") or "") for _, d in G.nodes(data=True))
    return NODE_BYTES * G.number_of_nodes() + EDGE_BYTES * G.number_of_edges() + text


class SharedMemo:
    """{(session, key): value}, least recently used first out past `total_bytes` together or
    `per_session` entries of one session."""

    def __init__(self, total_bytes: int, per_session: int):
        self.total_bytes, self.per_session = total_bytes, per_session
        self._items: OrderedDict = OrderedDict()     # (session, key) -> (value, bytes)
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, session: Hashable, key: Hashable) -> Optional[Any]:
        with self._lock:
            item = self._items.get((session, key))
            if item is None:
                return None
            self._items.move_to_end((session, key))
            return item[0]

    def put(self, session: Hashable, key: Hashable, value: Any, size: int) -> None:
        with self._lock:
            old = self._items.pop((session, key), None)
            if old is not None:
                self._bytes -= old[1]
            self._items[(session, key)] = (value, size)
            self._bytes += size
            mine = [k for k in self._items if k[0] == session]
            for k in mine[:max(0, len(mine) - self.per_session)]:
                self._drop(k)
            # the newest stays even alone over the bound: its page is drawing it now
            while self._bytes > self.total_bytes and len(self._items) > 1:
                self._drop(next(iter(self._items)))

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def _drop(self, k) -> None:
        self._bytes -= self._items.pop(k)[1]
