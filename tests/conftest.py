"""The suite's two tiers, and the check that keeps the fast one fast.

A test that starts a process (a worker or the zygote through tapeviz.server, a fresh
Python, a Streamlit server, Chromium through Playwright) is marked `slow`: each such start
costs seconds (TensorFlow's import, Streamlit's, a browser's) on a 2-core machine. So
is a test that trains for many seconds in-process (a LeNet on real digits, a loop run to
its time limit): `-m "not slow"` must stay under 2 minutes on a busy 2-core machine.
`python -m pytest -m "not slow"` runs the rest, in-process: pure code, plain data, and
TensorFlow recorded in the test's own process.

The check (on in both tiers): a test NOT marked slow that starts a process fails, naming what it started and
saying to mark it slow. It watches through a Python audit hook (PEP 578), so it sees every
start from any thread, however the code reaches it: subprocess (which AppTest's pages,
Runner's spawner thread and Playwright's driver all go through), os.exec*, os.posix_spawn,
os.system. A plain os.fork is let through: it copies this process in milliseconds and
runs no new program.
"""
import os
import platform
import sys
import threading

import pytest

# No recordings of the examples kept between servers (server/example_cache.py) unless a test
# asks for them in a folder of its own: each test's first page runs its example live, and
# no server records every example in the background while the suite runs.
os.environ.setdefault("TAPEVIZ_CACHE_DIR", "off")

# Events that start a new program (https://docs.python.org/3/library/audit_events.html).
_STARTS = frozenset({"subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system"})

_watched = None            # the running test's node id while it is not marked slow, else None
_started: list = []        # what the watched test started: (event, program)
_lock = threading.Lock()   # starts may come from the test's threads (a Runner's spawner)


def _audit(event, args):
    # Called for every audited event of the process (imports, opens, ...): the first test
    # keeps it cheap when no fast test is running.
    if _watched is None or event not in _STARTS:
        return
    program = args[1] if event == "os.spawn" else args[0]     # os.spawn's first is the mode
    program = os.fsdecode(program) if isinstance(program, (str, bytes, os.PathLike)) else program
    with _lock:
        _started.append((event, program))
    raise RuntimeError(f"{_watched} starts {program!r} but is not marked slow")


# Importing TensorFlow asks platform for the processor's name, which Python finds by
# running `uname -p` once and caching it: ask first, so no test is blamed for that.
platform.processor()
sys.addaudithook(_audit)   # a hook cannot be removed: it stays idle between watched tests


def _watch(item):
    """Runs one phase of `item` (setup, call or teardown) watching for process starts."""
    global _watched
    with _lock:
        _started.clear()
    _watched = item.nodeid if item.get_closest_marker("slow") is None else None
    try:
        return (yield)
    finally:
        # Also when the test caught the hook's error, or a thread swallowed it and the
        # test failed on something else (a worker that never came): say the real cause.
        _watched = None
        with _lock:
            started, _started[:] = list(_started), []
        if started:
            event, program = started[0]
            raise pytest.fail.Exception(
                f"not marked slow, yet started {program!r} ({event}): mark the test "
                "@pytest.mark.slow, or its module with pytestmark = pytest.mark.slow "
                "(tests/conftest.py says why)", pytrace=False) from None


# Module-scoped fixtures (a server, a Runner) start in the setup of their first test, so
# every phase is watched, not only the call.
pytest_runtest_setup = pytest.hookimpl(wrapper=True)(_watch)
pytest_runtest_call = pytest.hookimpl(wrapper=True)(_watch)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Watched too; and after a module's last test, the Runners plain_runs.recorded kept for
    it are closed, so no worker of theirs outlives the module (nor starts in a fast test)."""
    result = yield from _watch(item)
    runs = sys.modules.get("plain_runs")
    if runs is not None and (nextitem is None or nextitem.module is not item.module):
        runs.close_pools()
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed browser test's report carries what the page showed and the server's log
    tail: a wait that timed out says what the page was doing instead."""
    report = yield
    util = sys.modules.get("browser_util")
    if util is None or call.when != "call":
        return report
    closed, util.FAILED[:] = list(util.FAILED), []
    if report.failed:
        report.sections += closed
        report.sections += [("page when the test failed", "\n".join(util.page_state(page)))
                            for page in util.OPEN_PAGES]
        report.sections += [("server log (tail)", util.log_tail(path)) for path in util.SERVER_LOGS]
    return report


# The files that take longest, first, longest to shortest: with `--dist loadfile` each file
# runs whole on one process, and a long file handed out last left the other process idle for
# minutes at the end of the run. Every file that took 40 s or more (measured with
# --durations) is here: unlisted files go in name order, and test_view_worker's minute and a
# half, last by name, ran alone at the end.
LONGEST_FIRST = ("test_hosted.py", "test_invisible.py", "test_layout_browser.py", "test_cli.py",
                 "test_train_steady_browser.py", "test_hosted_server_browser.py",
                 "test_view_worker.py", "test_compare_browser.py", "test_app.py",
                 "test_hosted_walls.py", "test_browser.py", "test_train_page.py",
                 "test_twin_browser.py", "test_viewport_browser.py", "test_compare_runs.py",
                 "test_train_browser.py", "test_editor_browser.py", "test_keep_policy.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: order kept within
