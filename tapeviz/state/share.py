"""Share links: a program's text carried in the page's URL (`?code=`), and back.

The text is zlib-compressed, then urlsafe base64 without padding, so a typical
example fits in a few hundred URL characters. No Streamlit and no TensorFlow here.
"""
from __future__ import annotations

import base64
import binascii
import zlib
from urllib.parse import urlencode

MAX_SOURCE_BYTES = 200_000   # decoding stops here: a crafted link must not become a memory bomb
LONG_URL = 8_000             # past this, some browsers and chat tools cut the link
# Past this, no link is offered: Streamlit's server (Tornado) answers a request whose
# headers pass 64 KiB with HTTP 400, before the app could say anything; cookies and the
# other headers need room too.
MAX_LINK = 32_000


def encode(source: str) -> str:
    packed = zlib.compress(source.encode("utf-8"), 9)
    return base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")


def decode(token: str) -> str:
    """The program a `code` token carries; ValueError (in words) when it is not one."""
    token = token.strip()
    try:
        packed = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("the link's code is not valid base64 (was the link cut short?)") from None
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(packed, MAX_SOURCE_BYTES)
    except zlib.error:
        raise ValueError("the link's code is not compressed program text (was the link cut short?)") from None
    if inflater.unconsumed_tail:
        raise ValueError(f"the link's program is longer than {MAX_SOURCE_BYTES:,} bytes")
    if not inflater.eof:
        raise ValueError("the link's code stops early (was the link cut short?)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the link's code is not UTF-8 text") from None


def too_long(url: str) -> str | None:
    """Why `url` cannot be offered as a link (in words), or None when it can."""
    if len(url) <= MAX_LINK:
        return None
    return (f"This program is too long to carry in a link ({len(url):,} characters; a link "
            f"stops at {MAX_LINK:,}, past which the server refuses it). Download the "
            f"recording instead, or share a shorter program.")


def link(base_url: str, *, code: str | None = None, example: str | None = None) -> str:
    """base_url (any query string dropped) with ?example=NAME or ?code=TOKEN."""
    base = (base_url or "").split("?")[0].split("#")[0]
    params = {"example": example} if example else {"code": encode(code or "")}
    return f"{base}?{urlencode(params)}"
