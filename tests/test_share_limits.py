"""Share links stop at what a URL can carry, with a message; text from a URL is made inert
before it reaches st.markdown. No Streamlit server, no TensorFlow."""
import random
import re
import string

from tapeviz.words import markdown
from tapeviz.state import share


def test_a_link_over_the_cap_is_refused_with_a_message():
    short = share.link("http://h/", code="import tensorflow as tf\n")
    assert share.too_long(short) is None
    rng = random.Random(0)                  # random text: compression cannot shrink it
    long_program = "".join(rng.choice(string.ascii_letters) for _ in range(40_000))
    url = share.link("http://h/", code=long_program)
    assert len(url) > share.MAX_LINK
    message = share.too_long(url)
    assert message and f"{share.MAX_LINK:,}" in message and "Download" in message
    assert share.decode(url.split("code=")[1]) == long_program   # the cap, not the codec


def test_url_text_is_inert_markdown():
    crafted = ("x](http://evil) ![i](http://evil/i.png) <img src=x onerror=alert(1)> "
               ":material/home: :red[big] **bold** `unpaired \\ $x$\n# heading")
    text = markdown.literal(crafted, limit=500)
    # every markdown/HTML character is backslash-escaped, none is left bare
    bare = re.sub(r"\\.", "", text)
    assert not set(bare) & set("[]()!<>*`$#\\_"), bare
    assert ":" not in text and "\n" not in text
    assert len(markdown.literal("a" * 1000, limit=80)) <= 81
