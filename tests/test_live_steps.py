"""The live run folds streamed Steps events into a bounded run the run view charts."""
import pickle

from tapeviz.draw import run_figures
from tapeviz.state.live_steps import LiveSteps
from builders import STEP_SOURCES as SOURCES, step_summary as summary




def test_every_step_is_kept_up_to_the_bound_and_charted_in_order():
    live = LiveSteps(keep_all=1000, first=100)
    live.take([summary(0, 2.0, [1.0, 0.5])], SOURCES)
    live.take([summary(i, 2.0 / (i + 1), [1.0, 0.5]) for i in range(1, 500)], [])
    run = live.snapshot()
    assert [s.call for s in run.steps] == list(range(500)) and live.thinned == 0
    steps = run_figures.site_steps(run)
    assert steps[-1]["loss"] == 2.0 / 500
    assert steps[0]["grad_norms"] == {"dense/kernel": 1.0, "dense/bias": 0.5}
    assert run_figures.run_figure(run).data


def test_a_100000_step_run_stays_under_its_budget_with_first_and_newest_steps():
    live = LiveSteps()
    live.take([], SOURCES)
    for start in range(0, 100_000, 50):          # a Steps event every half second
        live.take([summary(i, 1.0, [0.1, 0.2]) for i in range(start, start + 50)], [])
    run = live.snapshot()
    assert live.seen == 100_000
    assert len(run.steps) <= live.keep_all
    assert live.thinned == 100_000 - len(run.steps) == run.dropped["steps"]
    calls = [s.call for s in run.steps]
    assert calls[:live.first] == list(range(live.first))       # the first steps whole
    newest = live.keep_all // 2
    assert calls[-newest:] == list(range(100_000 - newest, 100_000))  # the newest whole
    assert calls == sorted(calls)
    assert len(pickle.dumps(run)) < 4 * 2**20    # the server's memory for it: a few MiB
