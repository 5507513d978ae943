"""How wide the browser draws the debugger's graph: the window's width, reported by a tiny
component, and the graph column's share of it, so labels are placed for the chart the
person sees rather than for the narrowest one (figures.PLOT_W)."""
from typing import Optional

import streamlit as st

# Reports the window's width (without its scroll bar) on mount, and again after a resize that changes it by a column's
# worth of labels (each report is a rerun; a drag of the window's edge is many resizes).
_JS = """
export default function(component) {
    const { setStateValue } = component;
    let sent = 0, timer = null;
    const report = () => {
        const width = Math.round(document.documentElement.clientWidth);
        if (Math.abs(width - sent) >= 40) { sent = width; setStateValue("width", width); }
    };
    const later = () => { clearTimeout(timer); timer = setTimeout(report, 400); };
    report();
    window.addEventListener("resize", later);
    return () => { window.removeEventListener("resize", later); clearTimeout(timer); };
}
"""
_REPORTER = st.components.v2.component("tapeviz_viewport", js=_JS)

PADDING_REM = 1.5            # .block-container's side padding (views/debugger.py's CSS)
GAP_REM = 2.0                # st.columns(gap="medium") between the code and the graph
REM_PX, LARGE_REM_PX = 16, 20   # Large text sets html's font-size to 125%
# The graph column's share of the row: st.columns([7, 4]) graph first, else [5, 7]
GRAPH_FIRST_SHARE, GRAPH_SECOND_SHARE = 7 / 11, 7 / 12


def window_width() -> Optional[int]:
    """The browser window's width in px, once its report has come back (None before)."""
    width = _REPORTER(key="viewport", default={"width": None}, height=0,
                      on_width_change=lambda: None).width
    return int(width) if isinstance(width, (int, float)) and 200 <= width <= 20_000 else None


def graph_width(window: Optional[int], graph_first: bool, large_text: bool) -> Optional[int]:
    """The px width of the graph's column for a window `window` px wide (None: unknown, the
    figure places labels for its narrowest chart)."""
    if window is None:
        return None
    rem = LARGE_REM_PX if large_text else REM_PX
    row = window - 2 * PADDING_REM * rem - GAP_REM * rem
    return int(row * (GRAPH_FIRST_SHARE if graph_first else GRAPH_SECOND_SHARE))
