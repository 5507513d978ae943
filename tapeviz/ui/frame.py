"""The frame around every page: the page config, the icon, the menu and the style both pages
share. app.py runs it; each page script starts with `frame.require(__file__)`, so a page
reached first by a direct link on a fresh server still gets the frame (see require)."""
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
    """app.py: the config (served icon, not one fetched from Google), the menu, the page."""
    st.set_page_config(page_title="tapeviz", page_icon=page_icon(), layout="wide")
    page = st.navigation(pages(Path(app_file).parent / "pages"), position="top")
    _run.framed = True
    try:
        page.run()
    finally:
        _run.framed = False


def require(page_file: str) -> None:
    """A page's first line. Streamlit runs a `pages/` folder's script on its own, without
    app.py, for a server's first session when it opens at that page's address (its
    multipage mode before st.navigation). Calling st.navigation here ends that mode for the
    server, and the rerun goes through app.py: the same menu, icon and config as ever."""
    if not getattr(_run, "framed", False):
        st.navigation(pages(Path(page_file).parent), position="hidden")
        st.rerun()
    st.html(STYLE)
