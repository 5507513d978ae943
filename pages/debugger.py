"""The tape debugger: pick or write a TensorFlow program, run it in a worker, and see what
the tape recorded, how the gradient flowed, and where a NaN first appeared.

Top to bottom: the inputs (the address, the editor, callbacks) change the session's
DebuggerState (state/debugger.py), then the page draws from it."""
import os
import time
from functools import partial

import streamlit as st

from tapeviz import examples
from tapeviz.state import callouts, debugger, opened
from tapeviz.server.jobs import Recorded
from tapeviz.state.follow import FOLLOW_ENV
from tapeviz.ui import compare_panel, editor, frame, mode, panels, session, viewport
from tapeviz.ui.live_panel import LivePanel
from tapeviz.words import hints, notes, values
from tapeviz.words.markdown import literal

frame.require(__file__)
st.html("""<style>
.stTextArea textarea {font-family: ui-monospace, 'DejaVu Sans Mono', monospace; font-size: 1.05rem;
                      line-height: 1.45; color: #111;}
.stTextArea textarea {white-space: pre; overflow-wrap: normal; overflow-x: auto;}
[data-testid="stAlertContainer"] {padding: .45rem .8rem;}
[data-testid="stAlertContainer"] p {font-size: .92rem; line-height: 1.35;}
.st-key-viewport {display: none;}   /* the window's reporter (ui/viewport.py) */
/* A page's first graph is painted from its first picture (draw/first_paint.py) while the
   browser loads Plotly's code; Plotly's chart waits over it, unseen, and takes its place
   once drawn. */
.st-key-graph_area, [class*="st-key-first_paint_"] {position: relative;}
:is(.st-key-graph_area, [class*="st-key-first_paint_"]):has(.tv-first-paint)
    [data-testid="stElementContainer"]:has([data-testid="stPlotlyChart"]):not(:has(.main-svg)) {
    position: absolute; top: 0; left: 0; right: 0; visibility: hidden;}
:is(.st-key-graph_area, [class*="st-key-first_paint_"]):has([data-testid="stPlotlyChart"] .main-svg)
    [data-testid="stElementContainer"]:has(.tv-first-paint) {display: none;}
</style>""")
if st.session_state.get("large_text"):     # the projector: everything Streamlit sizes in rem grows
    # Streamlit sizes markdown, alerts and captions in its own px: they grow by name, wrapping
    st.html("""<style>html {font-size: 125%;}
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li,
[data-testid="stAlertContainer"] p, [data-testid="stCaptionContainer"] {font-size: 1.1rem;
    line-height: 1.4; overflow-wrap: break-word; white-space: normal;}
[data-testid="stButton"] p, [data-testid="stPopoverButton"] p {font-size: 1rem; overflow-wrap: normal;}</style>""")
state = debugger.of(st.session_state)


# -- inputs: callbacks run before the script, so they may set widget state ------------------
def cancel_run():
    state.cancel(session.runner().cancel)


def stop_run():
    if state.job is not None:     # the runner still sends the recording so far (state/run_job.py)
        state.job.stop(session.runner().interrupt, state.owner)


def open_upload():
    if (upload := st.session_state.get("open_file")) is not None:
        state.open_bytes(upload.getvalue(), upload.name)


def run_for(link: bool):
    """The events of a new run (its job's, state/run_job.py follows them), with the runner
    call bound in this script thread (the run's own thread has no session)."""
    submit = partial(session.submit, owner=state.owner, pool=session.runner(), session=session.session_id(),
                     client=session.client_id(), eager=bool(st.session_state.get("eager")))
    if link:    # A class opens one link at once: one worker records it for them all (link_runs.py)
        return partial(session.link_runs().events, submit=submit)
    return lambda source: submit(source).stream()


def record_twin(source):
    """An example's PyTorch twin, recorded as a link's run is: shared, and cached."""
    for event in run_for(link=True)(source):
        if isinstance(event, Recorded):
            return event.recording
    return None


def name_in_address(job):
    """The address bar names what ran, so a reload or a copied URL gives the same page."""
    if job is not None and (params := state.address(job.source, st.query_params.get("code"))) is not None:
        st.query_params.from_dict(params)


def wait_for(job, where):
    """Poll the run, saying what it waits for; each update lets a Cancel click in."""
    with where.container():
        box = st.status(job.label(), state="running")
        st.button("Cancel", on_click=cancel_run, icon=":material/stop_circle:",
                  help="Stop the worker now; the page keeps what it showed before.")
        st.button("Stop, keep the steps", on_click=stop_run, icon=":material/pause_circle:",
                  help="Stop the program as Ctrl+C would, and show what it recorded: every step so far.")
    live = LivePanel(live_slot)        # the run view fills, where the graph goes, as steps stream in
    while not job.done.wait(1.0):      # each update is a message to redraw, 30 pages at once
        box.update(label=job.label())
        live.update(job)
    if state.take(job):
        name_in_address(job)
    st.rerun()


def follow_live(follow, where):
    """Chart the followed file's steps as its program writes them; its end reruns the page,
    which then draws the finished recording (tapeviz view --follow, record --live)."""
    with where.container():      # over the charts, where the class looks
        box = st.status(follow.label(), state="running")
        st.button("Stop the program, keep the steps", on_click=follow.ask_stop,
                  icon=":material/pause_circle:", disabled=follow.stop_sent,
                  help="Ask the program to stop: fit() ends after its step, `record --live` "
                       "ends the run; every step so far is kept in the file.")
    live = LivePanel(live_slot)
    printed = live_slot.empty()
    editor_text = state.source
    while not state.follow_poll():
        if state.follow is None or state.source != editor_text:
            break             # the program's text arrived with the file: the editor shows it
        live.update(follow)
        if follow.snapshot is not None and follow.snapshot.stdout:
            printed.code(follow.snapshot.stdout[-1500:], language=None)
        if follow.problem:
            box.update(label=f"{follow.label()}: {follow.problem}", state="error")
        else:
            box.update(label=follow.label(), state="running")
        time.sleep(0.5)           # a stat a poll; the file is reread only when it changed
    st.rerun()


if state.source is None:
    view_path = os.environ.get(opened.VIEW_ENV)
    if view_path and os.environ.get(FOLLOW_ENV):
        state.start_following(view_path)
    else:
        state.start_from_url(st.query_params.to_dict(), view_path)
kind, text = editor.event()
state.edited(text, submitted=kind == "submit")
if state.start_run(run_for, lambda owner: session.runner().cancel(owner)) is not None:
    name_in_address(state.settle())

# -- the page: graph first, on a projector too ----------------------------------------------
# One header line (title, switches, mode); callouts and the view's popover sit over the
# graph; the code beside it. At 1280x720 and 1024x768 both are on screen on arrival.
head, big, flip, walls = st.columns([2.2, 1.3, 1.3, 2], vertical_alignment="center")
head.markdown("**Tape debugger**")
big.toggle("Large text", key="large_text", help="For a projector: bigger letters and labels everywhere.")
flip.toggle("Graph first", key="graph_first", help="Put the graph on the left, wider, and the code beside it.")
with walls:
    mode.banner(compact=True)
top = st.container()
if st.session_state.get("graph_first"):
    right, left = st.columns([7, 4], gap="medium")
else:
    left, right = st.columns([5, 7], gap="medium")
follow_slot = right.container()
live_slot = right.container()

with left:
    st.selectbox("Example", examples.names(), key="example", index=None, on_change=state.load_example,
                 format_func=lambda n: examples.load(n).title, placeholder="Pick an example program…",
                 label_visibility="collapsed")
    if (shown := state.example_shown()) is not None:
        st.caption(literal(examples.load(shown).explanation))
    editor_slot = st.container()
    status_area = st.empty()
    st.toggle("Run tf.functions eagerly", key="eager",
              help="tf.config.run_functions_eagerly(True) for the next Run: a @tf.function or "
                   "fit()'s train_step is recorded op by op, with values and gradients.")
    with st.expander("Open a recording", icon=":material/folder_open:", expanded=bool(state.open_problem)):
        st.file_uploader("A recording (.json) from `tapeviz record -o run.json` or ⬇ Recording",
                         type=["json"], key="open_file", on_change=open_upload)
        if state.open_problem:
            st.error(state.open_problem)
    if state.opened_name:
        st.caption(notes.opened_caption(state.opened_name, state.rec))
    shown = state.example_shown()
    compare_panel.twin(state.rec, examples.load(shown).twin if shown else None, record_twin)
    compare_panel.chooser(state.rec)     # "Compare with…": the previous run, a step, a file

if state.url_problem:
    top.warning(state.url_problem)
if (problem := compare_panel.twin_problem()) is not None:
    top.info(literal(problem, 600), icon=":material/info:")
rec = state.rec
compare_panel.show(top, rec)             # the chosen pair side by side, over the page


def draw_editor_text():
    source = state.source
    same = rec is not None and rec.source == source
    err = rec.error if same and values.in_program(rec, rec.error and rec.error.file) else None
    pick = state.pick_line if same and st.session_state.get("pick") is not None else None
    lines = min(24, max(10, source.count("\n") + 2))
    with editor_slot:
        editor.draw(source, lines, 20 if st.session_state.get("large_text") else 15,
                    editor.markers(err.line if err else None, pick, err.message if err else ""))


@st.fragment
def status_line(page):
    """The run's status under the editor, and the browser's reporter (ui/viewport.py): a
    report reruns only this, and the whole page only when the graph must be drawn again
    for it (the window's width or room, Plotly's code loaded). So the browser's paint time
    of a Run's graph costs no second drawing of the page."""
    if page is not None:
        viewport.measure(page, time_paint=state.times(page))
        if viewport.redraw_needed():
            st.rerun()
        state.painted(viewport.painted_after_opening())
        state.browser_drew(page, viewport.drawn_ms(page))
    if state.run_status is not None:
        said, outcome = state.run_status
        icon = ":material/check_circle:" if outcome == "complete" else ":material/error:"
        st.caption(f"{icon} {said}")


def draw_editor(text: bool = True, page=None):
    """The editor last: the picked node's line is known once the inspector ran. `page`:
    the graph's name for what is drawn, when one is."""
    if text:
        draw_editor_text()
    if state.job is not None:
        wait_for(state.job, status_area)
    if state.follow is not None:
        follow_live(state.follow, follow_slot)
    if state.rec is not rec:    # a script run that a click superseded took the run: draw it
        st.rerun()
    state.finish_drawing(session.link_runs().age, page)
    with status_area.container():
        status_line(page)


if rec is None and state.follow is None:
    right.info("Pick an example or write a program, then press **Run** (or Ctrl+Enter in the editor). "
               "tapeviz runs it in a separate process and draws every op the tape recorded.")
if rec is None:
    draw_editor()
    st.stop()

# A page's first drawing has no picked node: its editor goes out before the graph, so the
# browser loads the editor's frame beside Plotly's code instead of after the graph is painted
# (a lesson link's editor was a grey box for a second after the graph appeared)
early_editor = not st.session_state.get("drawn_once") and st.session_state.get("pick") is None
if early_editor:
    draw_editor_text()
st.session_state["drawn_once"] = True

with right:
    panels.show_callouts(state, callouts.callouts(rec))
    if rec.eager:
        st.info("Recorded with tf.functions run eagerly: each traced function's ops are drawn "
                "one by one, with their values.", icon=":material/bolt:")
    # the recording's own note that tf.functions ran eagerly is the info just above
    shown = [w for w in rec.warnings if not (rec.eager and isinstance(w, dict) and w.get("kind") == "eager")]
    for warning in shown[:5]:
        st.warning(notes.warning_line(warning))
    if rec.skipped:
        st.info(notes.skipped_note(rec.skipped))
    if rec.dropped:
        st.warning(notes.dropped_note(rec.dropped))

with right:
    if rec.error is not None:
        panels.show_error(rec)
    drawn = panels.show_graph(state, rec) if rec.ops else None
    if drawn is not None:
        panels.show_inspector(state, rec, *drawn[:2])
    elif not rec.ops:
        st.info(hints.no_graph_note(rec.error.type if rec.error else None, len(rec.tensors)))
    # On a first visit the run's charts (Vega's code, a second Plotly chart) wait until
    # Plotly has drawn the graph: they would compete with it for the browser's one thread
    if drawn is None or viewport.plotly_drawn():
        panels.show_run(state, rec)
    panels.show_printed(rec)
    if state.scroll:
        state.scroll = False
        panels.scroll_to_chart()

with left:
    panels.share_and_export(st.session_state.get("example"), rec, state.rec_dict,
                            drawn[2] if drawn is not None else None)

draw_editor(text=not early_editor, page=drawn[3] if drawn is not None else None)
