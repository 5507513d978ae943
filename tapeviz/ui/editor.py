"""The program editor: Ace (bundled in streamlit-code-editor's wheel, so it works offline)
with line numbers, Python highlighting, Tab indentation, Ctrl+Enter to run, the error line
and the picked node's line marked.
"""
from __future__ import annotations

from typing import Optional

import streamlit as st


ERROR_CLASS, PICK_CLASS = "tv-error-line", "tv-pick-line"
# Ace draws markers as absolutely placed divs inside the editor's iframe.
EDITOR_CSS = (f".{ERROR_CLASS} {{position:absolute; background:rgba(213,94,0,.22);}}"
              f".{PICK_CLASS} {{position:absolute; background:rgba(255,200,40,.45);}}"
              # Python's colours, ours (see ACE_PROPS' theme): the component's textmate has none.
              # Dark enough to read on a washed-out projector; blue and vermillion tell apart
              # for every colour vision.
              ".ace_editor {background:#fafafa; color:#111; line-height:1.5;} .ace_gutter {background:#eef0f2; color:#555;}"
              ".ace_keyword, .ace_storage {color:#0050a0; font-weight:600;}"
              ".ace_string {color:#9a3c00;} .ace_constant.ace_numeric, .ace_constant.ace_language {color:#6a2e8c;}"
              ".ace_comment {color:#5f6b63; font-style:italic;} .ace_support.ace_function {color:#00734f;}"
              ".ace_cursor {color:#111;} .ace_marker-layer .ace_selection {background:rgba(0,114,178,.2);}")
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
# - theme: the component's own themes (streamlit_light/dark) @import Source Code Pro from
#   Google's font servers, so every page asked for it, and offline the request failed.
#   Ace's built-in textmate theme needs nothing from outside, in the system's monospace.
ACE_PROPS = {"debounceChangePeriod": 0, "scrollMargin": [0, 0, 0, 0],
             "enableLiveAutocompletion": False, "enableBasicAutocompletion": True,
             "theme": "textmate"}
MONOSPACE = "ui-monospace, 'DejaVu Sans Mono', 'Liberation Mono', Menlo, Consolas, monospace"
RUN_BUTTON = {"name": "Run  (Ctrl+Enter)", "feather": "Play", "primary": True, "hasText": True,
              "alwaysOn": True, "showWithIcon": True, "commands": ["submit"],
              "style": {"bottom": "0.4rem", "right": "0.4rem"}}


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
                         "fontSize": font_px, "fontFamily": MONOSPACE, "showPrintMargin": False, "wrap": False,
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
