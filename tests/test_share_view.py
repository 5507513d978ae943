"""share (code in a URL) and view (what the debugger page shows), without Streamlit or TF."""
import zlib
import base64

import pytest

from tapeviz.draw import graph
from tapeviz.draw.options import View
from tapeviz.words import markdown
from tapeviz.state import inspector, share, view
from builders import keras_like, wxb


def test_code_survives_the_link_round_trip():
    source = "import tensorflow as tf\nx = tf.constant('ünï')  # ✓\n" * 50
    token = share.encode(source)
    assert share.decode(token) == source
    assert len(token) < len(source) / 4      # repetitive code compresses well
    assert share.link("http://h:8501/?example=x#top", code=source) == f"http://h:8501/?code={token}"
    assert share.link("http://h/", example="higher_order") == "http://h/?example=higher_order"


@pytest.mark.parametrize("token", ["not base64!", share.encode("abc")[:-4], "", "AAAA"])
def test_broken_tokens_raise_value_error_in_words(token):
    with pytest.raises(ValueError, match="link"):
        share.decode(token)


def test_a_compression_bomb_is_refused():
    bomb = base64.urlsafe_b64encode(zlib.compress(b"a" * (share.MAX_SOURCE_BYTES * 10))).decode()
    with pytest.raises(ValueError, match="longer than"):
        share.decode(bomb)


def test_details_of_a_tensor_name_its_producer_consumers_and_line():
    rec, ids = wxb()
    G = graph.build(rec, View(tape=1, call=0))
    d = inspector.details(rec, G, graph.tensor_node(ids["w"]))
    assert d.title == "w" and d.value == "2.0" and d.consumers and d.consumers[0].startswith("Mul")
    x = inspector.details(rec, G, graph.tensor_node(ids["x"]))
    assert any(label == "gradient" and "not watched" in text for label, text in x.facts)
    z = inspector.details(rec, G, graph.tensor_node(ids["z"]))
    assert z.producer.startswith("AddV2") and z.line == 4


def test_grouped_nodes_are_found_for_their_ops_and_offer_expansion():
    rec, ids = keras_like()
    G = graph.build(rec, View(tape=1, group=True))
    relu = rec.tensor(ids["h"]).producer
    node = view.node_for_op(G, relu)
    assert node.startswith("g:") and inspector.details(rec, G, node).group == "sequential/dense"
    assert graph.opens_grouped(rec) is False        # small: opens flat
    assert "sequential/dense" in graph.group_keys(rec)


def test_code_excerpt_highlights_and_escapes_its_line():
    source = "a = 1\nif a < 2:\n    b = a\n"
    out = inspector.code_html(source, 2, context=1)
    assert "a &lt; 2" in out and out.count("font-weight:700") == 1
    assert inspector.code_html(source, 99) == "" and inspector.code_html(source, None) == ""


def test_markdown_text_stays_as_typed():
    assert markdown.literal("y = x**3 and a_b") == "y \\= x\\*\\*3 and a\\_b"
