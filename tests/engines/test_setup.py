"""`agentsbx setup docker|podman|containerd` (issue 21) against the private engines of this suite:
the engine's own config file without agentsbx; a dry run changes no byte; setup adds the runtime
and a runtime class with the agent profile, the engine then runs a container through each
(asserted from inside: /etc read-only and unshare refused under the class only); a second setup
changes nothing; undo leaves the file byte-identical to before and the engine no longer knows the
runtime. Run with the binary under test (the private copy of runtime_paths), so what the file
names is that copy."""

import os
import shutil
import signal
import subprocess
import tempfile

import pytest

from conftest import IMAGE, IMAGE_FULL, Containerd, HERE, Leaks, RUNC, _need, sh, wait_for, DOCKER_CLI
from test_docker import Docker
from test_podman import Podman

SCRIPT = ("touch /etc/asbx-x 2>/dev/null && echo etc=writable || echo etc=refused; "
          "unshare -U true 2>/dev/null && echo userns=allowed || echo userns=refused")

# one query for unlisted.invalid in class CH sent to 127.0.0.1:53 from inside: the answer's rcode
# (class IN would be held for the `agent` profile's approvals `ask`; another class is refused at
# once, and only by a stub: nothing else listens there)
DNS_SCRIPT = ("; python3 -c \"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
              "s.settimeout(5); q = bytes.fromhex('abcd01000001000000000000') + b'\\x08unlisted\\x07invalid"
              "\\x00\\x00\\x01\\x00\\x03'; s.sendto(q, ('127.0.0.1', 53)); "
              "print('dns-rcode=%d' % (s.recv(512)[3] & 15))\"")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def asbx_setup(runtime_paths, engine, *args, check=True):
    return sh([runtime_paths["agentsbx"], "setup", engine, *args], check=check)


def dry_run_changes_nothing(runtime_paths, engine, conf, *args):
    before = read(conf)
    listing = sorted(os.listdir(os.path.dirname(conf)))
    r = asbx_setup(runtime_paths, engine, "--config", conf, "--dry-run", *args)
    assert "agentsbx" in r.stdout and "dry run" in r.stderr, r
    assert read(conf) == before and sorted(os.listdir(os.path.dirname(conf))) == listing


# ---------------------------------------------------------------------------------------------
# Docker: daemon.json, re-read on SIGHUP

class BareDocker(Docker):
    """the private dockerd of test_docker.py, with only the control runtime declared"""

    def config(self, live_restore=False):
        c = super().config(live_restore)
        c["runtimes"] = {"runcref": c["runtimes"]["runcref"]}
        return c


def docker_runtimes(dk):
    import json
    return set(json.loads(dk.cli("info", "--format", "{{json .Runtimes}}").stdout))


@pytest.mark.docker
def test_setup_docker(eng_dir, runtime_paths, rootfs_tar):
    _need("dockerd", "docker.io")
    _need(DOCKER_CLI, "docker.io")
    d = tempfile.mkdtemp(prefix="dks-", dir=eng_dir)
    dk = BareDocker(d, runtime_paths)
    dk.start()
    conf = os.path.join(d, "daemon.json")
    leaks = Leaks([d])
    try:
        dk.cli("import", rootfs_tar, IMAGE)
        before = read(conf)
        dry_run_changes_nothing(runtime_paths, "docker", conf, "--profile", "agent")
        r = asbx_setup(runtime_paths, "docker", "--config", conf, "--profile", "agent")
        assert "systemctl reload docker" in r.stderr, r
        assert read(conf + ".agentsbx-backup") == before
        again = read(conf)
        asbx_setup(runtime_paths, "docker", "--config", conf, "--profile", "agent")
        assert read(conf) == again, "a second setup changed the file"
        os.kill(dk.proc.pid, signal.SIGHUP)
        wait_for(lambda: {"agentsbx", "agentsbx-agent"} <= docker_runtimes(dk), "dockerd to reload its runtimes")
        out = {}
        for rt in ("agentsbx", "agentsbx-agent"):
            cidfile = os.path.join(d, f"cid-{rt}")
            r = dk.cli("run", "--rm", f"--runtime={rt}", "--network", "none", "--cidfile", cidfile, IMAGE,
                       "sh", "-c", SCRIPT)
            with open(cidfile) as f:
                leaks.track(f.read().strip(), *dk.state_roots())
            out[rt] = r.stdout
        assert "etc=writable" in out["agentsbx"], out  # (the engines' own seccomp profiles refuse unshare)
        assert "etc=refused" in out["agentsbx-agent"] and "userns=refused" in out["agentsbx-agent"], out
        asbx_setup(runtime_paths, "docker", "--config", conf, "--undo")
        assert read(conf) == before, "undo did not restore daemon.json byte for byte"
        assert not os.path.exists(conf + ".agentsbx-backup")
        os.kill(dk.proc.pid, signal.SIGHUP)
        wait_for(lambda: "agentsbx" not in docker_runtimes(dk), "dockerd to drop the runtime")
        r = dk.cli("run", "--rm", "--runtime=agentsbx", IMAGE, "true", check=False)
        assert r.returncode != 0 and "agentsbx" in r.stderr, r
        leaks.check()
    finally:
        dk.stop()


# ---------------------------------------------------------------------------------------------
# Podman: containers.conf [engine.runtimes], read at every command

@pytest.mark.podman
def test_setup_podman(eng_dir, runtime_paths, rootfs_tar):
    _need("podman", "podman")
    d = tempfile.mkdtemp(prefix="pms-", dir=eng_dir)
    pm = Podman(d, runtime_paths)
    conf = pm.env["CONTAINERS_CONF"]
    with open(conf) as f:
        text = f.read()
    # the engine without agentsbx: the control runtime only
    text = "\n".join(x for x in text.splitlines() if not x.startswith("agentsbx = ")) + "\n"
    text = text.replace('runtime = "agentsbx"', 'runtime = "runcref"')
    with open(conf, "w") as f:
        f.write(text)
    wdir = os.path.join(d, "wrappers")
    try:
        pm.cli("import", rootfs_tar, IMAGE)
        before = read(conf)
        dry_run_changes_nothing(runtime_paths, "podman", conf, "--profile", "agent", "--wrapper-dir", wdir)
        assert not os.path.exists(wdir)
        r = asbx_setup(runtime_paths, "podman", "--config", conf, "--profile", "agent", "--wrapper-dir", wdir)
        assert "nothing to restart" in r.stderr, r
        wrapper = os.path.join(wdir, "agentsbx-agent")
        assert os.access(wrapper, os.X_OK)
        again = read(conf)
        asbx_setup(runtime_paths, "podman", "--config", conf, "--profile", "agent", "--wrapper-dir", wdir)
        assert read(conf) == again
        out = {rt: pm.cli("run", "--rm", "--runtime", rt, "--network", "none", IMAGE, "sh", "-c", SCRIPT).stdout
               for rt in ("agentsbx", "agentsbx-agent")}
        assert "etc=writable" in out["agentsbx"], out  # (the engines' own seccomp profiles refuse unshare)
        assert "etc=refused" in out["agentsbx-agent"] and "userns=refused" in out["agentsbx-agent"], out
        asbx_setup(runtime_paths, "podman", "--config", conf, "--undo", "--wrapper-dir", wdir)
        assert read(conf) == before, "undo did not restore containers.conf byte for byte"
        assert not os.path.exists(wrapper) and not os.path.exists(conf + ".agentsbx-backup")
        r = pm.cli("run", "--rm", "--runtime", "agentsbx", IMAGE, "true", check=False)
        assert r.returncode != 0, r
    finally:
        pm.cli("rm", "-af", "-t", "0", check=False)
        pm.cli("system", "reset", "-f", check=False)


# ---------------------------------------------------------------------------------------------
# containerd: config.toml's CRI runtime handlers, read at start

@pytest.mark.containerd
def test_setup_containerd(eng_dir, runtime_paths, rootfs_tar):
    _need("containerd", "containerd")
    _need("ctr", "containerd")
    d = tempfile.mkdtemp(prefix="cds-", dir=eng_dir)
    cd = Containerd(d, {"runc": runtime_paths["runc"]}, IMAGE_FULL)
    conf = cd.config
    wdir = os.path.join(d, "wrappers")
    before = read(conf)
    profiles = ["--profile", "agent", "--profile", "locked"]
    dry_run_changes_nothing(runtime_paths, "containerd", conf, *profiles, "--wrapper-dir", wdir)
    r = asbx_setup(runtime_paths, "containerd", "--config", conf, *profiles, "--wrapper-dir", wdir)
    assert "systemctl restart containerd" in r.stderr, r
    again = read(conf)
    asbx_setup(runtime_paths, "containerd", "--config", conf, *profiles, "--wrapper-dir", wdir)
    assert read(conf) == again
    # containerd's own parser reads the handlers as setup meant them
    dump = sh(["containerd", "--config", conf, "config", "dump"]).stdout
    assert 'runtimes.agentsbx.options]' in dump and f'BinaryName = "{runtime_paths["agentsbx"]}"' in dump, dump
    assert f'BinaryName = "{os.path.join(wdir, "agentsbx-agent")}"' in dump, dump
    cd.start()
    try:
        node = shutil.which("node")
        cri_js = os.path.join(HERE, "cri", "cri.js")
        if node and os.path.isdir(os.path.join(HERE, "cri", "node_modules", "@grpc", "grpc-js")):
            _cri_run(cd, cri_js, rootfs_tar)
        else:
            # the handlers are there for CRI; ctr runs the same binaries through the runc v2 shim
            archive = os.path.join(d, "image.oci.tar")
            from conftest import make_oci_archive
            make_oci_archive(rootfs_tar, archive)
            cd.ctr("images", "import", archive)
            for rt, binary in (("agentsbx", runtime_paths["agentsbx"]),
                               ("agentsbx-agent", os.path.join(wdir, "agentsbx-agent"))):
                cid = f"setup-{rt}-{os.getpid()}"
                r = cd.ctr("run", "--rm", "--runtime", "io.containerd.runc.v2", "--runc-binary", binary,
                           IMAGE_FULL, cid, "sh", "-c", SCRIPT)
                want = "etc=refused" if rt == "agentsbx-agent" else "etc=writable"
                assert want in r.stdout, (rt, r.stdout)
    finally:
        from conftest import stop_daemon
        stop_daemon(cd.proc)
    asbx_setup(runtime_paths, "containerd", "--config", conf, "--undo", "--wrapper-dir", wdir)
    assert read(conf) == before, "undo did not restore config.toml byte for byte"
    assert not os.path.exists(os.path.join(wdir, "agentsbx-agent"))
    assert not os.path.exists(os.path.join(wdir, "agentsbx-locked"))


def _cri_run(cd, cri_js, rootfs_tar):
    import json
    from conftest import make_oci_archive
    archive = os.path.join(cd.dir, "image.oci.tar")
    make_oci_archive(rootfs_tar, archive)
    cd.ctr("images", "import", archive, ns="k8s.io")

    def call(method, req):
        return json.loads(sh(["node", cri_js, cd.sock, method, json.dumps(req)]).stdout)
    # `agent` (filtered): the pod's sandbox (pause) container runs under the handler's profile
    # too and owns the pod network namespace's egress (the table, the DNS stub on 127.0.0.1:53);
    # the app container joins that namespace by path and shares it (runtime/egress_share.h).
    # `locked` (none): the same with the table only.
    # Under `agent` the app container also sends one DNS query to 127.0.0.1:53 itself: the pod's
    # egress (the sandbox container's stub) answers REFUSED (rcode 5) and the sandbox container's
    # audit log (default directory, named by the pod sandbox id) holds the decision.
    for handler, want in (("agentsbx", "etc=writable"), ("agentsbx-agent", "etc=refused"),
                          ("agentsbx-locked", "etc=refused")):
        name = f"setup-{handler}-{os.getpid()}"
        pcfg = {"metadata": {"name": name, "uid": name, "namespace": "default", "attempt": 0},
                "linux": {"security_context": {"namespace_options": {"network": "NODE", "pid": "CONTAINER",
                                                                     "ipc": "POD"}}}}
        pod = call("RunPodSandbox", {"config": pcfg, "runtime_handler": handler})["pod_sandbox_id"]
        try:
            # the container's own pid namespace, as kubelet asks without shareProcessNamespace
            # (the agent profile refuses a joined one: vm.memfd_noexec is per pid namespace)
            ccfg = {"metadata": {"name": "w", "attempt": 0}, "image": {"image": IMAGE_FULL},
                    "command": ["sleep", "60"], "log_path": "w.log",
                    "linux": {"security_context": {"namespace_options": {"network": "NODE", "pid": "CONTAINER",
                                                                         "ipc": "POD"}}}}
            c = call("CreateContainer", {"pod_sandbox_id": pod, "config": ccfg,
                                         "sandbox_config": pcfg})["container_id"]
            call("StartContainer", {"container_id": c})
            script = SCRIPT + (DNS_SCRIPT if handler == "agentsbx-agent" else "")
            r = call("ExecSync", {"container_id": c, "cmd": ["sh", "-c", script], "timeout": 30})
            import base64
            out = base64.b64decode(r.get("stdout", "")).decode()
            assert want in out, (handler, r)
            if handler == "agentsbx-agent":
                assert "dns-rcode=5" in out, (handler, out, base64.b64decode(r.get("stderr", "")).decode())
                with open(f"/var/log/agentsbx/{pod}.jsonl") as f:
                    recs = [json.loads(line) for line in f]
                assert [x for x in recs if x["event"] == "dns" and x["host"] == "unlisted.invalid"
                        and x["decision"] == "refused"], recs
            call("StopContainer", {"container_id": c, "timeout": 1})
            call("RemoveContainer", {"container_id": c})
        finally:
            call("StopPodSandbox", {"pod_sandbox_id": pod})
            call("RemovePodSandbox", {"pod_sandbox_id": pod})
