"""The Kubernetes manifests under deploy/, rendered without a cluster and checked against
the code they run: the ports and health path Streamlit serves, the env vars
tapeviz/server/config.py reads, what the sandbox needs (docs/hosting.md).

The rendering is the few kustomize features the manifests use (resources, namespace,
images, strategic-merge patches of a Deployment), so no tool is needed; where kubectl is
installed its own kustomize must render the same objects.
"""
import ast
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tapeviz.server.config import Config

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "deploy" / "base"
GVISOR = ROOT / "deploy" / "gvisor"
HEALTH = "/_stcore/health"
CLUSTER_SCOPED = {"Namespace", "RuntimeClass"}

sys.path.insert(0, str(ROOT / "deploy"))     # the scripts import each other, as when run
import capacity  # noqa: E402
import pod_check  # noqa: E402


def merge(into: dict, patch: dict) -> dict:
    """A strategic-merge patch as far as maps go (the manifests patch no lists)."""
    out = dict(into)
    for key, value in patch.items():
        out[key] = merge(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


def render(folder: Path) -> list:
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    objects = []
    for entry in kustomization.get("resources", []):
        path = (folder / entry).resolve()
        if path.is_dir():
            objects += render(path)
        else:
            objects += [o for o in yaml.safe_load_all(path.read_text()) if o]
    for patch in kustomization.get("patches", []):
        change = yaml.safe_load((folder / patch["path"]).read_text())
        objects = [merge(o, change) if (o["kind"], o["metadata"]["name"]) ==
                   (change["kind"], change["metadata"]["name"]) else o for o in objects]
    namespace = kustomization.get("namespace")
    images = {i["name"]: f"{i.get('newName', i['name'])}:{i['newTag']}"
              for i in kustomization.get("images", [])}
    for obj in objects:
        if namespace and obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"]["namespace"] = namespace
        for container in pod_spec(obj).get("containers", []):
            container["image"] = images.get(container["image"], container["image"])
    return objects


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"] if obj["kind"] == "Deployment" else {}


def by_kind(objects: list) -> dict:
    out = {}
    for obj in objects:
        assert obj["kind"] not in out, f"two {obj['kind']}s: the checks below expect one"
        out[obj["kind"]] = obj
    return out


@pytest.fixture(scope="module")
def base():
    return by_kind(render(BASE))


@pytest.fixture(scope="module")
def app(base):
    return pod_spec(base["Deployment"])["containers"][0]


def dockerfile_cmd() -> list:
    text = (ROOT / "Dockerfile").read_text()
    return yaml.safe_load(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))


def streamlit_port() -> int:
    """The port the image's command serves Streamlit on."""
    return int(next(a.split("=")[1] for a in dockerfile_cmd() if a.startswith("--server.port")))


def env_names_read_by_config() -> set:
    """TAPEVIZ_* names config.py reads: string constants passed to a `.get(...)`."""
    tree = ast.parse((ROOT / "tapeviz" / "server" / "config.py").read_text())
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith("TAPEVIZ_")}


def gib(quantity: str) -> float:
    units = {"Gi": 1, "Mi": 1 / 1024}
    return float(quantity[:-2]) * units[quantity[-2:]]


REQUIRED = {
    "Namespace": [],
    "Deployment": ["selector", "template"],
    "Service": ["selector", "ports"],
    "Ingress": ["rules"],
    "HorizontalPodAutoscaler": ["scaleTargetRef", "minReplicas", "maxReplicas", "metrics"],
    "NetworkPolicy": ["podSelector", "policyTypes"],
    "PodDisruptionBudget": ["selector"],
}


def test_every_object_has_its_required_fields(base):
    assert set(base) == set(REQUIRED)
    for kind, obj in base.items():
        assert obj["apiVersion"] and obj["metadata"]["name"], kind
        for field in REQUIRED[kind]:
            assert field in obj["spec"], f"{kind} lacks spec.{field}"
        if kind not in CLUSTER_SCOPED:
            assert obj["metadata"]["namespace"] == base["Namespace"]["metadata"]["name"]


def test_the_pieces_point_at_each_other(base, app):
    labels = base["Deployment"]["spec"]["template"]["metadata"]["labels"]
    selects = lambda selector: selector.items() <= labels.items()  # noqa: E731
    assert selects(base["Deployment"]["spec"]["selector"]["matchLabels"])
    assert selects(base["Service"]["spec"]["selector"])
    assert selects(base["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"])
    assert selects(base["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"])
    target = base["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment",
                                                base["Deployment"]["metadata"]["name"])
    ports = {p["name"]: p["containerPort"] for p in app["ports"]}
    assert ports["http"] == streamlit_port()
    service_ports = {p["name"]: p for p in base["Service"]["spec"]["ports"]}
    for rule in base["Ingress"]["spec"]["rules"]:
        for path in rule["http"]["paths"]:
            backend = path["backend"]["service"]
            assert backend["name"] == base["Service"]["metadata"]["name"]
            assert ports[service_ports[backend["port"]["name"]]["targetPort"]] == \
                streamlit_port()


def test_the_deployment_runs_the_dockerfiles_image_and_command(app):
    assert app["image"].split(":")[0] == "tapeviz"
    # No command or args: the image's CMD (Streamlit in headless hosted mode) runs.
    assert "command" not in app and "args" not in app
    assert dockerfile_cmd()[:3] == ["streamlit", "run", "app.py"]


def test_ingress_sticks_a_browser_to_its_replica_and_keeps_the_websocket(base):
    ingress = base["Ingress"]
    notes = ingress["metadata"]["annotations"]
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert notes["nginx.ingress.kubernetes.io/affinity-mode"] == "persistent"
    assert notes["nginx.ingress.kubernetes.io/session-cookie-name"]
    # nginx's default 60 s cuts an idle websocket: a student reading a graph for longer
    # would be reconnected into a fresh session.
    for key in ("proxy-read-timeout", "proxy-send-timeout"):
        assert int(notes[f"nginx.ingress.kubernetes.io/{key}"]) >= 3600
    # The training page's upload is bounded by Streamlit's own maxUploadSize, not nginx's.
    config = (ROOT / ".streamlit" / "config.toml").read_text()
    upload_mb = int(re.search(r"^maxUploadSize = (\d+)", config, re.M).group(1))
    assert int(notes["nginx.ingress.kubernetes.io/proxy-body-size"].rstrip("m")) > upload_mb


def test_every_container_has_requests_and_limits(base):
    for container in pod_spec(base["Deployment"])["containers"] + \
            pod_spec(base["Deployment"]).get("initContainers", []):
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][kind]), container["name"]
        # Guaranteed QoS: the pool is sized from a CPU the replica surely has.
        assert container["resources"]["requests"] == container["resources"]["limits"]


def test_probes_ask_streamlits_health_endpoint(app):
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        check = app[probe]["httpGet"]
        assert check["path"] == HEALTH
        assert {p["name"]: p["containerPort"] for p in app["ports"]}[check["port"]] == \
            streamlit_port()


def test_root_filesystem_is_read_only_with_writable_scratch(base, app):
    assert app["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v for v in pod_spec(base["Deployment"])["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in app["volumeMounts"]}
    assert all("emptyDir" in v for v in mounts.values())
    env = pod_check.container_env(app)
    # Python's tempfile (workers' directories), and $HOME for Streamlit's own files.
    assert {"/tmp", env["HOME"]} <= set(mounts)


def test_network_policy_denies_all_egress_and_admits_only_the_ingress_controller(base, app):
    policy = base["NetworkPolicy"]["spec"]
    assert "Egress" in policy["policyTypes"] and policy["egress"] == []
    assert "Ingress" in policy["policyTypes"]
    (rule,) = policy["ingress"]
    (peer,) = rule["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "ingress-nginx"}
    assert [p["port"] for p in rule["ports"]] == [streamlit_port()]


def test_hpa_scales_on_cpu_utilisation(base):
    spec = base["HorizontalPodAutoscaler"]["spec"]
    (metric,) = spec["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["target"]["type"] == "Utilization"
    assert 0 < metric["resource"]["target"]["averageUtilization"] <= 100
    assert 2 <= spec["minReplicas"] <= spec["maxReplicas"]


def test_env_vars_are_ones_the_config_reads_and_size_the_pool_from_the_cpu_request(app):
    env = pod_check.container_env(app)
    tapeviz_names = {n for n in env if n.startswith("TAPEVIZ_")}
    assert tapeviz_names and tapeviz_names <= env_names_read_by_config()
    config = Config.from_env(env)
    cores = pod_check.cpu_cores(app["resources"]["requests"]["cpu"])
    assert config.hosted and config.sandbox == "bwrap"
    assert config.workers == math.ceil(cores)
    # README's sizing: 2 GiB for every worker that can be alive, plus 1 GiB.
    alive = config.workers + config.training + config.warm
    assert gib(app["resources"]["limits"]["memory"]) >= 2 * alive + 1


def test_security_context_gives_bwrap_what_it_needs_and_no_more(base, app):
    pod = pod_spec(base["Deployment"])
    context = app["securityContext"]
    assert pod["automountServiceAccountToken"] is False
    assert context["runAsUser"] == 0          # per-worker uids need a root server
    assert context.get("privileged") is not True
    assert context["capabilities"]["drop"] == ["ALL"]
    # Each found needed by `python deploy/pod_check.py --drop CAP` (docs/hosting.md).
    assert {"SYS_ADMIN", "NET_ADMIN", "SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE"} <= \
        set(context["capabilities"]["add"])
    # The API server refuses allowPrivilegeEscalation: false beside CAP_SYS_ADMIN.
    assert context.get("allowPrivilegeEscalation") is not False
    assert context["seccompProfile"]["type"] in ("Unconfined", "Localhost")
    assert context["appArmorProfile"]["type"] in ("Unconfined", "Localhost")
    assert base["Namespace"]["metadata"]["labels"][
        "pod-security.kubernetes.io/enforce"] == "privileged"


def test_gvisor_overlay_only_adds_the_runtime_class(base):
    objects = render(GVISOR)
    gvisor = by_kind(objects)
    runtime = gvisor.pop("RuntimeClass")
    assert runtime["handler"] == "runsc"
    deployment = gvisor["Deployment"]
    assert pod_spec(deployment)["runtimeClassName"] == runtime["metadata"]["name"]
    del pod_spec(deployment)["runtimeClassName"]
    assert gvisor == base


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("folder", [BASE, GVISOR], ids=["base", "gvisor"])
def test_kubectls_kustomize_renders_the_same(folder):
    done = subprocess.run(["kubectl", "kustomize", str(folder)], capture_output=True,
                          text=True, timeout=60, check=True)
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    theirs = sorted(yaml.safe_load_all(done.stdout), key=key)
    ours = sorted(render(folder), key=key)
    assert theirs == ours


def test_the_capacity_table_in_the_docs_follows_from_the_measured_cpu_per_run():
    """docs/hosting.md's replicas per class size are capacity.py's model applied to the
    CPU per run the doc quotes, with deploy/base's cores and HPA."""
    doc = (ROOT / "docs" / "hosting.md").read_text()
    low, high = map(float, re.search(r"With c = ([\d.]+)-([\d.]+) s", doc).groups())
    target_s = float(re.search(r"T = ([\d.]+) s", doc).group(1))
    every_min = float(re.search(r"m = ([\d.]+) minutes", doc).group(1))
    shape = capacity.replica_shape()
    rows = re.findall(r"^\| (\d+) \| ([\d-]+)[^|]*\| ([\d-]+) \|$", doc, re.M)
    assert len(rows) >= 3

    def span(values):
        lo, hi = min(values), max(values)
        return str(lo) if lo == hi else f"{lo}-{hi}"

    for students, burst, steady in rows:
        n = int(students)
        assert burst == span([max(shape["min"], capacity.replicas_for_burst(
            n, c, shape["cores"], target_s)) for c in (low, high)])
        assert steady == span([max(shape["min"], capacity.replicas_for_steady(
            n, c, shape["cores"], every_min, shape["utilisation"])) for c in (low, high)])
