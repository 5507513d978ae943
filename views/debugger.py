"""The tape debugger: pick or write a TensorFlow program, run it in a worker, and see what
the tape recorded, how the gradient flowed, and where a NaN first appeared."""
import json
import uuid
from functools import partial

import streamlit as st

from tapeviz import examples, explain
from tapeviz.draw import figures, graph
from tapeviz.page import editor, session, share, view
from tapeviz.page.run_job import RunJob
from tapeviz.recording import Recording

# Per-run view state: a new recording starts from a clean view.
VIEW_KEYS = ("tape", "call", "group", "expand", "path_only", "pick", "_graph_seen", "focus")

st.html("""<style>
.stTextArea textarea {font-family: ui-monospace, 'DejaVu Sans Mono', monospace; font-size: 1.05rem;
                      line-height: 1.45; color: #111;}
.stTextArea textarea {white-space: pre; overflow-wrap: normal; overflow-x: auto;}
.block-container {padding: 3.2rem 1.5rem 1rem 1.5rem; max-width: 100%;}
</style>""")
if st.session_state.get("large_text"):     # the projector: everything Streamlit sizes in rem grows
    st.html("<style>html {font-size: 125%;}</style>")


# -- callbacks (they run before the script, so they may set widget state) -----------------
def load_example():
    if st.session_state.get("example"):
        st.session_state.source = editor.example_code(st.session_state.example)
        st.session_state.pending = True


def cancel_run():
    """End the worker at once; the page keeps the last drawn recording."""
    job = st.session_state.pop("job", None)
    if job is not None:
        job.cancelled = True
        session.runner().cancel(st.session_state.owner)
        st.session_state.run_status = ("Cancelled after %.1f s: the worker was stopped." % job.elapsed(),
                                       "error")


def focus_on(tensor_id, op_id):
    """Show the op where a NaN/Inf first appeared: every op, its layer expanded, selected."""
    rec = st.session_state.rec
    for key in ("tape", "call"):
        st.session_state[key] = None
    st.session_state.path_only = False
    op = rec.op(op_id) if op_id is not None else None
    layer = graph.group_key(op.scope) if op is not None else None
    if layer and layer not in st.session_state.get("expand", []):
        st.session_state.expand = [*st.session_state.get("expand", []), layer]
    st.session_state.pop("step:None", None)
    st.session_state.focus = tensor_id


def expand_layer(key):
    st.session_state.expand = [*st.session_state.get("expand", []), key]


def start_from_url():
    """The first visit: ?example=NAME or ?code=TOKEN fills the editor and runs it."""
    params = st.query_params
    name, token = params.get("example"), params.get("code")
    if name in examples.names():
        st.session_state.example = name
        load_example()
    elif token:
        try:
            st.session_state.source = share.decode(token)
            st.session_state.pending = True
        except ValueError as exc:
            st.session_state.url_problem = f"The shared link's code could not be read: {exc}."
    if name and name not in examples.names():
        st.session_state.url_problem = f"There is no example called “{name}”; pick one from the list."
    st.session_state.setdefault("source", editor.example_code(examples.names()[0]))


def start_run(source):
    """Hand the program to a worker in a thread; the page polls it (`wait_for`)."""
    old = st.session_state.pop("job", None)
    if old is not None and not old.done.is_set():
        session.runner().cancel(st.session_state.owner)
    st.session_state.job = RunJob(source, partial(session.run, owner=st.session_state.owner,
                                                  pool=session.runner()))


def wait_for(job, where):
    """Poll the run, saying what it waits for; each update lets a Cancel click in."""
    with where.container():
        box = st.status(job.label(), state="running")
        st.button("Cancel", on_click=cancel_run, icon=":material/stop_circle:",
                  help="Stop the worker now; the page keeps what it showed before.")
    while not job.done.wait(0.3):
        box.update(label=job.label())
    st.session_state.pop("job", None)
    if not job.cancelled:
        run(job.source, job.result)
        st.session_state.drawing = job
    st.rerun()


def run(source, recorded):
    try:
        rec = Recording.from_dict(recorded)
    except (ValueError, TypeError, KeyError) as exc:
        rec = Recording(source=source)
        st.session_state.url_problem = f"The worker sent back something unreadable: {exc}"
    for key in [*VIEW_KEYS, *[k for k in st.session_state if str(k).startswith("step:")]]:
        st.session_state.pop(key, None)
    st.session_state.update(rec=rec, rec_dict=recorded, run_id=st.session_state.get("run_id", 0) + 1,
                            group=view.auto_group(rec), tape=view.default_tape(rec))
    # Another page may ask for a view of what it sent (the training page: {"call": 0}).
    wanted = st.session_state.pop("after_run", {})
    if wanted.get("call") is not None and wanted["call"] < len(view.call_choices(rec)):
        st.session_state.call = wanted["call"]
    # The address bar names what ran, so a reload or a copied URL gives the same page.
    name = st.session_state.get("example")
    if name and source == editor.example_code(name):
        st.query_params.from_dict({"example": name})
    elif st.query_params.get("code") != share.encode(source):
        st.query_params.clear()


def show_result(rec):
    """The run's outcome: its error with the line and a hint, and what it printed."""
    if rec.error is not None:
        err = rec.error
        title = "Timeout (the run hit its time limit)" if err.type == "Timeout" else err.type
        st.error(f"**{title}**" + (f" at line {err.line}" if err.line else "") + f": {err.message}")
        if err.line:
            st.markdown(view.code_html(rec.source, err.line, context=2), unsafe_allow_html=True)
        if err.hint:
            st.info("**Hint:** " + err.hint)
        if rec.ops:
            st.caption("The graph below shows what was recorded before the error.")
    if rec.stdout:
        st.markdown("**Printed output**")
        st.code(rec.stdout, language=None, height=min(220, 40 + 28 * rec.stdout.count("\n")))


def show_graph(rec, run_id):
    """Pickers, the step slider and the op graph; returns (G, flow, figure) or None."""
    calls = view.call_choices(rec)
    tapes = dict(view.tape_choices(rec))
    c1, c2 = st.columns(2)
    tape = c1.selectbox("Tape", list(tapes), format_func=tapes.get, key="tape")
    call = c2.selectbox("Gradient flow of", [None, *range(len(calls))], key="call",
                        format_func=lambda i: "(none: plain op graph)" if i is None else calls[i][2])
    layers = view.group_keys(rec)
    c3, c4, c5 = st.columns([2, 2, 3])
    group = c3.toggle("Group by layer", key="group", disabled=not layers)
    path_only = c4.toggle("Gradient path only", key="path_only", disabled=call is None,
                          help="Hide ops the chosen gradient does not flow through.")
    expand = (c5.multiselect("Expand layers", layers, key="expand", placeholder="Expand a layer…")
              if group and layers else [])
    call_index = None
    if call is not None:
        tape, call_index = calls[call][0], calls[call][1]
        st.caption(f"Colours: norm of the gradient of the call's target with respect to each tensor "
                   f"(log scale) on tape {tape}, which made this call. Grey: no gradient flows there.")

    chart_area = st.container()   # the chart goes above its step slider, like a video above its timeline
    order = view.steps(rec, tape)
    upto = None
    if len(order) > 1:
        k = st.slider("Step through the ops in the order they ran", 1, len(order), len(order), key=f"step:{tape}")
        st.caption(f"Step {k} of {len(order)}: {view.step_label(rec, order[k - 1])}")
        upto = order[k - 1] if k < len(order) else None

    try:
        G, pos = session.drawn(rec, run_id, tape=tape, group=group, expand=list(expand),
                               gradient_path_only=bool(path_only and call is not None),
                               upto_op=upto, call=call_index)
    except (ValueError, KeyError, IndexError) as exc:
        st.error(f"This view cannot be drawn: {exc}")
        return None
    flow = graph.flow_norms(rec, tape, call_index, G) if call is not None else None

    # A click on the chart, or the alert's button, picks the node the inspector shows.
    if (focus := st.session_state.pop("focus", None)) is not None:
        st.session_state.pick = view.node_for_tensor(rec, G, focus)
    chart = st.session_state.get("graph") or {}
    points = tuple(str(p.get("customdata")) for p in (chart.get("selection") or {}).get("points", []))
    if points != st.session_state.get("_graph_seen"):
        st.session_state._graph_seen = points
        if points and points[0] in G:
            st.session_state.pick = points[0]
    if st.session_state.get("pick") not in G:
        st.session_state.pick = None
    picked = st.session_state.pick

    view_key = (tape, call_index, group, tuple(expand), path_only, upto, picked)
    fig = session.figure(G, pos, run_id, view_key, flow=flow, selected=picked)
    chart_area.plotly_chart(fig, key="graph", on_select="rerun", selection_mode="points", height=620,
                            config={"scrollZoom": True, "displaylogo": False})
    chart_area.caption(f"{G.number_of_nodes()} nodes. Hover for details; click a node to inspect it; "
                       "scroll to zoom, drag to pan, double-click to fit.")

    if call is None and tape is not None:
        st.caption(view.tape_summary(rec, tape))
    if call is not None:
        chosen = graph.gradient_call(rec, tape, call_index)
        for result in chosen.results:
            if result.grad is None:
                who = rec.tensor(result.source)
                st.warning(f"**Gradient for `{who.name if who and who.name else result.source}` is None:** "
                           f"{result.none_reason or 'no reason recorded'}")
        for note in (chosen.error, chosen.warning, chosen.note):
            if note:
                st.info(note)
    return G, flow, fig


def show_inspector(rec, G, flow):
    """The picked node: value, statistics, producer, consumers, and its line in the program."""
    st.subheader("Inspect")
    choices = dict(view.node_choices(G, keep=st.session_state.get("pick")))
    st.selectbox("Node", [None, *choices], key="pick", placeholder="Click a node or pick one…",
                 format_func=lambda n: "—" if n is None else choices[n])
    if st.session_state.pick is not None:
        d = view.details(rec, G, st.session_state.pick, flow)
        info, code = st.columns([1, 1])
        info.markdown(f"### {d.title}\n*{d.kind}*\n\n"
                      + "\n".join(f"- **{label}**: {text}" for label, text in d.facts))
        if d.value is not None:
            info.code(d.value, language=None)
        if d.stats:
            info.dataframe([d.stats], hide_index=True)
        if d.group:
            info.button(f"Expand {d.group}", on_click=expand_layer, args=(d.group,))
        if d.producer:
            code.markdown(f"**made by** {d.producer}")
        if d.consumers:
            code.markdown("**used by** " + "; ".join(d.consumers))
        st.session_state.pick_line = d.line     # marked in the editor too
        if d.line:
            code.markdown(f"**line {d.line}** of the program:")
            code.markdown(view.code_html(rec.source, d.line), unsafe_allow_html=True)


# -- the page -----------------------------------------------------------------------------
st.session_state.setdefault("owner", uuid.uuid4().hex)    # whose runs Cancel ends
if "source" not in st.session_state:
    start_from_url()
kind, text = editor.event()
if text is not None:
    st.session_state.source = text
if kind == "submit":
    st.session_state.pending = True
if st.session_state.pop("pending", False):
    start_run(st.session_state.source)

head, big, flip = st.columns([4, 1.5, 1.5], vertical_alignment="bottom")
head.markdown("#### Tape debugger")
big.toggle("Large text", key="large_text", help="For a projector: bigger letters everywhere.")
flip.toggle("Graph first", key="graph_first", help="Put the graph on the left, wider, and the code beside it.")
top = st.container()
if st.session_state.get("graph_first"):
    right, left = st.columns([7, 4], gap="medium")
else:
    left, right = st.columns([5, 7], gap="medium")

with left:
    st.selectbox("Example", examples.names(), key="example", index=None, on_change=load_example,
                 format_func=lambda n: examples.load(n).title, placeholder="Pick an example program…",
                 label_visibility="collapsed")
    if st.session_state.get("example"):
        st.caption(view.plain(examples.load(st.session_state.example).explanation))
    editor_slot = st.container()
    status_area = st.empty()

if problem := st.session_state.pop("url_problem", None):
    top.warning(problem)
rec = st.session_state.get("rec")


def draw_editor():
    """The editor last: the picked node's line is known once the inspector ran."""
    source = st.session_state.source
    err = rec.error if rec is not None and rec.source == source else None
    pick = (st.session_state.get("pick_line") if rec is not None and rec.source == source
            and st.session_state.get("pick") is not None else None)
    lines = min(24, max(10, source.count("\n") + 2))
    large = bool(st.session_state.get("large_text"))
    with editor_slot:
        editor.draw(source, lines, 20 if large else 15,
                    editor.markers(err.line if err else None, pick, err.message if err else ""))
    job = st.session_state.get("job")
    if job is not None:
        wait_for(job, status_area)
    drawn_job = st.session_state.pop("drawing", None)
    if drawn_job is not None:
        failed = rec is not None and rec.error is not None
        st.session_state.run_status = (drawn_job.summary()
                                       + (f"; it stopped with {rec.error.type}" if failed else ""),
                                       "error" if failed else "complete")
    if (said := st.session_state.get("run_status")) is not None:
        icon = ":material/check_circle:" if said[1] == "complete" else ":material/error:"
        status_area.caption(f"{icon} {said[0]}")


if rec is None:
    right.info("Pick an example or write a program, then press **Run** (or Ctrl+Enter in the editor). "
               "tapeviz runs it in a separate process and draws every op the tape recorded.")
    draw_editor()
    st.stop()
run_id = st.session_state.run_id

# Numerics alerts and warnings go first: they are what a debugging session is about.
for i, alert in enumerate(rec.alerts[:3]):
    row = top.columns([6, 1], vertical_alignment="center")
    row[0].error(view.alert_text(rec, alert))
    row[1].button("Show where", key=f"alert{i}", on_click=focus_on, args=(alert.tensor, alert.op))
for warning in rec.warnings[:5]:
    line = warning.get("line")
    top.warning((f"Line {line}: " if line else "") + str(warning.get("message", warning)))
if rec.dropped:
    top.warning("The recording hit its size bounds and left out: "
                + ", ".join(f"{n} {what}" for what, n in rec.dropped.items()) + ".")

with right:
    show_result(rec)
    drawn = show_graph(rec, run_id) if rec.ops else None
    if drawn is not None:
        show_inspector(rec, *drawn[:2])
    elif not rec.ops:
        st.info(explain.no_graph_note(rec.error.type if rec.error else None, len(rec.tensors)))

# -- share and export ----------------------------------------------------------------------
with left:
    share_col, json_col, html_col = st.columns(3)
    with share_col.popover("Share link", width="stretch"):
        base = st.context.url or ""
        name = st.session_state.get("example")
        if name and rec.source == editor.example_code(name):
            st.markdown("This example:")
            st.code(share.link(base, example=name), language=None, wrap_lines=True)
        url = share.link(base, code=rec.source)
        st.markdown("This program, carried in the link itself:")
        st.code(url, language=None, wrap_lines=True)
        if len(url) > share.LONG_URL:
            st.warning("This link is long; some chat tools may cut it. Download the recording instead.")
    recorded = st.session_state.rec_dict
    json_col.download_button("⬇ Recording", lambda: json.dumps(recorded, allow_nan=False), width="stretch",
                             file_name="recording.json", mime="application/json", on_click="ignore",
                             help="The recording as JSON (schema tapeviz.recording/1)")
    if drawn is not None:
        html_col.download_button("⬇ Graph", lambda: figures.to_html(drawn[2]), file_name="graph.html", mime="text/html",
                                 width="stretch", on_click="ignore", help="The graph as a standalone HTML page")

draw_editor()
