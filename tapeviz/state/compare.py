"""The debugger's "Compare with…" for one session, without Streamlit: the run before the
last one (kept automatically when a new recording arrives), the pair the reader chose (the
previous run, two steps of this run, or an opened recording) and its comparison, memoised.
Widget keys it reads (the page writes them only through this module's names):
  compare_with      what the shown recording is compared with (None: nothing)
  compare_steps     the two kept steps compared, (i, j)
  compare_file      the recording opened to compare with
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import MutableMapping, Optional

from .. import recording_gate as gate
from ..matching import match, steps
from ..recording import Recording
from ..words import compare as words

KEY = "compare"
WITH, STEPS, FILE = "compare_with", "compare_steps", "compare_file"
PREVIOUS, STEP, OPENED, TWIN = "previous", "step", "opened", "twin"
CHOICES = {TWIN: "the same lesson in PyTorch", PREVIOUS: "the previous run (before the edit)",
           STEP: "another step of this run", OPENED: "an opened recording"}


@dataclass
class Pair:
    a: Recording
    b: Recording
    names: tuple
    comparison: match.Comparison
    sentence: str


@dataclass
class CompareState:
    seen: Optional[Recording] = None          # the recording the page showed last
    previous: Optional[Recording] = None      # the one before it
    opened: Optional[Recording] = None
    opened_name: Optional[str] = None
    twin: Optional[Recording] = None          # an example's PyTorch twin, recorded
    twin_source: Optional[str] = None
    twin_of: Optional[Recording] = None       # the recording it was chosen for, once
    twin_problem: Optional[str] = None        # why the twin is not shown
    problem: Optional[str] = None             # why the opened file or the steps cannot be compared
    picked: Optional[tuple] = None            # (side "a" | "b", op id) picked on either chart
    _memo: dict = field(default_factory=dict)
    _scrolled: Optional[Pair] = None          # the pair last brought into view
    _clicked: dict = field(default_factory=dict)   # side -> the node its chart last selected

    def noticed(self, rec: Optional[Recording]) -> None:
        """A new recording on the page: the one it replaces becomes the previous run."""
        if rec is None or rec is self.seen:
            return
        if self.seen is not None:
            self.previous = self.seen
        self.seen, self.picked, self._clicked = rec, None, {}

    def choices(self, rec: Recording) -> list:
        """What this recording can be compared with, in the chooser's order."""
        out = [TWIN] if self.twin is not None and self.twin_source is not None else []
        out += [PREVIOUS] if self.previous is not None else []
        if len(steps.kept_steps(rec)) >= 2:
            out.append(STEP)
        return out + [OPENED]

    def wants_twin(self, source: Optional[str]) -> bool:
        """Whether the twin `source` has yet to be recorded."""
        return source is not None and source != self.twin_source

    def set_twin(self, rec: Recording, source: Optional[str], session: MutableMapping,
                 twin: Optional[Recording] = None) -> None:
        """The shown example's PyTorch twin `source` (None: it has none), and its recording
        when just made; the first time a recording of the example is shown, the comparison
        opens on the twin, with no click. A twin that could not run (PyTorch not installed)
        leaves its hint in `twin_problem`."""
        if source != self.twin_source:
            self.twin_source, self.twin, self.twin_problem = source, None, None
            if twin is not None and twin.error is not None:
                self.twin_problem = twin.error.hint or f"{twin.error.type}: {twin.error.message}"
            elif twin is not None:
                self.twin = twin
        if self.twin is not None and self.twin_of is not rec:
            self.twin_of = rec
            session[WITH] = TWIN

    def open_bytes(self, data: bytes, name: str) -> None:
        try:
            self.opened, self.opened_name, self.problem = gate.read(data, name).recording, name, None
        except gate.Unreadable as e:
            self.opened, self.opened_name, self.problem = None, None, str(e)

    def pair(self, rec: Recording, session: MutableMapping) -> Optional[Pair]:
        """The chosen pair, compared (memoised per pair), or None (nothing chosen, or the
        choice cannot be made: self.problem says why)."""
        choice = session.get(WITH)
        if choice == TWIN and self.twin is not None:
            a, b, step_pair, names = rec, self.twin, (None, None), ("TensorFlow's tape", "PyTorch's autograd")
        elif choice == PREVIOUS and self.previous is not None:
            a, b, step_pair, names = self.previous, rec, (None, None), ("previous run", "this run")
        elif choice == STEP:
            step_pair = tuple(session.get(STEPS) or default_steps(rec))
            a, b, names = rec, rec, words.side_names(*step_pair, same_file=True)
        elif choice == OPENED and self.opened is not None:
            a, b, step_pair, names = rec, self.opened, (None, None), ("this run", self.opened_name or "opened")
        else:
            return None
        key = (id(a), id(b), step_pair)
        if key not in self._memo:
            try:
                cmp = match.compare(a, b, step_a=step_pair[0], step_b=step_pair[1])
            except steps.NoSuchStep as e:
                self.problem = str(e)
                return None
            self._memo.clear()            # one pair at a time: recordings are big
            self._memo[key] = Pair(a, b, names, cmp, words.divergence(cmp, names))
        self.problem = None if choice != OPENED else self.problem
        return self._memo[key]

    def scroll_due(self, pair: Pair) -> bool:
        """Whether this pair is drawn for the first time (the page then brings it into view)."""
        due = self._scrolled is not pair
        self._scrolled = pair
        return due

    def new_click(self, side: str, node: str) -> bool:
        """Whether `node` is a new selection on chart `side` (not the one it kept)."""
        new = self._clicked.get(side) != node
        self._clicked[side] = node
        return new

    def pick(self, side: str, op_id: Optional[int]) -> None:
        self.picked = (side, op_id) if op_id is not None else None

    def picked_ops(self, pair: Pair) -> tuple:
        """(op id in A, op id in B) of the picked op and its match, else the first divergence's."""
        if self.picked is not None:
            side, op_id = self.picked
            other = pair.comparison.match_of(side, op_id)
            return (op_id, other) if side == "a" else (other, op_id)
        row = pair.comparison.first_row()
        return (row.a, row.b) if row is not None else (None, None)


def default_steps(rec: Recording) -> tuple:
    """The steps a comparison of this run opens on: the step of the first NaN or Inf and the
    one before it, else the first and the last kept step."""
    kept = steps.kept_steps(rec)
    if len(kept) < 2:
        return (0, 0)
    first_alert = min((a.op for a in rec.alerts if a.op is not None), default=None)
    if first_alert is not None:
        index = sum(1 for _, start in kept if start <= first_alert) - 1
        if index >= 1:
            return (index - 1, index)
    return (0, len(kept) - 1)


def of(session: MutableMapping) -> CompareState:
    state = session.get(KEY)
    if not isinstance(state, CompareState):
        state = session[KEY] = CompareState()
    return state
