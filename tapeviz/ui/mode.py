"""How this instance runs programs, said on every page: to a visitor, in one line, whether
their code runs isolated; to the operator, which mode and which walls are on (or why not).
"""
from __future__ import annotations

import streamlit as st

from . import session


def banner(compact: bool = False) -> None:
    """One caption line, and a popover listing the walls. Never raises: a hosted instance
    that refuses to run unsandboxed says so here, in words, on both pages. `compact`: the
    popover's label says the mode in a few words and holds the sentence (a projector's
    header has room for one line)."""
    try:
        status = session.runner().status()
    except Exception as exc:  # noqa: BLE001 - e.g. SandboxUnavailable: the page says why
        st.error(f"**This instance does not run programs.** {exc}", icon=":material/block:")
        return
    if compact:
        detail = st.container()
    else:
        line, detail = st.columns([5, 1], vertical_alignment="center")
        line.caption(visitor_line(status))
    with detail.popover(short_line(status) if compact else "Walls", icon=":material/security:", width="stretch",
                        help="How this instance runs programs: its mode and its walls"):
        if compact:
            st.caption(visitor_line(status))
        st.markdown(f"**Mode:** {status['mode']}" + ("" if status["mode"] == "hosted" else
                    " (set `TAPEVIZ_MODE=hosted` for an instance others use)"))
        for wall in status.get("walls", []):
            mark = ":material/check_circle:" if wall["on"] else ":material/cancel:"
            st.markdown(f"{mark} **{wall['wall']}**: {wall['detail']}")
        for text in status.get("warnings", []) + status.get("notes", []):
            st.warning(text)


def visitor_line(status: dict) -> str:
    if status["mode"] != "hosted":
        return (":material/computer: Local mode: programs run on this machine with the app's "
                "own permissions, in a separate process with a time limit. Not isolated.")
    if status.get("isolated"):
        return (":material/shield: Programs run isolated: each in its own sandbox and process, "
                "no network, none of the server's files, bounded time and memory.")
    return (":material/warning: Hosted without a sandbox: each program runs in its own "
            "process with limits, but is not isolated from this machine.")


def short_line(status: dict) -> str:
    """The mode in three words, for a compact header."""
    if status["mode"] != "hosted":
        return "Local: not isolated"
    return "Hosted: isolated" if status.get("isolated") else "Hosted: not isolated"
