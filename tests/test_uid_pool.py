"""The worker uid pool sweeps a uid only when it may hold something: whatever ran as a uid
before the pool started, or under another server since, is killed before a worker gets it;
a uid this pool gave back is handed out again without reading every process's status."""
import os
import subprocess
import time

import pytest

from tapeviz.server import sandbox

pytestmark = [pytest.mark.slow,        # starts processes under other uids
              pytest.mark.skipif(not sandbox.UidPool.available(), reason="needs root")]

BASE = 64900        # away from the servers' own range (TAPEVIZ_UID_BASE, 61000)


@pytest.fixture
def lock_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox.UidPool, "LOCK_DIR", tmp_path)
    return tmp_path


def left_running(uid: int) -> subprocess.Popen:
    """A process running as `uid`, as a crashed server's worker would be left."""
    proc = subprocess.Popen(["sleep", "120"],
                            user=uid, group=uid)
    deadline = time.monotonic() + 10
    while proc.pid not in sandbox.processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.pid in sandbox.processes_of(uid)
    return proc


def test_what_ran_before_the_pool_started_is_killed_when_its_uid_is_taken(lock_dir):
    leftover = left_running(BASE)
    try:
        pool = sandbox.UidPool(BASE, 2)
        assert pool.take() == BASE
        assert leftover.wait(10) == -9
        assert sandbox.processes_of(BASE) == []
    finally:
        leftover.kill()


def test_a_uid_another_server_held_since_is_swept_at_take(lock_dir):
    pool = sandbox.UidPool(BASE, 1)
    uid = pool.take()
    pool.give_back(uid, gone=True)
    # Another server (its pid in the lock file) held the uid and left a process behind.
    (lock_dir / str(uid)).write_bytes(b"999999")
    leftover = left_running(uid)
    try:
        assert pool.take() == uid
        assert leftover.wait(10) == -9
        assert (lock_dir / str(uid)).read_bytes() == str(os.getpid()).encode()
    finally:
        leftover.kill()
    # Given back without `gone`: swept at once, whoever's lock file it is.
    again = left_running(uid)
    try:
        pool.give_back(uid)
        assert again.wait(10) == -9
    finally:
        again.kill()


def test_a_uid_given_back_gone_is_handed_out_without_a_sweep(lock_dir):
    """The skip itself: a forked job's pid namespace ended, so nothing is looked for (a
    process left as that uid here, which no namespace would let live, survives the take)."""
    pool = sandbox.UidPool(BASE, 1)
    uid = pool.take()
    survivor = left_running(uid)
    try:
        pool.give_back(uid, gone=True)
        assert pool.take() == uid
        assert survivor.poll() is None
    finally:
        survivor.kill()
        survivor.wait()
