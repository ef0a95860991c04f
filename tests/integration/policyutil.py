"""Shared helpers for the agent-policy integration tests (test_policy_*.py, test_sandbox.py).

A policy bundle is a busybox bundle with the probe also at /usr/bin/probe (the `agent` profile
only executes from system paths), a /workspace directory, and planted secrets at the profile's
credential paths. Every run gets a private --audit-dir so tests read the audit log the monitor
wrote, and state/exitReason from `state`.
"""

import json
import os
import shutil
import subprocess
import time

PROBE = "/usr/bin/probe"
SECRET = "TOPSECRET\n"


def json_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def last_json(r):
    js = json_lines(r.out)
    assert js, f"no JSON from the probe: {r}"
    return js[-1]


def policy_bundle(make_bundle, args=(PROBE, "report")):
    b = make_bundle(args=list(args))
    root = b.rootfs
    shutil.copy2(os.path.join(root, "probe"), os.path.join(root, "usr", "bin", "probe"))
    for d in ("workspace", "root/.ssh", "home/user/.aws"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "workspace"), 0o777)
    for f in ("root/.ssh/id_rsa", "home/user/.aws/credentials", "etc/shadow"):
        with open(os.path.join(root, f), "w") as fh:
            fh.write(SECRET)
    return b


def audit_dir(rt):
    d = os.path.join(rt.workdir, "audit")
    os.makedirs(d, exist_ok=True)
    return d


def sandbox_run(rt, *args, policy=None, audit=None, global_args=(), timeout=60, **kw):
    """`agentsbx sandbox ARGS...` (ARGS: the verb's own, e.g. --id, --workspace, --, the command)
    with the global flags the tests give it: --audit-dir `audit` (default audit_dir(rt)), then
    --policy when `policy` is given (a document: written to a file in rt.workdir; a path: used as
    it is), then `global_args`. Other keywords go to rt.cmd. Returns rt.cmd's result."""
    g = ["--audit-dir", str(audit) if audit is not None else audit_dir(rt)]
    if policy is not None:
        if isinstance(policy, (dict, list)):
            path = os.path.join(rt.workdir, f"sbx-policy-{os.urandom(3).hex()}.json")
            with open(path, "w") as f:
                json.dump(policy, f)
            policy = path
        g += ["--policy", str(policy)]
    return rt.cmd("sandbox", *args, global_args=[*g, *global_args], timeout=timeout, **kw)


def gflags(rt, profile=None, policy=None, config=None):
    g = ["--audit-dir", audit_dir(rt)]
    if profile:
        g += ["--profile", profile]
    if policy is not None:
        p = os.path.join(rt.workdir, f"policy-{os.urandom(4).hex()}.json")
        with open(p, "w") as f:
            json.dump(policy, f) if not isinstance(policy, str) else f.write(policy)
        g += ["--policy", p]
    if config is not None:
        p = os.path.join(rt.workdir, f"config-{os.urandom(4).hex()}.json")
        with open(p, "w") as f:
            json.dump(config, f)
        g += ["--config", p]
    return g


def prun(rt, bundle, args=None, profile="agent", policy=None, config=None, timeout=60):
    """`run` in the foreground under the given ceiling; returns (Result, cid)."""
    if args is not None:
        bundle.args(*args)
    bundle.save()
    cid = rt.new_id()
    rt.created.append(cid)
    r = rt.cmd("run", "--bundle", bundle.path, cid, timeout=timeout,
               global_args=gflags(rt, profile, policy, config))
    return r, cid


def pcreate(rt, bundle, args=None, profile="agent", policy=None, config=None):
    """`create` (detached) under the given ceiling; returns (Result, cid)."""
    if args is not None:
        bundle.args(*args)
    bundle.save()
    cid = rt.new_id()
    rt.created.append(cid)
    r = rt.cmd("create", "--bundle", bundle.path, cid, stdout_path=bundle.stdout_path,
               global_args=gflags(rt, profile, policy, config))
    return r, cid


def audit_records(rt, cid):
    p = os.path.join(audit_dir(rt), f"{cid}.jsonl")
    if not os.path.exists(p):
        return []
    with open(p, "rb") as f:
        data = f.read()
    assert data == b"" or data.endswith(b"\n"), "audit log does not end with a whole line"
    return [json.loads(x) for x in data.decode().splitlines()]


def exited_record(rt, cid):
    recs = [r for r in audit_records(rt, cid)
            if r["event"] == "lifecycle" and r.get("state") == "exited"]
    return recs[-1] if recs else None


def wait_for(pred, timeout=30.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def state_reason(rt, cid):
    r = rt.state(cid)
    assert r.ok, r
    st = r.json()
    return st["status"], (st.get("annotations") or {}).get("io.agentsbx.exitReason")


def host_run(*argv, **kw):
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, **kw)


def script(steps):
    """A busybox sh script running each step (an argv list, or a raw shell string) and printing
    a marker with its exit status; parse with `steps_out`."""
    import shlex
    lines = []
    for s in steps:
        cmd = s if isinstance(s, str) else " ".join(shlex.quote(str(a)) for a in s)
        lines.append(f"{cmd}; echo \"@@rc=$?\"")
    return ["/bin/sh", "-c", "\n".join(lines)]


def steps_out(r, n):
    """-> list of (rc, last JSON object or None) per step."""
    out, cur = [], []
    for line in r.out.splitlines():
        if line.startswith("@@rc="):
            js = json_lines("\n".join(cur))
            out.append((int(line[5:]), js[-1] if js else None))
            cur = []
        else:
            cur.append(line)
    assert len(out) == n, f"expected {n} steps, got {len(out)}: {r}"
    return out
