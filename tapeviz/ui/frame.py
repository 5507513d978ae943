"""The frame around every page: the page config, the icon, the menu and the style both pages
share. app.py runs it; each page script starts with `frame.require(__file__)`, so a page
Streamlit runs without app.py still gets the frame (see require)."""
from __future__ import annotations

import threading
from pathlib import Path

import streamlit as st

from .icon import page_icon

# Every page's own CSS: a full-width page with room for the top menu, and captions a
# projector shows (Streamlit's are pale grey at 60% opacity).
STYLE = """<style>
.block-container {padding: 3.9rem 1.5rem 1rem 1.5rem; max-width: 100%;}
[data-testid="stCaptionContainer"] {color: #3a3a3a !important; opacity: 1 !important;}
</style>"""

_run = threading.local()     # set while app.py's navigation runs a page, in the script thread


def pages(folder: Path) -> list:
    """The menu. `folder` is the app's pages/: beside app.py in a checkout, under share/ once
    installed, so it comes from the script Streamlit runs, not from this package."""
    return [st.Page(folder / "debugger.py", title="Tape debugger", icon=":material/account_tree:",
                    default=True),     # at the bare address
            st.Page(folder / "train.py", title="Train MNIST", icon=":material/monitoring:", url_path="train")]


def run(app_file: str) -> None:
    """app.py: the frame, then the page the address names."""
    _run_framed(_frame(Path(app_file).parent / "pages"))


def require(page_file: str) -> None:
    """A page's first line. Streamlit runs a `pages/` folder's script on its own, without
    app.py, while st.navigation has not yet run in the process: a fresh server's first
    session opened at that page's address (and every AppTest run). Then the page puts up the
    frame itself, runs itself inside it and stops: one script run, so a press or a choice
    that started it is kept (a rerun dropped a press; drawing on outside the frame lost
    widget values), and st.navigation ends that mode for the server."""
    if not getattr(_run, "framed", False):
        _run_framed(_frame(Path(page_file).parent))
        st.stop()
    st.html(STYLE)


def _run_framed(page) -> None:
    _run.framed = True
    try:
        page.run()
    finally:
        _run.framed = False


def _frame(folder: Path):
    """The config (a served icon, not one fetched from Google) and the menu; the page the
    address names."""
    st.set_page_config(page_title="tapeviz", page_icon=page_icon(), layout="wide")
    return st.navigation(pages(folder), position="top")
