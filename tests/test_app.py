"""The debugger page through streamlit.testing: every example runs in a real worker and draws."""
import os
import pathlib
import re

import pytest
from streamlit.testing.v1 import AppTest

from tapeviz import examples, printed
from tapeviz.draw import graph
from tapeviz.state import debugger, share
from plain_runs import first_non_finite_op

pytestmark = pytest.mark.slow   # every page opened here runs its program in a real worker

APP = str(pathlib.Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 120    # a cold worker imports TensorFlow first; on a busy 2-core machine that is slow


@pytest.fixture(scope="module", autouse=True)
def short_time_limit():
    """A 5 s limit keeps the timeout test short. Set before this module's pages make their
    Runner (st.cache_resource keeps one per process), and taken away after, with that Runner:
    set at import, it once reached every later test's server, and a 3,000-op loop in
    test_browser.py timed out under CI's load."""
    from tapeviz.ui import session
    before = os.environ.get("TAPEVIZ_TIMEOUT_S")
    os.environ["TAPEVIZ_TIMEOUT_S"] = "5"
    session.runner.clear()
    yield
    session.runner.clear()           # closes it (on_release): its workers go with it
    if before is None:
        del os.environ["TAPEVIZ_TIMEOUT_S"]
    else:
        os.environ["TAPEVIZ_TIMEOUT_S"] = before


def opened(**params):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def typed(source):
    """As if typed and run with Ctrl+Enter: the Ace editor is a component AppTest cannot
    type into (tests/test_editor_browser.py drives it in a browser), so this sets what its
    submit sets."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    state(at).edited(source, submitted=True)
    return at.run()


def state(at):
    return at.session_state[debugger.KEY]


def texts(elements):
    return "\n".join(str(e.value) for e in elements)


def shown(elements):
    """What a reader sees of markdown made by markdown.literal: no backslash escapes."""
    return re.sub(r"\\(.)", r"\1", texts(elements)).replace("∶", ":")


def charts(at):
    return at.get("plotly_chart")


@pytest.mark.parametrize("name", examples.names())
def test_every_example_runs_from_its_link_and_draws(name):
    at = opened(example=name)
    assert not at.exception
    assert state(at).source == examples.code(name)     # the code, not its docstring
    assert charts(at), f"{name}: no graph; errors: {texts(at.error)}"
    # those are about an error, a NaN, or None gradients (called out in red, unasked)
    if name not in ("nonpersistent_error", "nan_hunt", "none_gradients"):
        assert not at.error, texts(at.error)


def test_the_bare_address_opens_on_the_first_lesson_as_its_link_does():
    # A class opens the app's address and should see a lesson drawn, not an empty page
    bare, link = opened(), opened(example=examples.names()[0])
    assert not bare.exception
    assert state(bare).rec is not None, "the bare page ran nothing"
    assert state(bare).source == state(link).source
    assert [op.type for op in state(bare).rec.ops] == \
        [op.type for op in state(link).rec.ops]
    assert len(charts(bare)) == len(charts(link)) > 0


def test_higher_order_opens_on_the_outer_gradient_and_names_its_tapes():
    at = opened(example="higher_order")
    assert "dy_dx = 3.0" in texts(at.code) and "d2y_dx2 = 6.0" in texts(at.code)
    shown = at.selectbox(key="view")
    assert shown.value == "call:0:0" and "outer_tape.gradient" in shown.format_func(shown.value)
    # two gradient calls, what each tape recorded, every op
    assert len(shown.options) == 5 and any("inner_tape" in o for o in shown.options)
    # one sentence over the picture says what it shows, with the number the program printed
    # (for nested tapes: what each tape recorded, and the second derivative at the program's x)
    said = [str(m.value).replace("\\", "") for m in at.markdown if "recorded" in str(m.value)]
    assert said and "`inner_tape` recorded y = x·x·x" in said[0], texts(at.markdown)
    assert "`outer_tape` recorded the inner gradient's ops" in said[0]
    assert "d²y/dx² = 6.0 at x = 1.0" in said[0]
    at = shown.set_value("tape:0").run()
    assert not at.exception
    assert "backward ops of an inner gradient call" in texts(at.caption)


def test_nonpersistent_error_shows_the_runtime_error_its_line_and_hint():
    at = opened(example="nonpersistent_error")
    # Line 19 of the file is the second gradient call; the editor holds the code without
    # the docstring, so the line the error names is that call's line in the code.
    call = examples.load("nonpersistent_error").source.splitlines()[18]
    line = examples.code("nonpersistent_error").splitlines().index(call) + 1
    assert "RuntimeError" in texts(at.error) and f"line {line}" in texts(at.error)
    assert "persistent=True" in shown(at.info)
    assert "dz_dx = 108.0" in texts(at.code)
    assert charts(at)     # the partial recording is still drawn


def test_a_syntax_error_shows_its_line():
    at = typed("import tensorflow as tf\nx = tf.constant(1.0)\nif x > 0\n    print(x)\n")
    assert not at.exception
    assert "SyntaxError" in texts(at.error) and "at line 3" in texts(at.error)
    assert "if x &gt; 0" in texts(at.markdown)     # the offending line, highlighted


def test_a_timeout_says_so():
    at = typed("while True:\n    pass\n")
    assert not at.exception
    assert "Timeout" in texts(at.error)


def test_tf_print_shows_under_the_printed_output():
    # tf.print writes to stderr unless told otherwise; a learner must see it on the page
    at = typed("import tensorflow as tf\nprint('x is')\ntf.print(tf.constant([1, 2]) * 3)\n")
    assert not at.exception
    assert "Written to stderr" in texts(at.markdown)
    shown = [c.value for c in at.code]
    assert "x is" in shown and "[3 6]" in shown            # stdout, then stderr


def test_the_inspector_shows_a_picked_tensor_and_its_line():
    at = opened(example="linear_gradient")
    pick = at.selectbox(key="pick")
    at = pick.select_index(next(i for i, label in enumerate(pick.options) if label.startswith("z "))).run()
    assert not at.exception
    assert "made by" in texts(at.markdown) and "tapeviz-code" in texts(at.markdown)


def test_every_none_gradient_is_called_out_unasked():
    at = opened(example="none_gradients")
    called = texts(at.error)
    assert called.count("is None") == 3 and "no path" in called and "integer" in called
    # each in short words; the whole story is on its button's hover
    told = " ".join(b.help or "" for b in at.button if b.label == "Show it")
    assert "never used" in told and "int32" in told
    assert at.selectbox(key="view").value == "call:0:0"      # the first None's call, its source picked
    assert at.selectbox(key="pick").value is not None
    at = at.button(key="callout1").click().run()
    assert not at.exception and at.selectbox(key="view").value == "call:0:1"
    at = at.toggle(key="path_only").set_value(True).run()
    assert not at.exception and charts(at)


def test_nan_alert_leads_to_where_it_first_appeared(tmp_path):
    at = opened(example="nan_hunt")
    alerts = state(at).rec.alerts
    # the first non-finite value the recording names is the one plain TensorFlow's own check
    # stops at (the Inf of sqrt's gradient at 0, which the next op turns into the NaN)
    first = state(at).rec.op(alerts[0].op)
    assert first.type == first_non_finite_op(examples.code("nan_hunt"), tmp_path)
    said = [e for e in at.error if "first appeared" in str(e.value)]
    buttons = [b.key for b in at.button if b.label == "Show it"]
    assert len(said) == len(buttons) == len(alerts) and "**NaN**" in texts(said)
    for key, alert in zip(buttons, alerts):
        # each callout's button picks the node of its own tensor (or the op that made it)
        at = at.button(key=key).click().run()
        assert not at.exception
        assert at.selectbox(key="pick").value in (graph.tensor_node(alert.tensor), graph.op_node(alert.op))


def test_a_shared_code_link_opens_and_runs_that_code():
    at = opened(code=share.encode("import tensorflow as tf\nsecret = tf.constant(41.0) + 1\nprint(secret.numpy())\n"))
    assert not at.exception
    assert "42.0" in texts(at.code)
    # no tape: a sentence says so, and there is no view picker to sit on a placeholder
    assert "opened no" in texts(at.info) and not [s for s in at.selectbox if s.key == "view"]


@pytest.mark.parametrize("params", [{"example": "no_such_example"}, {"code": "not-base64!!"},
                                    {"code": share.encode("x")[:-3]}])
def test_bad_links_warn_instead_of_crashing(params):
    at = opened(**params)
    assert not at.exception
    assert at.warning, "a bad link should say what was wrong"


def test_pages_opening_one_link_share_its_run():
    # A class opens one link at once: one worker records the example for every page
    # (state/link_runs.py); Run on any of them records that page's own
    from tapeviz.ui import session
    first, second = opened(example="higher_order"), opened(example="higher_order")
    assert not second.exception
    assert session.link_runs().age(examples.code("higher_order")) is not None
    said = state(second).run_status[0]
    assert "from this link's recording" in said, said
    assert [op.type for op in state(second).rec.ops] == \
        [op.type for op in state(first).rec.ops]
    state(second).edited(None, submitted=True)
    second.run()
    said = state(second).run_status[0]
    assert said.startswith("Run → drawn in"), said
    assert state(second).rec.tapes and not second.exception


def test_tf_functions_run_eagerly_are_said_once():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at = at.toggle(key="eager").set_value(True).run()
    state(at).edited("import tensorflow as tf\n\n@tf.function\ndef f(x):\n    return x * x\n\n"
                     "x = tf.Variable(3.0)\nwith tf.GradientTape() as tape:\n    y = f(x)\n"
                     "print(tape.gradient(y, x).numpy())\n", submitted=True)
    at = at.run()
    assert not at.exception and state(at).rec.eager
    assert any(w.get("kind") == "eager" for w in state(at).rec.warnings)    # the recording says it
    said = texts(at.info) + texts(at.warning)
    assert said.count("ran eagerly") + said.count("run eagerly") == 1, said


def _in_order(node, out):
    """Every element under `node` in the order the page draws them: (type, value)."""
    for child in getattr(node, "children", {}).values():
        out.append((child.type, str(getattr(child, "value", ""))))
        _in_order(child, out)
    return out


@pytest.mark.parametrize("name", ["eager_basics", "tf1_vs_eager", "fizzbuzz"])
def test_a_program_without_a_tape_shows_what_it_printed_beside_its_sentence(name):
    # its lesson is what it printed (m = tf.Tensor(...), the Session's 22.0): with the
    # sentence over the graph, not only under the legend below the fold
    at = opened(example=name)
    assert not at.exception and not state(at).rec.tapes and state(at).rec.stdout
    seq = [(kind, value) for kind, value in _in_order(at.main, [])
           if kind in ("info", "code", "plotly_chart")]
    sentence = next(i for i, (kind, value) in enumerate(seq) if kind == "info" and "ran" in value)
    chart = next(i for i, (kind, _) in enumerate(seq) if kind == "plotly_chart")
    kind, text = seq[sentence + 1]
    assert kind == "code" and text.strip() == printed.as_shown(state(at).rec.stdout).strip()
    assert sentence + 1 < chart


UNWATCHED_SECOND = pathlib.Path(__file__).with_name("programs").joinpath("unwatched_second_tape.py").read_text()


def showing(at):
    return next(p.proto.popover.label for p in at.get("popover") if "Showing" in p.proto.popover.label)


def test_the_view_switches_show_the_state_the_graph_is_drawn_with():
    # the graph opens with loops folded: the switch says so, and its first click unfolds
    at = typed(UNWATCHED_SECOND)
    assert at.toggle(key="fold").value is True and state(at).rec is not None
    calls = {c.line for tp in state(at).rec.tapes for c in tp.gradients}
    assert calls == {7, 11}
    # the None callout names line 11's call: the graph opens on it, and stays on it
    assert "line 11" in texts(at.error) and "line 11" in showing(at)
    at.toggle(key="backward").set_value(True).run()
    assert at.session_state["view"] == "call:1:0" and "line 11" in showing(at), showing(at)
    at.toggle(key="fold").set_value(False).run()
    assert at.session_state["fold"] is False and "line 11" in showing(at)
