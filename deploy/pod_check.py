"""Run one hosted recording inside a stand-in for the pod that deployment.yaml describes, on
a machine without a cluster: does the pod's securityContext let bubblewrap build the
workers' sandbox?

    python deploy/pod_check.py [--drop CAP ...] [--add CAP ...]

bubblewrap stands in for the container runtime: the machine's root filesystem read-only,
a tmpfs at each emptyDir's mountPath, only the capabilities the container adds (bwrap
--cap-drop ALL --cap-add ...), the container's environment (TAPEVIZ_WORKERS from the CPU
request, as the Downward API gives it). Inside, a tapeviz Runner in hosted mode prints its
walls and records a small TensorFlow program. --drop/--add change the capabilities, to see
which ones the sandbox needs. Run as root (the pod runs as root).

Not emulated: the runtime's seccomp and AppArmor profiles (the manifest turns both off),
cgroup limits, the image's own files (this machine's Python and this checkout stand in).
Exit status 0 when the program was recorded in a bwrap sandbox.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOYMENT = ROOT / "deploy" / "base" / "deployment.yaml"

PROGRAM = """import tensorflow as tf
w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
x = tf.constant([[1.0], [1.0]])
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(tf.matmul(w, x) ** 2)
print("grad", tape.gradient(loss, w).numpy().tolist())
"""

# What runs inside the stand-in pod: the server side of tapeviz only (no TensorFlow here).
INSIDE = """import json, os, sys, time
from tapeviz.server import runner
pool = runner.Runner(runner.Config.from_env())
status = pool.status()
out = {"sandbox": status["sandbox"], "walls": status["walls"], "workers": pool.config.workers}
if status["isolated"]:
    rec = pool.record(sys.argv[1], "check.py")
    out.update(error=rec["error"], stdout=rec["stdout"], ops=len(rec["ops"]))
pool.close()
time.sleep(2)   # the idle worker's clean-up runs in its reader thread
out["left_in_tmp"] = sorted(n for n in os.listdir("/tmp") if n.startswith("tapeviz-"))
print("RESULT " + json.dumps(out))
"""


def container(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]["containers"][0]


def cpu_cores(quantity: str) -> float:
    """A Kubernetes CPU quantity ("2", "1500m") in cores."""
    quantity = str(quantity)
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def container_env(spec: dict) -> dict:
    """The container's environment as the kubelet would set it (plain values and the
    Downward API's resource fields; a divisor of 1 rounds a fraction of a core up)."""
    env = {}
    for item in spec.get("env", []):
        if "value" in item:
            env[item["name"]] = str(item["value"])
            continue
        field = item["valueFrom"]["resourceFieldRef"]
        kind, resource = field["resource"].split(".")
        value = cpu_cores(spec["resources"][kind][resource])
        env[item["name"]] = str(math.ceil(value / cpu_cores(field.get("divisor", "1"))))
    return env


def pod_command(spec: dict, volumes: dict, caps: list, workdir: str) -> list:
    """bwrap arguments that build the stand-in container."""
    context = spec["securityContext"]
    args = ["bwrap", "--die-with-parent",
            "--ro-bind" if context.get("readOnlyRootFilesystem") else "--bind", "/", "/",
            "--dev", "/dev", "--proc", "/proc"]
    for mount in spec.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        assert "emptyDir" in volume, f"only emptyDir volumes are emulated: {mount['name']}"
        # The runtime makes mount points in the image; here they must exist on the host.
        Path(mount["mountPath"]).mkdir(parents=True, exist_ok=True)
        args += ["--tmpfs", mount["mountPath"]]
    args += ["--cap-drop", "ALL"]
    for cap in caps:
        args += ["--cap-add", "CAP_" + cap]
    args += ["--chdir", workdir]
    return args


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drop", nargs="*", default=[], help="capabilities to leave out")
    parser.add_argument("--add", nargs="*", default=[], help="capabilities to add")
    args = parser.parse_args()
    if os.geteuid() != 0 or not shutil.which("bwrap"):
        print("needs root and bwrap, as the pod has them", file=sys.stderr)
        return 2

    deployment = yaml.safe_load(DEPLOYMENT.read_text())
    spec = container(deployment)
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    added = spec["securityContext"]["capabilities"]["add"]
    caps = [c for c in added if c not in args.drop] + args.add
    env = container_env(spec)
    # This machine's Python and checkout stand in for the image's.
    env.update(PATH=os.environ.get("PATH", "/usr/bin:/bin"), PYTHONPATH=str(ROOT),
               PYTHONDONTWRITEBYTECODE="1")
    print("capabilities:", " ".join(caps) or "(none)")
    print("environment:", " ".join(f"{k}={v}" for k, v in sorted(env.items())
                                   if k.startswith("TAPEVIZ_")))
    command = pod_command(spec, volumes, caps, str(ROOT)) + ["--clearenv"]
    for key, value in env.items():
        command += ["--setenv", key, value]
    command += ["--", sys.executable, "-c", INSIDE, PROGRAM]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
    if not lines:
        print("the stand-in pod failed:", done.returncode, done.stderr[-2000:])
        return 1
    result = json.loads(lines[-1][len("RESULT "):])
    print(f"sandbox: {result['sandbox']}, workers: {result['workers']}")
    for wall in result["walls"]:
        print(f"  {'on ' if wall['on'] else 'OFF'} {wall['wall']}: {wall['detail']}")
    if result["sandbox"] != "bwrap":
        return 1
    print(f"recorded {result['ops']} ops, error: {result['error']}, "
          f"stdout: {result['stdout'].strip()!r}")
    print("worker directories left in /tmp:", result["left_in_tmp"] or "none")
    return 0 if result["error"] is None and "grad" in result["stdout"] else 1


if __name__ == "__main__":
    sys.exit(main())
