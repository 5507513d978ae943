"""The server's own walls in hosted mode, against programs that write to their worker's
message channel (found up their own stack, as any program can) through the real runner and
real sandboxed workers: a forged recording with a million inputs, one nested 100,000 deep,
messages of the wrong shape, and a flood of valid printed text. Each ends in a plain
ProtocolError, the server (this process) stays within its memory, and the next run works."""
import resource

import pytest

from tapeviz import recording_gate as gate
from tapeviz.server import protocol, runner, sandbox

from hosted_util import works

SANDBOXED, WHY_NOT = sandbox.probe()
pytestmark = [pytest.mark.slow,   # a hosted server, its sandboxed workers
              pytest.mark.skipif(not SANDBOXED, reason=f"no usable bwrap: {WHY_NOT}")]
HOSTED_ENV = {"TAPEVIZ_MODE": "hosted", "TAPEVIZ_WORKERS": "1", "TAPEVIZ_WARM": "1",
              "TAPEVIZ_TIMEOUT_S": "20"}
SERVER_MIB = 600           # what one hostile run may add to the server's peak memory

CHANNEL = """
import json, linecache, sys
SOURCE = ''.join(linecache.cache[__file__][2])    # the program's own text, as the server has it
frame = sys._getframe()
while 'channel' not in frame.f_locals:             # the worker's channel: a local up the stack
    frame = frame.f_back
channel = frame.f_locals['channel']
"""


@pytest.fixture(scope="module")
def pool():
    pool = runner.Runner(runner.Config.from_env(HOSTED_ENV))
    yield pool
    pool.close()


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def refused(pool, program: str, words: str, timeout: float = 60):
    before = peak_mib()
    rec = pool.record(CHANNEL + program, timeout=timeout)
    grew = peak_mib() - before
    print(f"server peak +{grew:.0f} MiB: {rec['error']['message'][:120]}")
    assert rec["error"]["type"] == "ProtocolError", rec["error"]
    assert words in rec["error"]["message"], rec["error"]["message"]
    assert "Traceback" not in rec["error"]["message"] and len(rec["error"]["message"]) < 400
    assert rec["ops"] == [] and grew < SERVER_MIB
    works(pool)


def test_a_forged_million_input_recording_is_refused(pool):
    refused(pool, """
forged = {"schema": "tapeviz.recording/1", "source": SOURCE, "stdout": "", "error": None,
          "ops": [{"id": 0, "type": "AddN", "inputs": list(range(1, 1_000_001)), "outputs": [0],
                   "line": 1, "scope": None, "tapes": [], "phase": "forward"}],
          "tensors": [], "tapes": [], "alerts": [], "warnings": [], "dropped": {}}
channel.send({"type": "recording", "recording": forged})
""", "inputs and outputs together")


def test_a_forged_recording_of_long_names_is_refused(pool):
    refused(pool, """
tensors = [{"id": i, "name": "n" * 5000, "shape": [], "dtype": "float32", "kind": "constant",
            "producer": None} for i in range(10_000)]
forged = {"schema": "tapeviz.recording/1", "source": SOURCE, "ops": [], "tensors": tensors,
          "tapes": []}
channel.send({"type": "recording", "recording": forged})
""", "field 'name'")


def test_a_100000_deep_message_is_refused(pool):
    refused(pool, """
channel._out.write('{"type": "recording", "recording": ' + '[' * 100_000 + ']' * 100_000 + '}\\n')
channel._out.flush()
import time
time.sleep(5)
""", "nested deeper")


@pytest.mark.parametrize("message, words", [
    ('{"type": "stdout", "text": list(range(100_000))}', "stdout message whose 'text'"),
    ('{"type": "stdout", "text": "hi", "extra": 1}', "'extra'"),
    ('{"type": "recording", "recording": "not a recording"}', "'recording'"),
    ('{"type": "metric", "metric": [1, 2]}', "'metric'"),
    ('{"type": "shell"}', "unknown type"),
])
def test_messages_of_the_wrong_shape_are_refused(pool, message, words):
    refused(pool, f"channel.send({message})\nimport time\ntime.sleep(5)\n", words)


def test_a_large_message_that_is_not_a_recording_is_refused_unparsed(pool):
    refused(pool, """
channel._out.write('{"secret": "x", "type": "stdout", "text": [' + '1,' * 3_000_000 + '1]}\\n')
channel._out.flush()
import time
time.sleep(5)
""", "that is not a recording")


def test_a_flood_of_valid_text_waits_in_the_pipe(pool):
    """Valid stdout messages as fast as the channel takes them: the server reads at most one
    recording's worth at once and OUTPUT_BYTES_PER_S after, so the program is held back."""
    rec = pool.record(CHANNEL + "import time\n"
                      "text, wrote, start = 'x' * 3_000_000, 0, time.monotonic()\n"
                      "while time.monotonic() - start < 8:\n"
                      "    channel.send({'type': 'stdout', 'text': text})\n"
                      "    wrote += len(text)\n"
                      "print('wrote', wrote, 'in', time.monotonic() - start)\n", timeout=20)
    assert rec["error"] is None, rec["error"]
    words = rec["stdout"].splitlines()[-1].split()
    wrote, seconds = int(words[1]), float(words[3])
    # the program blocks once the server stops reading: what it wrote is bounded by the
    # budget (its burst, then its rate) plus the message being paid for and the one the
    # pipe holds
    bound = protocol.MAX_MESSAGE + protocol.OUTPUT_BYTES_PER_S * seconds + 8 * 2**20
    print(f"wrote {wrote / 2**20:.0f} MiB in {seconds:.1f} s; the budget allows {bound / 2**20:.0f}")
    assert wrote <= bound
    works(pool)


def test_the_gate_bounds_hold_for_the_recorders_own_bound(pool):
    """The reference for the refusals above: an honest run near the op bound passes."""
    rec = pool.record("import tensorflow as tf\nx = tf.constant(1.0)\n"
                      "for i in range(3000):\n    x = x + 1.0\nprint(float(x))\n", timeout=60)
    assert rec["error"] is None and len(rec["ops"]) >= 3000
    assert gate.problem(rec) is None


def test_the_workers_home_is_its_own_and_writable(pool):
    rec = pool.record("import os, tensorflow as tf\n"
                      "keras = os.path.expanduser('~/.keras')\n"
                      "print('made by the import:', os.path.isdir(keras))\n"
                      "with open(os.path.join(keras, 'mine.txt'), 'w') as f:\n"
                      "    f.write('ok')\n"
                      "with open(os.path.expanduser('~/notes.txt'), 'w') as f:\n"
                      "    f.write('ok')\n"
                      "print('home', os.path.expanduser('~') == os.getcwd(), os.getuid() != 0)\n")
    assert rec["error"] is None, rec["error"]
    assert "made by the import: True" in rec["stdout"]
    assert "home True True" in rec["stdout"]
