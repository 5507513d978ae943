"""The debugger's "Compare with…": the chooser beside the editor, and over the page both op
graphs side by side (draw/compare_figures.py), ringed by difference, the first divergence
called out, the sentence over them and both values of the picked op under them. A node
picked on one chart picks its match on the other."""
from __future__ import annotations

import streamlit as st

from ..draw import compare_figures, first_paint
from ..state import compare
from ..words import compare as words
from ..words.markdown import literal
from ..words.values import number_text
from . import viewport

CHART_H = 430           # px: both charts, the sentence and the legend fit 720 px with the header
PAGE_PAD = 96           # px of the window's width that are not the two charts


def twin(rec, source, record) -> None:
    """The shown example's PyTorch twin (`source`, None when it has none), recorded once by
    `record(source) -> Recording`: the comparison opens on it; where PyTorch is not
    installed, a note over the page says how to get it."""
    cs = compare.of(st.session_state)
    made = None
    if rec is not None and cs.wants_twin(source):
        with st.spinner("Recording the same lesson in PyTorch…"):
            made = record(source)
    if rec is not None:
        cs.set_twin(rec, source, st.session_state, made)


def twin_problem() -> str | None:
    cs = compare.of(st.session_state)
    return cs.twin_problem if cs.twin_source is not None else None


def chooser(rec) -> None:
    """What to compare the shown recording with; choosing draws the pair at once."""
    cs = compare.of(st.session_state)
    cs.noticed(rec)
    if rec is None:
        return
    choices = cs.choices(rec)
    if st.session_state.get(compare.WITH) not in (None, *choices):
        st.session_state[compare.WITH] = None
    with st.expander("Compare with…", icon=":material/compare:",
                     expanded=st.session_state.get(compare.WITH) is not None):
        st.selectbox("Compare this run with", [None, *choices], key=compare.WITH,
                     format_func=lambda c: "—" if c is None else compare.CHOICES[c],
                     placeholder="Pick what to compare with…")
        chosen = st.session_state.get(compare.WITH)
        if chosen == compare.STEP:
            _steps(rec)
        elif chosen == compare.OPENED:
            st.file_uploader("A recording (.json) to compare with", type=["json"], key=compare.FILE,
                             on_change=_open_upload)
            if cs.opened_name:
                st.caption("Comparing with " + literal(cs.opened_name, 120))
        if cs.problem:
            st.error(literal(cs.problem, 500))


def _open_upload() -> None:
    if (upload := st.session_state.get(compare.FILE)) is not None:
        compare.of(st.session_state).open_bytes(upload.getvalue(), upload.name)


def _steps(rec) -> None:
    n = len(compare.steps.kept_steps(rec))
    i, j = st.session_state.get(compare.STEPS) or compare.default_steps(rec)
    left, right = st.columns(2)
    a = left.number_input("Step", min_value=0, max_value=n - 1, value=min(i, n - 1), key="compare_step_a")
    b = right.number_input("against step", min_value=0, max_value=n - 1, value=min(j, n - 1), key="compare_step_b")
    st.session_state[compare.STEPS] = (int(a), int(b))


def show(where, rec) -> None:
    """Both graphs of the chosen pair over the page, or nothing when none is chosen."""
    cs = compare.of(st.session_state)
    pair = cs.pair(rec, st.session_state) if rec is not None else None
    if pair is None:
        return
    cmp = pair.comparison
    with where.container(border=True, key="compare_view"):
        st.markdown("**Compared:** " + literal(pair.sentence, 600))
        window = viewport.window_width() or 1280
        half = max(360, (window - PAGE_PAD) // 2)
        columns = st.columns(2, gap="small")
        for side, column, rec_side, name in (("a", columns[0], pair.a, pair.names[0]),
                                             ("b", columns[1], pair.b, pair.names[1])):
            _chart(column, cs, pair, side, rec_side, name, (half, CHART_H))
        st.caption(literal(" ".join(line.rstrip(".") + "." for line in words.summary(cmp, pair.names)[:2]), 600)
                   + " Rings: green matches, orange differs past rtol, red NaN, Inf or None on one "
                     "side, purple only on that side; click a node to see its match.")
        _both_values(cs, pair)
    if cs.scroll_due(pair):
        _scroll_to_pair()


def _scroll_to_pair() -> None:
    """A pair just chosen (the chooser sits below the fold at 1280x720): bring both charts
    into view. Plotly draws after this script runs, so it waits for the charts."""
    st.html("""<script>(function find(tries) {
        const doc = window.parent.document, box = doc.querySelector('.st-key-compare_view');
        const charts = box ? box.querySelectorAll('.js-plotly-plot') : [];
        if (charts.length < 2 && tries > 0) return setTimeout(() => find(tries - 1), 200);
        if (!box) return;
        box.scrollIntoView({block: 'start'});
        let pane = box.parentElement;    // then out from under the page's sticky header
        while (pane && pane.scrollHeight <= pane.clientHeight + 1) pane = pane.parentElement;
        (pane || window.parent).scrollBy(0, -72);
    })(40);</script>""", unsafe_allow_javascript=True)


def _chart(column, cs, pair, side: str, rec, name: str, size: tuple) -> None:
    picked_a, picked_b = cs.picked_ops(pair)
    G, pos, fig = compare_figures.side_figure(rec, pair.comparison, side, None, size=size)
    ring_at = compare_figures.node_of_op(G).get(picked_a if side == "a" else picked_b)
    if ring_at is not None and cs.picked is not None:
        compare_figures.mark_picked(fig, G, pos, ring_at)
    fig.update_layout(showlegend=False, margin=dict(t=10))   # the caption under both says the rings
    column.markdown(f"**{literal(name, 80)}**")
    area = column.container(key=f"first_paint_compare_{side}")
    if not viewport.plotly_drawn() and (first := first_paint.picture(fig)) is not None:
        area.html(first)     # painted at once; Plotly's chart takes its place when drawn
    chosen = area.plotly_chart(fig, key=f"compare_chart_{side}", on_select="rerun", selection_mode="points",
                                 height=fig.layout.height, config={"displaylogo": False, "scrollZoom": True})
    points = ((chosen or {}).get("selection") or {}).get("points") or []
    # Act on a chart's selection only when it changed: the other chart's older one stays
    # in its widget, and must not take the pick back.
    clicked = str(points[0].get("customdata")) if points else None
    if clicked is not None and cs.new_click(side, clicked):
        op_id = _op_of(rec, G, clicked)
        if op_id is not None and cs.picked != (side, op_id):
            cs.pick(side, op_id)
            st.rerun()


def _op_of(rec, G, node: str):
    """The op a clicked node stands for: its own, a fold's or group's first, a tensor's producer."""
    if node not in G:
        return None
    data = G.nodes[node]
    if data.get("kind") == "tensor":
        info = rec.tensor(data.get("ref")) if data.get("ref") is not None else None
        return info.producer if info is not None else None
    if data.get("ref") is not None:
        return data["ref"]
    return (data.get("members") or [None])[0]


def _both_values(cs, pair) -> None:
    """The picked op (or the first divergence) on both sides: as the inspector shows a node."""
    a_op, b_op = cs.picked_ops(pair)
    row = next((r for r in pair.comparison.rows if (r.a, r.b) == (a_op, b_op)), None)
    if row is None:
        return
    rows = []
    for name, rec, op_id, t, line in ((pair.names[0], pair.a, row.a, row.tensor_a, row.line_a),
                                      (pair.names[1], pair.b, row.b, row.tensor_b, row.line_b)):
        rows.append({"run": name, "op": row.op if op_id is not None else "—",
                     "line": line, "value": words.tensor_value(rec, t) if op_id is not None else "—"})
    diff = ", ".join(f"{what} {number_text(d, 3)}" for what, d, mark in
                     (("value", row.value_diff, row.value_mark), ("gradient", row.grad_diff, row.grad_mark))
                     if d is not None and mark is None)
    marked = [words.mark_words(row, what, pair.names) for what in ("value", "gradient")]
    label = "Picked" if cs.picked is not None else "First divergence"
    st.caption(f"{label}: {literal(row.op, 80)} at {literal(words.where_words(row), 80)}"
               + "".join(f"; {literal(m, 200)}" for m in marked if m)
               + (f"; max relative difference of {diff}" if diff else ""))
    st.dataframe(rows, hide_index=True)
