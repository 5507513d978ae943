"""Printed output as a terminal shows it at the end: a progress bar that redraws itself with
carriage returns and backspaces (Keras's, tqdm's) ends as its last drawing, and ANSI escape
codes (colours, bold, cursor moves) are dropped, not shown as "[1m". No TensorFlow, no
Streamlit: the page calls it on a recording's stdout and stderr.
"""
from __future__ import annotations

import re

# An escape sequence: CSI (ESC [ parameters, one final byte), OSC (ESC ] ... BEL or ESC \),
# or a two-character one (ESC and one byte).
_ESCAPE = re.compile(r"\x1b(?:\[([0-9;?]*)([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_PIECE = re.compile(r"\x1b(?:\[[0-9;?]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])|[\r\b\n]"
                    r"|[^\x1b\r\b\n]+")


def as_shown(text: str) -> str:
    """`text` as its terminal would show it at the end: carriage returns and backspaces
    applied (what they overwrite is gone), ANSI codes dropped, "erase line" obeyed."""
    lines, line, col = [], [], 0
    for piece in _PIECE.findall(text):
        if piece == "\n":
            lines.append("".join(line))
            line, col = [], 0
        elif piece == "\r":
            col = 0
        elif piece == "\b":
            col = max(0, col - 1)
        elif piece.startswith("\x1b"):
            m = _ESCAPE.match(piece)
            if m and m.group(2) == "K":         # erase in line: 0 to its end, 1 to the cursor
                mode = m.group(1) or "0"
                if mode == "0":
                    del line[col:]
                elif mode == "1":
                    line[:col] = [" "] * min(col, len(line))
                else:
                    line = []
        else:
            end = col + len(piece)
            if col > len(line):                  # past the end after a cursor move: pad
                line.extend(" " * (col - len(line)))
            line[col:end] = piece
            col = end
    lines.append("".join(line))
    return "\n".join(lines)
