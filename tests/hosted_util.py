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
