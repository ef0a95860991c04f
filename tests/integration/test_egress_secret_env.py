"""Secrets from the runtime's environment (issue 19, Docker/CRI; docs/policy.md "Credentials and
HTTP rules", runtime/secret_env.h): `${secret:NAME}` with no file NAME in secretsDir is the
variable AGENTSBX_SECRET_NAME of the runtime's environment, as an engine passes it to every
`create`/`start`/`exec` it runs.

(a) create/start with the variable and NO secrets directory at all: the fake HTTPS API of the
    egress lab sees the injected header. Between create and start the container's pid 1 is the
    runtime's own init, waiting, forked from the runtime: its /proc/1/environ is the runtime's
    environment block, and its memory the runtime's. `exec` is refused in a created container,
    but another container that shares the pid namespace (a Kubernetes pod's sidecar with
    shareProcessNamespace) sees that init: such a container, with every capability, probes it;
    so does `exec` (run with the variable too, as an engine does) and the container's own process
    after start. A createRuntime hook (the runtime's environment) does not get it either. Each
    searches every /proc/*/environ, the memory of every process it can read
    (/proc/PID/mem) and every readable file: no secret; nor in the audit log or the state
    directory.
(b) refusals: a name that is both a file and a variable; a name that is in neither.
"""
import hashlib
import json
import os
import re
import uuid

import pytest

from conftest import assert_refused
from test_egress import HOSTUP4, UP4B, ebundle, lab, sh, usr_template  # noqa: F401 (fixtures)
from test_egress_credentials import (CURL, ZONE, cbundle, header, lab_env, policy,  # noqa: F401 (fixtures)
                                     secret_probe, upstream_certs)

pytestmark = [pytest.mark.agentsbx_only("secrets from the runtime's environment (issue 19)")]

NAME = "gh"


def new_value():
    return "ghp_env" + uuid.uuid4().hex + uuid.uuid4().hex[:6]


def probe_args(value):
    return [value[:8], hashlib.sha256(value.encode()).hexdigest(), len(value)]


def host_config(tmp_path, secrets_dir, ca_file=None):
    cfg = {"secretsDir": str(secrets_dir)}
    if ca_file:
        cfg["upstreamCaFile"] = str(ca_file)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


def gargs(tmp_path, config, pol):
    p = tmp_path / "policy.json"
    p.write_text(json.dumps(pol))
    return ["--config", str(config), "--policy", str(p), "--audit-dir", str(tmp_path / "audit")]


def env_with(value, **extra):
    return dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4, **{"AGENTSBX_SECRET_" + NAME: value}, **extra)


def gh_policy():
    return policy(hosts=("api.test",), credentials=[
        {"host": "api.test", "header": "Authorization", "value": "Bearer ${secret:" + NAME + "}"}])


def last_json(text):
    return json.loads(text.strip().splitlines()[-1])


def files_holding(top, value):
    hits = []
    for d, _, files in os.walk(top):
        for f in files:
            p = os.path.join(d, f)
            try:
                with open(p, "rb") as fh:
                    if value.encode() in fh.read():
                        hits.append(p)
            except OSError:
                pass
    return hits


ALL_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
            "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
            "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
            "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
            "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
            "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
            "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
            "CAP_CHECKPOINT_RESTORE"]


def held_caps():
    """ALL_CAPS (in number order) that this test process's bounding set has (a CI container may
    lack some)."""
    bnd = int(re.search(r"^CapBnd:\s*([0-9a-f]+)$", open("/proc/self/status").read(), re.M).group(1), 16)
    return [c for i, c in enumerate(ALL_CAPS) if bnd >> i & 1]


def sidecar_probe(rt, make_bundle, usr_template, init_pid, value):
    """A plain OCI container in the pid namespace of the container whose init is init_pid, with
    every capability (CAP_SYS_PTRACE included), running the probe: its report."""
    a = make_bundle(rootfs_template=usr_template)
    a.add_mount("/usr", "bind", "/usr", ["rbind", "ro", "nosuid", "nodev"])
    a.set_namespace("pid", f"/proc/{init_pid}/ns/pid")
    a.process["capabilities"] = {k: held_caps() for k in ("bounding", "effective", "permitted")}
    secret_probe(rt, a, probe_args(value), None)
    r, _ = rt.run(a)
    assert r.ok, r
    return last_json(r.out)


def test_env_secret_injected_and_never_inside(rt, cbundle, lab, tmp_path, upstream_certs, make_bundle,
                                              usr_template):
    lab.zone(ZONE)
    value = new_value()
    config = host_config(tmp_path, tmp_path / "no-such-secrets-dir", ca_file=upstream_certs / "ca.pem")
    b = secret_probe(rt, cbundle, probe_args(value), None)
    probe = " ".join(["/usr/bin/python3", "/egress/secret_probe.py", *[str(a) for a in probe_args(value)], "/usr"])
    b.args("/bin/sh", "-c", f"{CURL} -sS https://api.test/v1/user; echo; {probe}")
    # a hook without `env` gets the runtime's environment (runc's rule): the variable is gone
    hook_env = tmp_path / "hook.env"
    b.hook("createRuntime", "/bin/sh", ["sh", "-c", f"cat /proc/$$/environ > {hook_env}; env >> {hook_env}"])
    env = env_with(value)
    r, cid = rt.create(b, global_args=gargs(tmp_path, config, gh_policy()), env=env)
    assert r.ok, r
    try:
        # between create and start: pid 1 is the runtime's own init, waiting in the container
        before = sidecar_probe(rt, make_bundle, usr_template, rt.state(cid).json()["pid"], value)
        r = rt.start(cid)
        assert r.ok, r
        r = rt.cmd("exec", cid, "/usr/bin/python3", "/egress/secret_probe.py", *probe_args(value), "/usr", env=env)
        assert r.ok or "not running" in r.err, r   # the container's process may have ended already
        execd = [last_json(r.out)] if r.ok else []
        rt.wait_status(cid, "stopped")
    finally:
        rt.kill(cid, "KILL")
        rt.delete(cid, force=True)
    out = open(b.stdout_path).read()
    assert "ok GET /v1/user" in out, out
    after = last_json(out)
    api = [json.loads(line) for line in lab.log("https.log")]
    assert len(api) == 1 and header(api[0], "Authorization") == [f"Bearer {value}"], api
    # the sidecar could read the waiting init's environment block and memory: the test can see a
    # secret there (the runtime's environ, had it kept the variable), and saw none
    assert 1 in before["env_pids"] and 1 in before["mem_pids"], before
    for rep in (before, after, *execd):
        assert rep["env_hits"] == [] and rep["mem_hits"] == [] and rep["file_hits"] == [], rep
        assert rep["files"] > 5 and rep["readable_regions"] > 10, rep
    assert value not in out
    audit = (tmp_path / "audit" / f"{cid}.jsonl").read_text()
    assert value not in audit and '"http"' in audit
    assert files_holding(rt.root, value) == []
    hook_text = hook_env.read_text()
    assert "AGENTSBX_UPSTREAM_DNS" in hook_text and "AGENTSBX_SECRET" not in hook_text and value not in hook_text


def test_env_secret_probe_control(rt, cbundle, lab, tmp_path, make_bundle, usr_template):
    """The control of the test above: a waiting init whose environment block holds the value
    (here the runtime's environment: a variable the runtime does not take) is found by the same
    sidecar probe through /proc/1/environ and /proc/1/mem."""
    value = new_value()
    b = secret_probe(rt, cbundle, probe_args(value), None)
    b.args("/bin/true")
    r, cid = rt.create(b, env=dict(os.environ, PLANTED=value))
    assert r.ok, r
    try:
        rep = sidecar_probe(rt, make_bundle, usr_template, rt.state(cid).json()["pid"], value)
    finally:
        rt.kill(cid, "KILL")
        rt.wait_status(cid, "stopped")
        rt.delete(cid, force=True)
    assert 1 in rep["env_hits"] and any(h.startswith("1:") for h in rep["mem_hits"]), rep


def test_env_secret_and_file_of_the_same_name_refused(rt, bundle, tmp_path):
    d = tmp_path / "secrets"
    d.mkdir(mode=0o700)
    (d / NAME).write_text("file-value\n")
    os.chmod(d / NAME, 0o600)
    value = new_value()
    r, cid = rt.run(bundle, global_args=gargs(tmp_path, host_config(tmp_path, d), gh_policy()), env=env_with(value))
    assert_refused(rt, r, 'secret "gh"', str(d), "AGENTSBX_SECRET_gh", "both", "network.credentials[0]")
    assert value not in r.out + r.err
    assert rt.cmd("state", cid).rc != 0


def test_secret_in_neither_place_refused(rt, bundle, tmp_path):
    d = tmp_path / "secrets"
    d.mkdir(mode=0o700)
    pol = policy(credentials=[{"host": "api.test", "header": "X-Key", "value": "${secret:other}"}])
    r, cid = rt.run(bundle, global_args=gargs(tmp_path, host_config(tmp_path, tmp_path / "absent"), pol),
                    env=env_with(new_value()))
    assert_refused(rt, r, 'secret "other"', "AGENTSBX_SECRET_other", "network.credentials[0]")
    assert rt.cmd("state", cid).rc != 0


def test_policy_explain_names_both_sources_of_each_secret(rt, tmp_path):
    """`policy explain` says where the egress takes each ${secret:NAME} from: the file NAME of
    the secrets directory, else the runtime's AGENTSBX_SECRET_NAME (it listed only the directory)."""
    d = tmp_path / "secrets"
    d.mkdir(mode=0o700)
    pol = policy(credentials=[{"host": "api.test", "header": "Authorization", "value": "Bearer ${secret:" + NAME + "}"},
                              {"host": "api.test", "header": "X-Key", "value": "${secret:other}"}])
    p = tmp_path / "policy.json"
    p.write_text(json.dumps(pol))
    r = rt.cmd("--config", host_config(tmp_path, d), "policy", "explain", "--policy", p, root=False)
    assert r.rc == 0, r.err
    for name in (NAME, "other"):
        assert f"secret {name}: the file {d}/{name}, else the runtime's environment variable AGENTSBX_SECRET_{name}" \
            in r.out, r.out
