"""The debugger page's state for one browser session, without Streamlit: the program in
the editor, the run in flight, the recording drawn and how it is viewed, and what the page
must say about them. The page script reads its inputs, calls these methods, then draws from
what they leave; tests drive them with a dict in place of st.session_state.

Where things live. The DebuggerState object is kept in the session under KEY (`of`).
Streamlit keeps each widget's value in the session under the widget's key, and a new
recording must reset some of them, so the widget keys the debugger writes are named here
and written only through this object (`widgets`, st.session_state on the page):
  example                 the example picker (None once the editor holds other code)
  legend                  the chart's legend, off until asked for (kept across runs)
  view, group, expand, path_only, fold, backward, plumbing    the graph's view switches
  pick                    the inspector's node picker (a chart click or a callout sets it)
  step:<view key>         the step slider of one view
  eager                   "Run tf.functions eagerly", passed to the next run
  run_chart, run_step     the run view's chart selection and step number
Other pages put work here only through `hand_over`.
"""
from __future__ import annotations

import os
import uuid
from typing import Callable, Iterable, MutableMapping, Optional

from .. import examples
from .. import recording_gate as gate
from ..draw import graph, run_figures
from ..recording import Recording
from ..words.markdown import code, literal
from . import callouts, share, view
from .follow import Follow
from .run_job import RunJob

KEY = "debugger"
VIEW_WIDGETS = ("view", "group", "expand", "path_only", "pick", "backward", "fold", "plumbing")
STEP_PREFIX = "step:"
EXAMPLE = "example"

# A run that ends within this is drawn in the same script run as the Run press. Most
# programs a class runs take a worker 0.1-0.5 s; waiting here for them spares a whole
# second rerun (the last graph drawn again while the worker runs, then the new one), about
# half a second of Run -> drawn in the browser. Longer runs show their status after it.
QUICK_RUN_S = 1.0


def of(session: MutableMapping) -> "DebuggerState":
    """This session's debugger state, made on first use; its widgets are `session`'s."""
    state = session.get(KEY)
    if state is None:
        state = session[KEY] = DebuggerState(session)
    state.widgets = session
    return state


def hand_over(session: MutableMapping, source: str, call: Optional[int] = None) -> None:
    """The one way another page puts work on the debugger (then it calls st.switch_page):
    run `source` when the debugger page next draws, and open on its `call`-th gradient
    call (the training page's "Inspect this step" opens on the step's gradient flow)."""
    state = of(session)
    state.source, state.pending, state.link_run = source, True, False
    state.after_run = {"call": call}
    session.pop(EXAMPLE, None)


class DebuggerState:
    """What the debugger page keeps for one browser session, and its run's lifecycle:
    start_run -> settle (a quick run) or take (after the page waited) -> adopt."""

    def __init__(self, widgets: MutableMapping):
        self.widgets = widgets
        self.owner = uuid.uuid4().hex       # whose runs Cancel ends
        self.source: Optional[str] = None   # the editor's text (None: the first visit)
        self.pending = False                # run `source` in this script run
        self.link_run = False               # ... as the shared first run of a link (link_runs.py)
        self.after_run: dict = {}           # the view another page asked for (hand_over)
        self.job: Optional[RunJob] = None   # the run in flight
        self.drawing: Optional[RunJob] = None   # the run whose recording is drawn now
        self.rec: Optional[Recording] = None
        self.rec_dict: Optional[dict] = None    # as recorded, for the ⬇ Recording button
        self.run_id = 0                     # a new one per recording: the drawing memo's key
        self.run_status: Optional[tuple] = None  # (markdown, "complete" or "error")
        self.arrival: Optional[tuple] = None   # (the page's first run, its shared age), until the browser times it
        self.timing: Optional[tuple] = None    # (page, run, shared age, s to drawn) until the browser says painted
        self.arrived = False                # the page's first run has been drawn
        # Said until the next run or file: the page reruns on its own (a widget's report of
        # the window), and a warning cleared once shown was gone before it was read.
        self.url_problem: Optional[str] = None   # markdown
        self.open_problem: Optional[str] = None  # markdown
        self.opened_name: Optional[str] = None   # the file shown, when opened, not run
        self.focus: Optional[int] = None    # a tensor to pick once the graph is built
        self.unfold: list = []              # folded repeats unfolded by a button
        self.graph_seen: tuple = ()         # the chart selection already acted on
        self.pick_line: Optional[int] = None     # the picked node's line, marked in the editor
        self.scroll = False                 # bring the graph into view once ("Show it")
        self.step_problem: Optional[str] = None  # why a step of the run view cannot open
        self.follow: Optional[Follow] = None     # a file rewritten while its program runs

    # -- the program ---------------------------------------------------------------------
    def load_example(self) -> None:
        """The example picker changed: its code goes in the editor and runs."""
        name = self.widgets.get(EXAMPLE)
        if name:
            self.source = examples.code(name)
            self.pending = True

    def example_shown(self) -> Optional[str]:
        """The picked example, while the editor holds its code: its title and explanation
        belong with that code only, not above a program typed over it."""
        name = self.widgets.get(EXAMPLE)
        return name if name and self.source == examples.code(name) else None

    def edited(self, text: Optional[str], submitted: bool) -> None:
        """The editor's event: new text, and Run (or Ctrl+Enter) pressed."""
        if text is not None:
            self.source = text
        if submitted:
            self.pending = True

    def start_following(self, path: str) -> None:
        """`tapeviz view --follow` / `record --live`: chart the file's steps while its
        program runs, and open it as the recording once it says it stopped."""
        self.follow, self.source = Follow(path), ""
        self.follow_poll()     # still running: the program's text, once the file has it

    def follow_poll(self) -> bool:
        """Reread the followed file; True once its run ended and it is the page's recording."""
        follow = self.follow
        if follow is None:
            return False
        follow.poll()
        if follow.final is None:
            if not self.source and follow.snapshot is not None:   # a file that came later
                self.source = follow.snapshot.source
            return False
        # A click's rerun may stop this script thread at any read of session state: the
        # follow is let go last, so the next thread adopts the end again if this one stopped
        rec, recorded = follow.final
        self.widgets.pop(EXAMPLE, None)
        self.source, self.opened_name = rec.source, os.path.basename(follow.path)
        self.adopt(rec, recorded)
        self.drawing = None
        self.run_status = (f"Followed {code(self.opened_name)} to its end: drawn from the file",
                           "error" if rec.error is not None else "complete")
        self.follow = None
        return True

    def start_from_url(self, params: dict, view_path: Optional[str] = None) -> None:
        """The first visit: ?example=NAME or ?code=TOKEN fills the editor and runs it;
        `tapeviz view` (`view_path`) opens a recording; the bare address runs the first
        example, as its link would: a class learns from the page before touching it."""
        names = examples.names()
        name, token = params.get("example"), params.get("code")
        if not name and not token and not view_path:
            name = names[0]
        if name in names:
            self.widgets[EXAMPLE] = name
            self.load_example()
            self.link_run = True       # pages opening this link share one run
        elif token:
            try:
                self.source = share.decode(token)
                self.pending = True
            except ValueError as exc:
                self.url_problem = f"The shared link's code could not be read: {literal(exc, 200)}."
        if name and name not in names:
            self.url_problem = (f"There is no example called “{literal(name, 80)}”; "
                                "pick one from the list.")
        if not name and not token:
            self.open_path(view_path)
        if self.source is None:
            self.source = examples.code(names[0])

    # -- the run -------------------------------------------------------------------------
    def start_run(self, run_for: Callable[[bool], Callable[[str], Iterable]],
                  cancel: Callable[[str], None]) -> Optional[RunJob]:
        """Start the pending run, if any, in a RunJob. `run_for(link)` gives the run's
        events for a source (its job's, or with `link`, the first run of an example's link,
        shared); `cancel(owner)` ends the worker of a run still in flight, which the new
        one replaces."""
        if not self.pending:
            return None
        link, self.pending, self.link_run = self.link_run, False, False
        self.opened_name = self.url_problem = self.open_problem = None
        old, self.job = self.job, None
        if old is not None and not old.done.is_set():
            cancel(self.owner)
        self.job = RunJob(self.source, run_for(link))
        return self.job

    def settle(self, wait_s: float = QUICK_RUN_S) -> Optional[RunJob]:
        """Wait briefly for the run in flight; when it ends, take it and return it."""
        job = self.job
        if job is not None and job.done.wait(wait_s) and self.take(job):
            return job
        return None

    def take(self, job: RunJob) -> bool:
        """The run is over: its recording becomes the page's, unless Cancel ended it.

        The job is let go only once its recording is the page's: Streamlit may stop a script
        run at any read of session state (a click reruns the page in a new script thread
        while the old one ends), and a run stopped between the two would lose it."""
        if job.cancelled:
            self.job = None
            return False
        self.take_recording(job.recorded.recording, job.recorded.data)
        self.drawing = job
        if self.job is job:
            self.job = None
        return True

    def take_recording(self, rec: Recording, recorded: dict) -> None:
        """A run's recording (read through the gate, recording_gate.read), shown on the view
        another page asked for."""
        self.adopt(rec, recorded)
        wanted, self.after_run = self.after_run, {}
        calls = view.call_choices(rec)
        if wanted.get("call") is not None and wanted["call"] < len(calls):
            tape_id, index, _ = calls[wanted["call"]]
            self.widgets["view"] = f"call:{tape_id}:{index}"

    def cancel(self, cancel: Callable[[str], None]) -> None:
        """End the worker at once (`cancel(owner)`); the page keeps the last recording."""
        job, self.job = self.job, None
        if job is not None:
            job.cancelled = True
            cancel(self.owner)
            self.run_status = (f"Cancelled after {job.elapsed():.1f} s: the worker was stopped.",
                               "error")

    def finish_drawing(self, shared_age: Callable[[str], Optional[float]], page: Optional[str] = None) -> None:
        """Once the taken run's graph is drawn: say how long Run -> drawn took, and where,
        until the browser says when it painted `page` (ui/viewport.py's name for what is drawn).
        `shared_age(source)`: how old a link's shared recording is."""
        job, self.drawing = self.drawing, None
        if job is None:
            return
        age = shared_age(job.source) if job.shared else None
        if not self.arrived:       # the page's first graph: the browser will say when it was painted
            self.arrived, self.arrival = True, (job, age)
        elif page is not None:
            self.timing = (page, job, age, job.elapsed())
        self.run_status = self._status(job, age)

    def times(self, page: Optional[str]) -> bool:
        """Whether the status waits for the browser to say when it painted `page`."""
        return self.timing is not None and self.timing[0] == page

    def browser_drew(self, page: Optional[str], ms: Optional[int]) -> None:
        """The browser painted `page` `ms` after its data arrived: a Run's status then says
        Run -> painted, the server's time to the drawn page and the browser's to the paint."""
        if ms is None or self.timing is None or self.timing[0] != page:
            return
        (_, job, age, drawn), self.timing = self.timing, None
        if self.job is None:
            self.run_status = self._status(job, age, run_to_paint=drawn + ms / 1000)

    def painted(self, seconds: Optional[float]) -> None:
        """The browser's time from opening the page to its first graph painted (ui/viewport.py):
        the first run's status says that, what the person waited, not the server's share."""
        if seconds is None or self.arrival is None:
            return
        (job, age), self.arrival = self.arrival, None
        if self.job is None and self.rec is not None and self.rec.source == job.source:
            self.run_status = self._status(job, age, painted=seconds)

    def _status(self, job: RunJob, age: Optional[float], painted: Optional[float] = None,
                run_to_paint: Optional[float] = None) -> tuple:
        error = self.rec.error if self.rec is not None else None
        said = job.summary(age, painted=painted, run_to_paint=run_to_paint)
        if error is not None:
            said += f"; it stopped with {literal(error.type, 80)}"
        return said, "error" if error is not None else "complete"

    def address(self, source: str, code_param: Optional[str]) -> Optional[dict]:
        """The query parameters that name what ran, so a reload or a copied URL gives the
        same page; None when the address (`code_param`, its ?code=) already does."""
        name = self.widgets.get(EXAMPLE)
        if name and source == examples.code(name):
            return {"example": name}
        if code_param != share.encode(source):
            return {}
        return None

    # -- a recording made elsewhere (`tapeviz record`, `tapeviz view`, ⬇ Recording) --------
    def open_bytes(self, data: bytes, name: str) -> None:
        self.open_problem = None
        try:
            rec, recorded = gate.read(data, name)
        except gate.Unreadable as exc:
            self.open_problem = literal(exc)
            return
        self.widgets.pop(EXAMPLE, None)
        self.source = rec.source
        self.opened_name = name
        self.adopt(rec, recorded)
        # The last run's status (a link's shared run, its age) is no longer what is shown.
        self.drawing = None
        self.run_status = (f"Opened the recording {code(name)}: drawn from the file, not run here",
                           "error" if rec.error is not None else "complete")

    def open_path(self, path: str) -> None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            self.open_problem = literal(f"Cannot read {path}: {exc.strerror or exc}")
            return
        self.open_bytes(data, os.path.basename(path))

    def adopt(self, rec: Recording, recorded) -> None:
        """Show `rec` from a clean view (a new run, or an opened recording)."""
        steps = [k for k in self.widgets if str(k).startswith(STEP_PREFIX)]
        for key in [*VIEW_WIDGETS, *steps]:
            self.widgets.pop(key, None)
        opening = callouts.opening(rec)      # widget values, and two of this object's own
        self.focus = opening.pop("focus", None)
        self.unfold = opening.pop("unfold")
        self.graph_seen = ()
        self.rec, self.rec_dict, self.run_id = rec, recorded, self.run_id + 1
        self.widgets.update(group=graph.opens_grouped(rec), **opening)

    # -- the view ------------------------------------------------------------------------
    def show_callout(self, view_key: str, tensor_id: Optional[int], backward: bool) -> None:
        """A callout's button: its view, every op revealed, its node picked."""
        self.widgets.update(view=view_key, path_only=False,
                            backward=backward or self.widgets.get("backward", False))
        self.focus = tensor_id
        self.scroll = True
        self.widgets.pop(f"{STEP_PREFIX}{view_key}", None)

    def open_step(self, n: int) -> None:
        """The run view's step `n` (from 1, at the run's main gradient call): its graph,
        when its ops were kept; else say why not."""
        steps = run_figures.site_steps(self.rec)
        if not 1 <= n <= len(steps):
            self.step_problem = f"There is no step {n}."
            return
        call = steps[n - 1]["call"]
        summary = next(s for s in self.rec.steps if s.call == call)
        key = f"call:{summary.tape}:{summary.index}"
        if key not in dict(view.view_choices(self.rec)):
            self.step_problem = (f"Step {n:,}'s ops were dropped by the recording's bounds; "
                                 "the chart above keeps its summary.")
            return
        self.step_problem = None
        self.show_callout(key, None, False)

    def open_clicked_step(self) -> None:
        points = ((self.widgets.get("run_chart") or {}).get("selection") or {}).get("points") or []
        if points and points[0].get("x") is not None:
            self.open_step(int(points[0]["x"]))

    def open_typed_step(self) -> None:
        if self.widgets.get("run_step") is not None:
            self.open_step(int(self.widgets["run_step"]))

    def expand_layer(self, key: str) -> None:
        self.widgets["expand"] = [*self.widgets.get("expand", []), key]

    def unfold_node(self, node: str) -> None:
        self.unfold = [*self.unfold, node]

    def update_pick(self, G, points: tuple) -> Optional[str]:
        """The node the inspector shows: a callout's tensor, else a new chart click (`points`,
        the nodes selected on the chart), else the picker's; None once not drawn."""
        if self.focus is not None:
            self.widgets["pick"] = view.node_for_tensor(self.rec, G, self.focus)
            self.focus = None
        if points != self.graph_seen:
            self.graph_seen = points
            if points and points[0] in G:
                self.widgets["pick"] = points[0]
        if self.widgets.get("pick") not in G:
            self.widgets["pick"] = None
        return self.widgets["pick"]
