"""Run one hosted recording inside a stand-in for the pod that deployment.yaml describes, on
a machine without a cluster: does the pod's securityContext let bubblewrap build the
workers' sandbox?

    python deploy/pod_check.py [--drop CAP ...] [--add CAP ...] [--serve]
    python deploy/pod_check.py [--drop CAP ...] --exec COMMAND ...

bubblewrap stands in for the container runtime: the machine's root filesystem read-only,
a tmpfs at each emptyDir's mountPath, only the capabilities the container adds (bwrap
--cap-drop ALL --cap-add ...), the container's environment (TAPEVIZ_WORKERS from the CPU
request, as the Downward API gives it). Inside, a tapeviz Runner in hosted mode prints its
walls and records a small TensorFlow program. --drop/--add change the capabilities, to see
which ones the sandbox needs. --serve then also starts the image's command (the
Dockerfile's CMD, on a free port) in the stand-in, waits for the probes' health path and
opens the app in Chromium (Playwright, /usr/bin/chromium) until the example's graph is
drawn. --exec runs COMMAND in the stand-in instead (e.g. the hosted tests, to see the
walls hold inside the pod) and exits with its status. Run as root (the pod runs as root).

Not emulated: the runtime's seccomp and AppArmor profiles (the manifest turns both off),
cgroup limits, the image's own files (this machine's Python and this checkout stand in).
Exit status 0 when the program was recorded in a bwrap sandbox.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
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
    Downward API's CPU fields, the only kind the Deployment uses; a divisor of 1 rounds a
    fraction of a core up)."""
    env = {}
    for item in spec.get("env", []):
        if "value" in item:
            env[item["name"]] = str(item["value"])
            continue
        field = item["valueFrom"]["resourceFieldRef"]
        kind, resource = field["resource"].split(".")
        assert resource == "cpu", f"only CPU resource fields are emulated: {item['name']}"
        value = cpu_cores(spec["resources"][kind][resource])
        env[item["name"]] = str(math.ceil(value / cpu_cores(field.get("divisor", "1"))))
    return env


def pod_command(spec: dict, volumes: dict, caps: list, workdir: str, env: dict) -> list:
    """bwrap arguments that build the stand-in container, up to the command's "--"."""
    context = spec["securityContext"]
    # A pod has its own process namespace: the server's clean-up by uid sees its own
    # workers only, as in the cluster.
    args = ["bwrap", "--die-with-parent", "--unshare-pid",
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
    args += ["--chdir", workdir, "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args + ["--"]


def image_command(port: int) -> list:
    """The Dockerfile's CMD, serving on `port` instead of the container's."""
    text = (ROOT / "Dockerfile").read_text()
    command = json.loads(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))
    return [f"--server.port={port}" if a.startswith("--server.port") else a for a in command]


def serve_check(pod: list, health: str) -> bool:
    """The app started in the stand-in pod answers `health` and draws a page's graph."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(pod + image_command(port), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        started = time.monotonic()
        while True:
            try:
                answer = urllib.request.urlopen(url + health, timeout=2).read().decode()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() - started > 120:
                    print("the app did not answer", health)
                    return False
                time.sleep(0.5)
        print(f"{health} answered {answer!r} after {time.monotonic() - started:.1f} s")
        from playwright.sync_api import sync_playwright
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                        args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            opened = time.monotonic()
            page.goto(url)
            page.wait_for_selector(".js-plotly-plot .scatterlayer", timeout=300_000)
            print(f"the page drew the example's graph {time.monotonic() - opened:.1f} s "
                  "after it opened")
            failed = page.locator("[data-testid='stException']").count()
            browser.close()
        return failed == 0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out = proc.communicate(timeout=20)[0]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out = proc.communicate()[0]
        errors = [l for l in out.splitlines() if "Error" in l or "denied" in l]
        print("the app's errors in its output:", errors[-5:] or "none")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drop", nargs="*", default=[], help="capabilities to leave out")
    parser.add_argument("--add", nargs="*", default=[], help="capabilities to add")
    parser.add_argument("--serve", action="store_true",
                        help="also run the image's command and draw a page in Chromium")
    parser.add_argument("--exec", nargs=argparse.REMAINDER, dest="command",
                        help="run this command in the stand-in pod instead")
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
               PYTHONDONTWRITEBYTECODE="1",
               # Worker uids apart from those of tapeviz servers on this machine (their
               # locks are in the machine's /run/tapeviz-uids, not the stand-in's): a
               # shared uid would share one process limit.
               TAPEVIZ_UID_BASE="64000")
    print("capabilities:", " ".join(caps) or "(none)")
    print("environment:", " ".join(f"{k}={v}" for k, v in sorted(env.items())
                                   if k.startswith("TAPEVIZ_")))
    pod = pod_command(spec, volumes, caps, str(ROOT), env)
    if args.command:
        return subprocess.run(pod + args.command).returncode
    command = pod + [sys.executable, "-c", INSIDE, PROGRAM]
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
    if result["error"] is not None or "grad" not in result["stdout"]:
        return 1
    if args.serve:
        health = spec["livenessProbe"]["httpGet"]["path"]
        return 0 if serve_check(pod, health) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
