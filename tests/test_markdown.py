"""Text from a program, a link or a file reaches the page's markdown as text: every place
the debugger and training pages put such text, rendered by a real CommonMark renderer
(markdown-it, HTML on), shows it literally, with no link, image or HTML made from it.
No Streamlit, no TensorFlow."""
import html
import re

import pytest
from markdown_it import MarkdownIt

from tapeviz.draw import graph
from tapeviz.draw.options import View
from tapeviz.state import callouts, debugger, inspector, view
from tapeviz.words import markdown, notes, tapes
from tapeviz.recording import Recording

HOSTILE = ("![x](http://evil.example/x.png) [Your session expired: log in again](http://evil.example) "
           "<img src=x onerror=alert(1)> <a href='http://evil.example'>a</a> www.evil.example "
           "**bold** :red[red] :material/home: $x^2$ # heading me@evil.example WWW.evil.example")
RENDER = MarkdownIt("commonmark", {"html": True})


# GFM's autolink literals, found in the parsed text (escapes already undone) as Streamlit's
# remark-gfm finds them (not in code spans): markdown-it's CommonMark does not look for them.
GFM_AUTOLINK = re.compile(r"(?i)(?:^|[\s*_~(])(?:www\.|https?://)|[\w.+-]+@[\w-]+\.[\w-]")


def inert(md: str) -> str:
    """The rendered HTML of `md`, checked to carry no element made from HOSTILE."""
    out = RENDER.render(md)
    outside_code = html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<code>.*?</code>", "", out)))
    assert not GFM_AUTOLINK.search(outside_code), outside_code
    assert not re.search(r"<(a|img|h1|script)\b", out), out
    assert "evil.example" not in "".join(re.findall(r'(?:href|src)="[^"]*"', out)), out
    return out


def parsed_text(md: str) -> str:
    """The rendered text, tags removed, entities read back."""
    return html.unescape(re.sub(r"<[^>]+>", "", RENDER.render(md)))


def shown(md: str) -> str:
    """What a reader sees: the invisible word joiner is not seen."""
    return parsed_text(md).replace("\u2060", "")


def test_literal_shows_hostile_text_as_typed():
    md = markdown.literal(HOSTILE)
    inert(md)
    assert shown(md).strip().replace("∶", ":") == HOSTILE


def test_paired_backticks_stay_code_and_nothing_in_them_acts():
    md = markdown.literal("use `[x](http://evil.example)` or `persistent=True`")
    inert(md)
    assert "<code>[x](http://evil.example)</code>" in RENDER.render(md)
    assert "<code>persistent=True</code>" in RENDER.render(md)
    for odd in ("a ` b", "``", "` `", "x`` [y](http://evil.example) ``"):
        inert(markdown.literal(odd))
    assert markdown.code("a`b [c](http://evil.example)") == markdown.literal("a`b [c](http://evil.example)")


def test_limit_cuts_and_says_so():
    assert markdown.literal("a" * 100, limit=10) == "a" * 10 + "…"
    assert "\n" not in markdown.literal("one\n\n    two\n# three")


def recording(**error):
    return Recording.from_dict({"schema": "tapeviz.recording/1", "source": "x = 1\n",
                                "error": {"type": "ValueError", "message": "", "line": 1,
                                          "hint": None, **error}})


def test_an_error_title_message_and_hint_are_text():
    rec = recording(type="Evil![x](http://evil.example/t.png)", message=HOSTILE, hint=HOSTILE)
    line = notes.error_line(rec)
    inert(line)
    assert line.startswith("**Evil") and " at line 1: " in line
    assert HOSTILE in shown(line).replace("∶", ":")
    inert(notes.hint(rec))
    assert notes.error_line(recording(type="Timeout")).startswith("**Timeout (the run")


def test_warnings_drops_and_skips_from_a_recording_are_text():
    inert(notes.warning_line({"line": 3, "message": HOSTILE}))
    inert(notes.warning_line(HOSTILE))
    inert(notes.skipped_note({"note": HOSTILE}))
    inert(notes.dropped_note({HOSTILE: 3}))


def test_an_opened_file_names_its_program_and_args_as_text():
    rec = Recording.from_dict({"schema": "tapeviz.recording/1", "source": "",
                               "program": "`[p](http://evil.example)`", "argv": ["p", HOSTILE]})
    said = notes.opened_caption("[f](http://evil.example).json", rec)
    inert(said)
    assert said.endswith("**Run** records the editor's text afresh.")


def hostile_recording():
    """A recording whose every name is HOSTILE: a tensor, an op's tf.function, a scope."""
    name = HOSTILE
    return Recording.from_dict({
        "schema": "tapeviz.recording/1", "source": "x\ny\nz\n",
        "tensors": [{"id": 1, "name": name, "shape": [], "dtype": "float32", "kind": "variable",
                     "line": 1, "value": 2.0},
                    {"id": 2, "name": name + "2", "shape": [], "dtype": "float32", "kind": "intermediate",
                     "producer": 1, "line": 2, "value": float("nan")}],
        "ops": [{"id": 1, "type": "Mul", "inputs": [1, 1], "outputs": [2], "line": 2, "tapes": [0],
                 "function": name, "scope": name + "/dense"}],
        "tapes": [{"id": 0, "line": 1, "persistent": False, "watch_accessed_variables": True,
                   "parent": None, "ops": [1], "watched": [1],
                   "gradients": [{"target": [2], "sources": [1], "line": 3, "kind": "gradient",
                                  "results": [{"source": 1, "grad": None, "none_reason": HOSTILE}]}]}],
        "alerts": [{"kind": "nan", "tensor": 2, "op": 1, "line": 2, "phase": "forward"}],
    })


def test_the_debugger_callouts_legend_and_summaries_are_text():
    rec = hostile_recording()
    called = callouts.callouts(rec)
    assert len(called) == 2
    for callout in called:
        inert(callout.text)
        assert callout.text.split("**")[1]     # the expander's label takes the bold part
    inert(view.legend_text(rec, "call:0:0"))
    inert(tapes.tape_summary(rec, 0))
    G = graph.build(rec, View(tape=0, call=0))
    for node in view.step_nodes(G):
        inert(view.step_words(G, node))


def test_the_inspector_is_text():
    rec = hostile_recording()
    G = graph.build(rec, View(tape=0, call=0, fold=False))
    for node in G:
        d = inspector.details(rec, G, node)
        inert(notes.inspector(d))
        if d.producer:
            inert(notes.made_by(d.producer))
        if d.consumers:
            inert(notes.used_by(d.consumers))


@pytest.mark.parametrize("params", [{"example": HOSTILE}, {"code": HOSTILE}])
def test_a_hostile_link_is_told_as_text(params):
    state = debugger.of({})
    state.start_from_url(params)
    inert(state.url_problem)


def test_a_hostile_file_is_told_as_text(tmp_path):
    state = debugger.of({})
    state.open_bytes(b"{not json " + HOSTILE.encode(), "[f](http://evil.example).json")
    inert(state.open_problem)
    state.open_path(str(tmp_path / "[g](http://evil.example).json"))
    inert(state.open_problem)
