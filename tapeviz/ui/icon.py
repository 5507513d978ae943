"""The page's icon, drawn here: a material icon or an emoji as page_icon makes the browser
fetch an SVG from Google's font servers, which offline fails and online leaves the app.
Streamlit serves an image given as page_icon from the app's own host."""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def page_icon():
    """64x64: two tensors into an op into a result, as the debugger draws a tape."""
    from PIL import Image, ImageDraw
    im = Image.new("RGBA", (64, 64), (0, 0, 0, 0))
    d = ImageDraw.Draw(im)
    blue, orange, grey = (0, 114, 178, 255), (230, 159, 0, 255), (90, 90, 90, 255)
    for y in (14, 50):
        d.line([(12, y), (32, 32)], fill=grey, width=4)
    d.line([(32, 32), (52, 32)], fill=grey, width=4)
    d.ellipse([2, 4, 22, 24], fill=orange)
    d.ellipse([2, 40, 22, 60], fill=orange)
    d.rectangle([24, 24, 40, 40], fill=blue)
    d.ellipse([44, 22, 62, 42], fill=blue)
    return im
