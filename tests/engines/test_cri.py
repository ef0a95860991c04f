"""The Kubernetes path: the CRI plugin of a private containerd, runtime handler `agentsbx` (as
a RuntimeClass names it) vs `runcref` as the control, driven by cri/cri.js (a minimal CRI
client on @grpc/grpc-js). Pods use the host network (NamespaceMode NODE, no hostname, as
kubelet sends), so no CNI is needed. pod_annotations/container_annotations = io.agentsbx.*
must reach the runtime's config.json; other annotations must not."""

import base64
import json
import os
import shutil
import subprocess

import pytest

from conftest import HERE, IMAGE_FULL, Leaks, _need, sh

pytestmark = pytest.mark.containerd
CRI_DIR = os.path.join(HERE, "cri")
HANDLERS = {"agentsbx": "agentsbx", "runc": "runcref"}


@pytest.fixture(scope="session")
def cri_client():
    _need("node", "nodejs")
    if not os.path.isdir(os.path.join(CRI_DIR, "node_modules", "@grpc", "grpc-js")):
        _need("npm", "npm")
        sh(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=CRI_DIR, timeout=600)
    return os.path.join(CRI_DIR, "cri.js")


@pytest.fixture
def cri(containerd, cri_client, engine_rt):
    leaks = Leaks([containerd.dir])
    root = os.path.join(containerd.rt_roots[engine_rt], "k8s.io")

    def call(method, req=None, check=True):
        r = sh(["node", cri_client, containerd.sock, method, json.dumps(req or {})],
               check=check)
        return json.loads(r.stdout) if r.returncode == 0 else r

    pods = []
    yield containerd, leaks, call, root, pods
    for pod in pods:
        call("StopPodSandbox", {"pod_sandbox_id": pod}, check=False)
        call("RemovePodSandbox", {"pod_sandbox_id": pod}, check=False)
    leaks.check()


def pod_config(name, annotations):
    return {
        "metadata": {"name": name, "uid": name + "-uid", "namespace": "default", "attempt": 0},
        "annotations": annotations,
        "linux": {"cgroup_parent": "",
                  "security_context": {"namespace_options": {"network": "NODE", "pid": "CONTAINER",
                                                             "ipc": "POD"}}},
    }


def test_pod_lifecycle_exec_annotations(cri, engine_rt):
    containerd, leaks, call, root, pods = cri
    v = call("Version", {"version": "v1"})
    assert v["runtime_name"] == "containerd"
    name = f"pod-{engine_rt}-{os.getpid()}-{os.urandom(2).hex()}"
    pcfg = pod_config(name, {"io.agentsbx.profile": "open", "other.example/x": "dropped"})
    pod = call("RunPodSandbox", {"config": pcfg, "runtime_handler": HANDLERS[engine_rt]})
    pod_id = pod["pod_sandbox_id"]
    pods.append(pod_id)
    leaks.track(pod_id, root)
    # the sandbox (pause) container ran under the handler's runtime: its state dir is there
    assert os.path.isdir(os.path.join(root, pod_id))
    with open(os.path.join(containerd.bundle("k8s.io", pod_id), "config.json")) as f:
        scfg = json.load(f)
    assert scfg["annotations"].get("io.agentsbx.profile") == "open"
    assert "other.example/x" not in scfg["annotations"]

    ccfg = {"metadata": {"name": "work", "attempt": 0}, "image": {"image": IMAGE_FULL},
            "command": ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done"],
            "annotations": {"io.agentsbx.profile": "open", "io.agentsbx.note": "c1",
                            "not.agentsbx/y": "dropped"},
            "log_path": "work.log",
            "linux": {"security_context": {"namespace_options": {"network": "NODE",
                                                                 "pid": "CONTAINER",
                                                                 "ipc": "POD"}}}}
    pcfg["log_directory"] = os.path.join(containerd.dir, "logs", name)
    os.makedirs(pcfg["log_directory"], exist_ok=True)
    c = call("CreateContainer", {"pod_sandbox_id": pod_id, "config": ccfg,
                                 "sandbox_config": pcfg})
    cid = c["container_id"]
    leaks.track(cid, root)
    call("StartContainer", {"container_id": cid})
    with open(os.path.join(containerd.bundle("k8s.io", cid), "config.json")) as f:
        cfg = json.load(f)
    ann = cfg["annotations"]
    assert ann.get("io.agentsbx.profile") == "open" and ann.get("io.agentsbx.note") == "c1"
    assert "not.agentsbx/y" not in ann
    # the container joins the sandbox's ipc namespace by /proc/PID/ns path
    paths = {n["type"]: n.get("path") for n in cfg["linux"]["namespaces"]}
    assert paths.get("ipc", "").startswith("/proc/")
    assert os.path.isdir(os.path.join(root, cid))

    r = call("ExecSync", {"container_id": cid, "cmd": ["sh", "-c",
                                                       "echo exec-$(cat /proc/1/comm); exit 3"],
                          "timeout": 60})
    out = base64.b64decode(r["stdout"]).decode()  # bytes fields arrive base64-encoded
    assert r["exit_code"] == 3 and "exec-sh" in out, (r, out)

    call("StopContainer", {"container_id": cid, "timeout": 30})
    call("RemoveContainer", {"container_id": cid})
    call("StopPodSandbox", {"pod_sandbox_id": pod_id})
    call("RemovePodSandbox", {"pod_sandbox_id": pod_id})
    pods.remove(pod_id)


AGENT_SCRIPT = ("touch /etc/x 2>/dev/null && echo etc=writable || echo etc=refused; "
                "unshare -U true 2>/dev/null && echo userns=allowed || echo userns=refused; "
                "grep CapEff /proc/self/status")


def _agent_container(call, containerd, pod_id, pcfg, name, annotations):
    ccfg = {"metadata": {"name": name, "attempt": 0}, "image": {"image": IMAGE_FULL},
            "command": ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done"],
            "annotations": annotations, "log_path": f"{name}.log",
            "linux": {"security_context": {"namespace_options": {"network": "NODE", "pid": "CONTAINER",
                                                                 "ipc": "POD"}}}}
    return call("CreateContainer", {"pod_sandbox_id": pod_id, "config": ccfg, "sandbox_config": pcfg})["container_id"]


def test_policy_annotation_enforced(cri, engine_rt):
    """A RuntimeClass user's lever is the annotation. A host-network pod (all these test pods:
    no CNI here) keeps the host's network, so the request keeps `network.mode: open`; the rest
    of the agent profile must be enforced in the container (asserted from inside through
    ExecSync) and audited. runc, the control, ignores the annotation: /etc is writable there."""
    containerd, leaks, call, root, pods = cri
    name = f"pol-{engine_rt}-{os.getpid()}-{os.urandom(2).hex()}"
    pcfg = pod_config(name, {})
    pcfg["log_directory"] = os.path.join(containerd.dir, "logs", name)
    os.makedirs(pcfg["log_directory"], exist_ok=True)
    pod_id = call("RunPodSandbox", {"config": pcfg, "runtime_handler": HANDLERS[engine_rt]})["pod_sandbox_id"]
    pods.append(pod_id)
    leaks.track(pod_id, root)
    policy = json.dumps({"version": 1, "extends": "agent", "network": {"mode": "open"}})
    cid = _agent_container(call, containerd, pod_id, pcfg, "agent", {"io.agentsbx.policy": policy})
    leaks.track(cid, root)
    audit = os.path.join("/var/log/agentsbx", f"{cid}.jsonl")
    try:
        call("StartContainer", {"container_id": cid})
        r = call("ExecSync", {"container_id": cid, "cmd": ["sh", "-c", AGENT_SCRIPT], "timeout": 60})
        out = base64.b64decode(r.get("stdout", "")).decode()
        cap = int(out.split("CapEff:")[1].split()[0], 16)
        if engine_rt == "agentsbx":
            assert "etc=refused" in out and "userns=refused" in out, out
            # the agent profile's allow list ∩ the CRI defaults: no CAP_NET_RAW, no CAP_SYS_CHROOT ...
            assert cap & ~0x4FB == 0, hex(cap)
            with open(audit) as f:
                recs = [json.loads(x) for x in f.read().splitlines()]
            pol = [x for x in recs if x["event"] == "policy"]
            assert pol and any("annotation" in s for s in pol[-1]["sources"]), recs[:3]
        else:
            assert "etc=writable" in out and "userns=" in out, out
            assert cap & (1 << 13), hex(cap)  # CAP_NET_RAW: the CRI default set, untouched
        call("StopContainer", {"container_id": cid, "timeout": 30})
        call("RemoveContainer", {"container_id": cid})
    finally:
        if os.path.exists(audit):
            os.unlink(audit)


def test_host_network_pod_with_isolating_profile_refused(cri, engine_rt):
    """`io.agentsbx.profile: agent` (network filtered) in a host-network pod: the container would
    join the host's network namespace, where the drop-all table must never be loaded. The
    container fails to start with the reason; the host keeps no table. (runc ignores it.)"""
    if engine_rt != "agentsbx":
        pytest.skip("runc ignores io.agentsbx.* annotations: nothing to refuse")
    containerd, leaks, call, root, pods = cri
    name = f"hostnet-{os.getpid()}-{os.urandom(2).hex()}"
    pcfg = pod_config(name, {})
    pcfg["log_directory"] = os.path.join(containerd.dir, "logs", name)
    os.makedirs(pcfg["log_directory"], exist_ok=True)
    pod_id = call("RunPodSandbox", {"config": pcfg, "runtime_handler": HANDLERS[engine_rt]})["pod_sandbox_id"]
    pods.append(pod_id)
    leaks.track(pod_id, root)
    tables = sh(["nft", "list", "tables"]).stdout
    cid = _agent_container(call, containerd, pod_id, pcfg, "agent", {"io.agentsbx.profile": "agent"})
    leaks.track(cid, root)
    r = call("StartContainer", {"container_id": cid}, check=False)
    assert r.returncode != 0 and "runtime's own (host) network namespace" in r.stderr, r
    assert sh(["nft", "list", "tables"]).stdout == tables
    call("RemoveContainer", {"container_id": cid}, check=False)
    audit = os.path.join("/var/log/agentsbx", f"{cid}.jsonl")
    if os.path.exists(audit):
        os.unlink(audit)
