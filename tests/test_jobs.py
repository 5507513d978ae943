"""The job model: fair shares per session and per browser (the queue alone, no workers), the
caps, and a real job's typed events through the runner."""
import threading
import time

import pytest

from tapeviz.server import jobs, runner
from tapeviz.server.queues import FairQueue, Shares, TooManyJobs


def serve_in_order(queue, shares, held, waiting):
    """`held` holds the one slot; `waiting` ((name, ticket), in arrival order) queue up
    behind it. Each, when its turn comes, notes its name and gives the slot back at once.
    Returns the names in the order they ran."""
    order, threads = [], []

    def take(name, ticket):
        assert queue.acquire(ticket)
        order.append(name)
        shares.leave(ticket)
        queue.release()

    for name, ticket in waiting:
        threads.append(threading.Thread(target=take, args=(name, ticket)))
        threads[-1].start()
    while queue.waiting < len(waiting):       # every one is in line before the slot frees
        time.sleep(0.01)
    shares.leave(held)
    queue.release()
    for t in threads:
        t.join(10)
    return order


def test_one_sessions_fourth_job_never_runs_before_anothers_first():
    shares = Shares()
    queue = FairQueue(1, shares)
    first = shares.join(owner="a")
    assert queue.acquire(first)
    waiting = [(f"a{i}", shares.join(owner="a")) for i in (2, 3, 4)]
    waiting.append(("b1", shares.join(owner="b")))        # came last, goes first
    assert serve_in_order(queue, shares, first, waiting) == ["b1", "a2", "a3", "a4"]


def test_one_browsers_tabs_share_one_turn_with_another_browser():
    shares = Shares()
    queue = FairQueue(1, shares)
    first = shares.join(owner="tab1", client="c")
    assert queue.acquire(first)
    waiting = [(f"tab{i}", shares.join(owner=f"tab{i}", client="c")) for i in (2, 3)]
    waiting.append(("d", shares.join(owner="d-tab", client="d")))
    assert serve_in_order(queue, shares, first, waiting) == ["d", "tab2", "tab3"]


def test_training_jobs_count_in_the_runs_queue_too():
    shares = Shares()
    runs, trainings = FairQueue(1, shares), FairQueue(1, shares)
    training = shares.join(owner="a")
    assert trainings.acquire(training)              # a trains
    busy = shares.join(owner="c")
    assert runs.acquire(busy)                       # c's run holds the run slot
    waiting = [("a", shares.join(owner="a")), ("b", shares.join(owner="b"))]
    assert serve_in_order(runs, shares, busy, waiting) == ["b", "a"]


def test_nobody_counts_for_the_command_line():
    shares = Shares(per_owner=1)
    tickets = [shares.join() for _ in range(5)]      # owner None: no share, no cap
    assert all(shares.rank(t) == 0 for t in tickets)


def test_the_cap_counts_queued_and_running_jobs_and_says_so():
    shares = Shares(per_owner=2, per_client=3)
    a, b = shares.join(owner="s", client="c"), shares.join(owner="s", client="c")
    with pytest.raises(TooManyJobs, match="This session already has 2"):
        shares.join(owner="s", client="c")
    shares.join(owner="t", client="c")
    with pytest.raises(TooManyJobs, match="This browser already has 3"):
        shares.join(owner="u", client="c")
    shares.leave(a)
    shares.join(owner="s", client="d")                # one ended: room again
    assert b in shares.live


def test_a_cancelled_wait_leaves_the_line():
    shares = Shares()
    queue = FairQueue(1, shares)
    assert queue.acquire(shares.join(owner="a"))
    cancelled = threading.Event()
    cancelled.set()
    assert queue.acquire(shares.join(owner="b"), cancelled=cancelled) is False
    assert queue.waiting == 0


# -- a real runner --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pool():
    pool = runner.Runner(runner.Config(workers=1, warm=1, jobs_per_session=2))
    yield pool
    pool.close()


@pytest.mark.slow   # a real runner and its workers
def test_a_record_job_reports_typed_events_in_order(pool):
    source = "total = sum(range(10))\nprint(total)\n"
    job = pool.submit(jobs.Record(source), owner="events")
    seen = []
    while not seen or not isinstance(seen[-1], jobs.Done):
        seen.append(job.next_event(120))
        assert seen[-1] is not None, seen
    kinds = [type(e).__name__ for e in seen]
    assert kinds[-2:] == ["Recorded", "Done"] and "Phase" in kinds
    printed = "".join(e.text for e in seen if isinstance(e, jobs.Output))
    assert printed == f"{sum(range(10))}\n" == job.result["stdout"]
    assert job.result["error"] is None and job.done


@pytest.mark.slow   # a real runner and its workers
def test_a_queued_job_says_its_place_and_cancel_ends_it(pool):
    long = pool.submit(jobs.Record("import time\ntime.sleep(60)\n"), owner="x")
    while long.phase != "running":
        assert long.next_event(120) is not None
    queued = pool.submit(jobs.Record("print(1)\n"), owner="y")
    event = queued.next_event(30)
    assert event == jobs.Phase("queued", 1)
    assert pool.cancel("y") == 1
    assert queued.wait(30) and queued.result["error"]["type"] == "Cancelled"
    # the cap: x holds one, a second is allowed, a third is refused with a message
    second = pool.submit(jobs.Record("print(2)\n"), owner="x")
    third = pool.submit(jobs.Record("print(3)\n"), owner="x")
    assert third.done and third.result["error"]["type"] == "TooManyJobs"
    assert "wait for one to end" in third.result["error"]["message"]
    long.cancel()
    assert second.wait(120) and second.result["stdout"] == "2\n"
    assert long.result["error"]["type"] == "Cancelled"
