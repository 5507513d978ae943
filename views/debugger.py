"""The tape debugger: pick or write a TensorFlow program, run it in a worker, and see what
the tape recorded, how the gradient flowed, and where a NaN first appeared."""
import json
import os

import streamlit as st

from tapeviz import examples
from tapeviz.draw import figures, graph
from tapeviz.page import mode, opened, session, share, view
from tapeviz.recording import Recording

# Per-run view state: a new recording starts from a clean view.
VIEW_KEYS = ("tape", "call", "group", "expand", "path_only", "pick", "_graph_seen", "focus")

st.html("""<style>
.stTextArea textarea {font-family: ui-monospace, 'DejaVu Sans Mono', monospace; font-size: 1.05rem;
                      line-height: 1.45; color: #111;}
.stTextArea textarea {white-space: pre; overflow-wrap: normal; overflow-x: auto;}
.block-container {padding-top: 3.5rem; max-width: 100%;}
</style>""")


# -- callbacks (they run before the script, so they may set widget state) -----------------
def load_example():
    if st.session_state.get("example"):
        st.session_state.source = examples.load(st.session_state.example).source
        st.session_state.pending = True


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
            st.session_state.url_problem = ("The shared link's code could not be read: "
                                            f"{share.plain(exc, 200)}.")
    if name and name not in examples.names():
        st.session_state.url_problem = (f"There is no example called “{share.plain(name)}”; "
                                         "pick one from the list.")
    if not name and not token and os.environ.get(opened.VIEW_ENV):
        open_path(os.environ[opened.VIEW_ENV])       # `tapeviz view RUN.json`
    st.session_state.setdefault("source", examples.load(examples.names()[0]).source)


def run(source, where):
    with where.status("Running in a worker process…") as status:
        def on_wait(place):
            status.update(label=f"Queued: the server is busy; your run is number {place} in line. "
                                "It starts as soon as a worker is free…")
        recorded = session.run(source, on_wait)
        try:
            rec = Recording.from_dict(recorded)
        except (ValueError, TypeError, KeyError) as exc:
            rec = Recording(source=source)
            st.session_state.url_problem = ("The worker sent back something unreadable: "
                                            + share.plain(exc, 200))
        failed = rec.error is not None
        status.update(label=("Finished with an error" if failed else "Finished")
                      + (f" in {rec.duration_s:.2f} s" if rec.duration_s else ""),
                      state="error" if failed else "complete")
    adopt(rec, recorded)
    # Another page may ask for a view of what it sent (the training page: {"call": 0}).
    wanted = st.session_state.pop("after_run", {})
    if wanted.get("call") is not None and wanted["call"] < len(view.call_choices(rec)):
        st.session_state.call = wanted["call"]
    # The address bar names what ran, so a reload or a copied URL gives the same page.
    name = st.session_state.get("example")
    if name and source == examples.load(name).source:
        st.query_params.from_dict({"example": name})
    elif st.query_params.get("code") != share.encode(source):
        st.query_params.clear()


def adopt(rec, recorded):
    """Show `rec` from a clean view (a new run, or an opened recording)."""
    for key in [*VIEW_KEYS, *[k for k in st.session_state if str(k).startswith("step:")]]:
        st.session_state.pop(key, None)
    st.session_state.update(rec=rec, rec_dict=recorded, run_id=st.session_state.get("run_id", 0) + 1,
                            group=view.auto_group(rec), tape=view.default_tape(rec))


# -- opening a recording made elsewhere (`tapeviz record`, `tapeviz view`, a download) -------
def open_bytes(data: bytes, name: str):
    try:
        rec, recorded = opened.read_recording(data, name)
    except ValueError as exc:
        st.session_state.open_problem = str(exc)
        return
    st.session_state.pop("example", None)
    st.session_state.source = rec.source
    st.session_state.opened_name = name
    adopt(rec, recorded)


def open_path(path: str):
    try:
        with open(path, "rb") as f:
            open_bytes(f.read(), os.path.basename(path))
    except OSError as exc:
        st.session_state.open_problem = f"Cannot read {path}: {exc.strerror or exc}"


def open_upload():
    upload = st.session_state.get("open_file")
    if upload is not None:
        open_bytes(upload.getvalue(), upload.name)


def open_section():
    with st.expander("Open a recording", icon=":material/folder_open:", expanded=bool(st.session_state.get("open_problem"))):
        st.file_uploader("A recording (.json) from `tapeviz record -o run.json` or ⬇ Recording",
                         type=["json"], key="open_file", on_change=open_upload)
        if problem := st.session_state.pop("open_problem", None):
            st.error(problem)
    if name := st.session_state.get("opened_name"):
        rec = st.session_state.get("rec")
        args = " ".join(rec.argv[1:]) if rec is not None and rec.argv else ""
        st.caption(f"Showing the recording **{name}**"
                   + (f" of `{rec.program}`" if rec is not None and rec.program else "")
                   + (f" run with `{args}`" if args else "") + "; **Run** records the editor's text afresh.")


def show_source(where, rec, G, node, line):
    """The line of a picked node in its own file of the user's project."""
    file = opened.file_of(rec, G.nodes[node])
    where.markdown(f"**{opened.where(rec, file, line)}**:")
    where.markdown(view.code_html(opened.source_of(rec, file), line), unsafe_allow_html=True)


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
        if d.line:
            show_source(code, rec, G, st.session_state.pick, d.line)


# -- the page -----------------------------------------------------------------------------
if "source" not in st.session_state:
    start_from_url()

st.markdown("## Tape debugger")
mode.banner()
top = st.container()
left, right = st.columns([5, 7], gap="large")

with left:
    st.selectbox("Example", examples.names(), key="example", index=None, on_change=load_example,
                 format_func=lambda n: examples.load(n).title, placeholder="Pick an example program…")
    if st.session_state.get("example"):
        st.info(view.plain(examples.load(st.session_state.example).explanation))
    with st.form("editor", border=False):
        st.text_area("Program", key="source", height=460, label_visibility="collapsed")
        clicked = st.form_submit_button("▶  Run   (Ctrl+Enter)", type="primary")
    status_area = st.container()
    if clicked or st.session_state.pop("pending", False):
        st.session_state.pop("opened_name", None)
        run(st.session_state.source, status_area)
    open_section()

if problem := st.session_state.pop("url_problem", None):
    top.warning(problem)
rec = st.session_state.get("rec")
if rec is None:
    right.info("Pick an example or write a program, then press **Run** (or Ctrl+Enter in the editor). "
               "tapeviz runs it in a separate process and draws every op the tape recorded.")
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
if rec.skipped:
    top.info("**--tapes:** " + str(rec.skipped.get("note", rec.skipped)))
if rec.dropped:
    top.warning("The recording hit its size bounds and left out: "
                + ", ".join(f"{n} {what}" for what, n in rec.dropped.items()) + ".")

with right:
    show_result(rec)
    drawn = show_graph(rec, run_id) if rec.ops else None
    if drawn is not None:
        show_inspector(rec, *drawn[:2])
    elif not rec.ops:
        st.info("No TensorFlow op ran, so there is no graph to draw.")

# -- share and export ----------------------------------------------------------------------
with left:
    share_col, json_col, html_col = st.columns(3)
    with share_col.popover("Share link", width="stretch"):
        base = st.context.url or ""
        name = st.session_state.get("example")
        if name and rec.source == examples.load(name).source:
            st.markdown("This example:")
            st.code(share.link(base, example=name), language=None, wrap_lines=True)
        url = share.link(base, code=rec.source)
        if problem := share.too_long(url):
            st.warning(problem)
        else:
            st.markdown("This program, carried in the link itself:")
            st.code(url, language=None, wrap_lines=True)
        if not problem and len(url) > share.LONG_URL:
            st.warning("This link is long; some chat tools may cut it. Download the recording instead.")
    recorded = st.session_state.rec_dict
    json_col.download_button("⬇ Recording", lambda: json.dumps(recorded, allow_nan=False), width="stretch",
                             file_name="recording.json", mime="application/json", on_click="ignore",
                             help="The recording as JSON (schema tapeviz.recording/1)")
    if drawn is not None:
        html_col.download_button("⬇ Graph", lambda: figures.to_html(drawn[2]), file_name="graph.html", mime="text/html",
                                 width="stretch", on_click="ignore", help="The graph as a standalone HTML page")
