"""The program editor: Ace (bundled in streamlit-code-editor's wheel, so it works offline)
with line numbers, Python highlighting, Tab indentation, Ctrl+Enter to run, the error line
and the picked node's line marked; and an example's code without its docstring.
"""
from __future__ import annotations

import ast
from typing import Optional

import streamlit as st

from .. import examples

ERROR_CLASS, PICK_CLASS = "tv-error-line", "tv-pick-line"
# Ace draws markers as absolutely placed divs inside the editor's iframe.
EDITOR_CSS = (f".{ERROR_CLASS} {{position:absolute; background:rgba(213,94,0,.22);}}"
              f".{PICK_CLASS} {{position:absolute; background:rgba(255,200,40,.45);}}")
# Ace props that override the component's defaults:
# - debounceChangePeriod: the component keeps its own copy of the text, updated 250 ms
#   after a key by default. Ctrl+Enter sooner than that, and the script run that draws the
#   error handed the editor the stale copy with the error-line marker: Ace dropped the last
#   line, marked a row that no longer existed, then the component restored the submitted
#   text and the marker was never drawn. Undebounced, the copy is never stale.
# - scrollMargin: with the default 15 px above and below, the text scrolled by 15 px when
#   the error was drawn and the line numbers did not, so each number sat half a line off
#   its line. The editor is sized to show every line (up to 24), so no margin is needed.
# - enableLiveAutocompletion: the component's default opened a completion list while one
#   typed, and Ctrl+Enter ran the program without closing it, so the list stayed over the
#   code (on a projector, over the lines being taught). Completion is still there on
#   Ctrl+Space (enableBasicAutocompletion).
ACE_PROPS = {"debounceChangePeriod": 0, "scrollMargin": [0, 0, 0, 0],
             "enableLiveAutocompletion": False, "enableBasicAutocompletion": True}
RUN_BUTTON = {"name": "Run  (Ctrl+Enter)", "feather": "Play", "primary": True, "hasText": True,
              "alwaysOn": True, "showWithIcon": True, "commands": ["submit"],
              "style": {"bottom": "0.4rem", "right": "0.4rem"}}


def split_docstring(source: str) -> tuple[str, str]:
    """(docstring, code): a module docstring and the program after it, blank lines trimmed.
    Programs without one come back whole."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return "", source
    doc = ast.get_docstring(tree, clean=True)
    if not doc or not tree.body:
        return "", source
    end = tree.body[0].end_lineno
    code = "\n".join(source.splitlines()[end:]).lstrip("\n")
    return doc, code + ("\n" if source.endswith("\n") and not code.endswith("\n") else "")


def example_code(name: str) -> str:
    """What the editor shows for an example: its program, its explanation left out."""
    return split_docstring(examples.load(name).source)[1]


def markers(error_line: Optional[int], pick_line: Optional[int], message: str = "") -> dict:
    """Ace props: full-line markers and a gutter annotation (rows are 0-based)."""
    marks, notes = [], []
    for line, cls in ((error_line, ERROR_CLASS), (pick_line, PICK_CLASS)):
        if line:
            marks.append({"startRow": line - 1, "startCol": 0, "endRow": line - 1, "endCol": 1,
                          "className": cls, "type": "fullLine"})
    if error_line:
        notes.append({"row": error_line - 1, "column": 0, "type": "error", "text": message})
    return {"markers": marks, "annotations": notes}


def draw(source: str, lines: int, font_px: int, props: dict, key: str = "code_editor") -> None:
    """Draw the editor. What it hands back (Ctrl+Enter or the Run button: "submit"; leaving
    it: "blur", so that edits survive other widgets' reruns) is read by `event`."""
    from code_editor import code_editor      # the page's only third-party component

    code_editor(source, lang="python", theme="default", shortcuts="vscode",
                height=[lines, lines], allow_reset=True, response_mode=["blur"],
                buttons=[RUN_BUTTON], key=key, props={**props, **ACE_PROPS},
                options={"showLineNumbers": True, "tabSize": 4, "useSoftTabs": True,
                         "fontSize": font_px, "showPrintMargin": False, "wrap": False,
                         "highlightActiveLine": False},
                component_props={"globalCSS": EDITOR_CSS})


def event(key: str = "code_editor") -> tuple[Optional[str], Optional[str]]:
    """("submit" | "blur", text) for an answer of the editor not yet handled, else
    (None, None). Read at the top of a script run, before anything is drawn."""
    answer = st.session_state.get(key)
    if not isinstance(answer, dict) or not answer.get("id"):
        return None, None
    if answer["id"] == st.session_state.get(f"_{key}_seen"):
        return None, None
    st.session_state[f"_{key}_seen"] = answer["id"]
    return answer.get("type") or None, answer.get("text")
