"""The debugger page's panels, drawn with Streamlit from a recording and the session's
DebuggerState: the run's error, the graph with its switches and step slider, the inspector,
the printed output, and the share and export buttons. They change no state but the widget
values the user sets (and `DebuggerState.update_pick` / `pick_line`). Text from the recording
reaches markdown only through notes.py and markdown.literal. Never imports TensorFlow.
"""
from __future__ import annotations

import dataclasses
import json

import streamlit as st

from .. import examples, printed
from ..draw import figures, gradient_flow, graph, run_figures, train_grids
from ..draw.options import View
from ..recording import STEP_HIST_EVERY, Recording
from ..state import callouts, inspector, opened, share, view
from ..words import eager_mode, notes, picture, tapes
from ..words.markdown import literal
from . import charts, drawing, viewport


PLUMBING_HELP = ("Variable bookkeeping TensorFlow does for you: creating a variable (VarHandleOp), "
                 "writing it (AssignVariableOp), checking it has a value; and with Backward ops, "
                 "the backward pass reshaping gradients to fit (Shape, Reshape, Tile, BroadcastTo). "
                 "Hidden because no line of yours is about it.")


def show_error(rec: Recording) -> None:
    """The run's error with its line, the line in the program, and a hint. An error a
    callout already states (a failed gradient call) folds away, its hint kept: repeated in
    full it pushed the graph below the fold at 1280x720."""
    called_out = callouts.error_called_out(rec)
    where = st.expander("The error in full, with its line") if called_out else st.container()
    where.error(notes.error_line(rec))
    if rec.error.line:     # quoted from the file it was raised in, a module of the project too
        source = opened.source_of(rec, rec.error.file)
        where.markdown(inspector.code_html(source, rec.error.line, context=2), unsafe_allow_html=True)
    if hint := notes.hint(rec):
        st.info(hint)
    if rec.ops and not called_out:
        st.caption("The graph below shows what was recorded before the error.")


def show_callouts(state, problems: list) -> None:
    """None gradients, NaN and Inf, unasked: what a debugging session is about. The first
    two on the page, each in short words with a button that shows its node (the whole
    story on the button's hover and in the inspector); more fold into an expander."""
    where = st.container()
    for i, callout in enumerate(problems[:8]):
        if i == 2:   # more would push the picture off the screen
            where = st.expander(f"{len(problems) - 2} more: " +
                                ", ".join(c.text.split("**")[1] for c in problems[2:8]))
        row = where.columns([5, 1], vertical_alignment="center")   # "Show it" whole at 1024 px
        row[0].error(callout.text)
        row[1].button("Show it", key=f"callout{i}", on_click=state.show_callout, help=callout.full,
                      args=(callout.view, callout.tensor, callout.backward))


def scroll_to_chart() -> None:
    """After "Show it": bring the picked node (the figure's ringed "selected" trace) to the
    middle of the screen, else the graph. Plotly draws after this script runs: it waits."""
    st.html("""<script>(function find(tries) {
        const doc = window.parent.document, chart = doc.querySelector('.js-plotly-plot');
        const ring = chart && (chart._fullData || []).find(t => t.name === 'selected' && t.x && t.x.length);
        if (!ring && tries > 0) return setTimeout(() => find(tries - 1), 200);
        if (!chart) return;
        chart.scrollIntoView({block: 'center'});
        if (ring) {      // the node's place on the page, from the chart's own axes
            const L = chart._fullLayout, xa = L.xaxis, ya = L.yaxis, box = chart.getBoundingClientRect();
            const y = box.top + ya._offset + ya.l2p(ring.y[0]);
            let pane = chart.parentElement;
            while (pane && pane.scrollHeight <= pane.clientHeight + 1) pane = pane.parentElement;
            (pane || window).scrollBy(0, y - window.parent.innerHeight / 2);
        }
        chart.focus && chart.focus();
    })(25);</script>""", unsafe_allow_javascript=True)


def show_printed(rec: Recording) -> None:
    # stderr too: tf.print writes there unless told otherwise, and a learner's must show
    for title, text in (("**Printed output**", rec.stdout),
                        ("**Written to stderr** (where `tf.print` and warnings go)", rec.stderr)):
        if text:
            text = printed.as_shown(text)     # a progress bar as its terminal left it
            st.markdown(title)
            st.code(text, language=None, height=min(220, 40 + 28 * text.count("\n")))


def chart_points(chart) -> tuple:
    """The nodes selected on the chart (its widget state), as their node names."""
    selection = (chart or {}).get("selection") or {}
    return tuple(str(p.get("customdata")) for p in selection.get("points", []))


def _view_switches(state, rec: Recording) -> tuple:
    """The view picker and display switches: (the view's key, the View they choose)."""
    choices = dict(view.view_choices(rec))
    # The view's switches wait in a popover named after what is shown: on a projector the
    # picture comes first, and the lesson's own view is the one the page opens on.
    shown = choices.get(st.session_state.get("view"), "")
    controls = st.popover(literal(f"Showing: {shown}", 160) if rec.tapes else "View options",
                          icon=":material/tune:", width="stretch",
                          help="What to draw: each gradient call, each tape, every op; and how")
    if rec.tapes:
        keys = list(choices)     # its default is the view drawn (see _switch): else a switch's
        now = st.session_state.get("view")     # click sent the first choice and jumped there
        key = controls.selectbox("Show", keys, index=keys.index(now) if now in keys else 0,
                                 format_func=choices.get, key="view")
    else:     # a program with no tape teaches by what it printed: beside the sentence, on arrival
        said, out = st.columns([3, 2]) if rec.stdout.strip() else (st.container(), None)
        said.info(eager_mode.no_tape_sentence(rec))
        if out is not None:
            text = printed.as_shown(rec.stdout)
            # wrapped, so the key number at a long line's end is on screen; a long print scrolls
            out.code(text, language=None, wrap_lines=True, height="content" if text.count("\n") < 6 else 180)
        key = view.ALL_OPS
    tape, call_index = view.parse_view(key)
    calling = call_index is not None
    if rec.tapes:     # what the picture shows, in one sentence (names escaped by view.sentence)
        try:
            st.markdown(view.sentence(rec, key))
        except (ValueError, KeyError, IndexError, StopIteration):
            pass      # a view that cannot be drawn says so below
    layers = graph.group_keys(rec)
    with controls:
        fold = _switch("Fold loops", "fold", True, help="Ops repeated from one line draw as one node.")
        backward = _switch("Backward ops", "backward", False, disabled=not calling,
                           help="The ops the gradient call ran.")
        path_only = _switch("Path only", "path_only", False, disabled=not calling,
                            help="Hide ops the chosen gradient does not flow through.")
        plumbing = _switch("Plumbing", "plumbing", False, help=PLUMBING_HELP)
        group = _switch("Layers", "group", False, help="One node per Keras layer.") if layers else False
        legend = _switch("Legend", "legend", False, help="What each marker's shape and colour mean, over the chart.")
        expand = (st.multiselect("Expand layers", layers, key="expand", placeholder="Expand a layer…",
                                 default=[k for k in st.session_state.get("expand", []) if k in layers])
                  if group and layers else [])
    return key, View(tape=tape, call=call_index, group=group, expand=expand, unfold=state.unfold,
                     path_only=bool(path_only and calling), fold=fold, plumbing=plumbing,
                     backward=bool(backward and calling), legend=legend,
                     large_text=bool(st.session_state.get("large_text")))     # the page's Large text switch


def _switch(label: str, key: str, default: bool, **kw) -> bool:
    """A view switch that shows the state the graph is drawn with. Its value is also its
    drawn default: a state set while the page's run was cut short (a fresh run's folded
    loops) never reached the browser, which then showed the switch off over folded loops."""
    return st.toggle(label, value=bool(st.session_state.get(key, default)), key=key, **kw)


def _step_slider(rec: Recording, G, key: str, order: list) -> tuple:
    """The step slider under the chart, when more than one op is drawn: (the step's op,
    the nodes revealed up to it), both None on the last step (the whole graph)."""
    if len(order) < 2:
        return None, None
    k = st.slider(f"Step through the {len(order)} ops drawn, in the order they ran", 1, len(order), len(order),
                  key=f"step:{key}")
    current = order[k - 1]
    st.caption(f"Step {k} of {len(order)}: {view.step_words(G, current)}")
    where, excerpt = inspector.excerpt_for(rec, G, current, context=0)   # the op's own file
    if excerpt:
        st.markdown(excerpt, unsafe_allow_html=True)
    visible = view.revealed(G, current) if k < len(order) else None
    return (current if visible is not None else None), visible


def show_graph(state, rec: Recording):
    """The view picker, display switches, the op graph and its step slider; returns
    (G, flow, figure, the page's name for what is drawn), or None when the view cannot be drawn. Its labels are placed for the
    chart's width and height in the browser's window, once reported (ui/viewport.py)."""
    key, showing = _view_switches(state, rec)
    try:
        G, pos = drawing.drawn(rec, state.run_id, showing)
    except (ValueError, KeyError, IndexError) as exc:
        st.error("This view cannot be drawn: " + literal(exc, 500))
        return None
    tape, call_index = showing.tape, showing.call
    flow = gradient_flow.flow_norms(rec, tape, call_index, G) if call_index is not None else None
    # A click on the chart, or a callout's button, picks the node the inspector shows.
    picked = state.update_pick(G, chart_points(st.session_state.get("graph")))

    # the chart goes above its step slider, like a video above its timeline
    chart_area = st.container(key="graph_area")
    order = view.step_nodes(G)
    current, visible = _step_slider(rec, G, key, order)
    # labels are placed for the chart's width and the height the page draws it at
    showing = dataclasses.replace(
        showing, current=current, picked=picked, height=viewport.fitted_height(figures.chart_height(pos)),
        width=viewport.graph_width(viewport.window_width(), bool(st.session_state.get("graph_first")),
                                   showing.large_text))
    fig = drawing.figure(G, pos, state.run_id, showing, flow=flow, visible=visible)
    if not viewport.plotly_drawn() and (first := drawing.first_picture(fig)) is not None:
        chart_area.html(first)     # painted at once; Plotly's chart takes its place when drawn
    chart_area.plotly_chart(fig, key="graph", on_select="rerun", selection_mode="points", height=fig.layout.height,
                            config={"scrollZoom": True, "displaylogo": False})
    st.caption(view.legend_text(rec, key) + " " + picture.drawn_words(len(order), G.number_of_nodes() - len(order))
               + ". Hover for details; click a node to inspect it; scroll to zoom, drag to pan, "
               "double-click to fit.")
    viewport.note_drawn()
    if call_index is None and tape is not None:
        st.caption(tapes.tape_summary(rec, tape))
    if call_index is not None:
        chosen = graph.gradient_call(rec, tape, call_index)
        for note in (chosen.error, chosen.warning, chosen.note):
            if note:
                st.info(literal(note, 2_000))
    return G, flow, fig, f"{state.run_id} {key}"


def show_inspector(state, rec: Recording, G, flow) -> None:
    """The picked node: value, statistics, producer, consumers, and its line in the program."""
    st.subheader("Inspect")
    choices = dict(view.node_choices(G, keep=st.session_state.get("pick")))
    nodes, now = [None, *choices], st.session_state.get("pick")
    st.selectbox("Node", nodes, key="pick", placeholder="Click a node or pick one…",
                 index=nodes.index(now) if now in nodes else 0,
                 format_func=lambda n: "—" if n is None else choices[n])
    node = st.session_state.pick
    if node is None:
        return
    d = inspector.details(rec, G, node, flow)
    info, code = st.columns([1, 1])
    info.markdown(notes.inspector(d))
    if d.value is not None:
        info.code(d.value, language=None)
    if d.stats:
        info.dataframe([d.stats], hide_index=True)
    if d.group:
        info.button("Expand " + literal(d.group, 200), on_click=state.expand_layer, args=(d.group,))
    if d.unfold:
        info.button("Unfold: every op", on_click=state.unfold_node, args=(d.unfold,))
    if d.producer:
        code.markdown(notes.made_by(d.producer))
    if d.consumers:
        code.markdown(notes.used_by(d.consumers))
    state.pick_line = inspector.editor_line(rec, G, node)     # marked in the editor: program lines only
    where, excerpt = inspector.excerpt_for(rec, G, node)        # quoted from the op's own file
    if excerpt:
        code.markdown(f"**{literal(where, 300)}**:")
        code.markdown(excerpt, unsafe_allow_html=True)


def share_and_export(example, rec: Recording, recorded: dict, fig) -> None:
    """A share link (the example's, or the program carried in the URL), and downloads."""
    share_col, json_col, html_col = st.columns(3)
    with share_col.popover("Share link", width="stretch"):
        base = st.context.url or ""
        if example and rec.source == examples.code(example):
            st.markdown("This example:")
            st.code(share.link(base, example=example), language=None, wrap_lines=True)
        url = share.link(base, code=rec.source)
        if problem := share.too_long(url):
            st.warning(problem)
        else:
            st.markdown("This program, carried in the link itself:")
            st.code(url, language=None, wrap_lines=True)
        if not problem and len(url) > share.LONG_URL:
            st.warning("This link is long; some chat tools may cut it. Download the recording instead.")
    json_col.download_button("⬇ Recording", lambda: json.dumps(recorded, allow_nan=False), width="stretch",
                             file_name="recording.json", mime="application/json", on_click="ignore",
                             help="The recording as JSON (schema tapeviz.recording/1)")
    if fig is not None:
        html_col.download_button("⬇ Graph", lambda: figures.to_html(fig), file_name="graph.html", mime="text/html",
                                 width="stretch", on_click="ignore", help="The graph as a standalone HTML page")


def clickable_steps(fig):
    """Each step a point a click selects: plotly selects no point of a lines-only trace, so
    the run's lines get small markers; few steps get a tick per step, not "2.5"."""
    fig = charts.legible(fig)
    fig.update_traces(mode="lines+markers", marker_size=5)
    steps = max((len(t.x) for t in fig.data if t.x is not None), default=0)
    if steps <= 12:
        fig.update_xaxes(dtick=1)
    return fig


def show_run(state, rec: Recording) -> None:
    """The run as a whole, when it made more than one gradient call: loss and each variable's
    gradient norm per step. A click on a step (or its number) opens that step's graph when
    its ops were kept."""
    if len(rec.steps) < 2:
        return
    st.subheader("The run, step by step")
    memo = st.session_state.get("_run_figure")
    if memo is None or memo[0] != state.run_id:      # 1,810 steps take a while to chart
        memo = st.session_state["_run_figure"] = (state.run_id, clickable_steps(run_figures.run_figure(rec)))
    fig = memo[1]
    st.plotly_chart(fig, key="run_chart", on_select=state.open_clicked_step, selection_mode="points",
                    config={"displaylogo": False})
    steps = run_figures.site_steps(rec)
    show_histograms(steps, "run_hist")
    st.number_input(f"Open step n's graph (1 to {len(steps):,}; a step whose ops the bounds "
                    "dropped has its summary only)", 1, max(1, len(steps)), None, key="run_step",
                    on_change=state.open_typed_step, placeholder="a step number, or click the chart")
    if state.step_problem:
        st.caption(state.step_problem)


def show_histograms(steps: list, key: str) -> None:
    """Each variable's gradient values over the steps as heat strips, from the calls that
    binned them (every STEP_HIST_EVERY-th), as the training page draws its own."""
    paths = train_grids.histogram_paths(steps)
    if not paths:
        return
    shown = paths[:train_grids.MAX_STRIPS]
    st.vega_lite_chart(train_grids.histogram_rows(steps, shown), train_grids.histogram_spec(
        shown, f"Gradient values per variable (|value|, every {STEP_HIST_EVERY}th call)"),
        key=key)
    if len(paths) > len(shown):
        st.caption(f"The first {len(shown)} of {len(paths)} variables: every one's counts are in "
                   "the recording (`steps[i].hist`).")
