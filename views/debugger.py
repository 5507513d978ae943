"""The tape debugger: pick or write a TensorFlow program, run it in a worker, and see what
the tape recorded, how the gradient flowed, and where a NaN first appeared."""
import json
import os
import uuid
from functools import partial

import streamlit as st

from tapeviz import examples, explain
from tapeviz.draw import figures, graph
from tapeviz.page import editor, mode, opened, session, share, view
from tapeviz.page.run_job import RunJob
from tapeviz.recording import Recording

# Per-run view state: a new recording starts from a clean view.
VIEW_KEYS = ("tape", "call", "group", "expand", "path_only", "pick", "_graph_seen", "focus",
             "view", "backward", "fold", "plumbing", "unfold")

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


def show_callout(view_key, tensor_id, backward):
    """A callout's button: its view, every op revealed, its node picked."""
    st.session_state.update(view=view_key, path_only=False, focus=tensor_id,
                            backward=backward or st.session_state.get("backward", False))
    st.session_state.pop(f"step:{view_key}", None)


def cancel_run():
    """End the worker at once; the page keeps the last drawn recording."""
    job = st.session_state.pop("job", None)
    if job is not None:
        job.cancelled = True
        session.runner().cancel(st.session_state.owner)
        st.session_state.run_status = ("Cancelled after %.1f s: the worker was stopped." % job.elapsed(),
                                       "error")


def expand_layer(key):
    st.session_state.expand = [*st.session_state.get("expand", []), key]


def unfold(node):
    st.session_state.unfold = [*st.session_state.get("unfold", []), node]


def start_from_url():
    """The first visit: ?example=NAME or ?code=TOKEN fills the editor and runs it; the bare
    address runs the first example."""
    params = st.query_params
    name, token = params.get("example"), params.get("code")
    if not name and not token and not os.environ.get(opened.VIEW_ENV):
        # The bare address opens on the first lesson, run and drawn, as its link would:
        # a class that opens the app learns from the page before touching anything
        name = examples.names()[0]
    if name in examples.names():
        st.session_state.example = name
        load_example()
        st.session_state.link_run = True     # pages opening this link share one run
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
    if not name and not token:
        open_path(os.environ[opened.VIEW_ENV])       # `tapeviz view RUN.json`
    st.session_state.setdefault("source", editor.example_code(examples.names()[0]))


def start_run(source, link=False):
    """Hand the program to a worker in a thread; the page polls it (`wait_for`). `link`:
    the first run of an example's link, which every page opening that link shares."""
    st.session_state.pop("opened_name", None)
    old = st.session_state.pop("job", None)
    if old is not None and not old.done.is_set():
        session.runner().cancel(st.session_state.owner)
    run = partial(session.run, owner=st.session_state.owner, pool=session.runner(),
                  session=session.session_id())
    if link:
        # A class opens one link at once: one worker records it for them all (link_runs.py)
        run = partial(session.link_runs().run, run=run)
    st.session_state.job = RunJob(source, run)


# A run that ends within this is drawn in the same script run as the Run press. Most
# programs a class runs take a worker 0.1-0.5 s; waiting here for them spares a whole
# second rerun (the last graph drawn again while the worker runs, then the new one), about
# half a second of Run -> drawn in the browser. Longer runs show their status after it.
QUICK_RUN_S = 1.0


def settle_quick_run():
    """Wait briefly for the run just started; if it ends, adopt its recording now."""
    job = st.session_state.get("job")
    if job is not None and job.done.wait(QUICK_RUN_S):
        take_result(job)


def take_result(job):
    """The run is over: its recording becomes the page's, unless Cancel ended it."""
    st.session_state.pop("job", None)
    if not job.cancelled:
        run(job.source, job.result)
        st.session_state.drawing = job


def wait_for(job, where):
    """Poll the run, saying what it waits for; each update lets a Cancel click in."""
    with where.container():
        box = st.status(job.label(), state="running")
        st.button("Cancel", on_click=cancel_run, icon=":material/stop_circle:",
                  help="Stop the worker now; the page keeps what it showed before.")
    while not job.done.wait(0.3):
        box.update(label=job.label())
    take_result(job)
    st.rerun()


def run(source, recorded):
    try:
        rec = Recording.from_dict(recorded)
    except (ValueError, TypeError, KeyError) as exc:
        rec = Recording(source=source)
        st.session_state.url_problem = ("The worker sent back something unreadable: "
                                        + share.plain(exc, 200))
    adopt(rec, recorded)
    # Another page may ask for a view of what it sent (the training page: {"call": 0}).
    wanted = st.session_state.pop("after_run", {})
    if wanted.get("call") is not None and wanted["call"] < len(view.call_choices(rec)):
        tape_id, index, _ = view.call_choices(rec)[wanted["call"]]
        st.session_state.view = f"call:{tape_id}:{index}"
    # The address bar names what ran, so a reload or a copied URL gives the same page.
    name = st.session_state.get("example")
    if name and source == editor.example_code(name):
        st.query_params.from_dict({"example": name})
    elif st.query_params.get("code") != share.encode(source):
        st.query_params.clear()


def adopt(rec, recorded):
    """Show `rec` from a clean view (a new run, or an opened recording)."""
    for key in [*VIEW_KEYS, *[k for k in st.session_state if str(k).startswith("step:")]]:
        st.session_state.pop(key, None)
    st.session_state.update(rec=rec, rec_dict=recorded, run_id=st.session_state.get("run_id", 0) + 1,
                            group=view.auto_group(rec), **view.opening(rec))


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
    """The run's outcome: its error with the line and a hint."""
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


def show_printed(rec):
    # stderr too: tf.print writes there unless told otherwise, and a learner's must show
    for title, text in (("**Printed output**", rec.stdout),
                        ("**Written to stderr** (where `tf.print` and warnings go)", rec.stderr)):
        if text:
            st.markdown(title)
            st.code(text, language=None, height=min(220, 40 + 28 * text.count("\n")))


def show_graph(rec, run_id):
    """The view picker, display toggles, the op graph and its step slider; returns (G, flow, figure) or None."""
    choices = dict(view.view_choices(rec))
    if rec.tapes:
        key = st.selectbox("Show", list(choices), format_func=choices.get, key="view")
    else:
        st.info(view.no_tape_sentence(rec))
        key = view.ALL_OPS
    tape, call_index = view.parse_view(key)
    layers = view.group_keys(rec)
    row = [*st.columns(3), *st.columns(3)]     # three a row: whole labels even at 1024 px
    fold = row[0].toggle("Fold loops", key="fold", help="Ops repeated from one line draw as one node.")
    backward = row[1].toggle("Backward ops", key="backward", disabled=call_index is None,
                             help="The ops the gradient call ran.")
    path_only = row[2].toggle("Path only", key="path_only", disabled=call_index is None,
                              help="Hide ops the chosen gradient does not flow through.")
    large = bool(st.session_state.get("large_text"))     # the page's Large text switch
    plumbing = row[3].toggle("Plumbing", key="plumbing", help="Variable bookkeeping ops: VarHandleOp, "
                                                             "AssignVariableOp, …")
    group = row[4].toggle("Layers", key="group", help="One node per Keras layer.") if layers else False
    expand = (st.multiselect("Expand layers", layers, key="expand", placeholder="Expand a layer…")
              if group and layers else [])
    calling = call_index is not None
    try:
        G, pos = session.drawn(rec, run_id, tape=tape, group=group,
                               expand=[*expand, *st.session_state.get("unfold", [])],
                               gradient_path_only=bool(path_only and calling), call=call_index,
                               fold=fold, plumbing=plumbing, backward=bool(backward and calling))
    except (ValueError, KeyError, IndexError) as exc:
        st.error(f"This view cannot be drawn: {exc}")
        return None
    flow = graph.flow_norms(rec, tape, call_index, G) if calling else None

    # A click on the chart, or a callout's button, picks the node the inspector shows.
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

    chart_area = st.container()   # the chart goes above its step slider, like a video above its timeline
    order = view.step_nodes(G)
    current = visible = None
    if len(order) > 1:
        k = st.slider(f"Step through the {len(order)} ops drawn, in the order they ran", 1, len(order), len(order),
                      key=f"step:{key}")
        current = order[k - 1]
        st.caption(f"Step {k} of {len(order)}: {view.step_words(G, current)}")
        if G.nodes[current].get("line"):
            st.markdown(view.code_html(rec.source, G.nodes[current]["line"], context=0), unsafe_allow_html=True)
        visible = view.revealed(G, current) if k < len(order) else None

    view_key = (key, group, tuple(expand), tuple(st.session_state.get("unfold", [])), path_only, fold, plumbing,
                backward, large, current if visible is not None else None, picked)
    fig = session.figure(G, pos, run_id, view_key, flow=flow, selected=picked, visible=visible,
                         current=current if visible is not None else None, large_text=large)
    chart_area.plotly_chart(fig, key="graph", on_select="rerun", selection_mode="points", height=fig.layout.height,
                            config={"scrollZoom": True, "displaylogo": False})
    st.caption(view.legend_text(rec, key) + " " + view.drawn_words(len(order), G.number_of_nodes() - len(order))
               + ". Hover for details; click a node to inspect it; scroll to zoom, drag to pan, "
               "double-click to fit.")
    if not calling and tape is not None:
        st.caption(view.tape_summary(rec, tape))
    if calling:
        chosen = graph.gradient_call(rec, tape, call_index)
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
        if d.unfold:
            info.button("Unfold: every op", on_click=unfold, args=(d.unfold,))
        if d.producer:
            code.markdown(f"**made by** {d.producer}")
        if d.consumers:
            code.markdown("**used by** " + "; ".join(d.consumers))
        st.session_state.pick_line = d.line     # marked in the editor too
        if d.line:
            show_source(code, rec, G, st.session_state.pick, d.line)


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
    start_run(st.session_state.source, link=st.session_state.pop("link_run", False))
    settle_quick_run()

head, big, flip = st.columns([4, 1.5, 1.5], vertical_alignment="bottom")
head.markdown("#### Tape debugger")
big.toggle("Large text", key="large_text", help="For a projector: bigger letters and labels everywhere.")
flip.toggle("Graph first", key="graph_first", help="Put the graph on the left, wider, and the code beside it.")
mode.banner()
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
    open_section()

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
        age = session.link_runs().age(drawn_job.source) if drawn_job.shared else None
        st.session_state.run_status = (drawn_job.summary(age)
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

# None gradients, NaN and Inf go first, unasked: they are what a debugging session is about.
problems, where = view.callouts(rec), top
for i, callout in enumerate(problems[:8]):
    if i == 2:   # the first two in full; more would push the picture off the screen
        where = top.expander(f"{len(problems) - 2} more: " + ", ".join(c.text.split("**")[1] for c in problems[2:8]))
    row = where.columns([6, 1], vertical_alignment="center")
    row[0].error(callout.text)
    row[1].button("Show it", key=f"callout{i}", on_click=show_callout,
                  args=(callout.view, callout.tensor, callout.backward))
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
        st.info(explain.no_graph_note(rec.error.type if rec.error else None, len(rec.tensors)))
    show_printed(rec)

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

draw_editor()
