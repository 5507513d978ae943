"""Text from outside -- a program's error, a tensor's name, a link's parameter, a file's
name -- shown as typed where Streamlit renders markdown (st.markdown, st.error, st.caption,
widget labels...). Such text is untrusted: a program can raise
ValueError("![x](http://evil/x.png) [log in](http://evil)"), and a page that rendered it as
markdown would fetch the image and draw the link for everyone who opens its share link.
No Streamlit and no TensorFlow here.
"""
from __future__ import annotations

import re
from typing import Optional

# Every character markdown, HTML or LaTeX ($) could act on.
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!<>|~$&\"'=^/])")


def literal(text, limit: Optional[int] = None) -> str:
    """Markdown that shows `text` literally, on one line, cut at `limit` characters.

    Outside code spans every special character is backslash-escaped, and `:` becomes "∶"
    (Streamlit reads `:red[...]`, `:material/x:` and emoji codes, and a backslash does not
    stop it). Paired backticks stay code spans: inside one nothing is interpreted, and the
    hints TensorFlow programs get (`persistent=True`) keep their look."""
    text = " ".join(str(text).split())
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    parts = text.split("`")
    if len(parts) % 2 == 0:               # an unpaired backtick: no code spans at all
        return _escaped(text)
    return "".join(_escaped(part) if i % 2 == 0 else _code_span(part)
                   for i, part in enumerate(parts))


def code(text) -> str:
    """A name (a tensor's, a file's) as a code span; literal text when it holds a backtick,
    which would end the span early."""
    text = " ".join(str(text).split())
    return f"`{text}`" if text and "`" not in text else literal(text)


def _code_span(part: str) -> str:
    if part.strip():
        return f"`{part}`"
    return "\\`" + _escaped(part) + "\\`"      # `` or ` `: not a code span, two backticks


# GFM links bare www.x and a@b.c even through backslashes (Streamlit finds them in the text
# after parsing): an invisible word joiner after "www" and "@" breaks both patterns.
_AUTOLINK = re.compile(r"(www|@)(?=\\.|\w)", re.IGNORECASE)
_JOINER = "\u2060"


def _escaped(text: str) -> str:
    text = _SPECIAL.sub(r"\\\1", text).replace(":", "∶")
    return _AUTOLINK.sub(lambda m: m.group(1) + _JOINER, text)
