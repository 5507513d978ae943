"""The debugger page's state without Streamlit: a dict stands for st.session_state, and a
recording made by hand (test_graph.wxb) stands for the worker's, where the worker is not
what is tested (tests/test_app.py runs the page with real workers)."""
import json
import threading

from tapeviz import examples
from tapeviz import recording_gate as gate
from tapeviz.server.jobs import Done, Phase, Recorded
from tapeviz.state import callouts, debugger, share, view
from builders import keras_like, wxb


def recorded():
    rec, _ = wxb()
    rec.source = "import tensorflow as tf\n"
    return rec.to_dict()


class FakeRunner:
    """A run's events as the page's runner call gives them (Job.stream()): its recording
    comes, read through the gate, at `release`."""

    def __init__(self, answer=None):
        self.answer = answer if answer is not None else recorded()
        self.release = threading.Event()
        self.release.set()
        self.links, self.cancelled = [], []

    def run_for(self, link):
        self.links.append(link)
        return self.run

    def run(self, source):
        yield Phase("running")
        self.release.wait(10)
        yield Recorded(*gate.read(dict(self.answer, source=source)))
        yield Done()

    def cancel(self, owner):
        self.cancelled.append(owner)



def ran_once(runner=None):
    """A session whose typed program was run once (through `runner`) and settled."""
    state = debugger.of({})
    state.edited("a = 1\n", submitted=True)
    runner = runner or FakeRunner()
    state.start_run(runner.run_for, runner.cancel)
    state.settle(5)
    return state, runner

def test_an_example_link_loads_its_code_and_runs_it_as_the_link_run():
    session = {}
    state = debugger.of(session)
    assert debugger.of(session) is state and session[debugger.KEY] is state
    state.start_from_url({"example": "higher_order"})
    assert state.source == examples.code("higher_order") and state.pending and state.link_run
    assert session["example"] == "higher_order" and state.url_problem is None
    runner = FakeRunner()
    job = state.start_run(runner.run_for, runner.cancel)
    assert runner.links == [True] and job.source == state.source and not state.pending
    assert state.start_run(runner.run_for, runner.cancel) is None      # nothing pending now
    assert state.settle(5) is job and state.job is None and state.drawing is job
    assert state.rec.source == state.source and state.run_id == 1
    assert state.address(job.source, None) == {"example": "higher_order"}


def test_the_bare_address_runs_the_first_example_and_a_bad_one_says_so():
    bare = debugger.of({})
    bare.start_from_url({})
    assert bare.source == examples.code(examples.names()[0]) and bare.pending
    bad = debugger.of({})
    bad.start_from_url({"example": "no_such_example"})
    assert "no example called" in bad.url_problem and not bad.pending
    assert bad.source == examples.code(examples.names()[0])
    # said on every redraw until the next run: the page reruns on its own
    bad.edited("a = 1\n", submitted=True)
    assert "no example called" in bad.url_problem
    bad.start_run(lambda link: (lambda source: iter(())), lambda owner: None)
    assert bad.url_problem is None


def test_a_code_link_runs_its_code_and_a_cut_one_says_why():
    program = "import tensorflow as tf\nprint(tf.constant(1.0) + 1)\n"
    state = debugger.of({})
    state.start_from_url({"code": share.encode(program)})
    assert state.source == program and state.pending and not state.link_run
    runner = FakeRunner()
    job = state.start_run(runner.run_for, runner.cancel)
    assert runner.links == [False] and state.settle(5) is job
    assert state.address(program, share.encode(program)) is None      # the address says it already
    assert state.address(program, "other") == {}                      # else the address is cleared
    cut = debugger.of({})
    cut.start_from_url({"code": share.encode(program)[:-3]})
    assert "could not be read" in cut.url_problem and not cut.pending


def test_a_new_recording_opens_on_a_clean_view():
    session = {}
    state = debugger.of(session)
    state.edited("import tensorflow as tf\n", submitted=True)
    session.update({"view": "tape:1", "path_only": True, "pick": "t:9", "step:tape:1": 3,
                    "expand": ["dense"], "large_text": True})
    state.unfold = ["r:x"]
    runner = FakeRunner()
    state.start_run(runner.run_for, runner.cancel)
    state.settle(5)
    rec = state.rec
    assert session["view"] == view.default_view(rec) and "step:tape:1" not in session
    assert "path_only" not in session and "pick" not in session and "expand" not in session
    assert session["large_text"] is True         # the page's own switches stay
    assert state.unfold == [] and session["fold"] is True
    assert state.focus == callouts.opening(rec).get("focus")


def test_a_run_started_over_a_running_one_cancels_it_and_cancel_keeps_the_last_recording():
    state, runner = ran_once()
    first = state.rec
    runner.release.clear()                       # the next run waits in the worker
    state.edited("a = 2\n", submitted=True)
    slow = state.start_run(runner.run_for, runner.cancel)
    assert state.settle(0.05) is None and state.job is slow
    state.edited(None, submitted=True)
    again = state.start_run(runner.run_for, runner.cancel)
    assert runner.cancelled == [state.owner] and state.job is again
    state.cancel(runner.cancel)
    assert again.cancelled and state.job is None and runner.cancelled == [state.owner] * 2
    assert state.run_status[1] == "error" and state.run_status[0].startswith("Cancelled after")
    runner.release.set()
    again.done.wait(5)
    assert not state.take(again) and state.rec is first      # a cancelled run is not drawn


def test_finish_drawing_says_how_the_run_went_once():
    failed = dict(recorded(), error={"type": "Evil[x](http://e)", "message": "m", "line": None})
    state, runner = ran_once(FakeRunner(failed))
    state.finish_drawing(lambda source: None)
    said, outcome = state.run_status
    assert outcome == "error" and said.startswith("Run → drawn in") and "Evil\\[x\\]" in said
    state.run_status = None
    state.finish_drawing(lambda source: None)
    assert state.run_status is None


def test_a_run_that_gave_no_recording_says_so_and_the_page_keeps_the_source():
    state = debugger.of({})
    state.edited("a = 1\n", submitted=True)
    job = state.start_run(lambda link: (lambda source: iter([Done()])), lambda owner: None)
    assert state.settle(5) is job
    assert state.rec.source == state.source == "a = 1\n" and state.rec.error.type == "RunnerError"
    assert state.rec_dict["error"]["type"] == "RunnerError"


def test_hand_over_runs_the_program_on_its_gradient_call():
    session = {"example": "higher_order"}
    program = "import tensorflow as tf\n"
    debugger.hand_over(session, program, call=0)
    state = debugger.of(session)
    assert state.source == program and state.pending and "example" not in session
    runner = FakeRunner()
    state.start_run(runner.run_for, runner.cancel)
    state.settle(5)
    tape_id, index, _ = view.call_choices(state.rec)[0]
    assert session["view"] == f"call:{tape_id}:{index}" and state.after_run == {}


def test_opening_a_file_shows_it_and_a_bad_one_says_why(tmp_path):
    session = {"example": "higher_order"}
    state = debugger.of(session)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(recorded()))
    state.open_path(str(path))
    assert state.opened_name == "run.json" and state.rec.source == state.source == "import tensorflow as tf\n"
    assert "example" not in session and state.open_problem is None and state.run_id == 1
    state.open_bytes(b"[1, 2]", "list.json")
    assert "not a tapeviz recording" in state.open_problem and state.opened_name == "run.json"
    state.open_path(str(tmp_path / "missing.json"))
    assert state.open_problem.startswith("Cannot read")
    view_only = debugger.of({})
    view_only.start_from_url({}, view_path=str(path))        # `tapeviz view run.json`
    assert view_only.opened_name == "run.json" and not view_only.pending


def test_callouts_layers_and_chart_clicks_pick_nodes():
    from tapeviz.draw import graph
    from tapeviz.draw.options import View
    session = {}
    state = debugger.of(session)
    rec, ids = keras_like()
    state.adopt(rec, rec.to_dict())
    G = graph.build(rec, View(tape=1, group=False))
    state.show_callout("tape:1", ids["h"], backward=False)
    assert session["view"] == "tape:1" and session["path_only"] is False
    assert state.update_pick(G, ()) == graph.tensor_node(ids["h"]) and state.focus is None
    clicked = graph.tensor_node(ids["x"])
    assert state.update_pick(G, (clicked,)) == clicked
    session["pick"] = graph.tensor_node(ids["h"])           # the picker moved since
    assert state.update_pick(G, (clicked,)) == graph.tensor_node(ids["h"])   # an old click stays acted on
    assert state.update_pick(G, ("not a node",)) == graph.tensor_node(ids["h"])
    session["pick"] = "gone"
    assert state.update_pick(G, ("not a node",)) is None
    state.expand_layer("sequential/dense")
    state.unfold_node("r:1")
    assert session["expand"] == ["sequential/dense"] and state.unfold == ["r:1"]


def test_an_examples_explanation_goes_with_its_code_only():
    session = {}
    state = debugger.of(session)
    state.start_from_url({"example": "higher_order"})
    assert state.example_shown() == "higher_order"
    state.edited("import tensorflow as tf\nx = tf.constant(1.0)\n", submitted=False)   # typed over it
    assert state.example_shown() is None
    state.edited(examples.code("higher_order"), submitted=False)                 # typed back
    assert state.example_shown() == "higher_order"


def test_an_opened_recording_replaces_the_last_runs_status_with_its_file():
    state, runner = ran_once()
    state.finish_drawing(lambda source: None)
    assert state.run_status[0].startswith("Run → drawn")
    state.open_bytes(json.dumps(recorded()).encode(), "night_run.json")
    state.finish_drawing(lambda source: None)          # the page draws: nothing of the old run
    said, outcome = state.run_status
    assert "`night_run.json`" in said and "drawn in" not in said and outcome == "complete"


def test_a_step_of_the_run_view_opens_its_graph_only_when_its_ops_were_kept():
    state = debugger.of({})
    answer = recorded()
    tape = answer["tapes"][0]["id"]
    # two calls of one line: the first's ops kept (it is the tape's call 0), the second's dropped
    answer["steps"] = [{"call": n, "tape": tape, "index": n, "kind": "gradient", "line": 7,
                        "file": "program.py", "target": 1.0 / (n + 1), "scalar": True} for n in range(2)]
    state.take_recording(*gate.read(answer))
    state.widgets["run_step"] = 1
    state.open_typed_step()
    assert state.widgets["view"] == f"call:{tape}:0" and state.step_problem is None and state.scroll
    state.widgets["run_chart"] = {"selection": {"points": [{"x": 2, "y": 0.5}]}}
    state.open_clicked_step()
    assert state.widgets["view"] == f"call:{tape}:0" and "dropped" in state.step_problem
    state.open_step(3)
    assert state.step_problem == "There is no step 3."


class StoppedAt(dict):
    """Session state whose first `pop` raises, as Streamlit stops a superseded script run
    at a read of session state (a click reruns the page in a new script thread)."""
    def __init__(self):
        super().__init__()
        self.armed = False

    def pop(self, *args):
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt("stopped")     # Streamlit's StopException is a BaseException too
        return super().pop(*args)


def test_a_script_run_stopped_while_taking_the_run_leaves_it_for_the_next():
    session = StoppedAt()
    state = debugger.of(session)
    state.edited("a = 1\n", submitted=True)
    runner = FakeRunner()
    job = state.start_run(runner.run_for, runner.cancel)
    assert job.done.wait(5)
    session.armed = True
    try:
        state.take(job)
    except KeyboardInterrupt:
        pass
    assert state.rec is None and state.job is job     # nothing taken, nothing lost
    assert state.take(job) and state.rec is not None and state.job is None


def test_the_browsers_paint_times_replace_the_servers_in_the_status():
    state, runner = ran_once()
    state.finish_drawing(lambda source: None, "1 call:1:0")     # the page's first graph
    assert state.run_status[0].startswith("Run → drawn in")
    state.browser_drew("1 call:1:0", 250)        # a first graph is timed from the page's opening
    assert state.run_status[0].startswith("Run → drawn in")
    state.painted(2.34)
    assert state.run_status[0].startswith("Painted 2.3 s after the page opened"), state.run_status
    state.painted(9.0)                           # said once
    assert "2.3 s" in state.run_status[0]
    # a Run's graph: the server's time to the drawn page and the browser's to its paint
    state.edited("a = 2\n", submitted=True)
    state.start_run(runner.run_for, runner.cancel)
    state.settle(5)
    state.finish_drawing(lambda source: None, "2 call:1:0")
    server = float(state.run_status[0].split("drawn in ")[1].split(" s")[0])
    state.browser_drew("1 call:1:0", 5_000)      # another graph's report: not this run's
    assert state.run_status[0].startswith("Run → drawn in")
    state.browser_drew("2 call:1:0", 400)
    said = state.run_status[0]
    assert said.startswith("Run → painted in"), said
    assert float(said.split("painted in ")[1].split(" s")[0]) >= server + 0.4 - 0.05
