"""The TensorFlow side: everything that runs inside a worker process (or the command line,
in-process). The only subpackage whose modules may import TensorFlow.

This file imports nothing, so `tapeviz.worker.numerics` stays cheap to test.
"""
