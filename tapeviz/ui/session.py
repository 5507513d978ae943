"""The Streamlit side of a run: one Runner per server process, and the session's ids.
Imports Streamlit and runner.py, never TensorFlow (that lives in workers).
"""
from __future__ import annotations

import atexit
import hashlib
import threading
from typing import Optional

import streamlit as st

from .. import examples
from ..server.example_cache import OWNER, ExampleCache
from ..server.jobs import Job, Record
from ..server.runner import Runner
from ..state.link_runs import LinkRuns

WATCH_S = 1.0     # how often a run checks that its tab is still open


@st.cache_resource(show_spinner=False, on_release=Runner.close)
def runner() -> Runner:
    # One per server process: it owns the warm worker and the queue every session shares
    # (cleared from the cache, its workers are stopped).
    shared = Runner()
    atexit.register(shared.close)    # no idle worker outlives the server
    if shared.config.hosted:
        quiet_file_watcher()
    return shared


def quiet_file_watcher() -> None:
    """Hosted mode: no file watcher for the sessions to come (Streamlit gives each new
    session one unless server.fileWatcherType is "none"; on a busy instance it logged
    thousands of "inotify queue overflowed" lines). The Dockerfile's command line sets it
    before the first session; this covers a hosted instance started without it."""
    from streamlit import config
    if config.get_option("server.fileWatcherType") != "none":
        config.set_option("server.fileWatcherType", "none")


@st.cache_resource(show_spinner=False)
def link_runs() -> LinkRuns:
    # One per server process, like the runner: every session that opens a link shares it.
    # The examples' recordings made earlier are drawn at once; the missing ones are recorded
    # now, in teaching order, each as that link's shared run (a page opening it meanwhile
    # waits for that one run instead of starting another).
    shared = runner()
    cache = ExampleCache(shared.config)
    links = LinkRuns(shared.config.link_run_s, cached=cache.lookup)

    def record(source):
        return links.events(source, lambda s: shared.submit(Record(s, "program.py"), OWNER))
    if links.max_age_s > 0:      # else no page shares a link's recording, nor an earlier one
        twins = [t for t in (examples.load(n).twin for n in examples.names()) if t]
        cache.build_in_background([examples.code(n) for n in examples.names()] + twins, record)
    return links


def submit(source: str, owner=None, pool: Optional[Runner] = None, session: Optional[str] = None,
           client: Optional[str] = None, eager: bool = False) -> Job:
    """Start recording a program in a worker and return the job's handle at once (its typed
    events are the page's to follow, state/run_job.py).

    A page's run thread passes `pool` and `session` (the session id), fetched in the
    script thread. The run is owned by `owner` (default: the session), and when the
    session's tab closes the run, running or still queued, is cancelled within about
    WATCH_S, not left to its time limit. `client` (a browser's id, from a cookie) gives
    the run its fair share among that browser's tabs (server/queues.py). `eager`: run
    tf.functions eagerly, so a traced train step is recorded op by op (`record --eager`)."""
    shared = pool or runner()
    session = session or session_id()
    owner = owner or (f"debugger-{session}" if session else None)
    job = shared.submit(Record(source, "program.py", eager=eager), owner, client)
    _cancel_when_closed(shared, session, owner, job)
    return job


def client_id() -> Optional[str]:
    """This browser's id, for its fair share of the workers (server/queues.py): all its tabs
    share one. Streamlit cannot set a cookie of ours, but with XSRF protection on (the
    app's config) it sets its own per-browser cookie; a digest of it stands for the browser
    (the token itself never leaves here). Without it, the address and user agent do."""
    try:
        cookie = st.context.cookies.get("_streamlit_xsrf")
        seen = cookie or "|".join(filter(None, (st.context.ip_address, st.context.headers.get("User-Agent"))))
    except Exception:    # noqa: BLE001 - outside a script run there is no browser
        return None
    return hashlib.sha256(seen.encode()).hexdigest()[:16] if isinstance(seen, str) and seen else None


def session_id() -> Optional[str]:
    """This script run's session id (None outside a script thread)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else None


def _cancel_when_closed(shared: Runner, session_id: Optional[str], owner, job: Job) -> None:
    """A thread that cancels `owner`'s jobs once the session is gone (its tab closed: the
    script thread itself may be waiting for the run and cannot notice), until `job` ends."""
    if session_id is None:
        return
    from streamlit import runtime

    def watch():
        while not job.wait(WATCH_S):
            if runtime.exists() and not runtime.get_instance().is_active_session(session_id):
                shared.cancel(owner)
                return

    threading.Thread(target=watch, daemon=True, name="tapeviz-run-watch").start()
