"""The notebook's questions asked of one recording, answered as plain rows (dicts): where the
first NaN or Inf appeared (forward or backward) with its op, line and inputs; every None
gradient with its reason; each variable's gradient over the steps, audited (zero, vanishing,
exploding). No TensorFlow here."""
from __future__ import annotations

import math
from typing import Optional

from ..recording import Recording, as_float
from ..words.values import tensor_name
from ..words.compare import tensor_value, value_name
from . import steps

VANISHING = 1e-7
EXPLODING = 1e4


def nonfinite(rec: Recording) -> list:
    """Every first NaN and first Inf the recording marked (one per kind and phase), in the
    order they were made: [{kind, phase, op, op_id, line, file, code, tensor, value, inputs}]."""
    rows = []
    for alert in sorted(rec.alerts, key=lambda a: (a.op is None, a.op if a.op is not None else 0)):
        op = rec.op(alert.op) if alert.op is not None else None
        rows.append({
            "kind": alert.kind, "phase": alert.phase,
            "op": (op.function or op.type) if op is not None else None, "op_id": alert.op,
            "line": alert.line, "file": alert.file, "code": steps.line_text(rec, alert.file, alert.line),
            "tensor": value_name(rec, alert.tensor), "value": tensor_value(rec, alert.tensor),
            "inputs": {value_name(rec, t): tensor_value(rec, t) for t in (op.inputs if op else [])},
        })
    return rows


def first_nan(rec: Recording) -> Optional[dict]:
    """The first NaN or Inf in execution order, forward or backward, or None."""
    rows = nonfinite(rec)
    return rows[0] if rows else None


def none_gradients(rec: Recording) -> list:
    """Every None gradient of every recorded call: [{tape, call, line, file, code, source, reason}]."""
    rows = []
    for tape in rec.tapes:
        for index, call in enumerate(tape.gradients):
            for result in call.results:
                if result.grad is None:
                    rows.append({"tape": tape.id, "call": index, "line": call.line, "file": call.file,
                                 "code": steps.line_text(rec, call.file, call.line),
                                 "source": tensor_name(rec, result.source),
                                 "reason": result.none_reason or "no reason recorded"})
    return rows


def verdict(norm, vanishing: float = VANISHING, exploding: float = EXPLODING) -> str:
    """One gradient norm judged: "none", "nan", "inf", "zero", "vanishing", "exploding" or "ok"."""
    n = as_float(norm)
    if n is None:
        return "none"
    if n != n:
        return "nan"
    if math.isinf(n):
        return "inf"
    if n == 0:
        return "zero"
    return "vanishing" if n < vanishing else "exploding" if n > exploding else "ok"


KINDS = ("zero", "vanishing", "exploding", "nan", "inf", "none")


def gradient_audit(rec: Recording, vanishing: float = VANISHING, exploding: float = EXPLODING,
                   per_step: bool = False) -> list:
    """Each variable's gradient norm over every step the recording summarised (`steps`, the
    steps run uninstrumented included): one row per variable with how many steps were zero,
    vanishing (< `vanishing`), exploding (> `exploding`), NaN, Inf or None, its smallest and
    largest norm and the first step that was not ok; `per_step`: one row per step and variable."""
    per = []
    for summary in rec.steps:
        for position, (source, norm) in enumerate(zip(summary.sources, summary.norms)):
            info = rec.step_sources[source] if 0 <= source < len(rec.step_sources) else None
            name = (info.name or info.variable) if info is not None else f"source {position}"
            per.append({"step": summary.call, "tape": summary.tape, "line": summary.line,
                        "variable": name, "layer": info.layer if info is not None else None,
                        "norm": as_float(norm), "verdict": verdict(norm, vanishing, exploding)})
    if per_step:
        return per
    rows = {}
    for r in per:
        row = rows.setdefault(r["variable"], {"variable": r["variable"], "layer": r["layer"], "steps": 0,
                                              **{k: 0 for k in KINDS}, "min_norm": None,
                                              "max_norm": None, "first_bad_step": None})
        row["steps"] += 1
        if r["verdict"] in KINDS:
            row[r["verdict"]] += 1
            if row["first_bad_step"] is None:
                row["first_bad_step"] = r["step"]
        n = r["norm"]
        if n is not None and math.isfinite(n):
            row["min_norm"] = n if row["min_norm"] is None else min(row["min_norm"], n)
            row["max_norm"] = n if row["max_norm"] is None else max(row["max_norm"], n)
    for row in rows.values():
        row["verdict"] = next((k for k in ("nan", "inf", "exploding", "none", "zero", "vanishing")
                               if row[k]), "ok")
    return list(rows.values())
