"""PyTorch tensors as the recording's Tensor records: ids that follow each tensor object
(weakly: the program frees what it frees plainly), values and stats read with NumPy."""
from __future__ import annotations

import weakref
from typing import Optional

import torch

from .. import numerics
from ...recording import CONSTANT, INTERMEDIATE, VARIABLE, Alert, Stats, Tensor

SMALL = 64      # elements: a value kept as nested lists (the recording's rule)


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def array(t: torch.Tensor):
    """t's values as a NumPy array (a copy for what NumPy cannot hold as is)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:         # NumPy has no bfloat16
        t = t.float()
    return t.resolve_neg().numpy()


class Tensors:
    """The run's torch tensors: recording id per tensor object, and their records."""

    def __init__(self, session):
        self.session = session
        self.ids: dict = {}          # id(tensor) -> (weakref, recording id, its _version then)
        self.first: dict = {}        # id(tensor) -> (weakref, its first recording id)
        self.alerted: set = set()    # (kind, phase) of the alerts already raised

    def known(self, t: torch.Tensor) -> Optional[int]:
        """t's recording id, while its value is the one recorded (not changed in place)."""
        held = self.ids.get(id(t))
        if held is not None and held[0]() is t and held[2] == t._version:
            return held[1]
        return None

    def origin(self, t: torch.Tensor, line, file) -> int:
        """The id t had when first recorded: a parameter's one name over the steps, though
        each optimizer step gives its value a new record."""
        held = self.first.get(id(t))
        if held is not None and held[0]() is t:
            return held[1]
        return self.rid(t, line, file)

    def rid(self, t: torch.Tensor, line, file, producer: Optional[int] = None,
            phase: str = "forward", op: Optional[int] = None) -> int:
        """t's recording id, a new record made (and described) when t is new or changed in
        place since (`producer` set: an op's output is always a new record)."""
        if producer is None:
            rid = self.known(t)
            if rid is not None:
                return rid
        s = self.session
        rid = s.next_tensor
        s.next_tensor += 1
        kind = INTERMEDIATE if producer is not None else (
            VARIABLE if t.requires_grad and t.grad_fn is None else CONSTANT)
        rec = Tensor(rid, None, list(t.shape), dtype_name(t), kind, producer=producer,
                     line=line, file=file)
        if kind == VARIABLE:
            rec.trainable = True
        self.describe(rec, t, phase, op if op is not None else producer)
        s.tensors[rid] = rec
        try:
            ref = weakref.ref(t, self._gone(id(t)))
        except TypeError:            # a tensor subclass without weakrefs: never looked up
            return rid
        self.ids[id(t)] = (ref, rid, t._version)
        held = self.first.get(id(t))
        if held is None or held[0]() is not t:
            self.first[id(t)] = (ref, rid)
        return rid

    def _gone(self, key: int):
        def forget(ref):
            for table in (self.ids, self.first):
                held = table.get(key)
                if held is not None and held[0] is ref:
                    del table[key]
        return forget

    def describe(self, rec: Tensor, t: torch.Tensor, phase: str, op: Optional[int]) -> None:
        try:
            if t.is_complex() or t.layout != torch.strided or t.device.type == "meta":
                rec.stats = None
                return
            a = array(t)
            rec.stats = numerics.stats(a)
            if a.size <= SMALL:
                rec.value = numerics.plain_value(a)
        except Exception as e:       # noqa: BLE001 - a label only: the program runs on
            self.session.fault("could not read this PyTorch tensor", e, rec.line, rec)
            return
        self._alert(rec, rec.stats, phase, op)

    def _alert(self, rec: Tensor, stats: Optional[Stats], phase: str, op: Optional[int]):
        if stats is None or op is None:
            return
        for kind, count in (("nan", stats.nan), ("inf", stats.inf)):
            if count and (kind, phase) not in self.alerted:
                self.alerted.add((kind, phase))
                self.session.alerts.append(Alert(kind, op, rec.id, rec.line, phase, rec.file))
