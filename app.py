"""tapeviz: the Streamlit entry point. Navigation only; the pages hold the logic."""
from pathlib import Path

import streamlit as st

from tapeviz.page.icon import page_icon

HERE = Path(__file__).parent

st.set_page_config(page_title="tapeviz", page_icon=page_icon(), layout="wide")   # served from here, not fetched
pages = [st.Page(HERE / "views" / "debugger.py", title="Tape debugger", icon=":material/account_tree:", default=True)]
if (HERE / "views" / "train.py").exists():   # the training page, when it is there
    pages.append(st.Page(HERE / "views" / "train.py", title="Train MNIST", icon=":material/monitoring:"))
st.navigation(pages, position="top").run()
