"""The room a window has for the debugger's graph: the browser measures the px from the
graph's top on the page to the window's bottom (a Streamlit component, inline JavaScript),
and the page draws a graph taller than that to end there. Never imports TensorFlow."""
from __future__ import annotations

import streamlit as st

FIT_MIN_PX = 300     # a graph shorter than this is cramped: the page scrolls instead
MARGIN_PX = 8        # between the graph's bottom and the window's
# Reports how many px lie between the graph's top on the page and the window's bottom
# (rounded to 10 px, so a rerun that draws the same page sends nothing new).
_ROOM_JS = """export default function({ data, setStateValue }) {
    // data: {px: the last measure, page: what is drawn}; a new page re-runs this, measured anew
    let timer = null;
    function measure(tries) {
        const chart = document.querySelector('.st-key-graph');
        if (!chart) { if (tries > 0) timer = setTimeout(() => measure(tries - 1), 200); return; }
        const top = chart.getBoundingClientRect().top + window.scrollY;
        const room = Math.round((window.innerHeight - top) / 10) * 10;
        if (room !== data.px) setStateValue('px', room);
    }
    measure(25);
    const again = () => { clearTimeout(timer); timer = setTimeout(() => measure(0), 300); };
    window.addEventListener('resize', again);
    return () => { clearTimeout(timer); window.removeEventListener('resize', again); };
}"""
_room = st.components.v2.component("tapeviz_window_room", js=_ROOM_JS)


def fitted_height(drawn: int) -> int:
    """The graph's height: as drawn when the window has room, else ending at the window's
    bottom, so the lesson's nodes are on screen on arrival at 1280x720 and 1024x768
    (higher_order's `y = 1`). Under FIT_MIN_PX of room (three callouts above it) it keeps
    its height: squeezed, it would be cramped and still cut. The room is the browser's
    measure from the last run (none yet on the page's first)."""
    return fit(drawn, (st.session_state.get("window_room") or {}).get("px"))


def fit(drawn: int, room) -> int:
    """fitted_height's rule, for a measured `room` in px (None: not measured yet)."""
    if not isinstance(room, (int, float)) or room >= drawn or room - MARGIN_PX < FIT_MIN_PX:
        return drawn
    return int(room) - MARGIN_PX


def measure(page: str) -> None:
    """Mounted below the graph: a rerun follows when the measure changes. `page` names what
    is drawn: another program's callouts move the graph's top, so it is measured again; so
    is a resized window."""
    _room(key="window_room", data={"px": (st.session_state.get("window_room") or {}).get("px"), "page": page},
          on_px_change=lambda: None)
