"""What a record job's worker streamed while its program ran, kept by the runner: the step
summaries and step sources (within the recording's own bounds, the newest kept) and the
newest steps kept whole. A run cut short (a kill past its time limit, a cancel, a crash)
still gives them in its recording (outcome.py). No TensorFlow.
"""
from __future__ import annotations

from collections import deque
from typing import Optional

from ..recording import MAX_STEP_NORMS, MAX_STEP_SOURCES, MAX_STEPS


class Streamed:
    """The streamed `steps` messages of one job, folded."""

    def __init__(self):
        self.steps: deque = deque()
        self.norms = 0
        self.dropped = 0
        self.sources: list = []
        self.kept: Optional[dict] = None   # the newest `kept` message's partial recording

    def add_steps(self, steps: list, sources: list) -> None:
        room = MAX_STEP_SOURCES - len(self.sources)
        self.sources.extend(sources[:max(0, room)])
        for summary in steps:
            self.steps.append(summary)
            self.norms += len(summary.get("norms") or ())
        while len(self.steps) > MAX_STEPS or (self.norms > MAX_STEP_NORMS and len(self.steps) > 1):
            self.norms -= len(self.steps.popleft().get("norms") or ())
            self.dropped += 1

    def __bool__(self) -> bool:
        return bool(self.steps or self.kept)

    def into(self, recording: dict, why: str) -> dict:
        """`recording` (one the runner made: an error alone) with what was streamed, and
        `cut_short` saying `why` ("timeout", "cancelled", "killed", "crashed")."""
        out = dict(recording)
        kept = self.kept or {}
        for key in ("ops", "tensors", "tapes", "alerts", "files", "program"):
            if key in kept:
                out[key] = kept[key]
        out["steps"] = list(self.steps)
        out["step_sources"] = list(self.sources)
        if self.dropped:
            out["dropped"] = dict(out.get("dropped") or {}, steps=self.dropped)
        whole = len(kept.get("tapes") or ())
        out["cut_short"] = {"why": why, "steps": len(self.steps), "whole_steps": whole,
                            "note": f"the run was cut short ({why}): its {len(self.steps):,} "
                                    f"step summaries streamed while it ran are kept"
                                    + (f", and {whole:,} tapes kept whole" if whole else "")}
        return out
