"""What the hosted-mode tests share: the check that a pool still serves a normal run, and
pools whose workers start either way hosted mode knows (forked from the sandboxed zygote,
or spawned each into its own bwrap), so every case of the walls runs against both."""
import pytest

from tapeviz.server import runner, sandbox

STARTS = ("forked", "spawned")


def forkable() -> bool:
    """Whether the fork server can run here: a usable bwrap and a root server."""
    return sandbox.probe()[0] and sandbox.UidPool.available()


# A case whose code under test is the same however the worker started runs on one start
# only (forked where it can run, as a hosted server does): the protocol (what a worker sends
# reaches the server down one pipe, read by process.Worker for both) and the rlimits (set
# by the worker's job loop, serve.apply_limits, after either start). The namespaces, mounts,
# uids, seccomp and killing differ between the starts: those cases run on both.
one_start = pytest.mark.parametrize("pool", ["forked" if forkable() else "spawned"], indirect=True)


def works(pool):
    """The next run after a hostile one: a normal program, a normal recording."""
    rec = pool.record("import tensorflow as tf\nprint(tf.constant(2.0) * 3.0)\n")
    assert rec["error"] is None, rec["error"]
    assert "6.0" in rec["stdout"]


def hosted_pool(env: dict, start: str) -> runner.Runner:
    """A hosted Runner whose workers are `start`ed ("forked" or "spawned"); skips the forked
    kind where it cannot run (no bwrap or not root), and checks it really forks."""
    if start == "forked" and not forkable():
        pytest.skip("the fork server needs a usable bwrap and a root server")
    pool = runner.Runner(runner.Config.from_env(
        dict(env, TAPEVIZ_ZYGOTE="1" if start == "forked" else "0")))
    if start == "forked":
        zygote = pool.zygote
        assert zygote is not None and zygote.sandboxed
        assert zygote.ready.wait(runner.READY_TIMEOUT_S) and zygote.usable, zygote.walls_failed
        assert pool.status()["workers"] == "forked"
    else:
        assert pool.status()["workers"] == "spawned"
    return pool


# A student's program that finds the worker's channel up its own stack, says it stopped in
# time, switches its alarm off and sleeps: only the server's own deadline can end it (the
# sleeping tabs of the hosted tests and of bench/hosted_load.py --sleepers).
FORGES_STOPPED = """
import signal, sys, time
frame = sys._getframe()
while "channel" not in frame.f_locals:
    frame = frame.f_back
frame.f_locals["channel"].send({"type": "stopped"})
signal.setitimer(signal.ITIMER_REAL, 0)
signal.signal(signal.SIGALRM, signal.SIG_IGN)
while True:
    time.sleep(0.1)
"""

# A fifth student's small program (about 0.3 s of TensorFlow).
SMALL = "import tensorflow as tf\nprint(float(tf.reduce_sum(tf.range(10.0) ** 2)))\n"
