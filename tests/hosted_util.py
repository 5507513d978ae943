"""What the hosted-mode tests share: the check that a pool still serves a normal run."""


def works(pool):
    """The next run after a hostile one: a normal program, a normal recording."""
    rec = pool.record("import tensorflow as tf\nprint(tf.constant(2.0) * 3.0)\n")
    assert rec["error"] is None, rec["error"]
    assert "6.0" in rec["stdout"]
