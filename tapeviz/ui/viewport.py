"""The browser window as the debugger's graph meets it, reported by one hidden component
mounted with the status line (pages/debugger.py's fragment): the window's width, so labels are placed for the chart the person
sees rather than the narrowest one (place.PLOT_W); the room from the graph's top to the
window's bottom, so a taller graph is drawn to end there and the lesson's nodes are on
screen on arrival at 1280x720 and 1024x768; whether Plotly's chart has been drawn (its
code loaded), and when the browser painted the page's first graph or a Run's. All come in
one report: a page's first draw reruns once for them, not once each. Never imports
TensorFlow."""
from __future__ import annotations

from typing import Optional

import streamlit as st

KEY = "viewport"
# Measures once the graph is on the page, and again after a resize. Sends only what Python
# does not know yet: a width off by a column's worth of labels (a drag of the window's
# edge is many resizes, each report a rerun), or room off by 10 px.
_JS = """export default function({ data, setStateValue }) {
    // data: {seen: the last report Python has, page: what is drawn}; a new page re-runs this
    let timer = null;
    const seen = data.seen || {};
    function report(chart, extra) {
        const width = Math.round(document.documentElement.clientWidth);
        const top = chart.getBoundingClientRect().top + window.scrollY;
        const room = Math.round((window.innerHeight - top) / 10) * 10;
        const plotly = !!chart.querySelector('.main-svg');
        const redraw = room !== seen.room || !(Math.abs(width - seen.width) < 40) || plotly !== !!seen.plotly;
        if (redraw || extra.drawn)
            setStateValue('window', {width, room, plotly, painted: seen.painted, drawn: seen.drawn, ...extra});
    }
    // The browser's own paint time of the first picture (Largest Contentful Paint names the
    // element): a poll runs late while the main thread evaluates Plotly's code.
    let picturePaint, observer;
    const take = entries => entries.forEach(e => {    // the picture is an SVG image (its url)
        if (picturePaint === undefined && ((e.url || '').startsWith('data:image/svg+xml')
                || (e.element && e.element.closest('.tv-first-paint'))))
            picturePaint = Math.round(e.renderTime || e.startTime);
    });
    try {
        observer = new PerformanceObserver(list => take(list.getEntries()));
        observer.observe({type: 'largest-contentful-paint', buffered: true});
    } catch (e) { /* a browser without it: the poll's time */ }
    // The page's first report waits for Plotly's chart (its code loads for seconds on a
    // first visit, the first picture standing in): one rerun then places the labels for
    // the window and drops the first picture. It carries when the graph was first painted,
    // in ms since the page opened, so the status can say what the person waited.
    function first(tries, painted) {
        const chart = document.querySelector('.st-key-graph_area');
        const picture = chart && chart.querySelector('.tv-first-paint img');
        if (chart && painted === undefined && ((picture && picture.complete) || chart.querySelector('.main-svg')))
            painted = Math.round(performance.now());
        // the page's first graph is timed from the page's opening, not as a Run's (drawn);
        // entries the observer has not handed over yet are taken now
        if (observer) take(observer.takeRecords());
        const arrived = {painted: picturePaint || painted, drawn: {page: data.page, ms: null}};
        if (chart && chart.querySelector('.main-svg')) return report(chart, arrived);
        if (tries <= 0) return chart && report(chart, arrived);
        timer = setTimeout(() => first(tries - 1, painted), 50);
    }
    function measure() {
        const chart = document.querySelector('.st-key-graph_area');
        if (chart) report(chart, {});
    }
    // A Run's new graph (data.time): when Plotly has painted it, the ms since this page's
    // data arrived, so the status says Run -> painted rather than the server's share. Only
    // for a Run: a report while a click's rerun draws would cut that rerun short.
    const mounted = performance.now();
    function drawn(tries) {
        const chart = document.querySelector('.st-key-graph_area');
        if (chart && chart.querySelector('.st-key-graph .main-svg'))
            return requestAnimationFrame(() => requestAnimationFrame(() =>
                report(chart, {drawn: {page: data.page, ms: Math.round(performance.now() - mounted)}})));
        if (tries > 0) timer = setTimeout(() => drawn(tries - 1), 50);
    }
    if (seen.width === undefined) requestAnimationFrame(() => first(600, undefined));
    else if (data.time && (!seen.drawn || seen.drawn.page !== data.page)) drawn(200);
    else timer = setTimeout(measure, 200);
    const again = () => { clearTimeout(timer); timer = setTimeout(measure, 400); };
    window.addEventListener('resize', again);
    return () => { clearTimeout(timer); window.removeEventListener('resize', again); };
}"""
_REPORTER = st.components.v2.component("tapeviz_viewport", js=_JS)

PADDING_REM = 1.5            # .block-container's side padding (pages/debugger.py's CSS)
GAP_REM = 2.0                # st.columns(gap="medium") between the code and the graph
REM_PX, LARGE_REM_PX = 16, 20   # Large text sets html's font-size to 125%
# The graph column's share of the row: st.columns([7, 4]) graph first, else [5, 7]
GRAPH_FIRST_SHARE, GRAPH_SECOND_SHARE = 7 / 11, 7 / 12
FIT_MIN_PX = 300     # a graph shorter than this is cramped: the page scrolls instead
MARGIN_PX = 8        # between the graph's bottom and the window's


def _reported() -> dict:
    """The browser's last report ({} before the first)."""
    reported = (st.session_state.get(KEY) or {}).get("window")
    return reported if isinstance(reported, dict) else {}


def plotly_drawn() -> bool:
    """Whether the browser has drawn a Plotly chart on this page yet (its code loaded):
    until then the graph goes out with its first picture (draw/first_paint.py)."""
    return bool(_reported().get("plotly"))


def painted_after_opening() -> Optional[float]:
    """Seconds from opening the page to its first graph painted, as the browser timed it
    (None before its first report)."""
    painted = _reported().get("painted")
    return painted / 1000 if isinstance(painted, (int, float)) and painted > 0 else None


def window_width() -> Optional[int]:
    """The browser window's width in px, once reported (None before)."""
    width = _reported().get("width")
    return int(width) if isinstance(width, (int, float)) and 200 <= width <= 20_000 else None


def graph_width(window: Optional[int], graph_first: bool, large_text: bool) -> Optional[int]:
    """The px width of the graph's column for a window `window` px wide (None: unknown, the
    figure places labels for its narrowest chart)."""
    if window is None:
        return None
    rem = LARGE_REM_PX if large_text else REM_PX
    row = window - 2 * PADDING_REM * rem - GAP_REM * rem
    return int(row * (GRAPH_FIRST_SHARE if graph_first else GRAPH_SECOND_SHARE))


def fitted_height(drawn: int) -> int:
    """The graph's height: as drawn when the window has room, else ending at the window's
    bottom (the room is the browser's measure from the last run, none yet on the first)."""
    return fit(drawn, _reported().get("room"))


def fit(drawn: int, room) -> int:
    """fitted_height's rule for a measured `room` in px (None: not measured yet). Under
    FIT_MIN_PX of room (three callouts above the graph) the graph keeps its height:
    squeezed, it would be cramped and still cut."""
    if not isinstance(room, (int, float)) or room >= drawn or room - MARGIN_PX < FIT_MIN_PX:
        return drawn
    return int(room) - MARGIN_PX


def measure(page: str, time_paint: bool = False) -> None:
    """Mounted in the status line's fragment (pages/debugger.py): its report reruns only
    that fragment, which reruns the page when the graph must be drawn again (redraw_needed).
    `page` names what is drawn: another program's callouts move the graph's top, so it is
    measured again; so is a resized window. `time_paint`: report when the browser painted
    `page` (a Run's graph, whose status waits for it)."""
    _REPORTER(key=KEY, data={"seen": _reported(), "page": page, "time": time_paint}, height=0,
              on_window_change=lambda: None)


def _drawn_for() -> tuple:
    reported = _reported()
    return reported.get("width"), reported.get("room"), bool(reported.get("plotly"))


def note_drawn() -> None:
    """The graph was drawn for the browser's last report (its width, room, Plotly's state)."""
    st.session_state["_viewport_drawn_for"] = _drawn_for()


def redraw_needed() -> bool:
    """A report came that the drawn graph did not use: the page must draw it again."""
    return st.session_state.get("_viewport_drawn_for") != _drawn_for()


def drawn_ms(page: str) -> Optional[int]:
    """The browser's ms from `page`'s data arriving to its graph painted, once reported."""
    drawn = _reported().get("drawn")
    if isinstance(drawn, dict) and drawn.get("page") == page and isinstance(drawn.get("ms"), (int, float)):
        return int(drawn["ms"])
    return None
