"""`agentsbx sandbox` quick mode (POLICY.md §7; issue 6): the host / read-only as the rootfs
(or --rootfs), the workspace at /workspace as cwd, default profile agent, exit code passed
through, limit kills as timeout(1)-style codes, nothing left behind."""

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from policyutil import SECRET, audit_dir, sandbox_run

pytestmark = pytest.mark.agentsbx_only("agentsbx sandbox")


@pytest.fixture
def ws(rt):
    d = os.path.join(rt.workdir, "ws")
    os.makedirs(d)
    os.chmod(d, 0o777)
    return d


def test_host_root_workspace_write_etc_refused(rt, ws):
    marker = f"/etc/asbx-sandbox-{os.getpid()}"
    r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c",
                f"pwd; echo hi > /workspace/f && echo wrote; echo x > {marker} || echo refused; "
                "echo y > /tmp/t && echo tmp-ok")
    assert r.rc == 0, r
    assert r.out.split() == ["/workspace", "wrote", "refused", "tmp-ok"], r
    with open(os.path.join(ws, "f")) as f:
        assert f.read() == "hi\n"
    assert not os.path.exists(marker)
    assert not os.listdir(os.path.join(rt.root, "sandbox")) if os.path.isdir(
        os.path.join(rt.root, "sandbox")) else True


def test_exit_code_passed_through(rt, ws):
    r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c", "exit 7")
    assert r.rc == 7, r


def test_written_binary_cannot_run(rt, ws):
    r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c",
                "cp /bin/true /workspace/t && /workspace/t && echo ran; cp /bin/true /tmp/t && "
                "/tmp/t && echo ran2; echo done")
    assert r.rc == 0, r
    assert "ran" not in r.out.split() and "ran2" not in r.out.split() and "done" in r.out, r


def test_wall_clock_limit_code(rt, ws):
    pol = {"version": 1, "extends": "agent", "limits": {"wallClockSeconds": 2}}
    t0 = time.monotonic()
    r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sleep", "60", policy=pol)
    assert r.rc == 124, r
    assert time.monotonic() - t0 < 30
    assert "wallclock" in r.err, r


def test_wall_clock_named_after_an_audit_flood(rt, ws):
    """An exec flood past the audit quota writes the quota's own `limit` records (no value); the
    summary still names the limit that stopped the sandbox, not `audit -1 reached` (outside
    tester, 2026-12-01)."""
    pol = {"version": 1, "extends": "agent", "limits": {"wallClockSeconds": 3}}
    r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c",
                "i=0; while [ $i -lt 3000 ]; do /bin/true; i=$((i+1)); done; sleep 60", policy=pol)
    assert r.rc == 124, r
    assert "wallClockSeconds 3 reached" in r.err and "audit -1" not in r.err, r


def test_rootfs_credentials_hidden(rt, ws, busybox_template):
    root = os.path.join(rt.workdir, "sbx-rootfs")
    subprocess.run(["cp", "-a", busybox_template, root], check=True)
    os.makedirs(os.path.join(root, "root", ".ssh"), exist_ok=True)
    os.makedirs(os.path.join(root, "workspace"), exist_ok=True)
    with open(os.path.join(root, "root", ".ssh", "id_rsa"), "w") as f:
        f.write(SECRET)
    r = sandbox_run(rt, "--rootfs", root, "--workspace", ws, "--", "/bin/sh", "-c",
                "cat /root/.ssh/id_rsa; echo rc=$?")
    assert SECRET.strip() not in r.out, r
    assert "rc=0" not in r.out, r
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("review", [False, True])
def test_hidden_dirs_inside_the_rootfs_hidden_at_their_rootfs_path(rt, ws, busybox_template, review):
    """--rootfs R with the workspacesDir at R/wsd and the audit dir at R/aud: the masks looked for
    them at their host paths and aliases only, and another run's review upper and meta.json were
    read and written at /wsd (outside tester, attack 03)."""
    root = os.path.join(rt.workdir, f"sbx-rootfs-{os.urandom(2).hex()}")
    subprocess.run(["cp", "-a", busybox_template, root], check=True)
    os.makedirs(os.path.join(root, "workspace"), exist_ok=True)
    wsd, aud = os.path.join(root, "wsd"), os.path.join(root, "aud")
    os.makedirs(os.path.join(wsd, "victim", "upper"))
    os.makedirs(aud)
    os.chmod(wsd, 0o700)
    with open(os.path.join(wsd, "victim", "upper", "s.txt"), "w") as f:
        f.write("WS-SECRET\n")
    with open(os.path.join(wsd, "victim", "meta.json"), "w") as f:
        f.write("META-SECRET\n")
    with open(os.path.join(aud, "other.jsonl"), "w") as f:
        f.write("AUDIT-SECRET\n")
    cfg = os.path.join(rt.workdir, f"cfg-{os.urandom(2).hex()}.json")
    with open(cfg, "w") as f:
        json.dump({"workspacesDir": wsd}, f)
    try:
        r = sandbox_run(rt, *(["--review"] if review else []), "--rootfs", root, "--workspace", ws, "--",
                        "/bin/sh", "-c",
                        "cat /wsd/victim/upper/s.txt /wsd/victim/meta.json /aud/other.jsonl; ls /wsd /aud; "
                        "echo x >> /wsd/victim/meta.json && echo WROTE-META; echo done",
                        audit=aud, global_args=["--config", cfg])
        assert r.rc == 0 and "done" in r.out, r
        for bad in ("WS-SECRET", "META-SECRET", "AUDIT-SECRET", "victim", "other.jsonl", "WROTE-META"):
            assert bad not in r.out, (bad, r)
        with open(os.path.join(wsd, "victim", "meta.json")) as f:
            assert f.read() == "META-SECRET\n"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_escapes_refused_in_sandbox(rt, ws):
    r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c",
                "unshare -U true && echo userns; unshare -m true && echo mntns; "
                "mount -o remount,rw / && echo remount; ln -s /etc /workspace/e; "
                "echo x > /workspace/e/asbx-evil && echo wrote-etc; echo end")
    assert r.rc == 0, r
    for bad in ("userns", "mntns", "remount", "wrote-etc"):
        assert bad not in r.out.split(), r
    assert not os.path.exists("/etc/asbx-evil")


def host_config(rt, **keys):
    """A host config file (what /etc/agentsbx/config.json holds), passed with --config."""
    p = os.path.join(rt.workdir, f"config-{os.urandom(3).hex()}.json")
    with open(p, "w") as f:
        json.dump(keys, f)
    return p


def read_log(d, cid):
    with open(os.path.join(d, f"{cid}.jsonl")) as f:
        return f.read()


def test_audit_dir_from_host_config(rt, ws):
    """Issue 6: the audit dir is --audit-dir, else the host config's auditDir, else
    /var/log/agentsbx - the same for the monitor that writes the log, the sandbox's closing
    summary that reads it, and `agentsbx audit`."""
    adir = os.path.join(rt.workdir, "cfg-audit")
    cfg = host_config(rt, auditDir=adir)
    cid = f"sbxcfg{os.getpid()}"
    r = rt.cmd("sandbox", "--id", cid, "--workspace", ws, "--", "/bin/sh", "-c", "unshare -U true; exit 3",
               global_args=["--config", cfg])
    assert r.rc == 3, r
    text = read_log(adir, cid)
    recs = [json.loads(line) for line in text.splitlines()]
    assert [x.get("state") for x in recs if x["event"] == "lifecycle"] == ["created", "started", "exited"], recs
    assert not os.path.exists(f"/var/log/agentsbx/{cid}.jsonl")
    # the summary came from that log (the seccomp denial of unshare is reported there)
    assert "agentsbx sandbox: denied syscall" in r.err, r
    a = rt.cmd("audit", "--json", cid, global_args=["--config", cfg])
    assert a.rc == 0 and a.out == text, a
    # the flag wins over the host config, for the writer and the reader alike
    fdir = os.path.join(rt.workdir, "flag-audit")
    r = rt.cmd("sandbox", "--id", cid + "f", "--workspace", ws, "--", "/bin/true",
               global_args=["--config", cfg, "--audit-dir", fdir])
    assert r.rc == 0, r
    assert read_log(fdir, cid + "f") and not os.path.exists(os.path.join(adir, f"{cid}f.jsonl"))
    a = rt.cmd("audit", cid + "f", global_args=["--config", cfg])
    assert a.rc != 0 and "no audit log" in a.err and adir in a.err, a
    a = rt.cmd("audit", cid + "f", global_args=["--config", cfg, "--audit-dir", fdir])
    assert a.rc == 0 and "lifecycle exited" in a.out, a


def test_audit_with_a_bad_host_config_fails_clearly(rt):
    """`audit` reads the host config as create does: an invalid one is an error naming the file,
    never a silent fall back to the default directory."""
    cfg = host_config(rt, auditDir="relative/dir")
    a = rt.cmd("audit", "nosuch", global_args=["--config", cfg])
    assert a.rc != 0 and cfg in a.err and "auditDir" in a.err, a


def test_pasta_starts_at_the_first_dns_activity(rt, ws):
    """filtered with only names reachable, in the sandbox's own network namespace: pasta (the way
    out: an interface and a default route) is attached at the DNS stub's first activity, not at
    create, so a command that resolves nothing never has a route. Seen from inside: the
    namespace's routes before and after a lookup (an unlisted name: answered REFUSED, never
    forwarded)."""
    # no `network` audit (not extending agent, whose audit.events are all): with it the table and a
    # route of last resort come at create, so refused attempts are logged (test_monitor_attacks.py)
    pol = {"version": 1, "network": {"mode": "filtered", "allowedDomains": ["sbx.invalid"]},
           "approvals": {"network": "deny"}}
    script = ("echo before; cat /proc/net/route; getent hosts other.invalid; echo rc=$?; echo after; "
              "cat /proc/net/route")
    r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c", script, policy=pol)
    assert r.rc == 0, r
    before, after = r.out.split("after\n")
    routes = lambda text: [ln.split() for ln in text.splitlines() if ln and not ln.startswith(("Iface", "before", "rc="))]
    assert routes(before) == [], r
    assert "rc=2" in before, r  # getent: not found (REFUSED by the stub)
    assert any(x[1] == "00000000" for x in routes(after)), r  # a default route, from pasta


def test_refused_packets_alone_do_not_attach_pasta(rt, ws):
    """agent (filtered, `network` audit: a table and a route of last resort at create): a packet
    the table refuses reaches the monitor's NFLOG watch, and so do the MLD reports the kernel
    sends on its own when the route's veth comes up. Neither needs a way out, so neither may
    attach pasta (an interface and a default route) - before, one did at the end of most short
    sandboxes (~20-70 ms). Seen from inside: the refused UDP packet is on record, and the
    namespace's routes, a second after it, are still only the route of last resort (asbx0)."""
    cid = f"sbxnflog{os.getpid()}"
    script = ("python3 -c \"import socket\n"
              "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
              "try: s.sendto(b'x', ('10.63.0.1', 9))\n"
              "except OSError as e: print('send', e.errno)\""
              "; sleep 1; echo routes; cat /proc/net/route")
    r = sandbox_run(rt, "--id", cid, "--workspace", ws, "--", "/bin/sh", "-c", script)
    assert r.rc == 0, r
    routes = [ln.split() for ln in r.out.split("routes\n", 1)[1].splitlines() if ln and not ln.startswith("Iface")]
    recs = [json.loads(x) for x in read_log(audit_dir(rt), cid).splitlines()]
    refused = [x for x in recs if x["event"] == "network" and x.get("addr") == "10.63.0.1"]
    assert refused and refused[0]["decision"] == "refused", recs  # the watch saw it
    assert routes and {x[0] for x in routes} == {"asbx0"}, r  # no pasta interface, no pasta route


def test_refused_flood_before_the_first_lookup_is_counted(rt, ws):
    """agent: refused packets beyond the log limit's burst are counted by the table's `unlogged`
    counter, read at most once a second. The first DNS query makes the monitor reload the table
    before pasta starts, which resets that counter: what the old table had counted must be read
    first (outside attack 13: of 20,000 refused packets sent right before a lookup, 19,445 were
    neither a record nor in `suppressed.network`). Every refused packet is on record or counted."""
    cid = f"sbxflood{os.getpid()}"
    n = 5000
    script = ("python3 -c \"import socket\n"
              "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
              f"for i in range({n}):\n"
              "    try: s.sendto(b'x', ('10.63.0.1', 9))\n"
              "    except OSError: pass\""
              "; getent hosts other.invalid; sleep 1.5")
    r = sandbox_run(rt, "--id", cid, "--workspace", ws, "--", "/bin/sh", "-c", script)
    assert r.rc == 0, r
    recs = [json.loads(x) for x in read_log(audit_dir(rt), cid).splitlines()]
    logged = sum(1 for x in recs if x["event"] == "network" and x.get("addr") == "10.63.0.1")
    counts = [x["suppressed"] for x in recs if isinstance(x.get("suppressed"), dict)]
    counted = counts[-1].get("network", 0) if counts else 0
    assert logged + counted >= n, (logged, counted)


def _pid_with_token(token, timeout=30):
    deadline = time.monotonic() + timeout
    me = os.readlink("/proc/self/ns/net")
    while time.monotonic() < deadline:
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read()
                if token.encode() in cmd and b"sandbox" not in cmd and os.readlink(f"/proc/{d}/ns/net") != me:
                    return int(d)
            except OSError:
                continue
        time.sleep(0.05)
    raise AssertionError(f"no container process with {token}")


def _nft_tables(pid):
    r = subprocess.run(["nsenter", "-n", "-t", str(pid), "nft", "list", "tables"], capture_output=True, text=True)
    assert r.returncode == 0, r
    return r.stdout


def _wait_file(path, timeout=30):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_nft_table_deferred_until_the_way_out(rt, ws):
    """In the sandbox's own namespace with only names reachable, the table is loaded by the
    monitor right before pasta attaches (nothing can leave a namespace holding only `lo`); seen
    from the host: no table before the first lookup, the table after it. (With hooks in the
    spec, which could wire the namespace, the init loads it at create: test_egress's bundles.)"""
    token = f"asbx-defer-{os.urandom(3).hex()}"
    # no `network` audit (not extending agent, whose audit.events are all): with it the table and a
    # route of last resort come at create, so refused attempts are logged (test_monitor_attacks.py)
    pol = {"version": 1, "network": {"mode": "filtered", "allowedDomains": ["sbx.invalid"], "allowLocalBinding": True},
           "approvals": {"network": "deny"}}
    polfile = os.path.join(rt.workdir, f"defer-{token}.json")
    with open(polfile, "w") as f:
        json.dump(pol, f)
    script = (f": {token}; while [ ! -e /workspace/go ]; do sleep 0.05; done; getent hosts other.invalid; "
              "touch /workspace/resolved; while [ ! -e /workspace/go2 ]; do sleep 0.05; done")
    argv = [rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "--policy", polfile, "sandbox",
            "--workspace", ws]
    p = subprocess.Popen(argv + ["--", "/bin/sh", "-c", script], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = _pid_with_token(token)
        assert "agentsbx" not in _nft_tables(pid)
        open(os.path.join(ws, "go"), "w").close()
        _wait_file(os.path.join(ws, "resolved"))
        assert "table inet agentsbx" in _nft_tables(pid)
        open(os.path.join(ws, "go2"), "w").close()
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, (out, err)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


# ---- stopping: SIGTERM from timeout(1) / systemd / CI ends the sandbox ---------------------------

def test_sigterm_stops_a_shell_init_after_the_stop_timeout(rt, ws):
    """A shell as the pid-namespace init ignores the forwarded SIGTERM: after --stop-timeout the
    cgroup is SIGKILLed and the sandbox exits 143 (128+SIGTERM, as timeout(1) expects)."""
    import signal
    cid = f"sbx-stop-{os.getpid()}"
    argv = [rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "sandbox", "--id", cid,
            "--workspace", ws, "--stop-timeout", "1", "--",
            "/bin/sh", "-c", "echo up > /workspace/up; while :; do sleep 0.1; done"]
    err_path = os.path.join(rt.workdir, "stop.err")
    with open(err_path, "wb") as err:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        _wait_file(os.path.join(ws, "up"))
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=1 + 5)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert time.monotonic() - t0 < 1 + 5
    with open(err_path) as f:
        err_text = f.read()
    assert rc == 143, err_text
    assert "stopped by signal 15" in err_text, err_text
    assert "stopped by the policy" not in err_text, err_text
    recs = [json.loads(line) for line in read_log(audit_dir(rt), cid).splitlines()]
    stopped = [r for r in recs if r.get("event") == "lifecycle" and r.get("state") == "stopped"]
    assert stopped and stopped[-1]["exitReason"] == "signal" and stopped[-1]["signal"] == 15, recs
    assert stopped[-1]["forcedKill"] is True, recs
    # nothing left: no state dir, no bundle, no cgroup
    assert not os.path.exists(os.path.join(rt.root, cid))
    sb = os.path.join(rt.root, "sandbox")
    assert not os.path.isdir(sb) or not os.listdir(sb)
    r = rt.cmd("state", cid)
    assert r.rc != 0


def test_sigterm_handled_by_the_command_passes_its_status(rt, ws):
    """A command that handles SIGTERM ends on its own within the timeout: its status is kept."""
    import signal
    cid = f"sbx-stop2-{os.getpid()}"
    argv = [rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "sandbox", "--id", cid,
            "--workspace", ws, "--stop-timeout", "20", "--",
            "/bin/sh", "-c", "trap 'exit 3' TERM; echo up > /workspace/up; while :; do sleep 0.1; done"]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        _wait_file(os.path.join(ws, "up"))
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=15)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == 3
    assert time.monotonic() - t0 < 10


def test_sigterm_right_after_the_command_starts_is_forwarded(rt, ws):
    """A SIGTERM sent the moment the command has visibly started (its first write) is forwarded,
    never the default action on the sandbox process: that left the container running, its state
    and cgroup behind (2 of 15 tries on 59ee469, the `sbx-stop` flake)."""
    import signal
    for i in range(10):
        cid = f"sbx-early-{os.getpid()}-{i}"
        up = os.path.join(ws, f"up{i}")
        argv = [rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "sandbox", "--id", cid,
                "--workspace", ws, "--stop-timeout", "1", "--",
                "/bin/sh", "-c", f"echo up > /workspace/up{i}; while :; do sleep 0.1; done"]
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not os.path.exists(up):  # no sleep: the gap after `start` is short
                assert time.monotonic() < deadline, "the command never started"
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            left = os.path.exists(os.path.join(rt.root, cid))
            if left:
                rt.cmd("delete", "--force", cid)
        assert rc == 143 and not left, (i, rc, left)


def test_stop_timeout_must_be_seconds(rt, ws):
    r = sandbox_run(rt, "--workspace", ws, "--stop-timeout", "soon", "--", "/bin/true")
    assert r.rc != 0 and "--stop-timeout" in r.err, r


# ---- the workspace guard: the one read-write host directory must not be the host ----------------

@pytest.mark.parametrize("path,why", [
    ("/", "root directory"),
    ("/proc", "kernel or device"),
    ("/proc/sys/kernel", "kernel or device"),
    ("/sys", "kernel or device"),
    ("/dev", "kernel or device"),
    ("/etc", "system directory"),
    ("/usr", "system directory"),
    ("/var", "system directory"),
    ("/boot", "system directory"),
    ("/home", "home"),
    ("/root", "home directory"),
])
def test_dangerous_workspace_refused(rt, path, why):
    if not os.path.isdir(path):
        pytest.skip(f"{path} does not exist here")
    r = sandbox_run(rt, "--workspace", path, "--", "/bin/true")
    assert r.rc != 0, r
    assert f"refusing workspace `{path}`" in r.err and why in r.err, r


@pytest.mark.parametrize("parent", ["/usr/local/src", "/usr/lib", "/usr/src"])
def test_workspace_below_an_exec_directory_refused(rt, parent):
    """A workspace under /usr is also visible at its host path, which allowExec lets run: a
    binary the agent wrote in /workspace ran through that alias (outside tester). Judged from the
    host: nothing was created by the refused sandbox (the marker the command would write)."""
    d = os.path.join(parent, f"asbx-ws-{os.getpid()}-{os.urandom(2).hex()}")
    os.makedirs(d)
    try:
        r = sandbox_run(rt, "--workspace", d, "--", "/bin/sh", "-c", "touch /workspace/ran")
        assert r.rc != 0, r
        assert f"refusing workspace `{d}`" in r.err and "execute" in r.err, r
        assert not os.path.exists(os.path.join(d, "ran"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("rel", ["usr/src/app", "", "lib64/x"])
def test_rootfs_workspace_at_an_exec_path_refused(rt, rel):
    """--rootfs R --workspace R/usr/src/app (an image's project dir): the workspace is also the
    rootfs's /usr/src/app, which allowExec lets run (second outside tester); R itself holds /usr."""
    root = os.path.join(rt.workdir, f"rfs-{os.urandom(2).hex()}")
    ws = os.path.join(root, rel) if rel else root
    os.makedirs(os.path.join(root, "usr", "bin"), exist_ok=True)
    os.makedirs(ws, exist_ok=True)
    r = sandbox_run(rt, "--rootfs", root, "--workspace", ws, "--", "/bin/true")
    assert r.rc != 0, r
    assert f"refusing workspace `{ws}`" in r.err and "execute" in r.err, r


def test_symlink_to_a_dangerous_workspace_refused(rt):
    link = os.path.join(rt.workdir, "etc-link")
    os.symlink("/etc", link)
    r = sandbox_run(rt, "--workspace", link, "--", "/bin/true")
    assert r.rc != 0 and "refusing workspace `/etc`" in r.err, r


def test_home_directories_refused_but_projects_in_them_allowed(rt):
    name = f"asbx-ws-{os.getpid()}"
    home = os.path.join("/home", name)
    os.makedirs(os.path.join(home, "project"))
    try:
        r = sandbox_run(rt, "--workspace", home, "--", "/bin/true")
        assert r.rc != 0 and "home directory" in r.err and home in r.err, r
        r = sandbox_run(rt, "--workspace", os.path.join(home, "project"), "--", "/bin/true")
        assert r.rc == 0, r
    finally:
        shutil.rmtree(home)


def test_current_directory_that_is_home_refused(rt, ws):
    """The default workspace (the current directory) is checked too, and $HOME counts."""
    env = dict(os.environ, HOME=ws)
    r = rt.cmd("sandbox", "--", "/bin/true", global_args=["--audit-dir", audit_dir(rt)], cwd=ws, env=env)
    assert r.rc != 0 and "$HOME" in r.err and "current directory" in r.err, r
    r = rt.cmd("sandbox", "--", "/bin/true", global_args=["--audit-dir", audit_dir(rt)], cwd="/")
    assert r.rc != 0 and "refusing workspace `/`" in r.err, r


def test_workspace_not_a_directory(rt, ws):
    f = os.path.join(ws, "file")
    open(f, "w").close()
    r = sandbox_run(rt, "--workspace", f, "--", "/bin/true")
    assert r.rc != 0 and "expected a directory" in r.err, r


def test_demo_workspace_allowed(rt):
    """The demo's workspace under /srv stays allowed (only /srv itself is refused)."""
    d = "/srv/agentsbx-demo/workspace"
    made = [p for p in ("/srv/agentsbx-demo", d) if not os.path.exists(p)]
    os.makedirs(d, exist_ok=True)
    try:
        r = sandbox_run(rt, "--workspace", d, "--", "/bin/sh", "-c", "pwd")
        assert r.rc == 0 and r.out.strip() == "/workspace", r
    finally:
        for p in reversed(made):
            os.rmdir(p)


# ---- workspaces that hold what the policy masks elsewhere (outside tester, attack 15) -----------

def _refused_and_not_run(rt, ws, why, global_args=None, root=True):
    """The sandbox refuses ws naming why, and the command never ran: the marker it would write
    through /workspace is not on the host."""
    marker = f"asbx-ran-{os.getpid()}-{os.urandom(3).hex()}"
    g = global_args if global_args is not None else ["--audit-dir", audit_dir(rt)]
    try:
        r = rt.cmd("sandbox", "--workspace", ws, "--", "/bin/sh", "-c", f"echo x > /workspace/{marker}",
                   global_args=g, root=root)
        assert r.rc != 0, r
        assert f"refusing workspace `{ws}`" in r.err and why in r.err, r
        assert not os.path.exists(os.path.join(ws, marker))
    finally:
        if os.path.exists(os.path.join(ws, marker)):
            os.unlink(os.path.join(ws, marker))


@pytest.mark.parametrize("path,why", [
    ("/etc/ssh", "lies in `/etc`"),
    ("/etc/default", "lies in `/etc`"),
    ("/var/log", "lies in `/var/log`"),
    ("/var/lib", "lies in `/var/lib`"),
    ("/var/lib/dpkg", "lies in `/var/lib`"),
    ("/var/spool", "lies in `/var/spool`"),
    ("/var/mail", "lies in `/var/mail`"),
    ("/run/lock", "lies in `/run`"),
])
def test_workspace_below_a_refused_system_dir_refused(rt, path, why):
    """--workspace /var/log was accepted although /var was refused: the audit dir, masked at
    /var/log/agentsbx, was read and forged at /workspace/agentsbx (outside tester)."""
    if not os.path.isdir(path) or os.path.islink(path):
        pytest.skip(f"{path} is no directory here")
    _refused_and_not_run(rt, path, why)


def test_workspace_holding_the_audit_dir_refused(rt):
    ws = os.path.join(rt.workdir, f"ws-audit-{os.urandom(2).hex()}")
    os.makedirs(os.path.join(ws, "logs"))
    _refused_and_not_run(rt, ws, "the audit directory", global_args=["--audit-dir", os.path.join(ws, "logs")])
    inner = os.path.join(ws, "logs", "proj")
    os.makedirs(inner)
    _refused_and_not_run(rt, inner, "the audit directory", global_args=["--audit-dir", os.path.join(ws, "logs")])


def test_workspace_holding_the_state_root_refused(rt):
    ws = os.path.join(rt.workdir, f"ws-state-{os.urandom(2).hex()}")
    os.makedirs(ws)
    _refused_and_not_run(rt, ws, "the state root", root=False,
                         global_args=["--root", os.path.join(ws, "state"), "--audit-dir", audit_dir(rt)])


@pytest.mark.parametrize("key,why,review", [
    ("workspacesDir", "the review workspaces directory", True),
    ("workspacesDir", "the review workspaces directory", False),
    ("secretsDir", "the secrets directory", False),
])
def test_workspace_holding_the_workspaces_or_secrets_dir_refused(rt, key, why, review):
    """A workspacesDir (or secretsDir) inside the workspace: the agent read and rewrote every review
    workspace's meta.json and upper at /workspace/.wsd, and the host's apply of that workspace then
    wrote where the forged meta.json pointed (outside tester, attack 20)."""
    ws = os.path.join(rt.workdir, f"ws-{key}-{os.urandom(2).hex()}")
    inside = os.path.join(ws, ".wsd")
    os.makedirs(inside)
    with open(os.path.join(inside, "meta.json"), "w") as f:
        f.write("OTHER-WORKSPACE-META\n")
    cfg = os.path.join(rt.workdir, f"cfg-{os.urandom(2).hex()}.json")
    with open(cfg, "w") as f:
        json.dump({key: inside}, f)
    marker = f"asbx-ran-{os.urandom(3).hex()}"
    r = rt.cmd("sandbox", *(["--review"] if review else []), "--workspace", ws, "--", "/bin/sh", "-c",
               f"echo x > /workspace/{marker}; echo forged > /workspace/.wsd/meta.json",
               global_args=["--config", cfg, "--audit-dir", audit_dir(rt)])
    assert r.rc != 0, r
    assert f"refusing workspace `{ws}`" in r.err and why in r.err, r
    assert not os.path.exists(os.path.join(ws, marker))
    with open(os.path.join(inside, "meta.json")) as f:
        assert f.read() == "OTHER-WORKSPACE-META\n"


@pytest.fixture
def passwd_user(rt):
    """A user of the host's /etc/passwd whose home lies in a project dir: <workdir>/proj/users/h."""
    proj = os.path.join(rt.workdir, f"proj-{os.urandom(2).hex()}")
    name = f"asbxh{os.getpid() % 100000}"
    home = os.path.join(proj, "users", name)
    os.makedirs(os.path.dirname(home))
    r = subprocess.run(["useradd", "-d", home, "-m", "-s", "/bin/sh", name], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"useradd failed: {r.stderr.strip()}")
    os.makedirs(os.path.join(home, ".ssh"), exist_ok=True)
    with open(os.path.join(home, ".ssh", "id_rsa"), "w") as f:
        f.write(SECRET)
    try:
        yield proj, home
    finally:
        subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(proj, ignore_errors=True)


def test_workspace_containing_a_passwd_home_refused(rt, passwd_user):
    """A project dir holding a passwd home: ~/.ssh was masked at the home's path only, and read
    and authorized_keys written through /workspace/users/NAME (outside tester)."""
    proj, home = passwd_user
    _refused_and_not_run(rt, proj, f"contains the home directory `{home}`")
    _refused_and_not_run(rt, os.path.join(proj, "users"), f"contains the home directory `{home}`")
    _refused_and_not_run(rt, home, f"is the home directory `{home}`")
    _refused_and_not_run(rt, os.path.join(home, ".ssh"), "dot-directory")


def test_home_dot_directories_refused_but_projects_allowed(rt):
    home = os.path.join("/home", f"asbx-dot-{os.getpid()}")
    for d in (".ssh", ".config/gh", "proj"):
        os.makedirs(os.path.join(home, d))
    try:
        _refused_and_not_run(rt, os.path.join(home, ".ssh"), "dot-directory of the home")
        _refused_and_not_run(rt, os.path.join(home, ".config", "gh"), "dot-directory of the home")
        r = sandbox_run(rt, "--workspace", os.path.join(home, "proj"), "--", "/bin/sh", "-c", "echo ok > /workspace/f")
        assert r.rc == 0, r
        with open(os.path.join(home, "proj", "f")) as f:
            assert f.read() == "ok\n"
    finally:
        shutil.rmtree(home)


@pytest.mark.parametrize("owner", [0, 23456], ids=["root-owned", "user-owned"])
def test_workspace_denyread_not_readable_at_its_host_path(rt, owner):
    """denyRead /workspace/.env, /workspace/secrets: masked at /workspace, but the read-only host
    view showed the workspace at its host path, where the agent read both (outside tester, root-
    and user-owned workspace). Judged by what the agent copies into a file the host reads."""
    home = os.path.join("/home", f"asbx-alias-{os.getpid()}-{owner}")
    ws = os.path.join(home, "proj")
    os.makedirs(os.path.join(ws, "secrets"))
    with open(os.path.join(ws, ".env"), "w") as f:
        f.write(SECRET + "-env\n")
    with open(os.path.join(ws, "secrets", "k"), "w") as f:
        f.write(SECRET + "-dir\n")
    for p in (ws, os.path.join(ws, "secrets"), os.path.join(ws, ".env"), os.path.join(ws, "secrets", "k")):
        os.chown(p, owner, owner)
        os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
    pol = {"version": 1, "extends": "agent",
           "filesystem": {"denyRead": ["/workspace/.env", "/workspace/secrets"]}}
    try:
        r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c",
                    f"cat /workspace/.env /workspace/secrets/k {ws}/.env {ws}/secrets/k > /workspace/out 2>&1; "
                    f"ls -A {ws} > /workspace/ls 2>&1; true", policy=pol)
        assert r.rc == 0, r
        with open(os.path.join(ws, "out")) as f:
            out = f.read()
        assert SECRET not in out, out
        with open(os.path.join(ws, "ls")) as f:
            listing = f.read()
        assert ".env" not in listing and "secrets" not in listing, listing  # the host path shows nothing
    finally:
        shutil.rmtree(home)


def _assert_nothing_copied(r, ws):
    """the command ran, and what it copied from the alias into /workspace/out and /workspace/ls
    (read on the host) holds neither the secret nor the masked name"""
    assert r.rc == 0 and "ok" in r.out, r
    with open(os.path.join(ws, "out")) as f:
        assert SECRET not in f.read()
    with open(os.path.join(ws, "ls")) as f:
        assert ".env" not in f.read()


def test_rootfs_workspace_denyread_not_readable_at_its_rootfs_path(rt, busybox_template):
    """--rootfs R --workspace R/srv/app: the workspace is also the rootfs's /srv/app, where the
    masks of /workspace/.env did not lie. Judged by what the agent copies into a host file."""
    root = os.path.join(rt.workdir, f"rfs-alias-{os.urandom(2).hex()}")
    subprocess.run(["cp", "-a", busybox_template, root], check=True)
    ws = os.path.join(root, "srv", "app")
    os.makedirs(ws)
    with open(os.path.join(ws, ".env"), "w") as f:
        f.write(SECRET + "-env\n")
    pol = {"version": 1, "extends": "agent", "filesystem": {"denyRead": ["/workspace/.env"]}}
    try:
        r = sandbox_run(rt, "--rootfs", root, "--workspace", ws, "--", "/bin/sh", "-c",
                    "cat /workspace/.env /srv/app/.env > /workspace/out 2>&1; ls -A /srv/app > /workspace/ls 2>&1; "
                    "echo ok", policy=pol)
        _assert_nothing_copied(r, ws)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("rel,why", [("", "is or contains"), ("keys/sub", "lies in")], ids=["contains", "inside"])
def test_workspace_holding_a_policy_denied_path_refused(rt, rel, why):
    """A custom denyRead of a host path (/srv/X/keys) is a mask at that path, not at
    /workspace/keys: a workspace holding it (or inside it) is refused, naming the rule."""
    top = os.path.join("/srv", f"asbx-deny-{os.getpid()}-{os.urandom(2).hex()}")
    os.makedirs(os.path.join(top, "keys", "sub"))
    os.makedirs(os.path.join(top, "src"))
    pol = {"version": 1, "extends": "agent", "filesystem": {"denyRead": [os.path.join(top, "keys")]}}
    p = os.path.join(rt.workdir, f"sbx-policy-{os.urandom(3).hex()}.json")
    with open(p, "w") as f:
        json.dump(pol, f)
    try:
        ws = os.path.join(top, rel) if rel else top
        _refused_and_not_run(rt, ws, f"{why} `{top}/keys`",
                             global_args=["--audit-dir", audit_dir(rt), "--policy", p])
        r = sandbox_run(rt, "--workspace", os.path.join(top, "src"), "--", "/bin/true", policy=pol)
        assert r.rc == 0, r
    finally:
        shutil.rmtree(top)


# ---- bind-mount aliases of the workspace (outside tester, 2026-12-01) ------------------------

def _bind(src, dst):
    os.makedirs(dst, exist_ok=True)
    subprocess.run(["mount", "--bind", src, dst], check=True)


def _unbind(dst):
    subprocess.run(["umount", dst], check=False)
    if os.path.isdir(dst):
        os.rmdir(dst)


def test_bind_mount_of_a_home_as_workspace_refused(rt):
    """`mount --bind /home/X /srv/y; --workspace /srv/y` was accepted: the path rules saw /srv/y,
    and the sandbox wrote the home. Judged by the marker the command would write."""
    home = os.path.join("/home", f"asbx-bindhome-{os.getpid()}-{os.urandom(2).hex()}")
    alias = os.path.join("/srv", f"asbx-bindws-{os.getpid()}-{os.urandom(2).hex()}")
    os.makedirs(home)
    try:
        _bind(home, alias)
        _refused_and_not_run(rt, alias, f"is also `{home}` (a bind mount)")
    finally:
        _unbind(alias)
        shutil.rmtree(home)


def test_bind_mount_of_the_host_root_as_workspace_refused(rt):
    alias = os.path.join("/srv", f"asbx-bindroot-{os.getpid()}-{os.urandom(2).hex()}")
    try:
        _bind("/", alias)
        _refused_and_not_run(rt, alias, "is also `/` (a bind mount)")
    finally:
        _unbind(alias)


@pytest.mark.parametrize("part", [False, True], ids=["whole", "subdirectory"])
def test_workspace_bound_elsewhere_hidden_there(rt, part):
    """A host bind of the workspace (or of a directory in it) at /opt/Y showed its denyRead files
    at /opt/Y in the read-only host view. Judged by what the agent copies into a host file."""
    ws = os.path.join("/srv", f"asbx-wsb-{os.getpid()}-{os.urandom(2).hex()}")
    alias = os.path.join("/opt", f"asbx-wsb-{os.getpid()}-{os.urandom(2).hex()}")
    os.makedirs(os.path.join(ws, "sub"))
    for p in (".env", "sub/.env"):
        with open(os.path.join(ws, p), "w") as f:
            f.write(SECRET + "\n")
    pol = {"version": 1, "extends": "agent",
           "filesystem": {"denyRead": ["/workspace/.env", "/workspace/sub/.env"]}}
    try:
        _bind(os.path.join(ws, "sub") if part else ws, alias)
        r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c",
                    f"cat {alias}/.env {alias}/sub/.env > /workspace/out 2>&1; ls -A {alias} > /workspace/ls 2>&1; "
                    "echo ok", policy=pol)
        _assert_nothing_copied(r, ws)
    finally:
        _unbind(alias)
        shutil.rmtree(ws)


# ---- another sandbox's audit log under a non-default --audit-dir (outside tester) -------------

def test_other_sandboxes_audit_dir_hidden_and_refused_as_workspace(rt, ws):
    """Sandbox A logs to --audit-dir /srv/P/audit; sandbox B (default audit dir) read A's log
    through the read-only host view, and a workspace holding it let B rewrite it. Judged by what
    B copies into a host file, and by A's log on the host staying as A wrote it."""
    top = os.path.join("/srv", f"asbx-aud-{os.getpid()}-{os.urandom(2).hex()}")
    adir = os.path.join(top, "audit")
    token = f"asbx-a-token-{os.urandom(4).hex()}"
    os.makedirs(adir)
    try:
        r = rt.cmd("sandbox", "--workspace", ws, "--", "/bin/sh", "-c", f"echo {token}",
                   global_args=["--audit-dir", adir], timeout=60)
        assert r.rc == 0, r
        logs = [os.path.join(adir, f) for f in os.listdir(adir)]
        assert logs and any(token in open(p).read() for p in logs), logs  # A's log holds its command
        r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c",
                    f"cat {adir}/* > /workspace/b-out 2>&1; ls -A {adir} > /workspace/b-ls 2>&1; echo ok")
        assert r.rc == 0 and "ok" in r.out, r
        with open(os.path.join(ws, "b-out")) as f:
            assert token not in f.read()
        with open(os.path.join(ws, "b-ls")) as f:
            assert f.read().strip() == "", "A's audit dir is listed inside B"
        _refused_and_not_run(rt, top, f"`{adir}`, the audit directory of an earlier sandbox")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _stopped(pid, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return True
        time.sleep(0.02)
    return False


def test_workspace_swapped_between_check_and_mount_refused(rt):
    """The workspace was judged by its path, then bound by the same path later: a rename plus a
    symlink in between made /workspace the host's /root (outside tester, 7 of 40). The swap is
    made while create is held (SIGSTOP) after the checks; the decoy must stay untouched."""
    top = os.path.join("/srv", f"asbx-swap-{os.getpid()}-{os.urandom(2).hex()}")
    ws, decoy = os.path.join(top, "proj"), os.path.join(top, "decoy")
    os.makedirs(ws)
    os.makedirs(decoy)
    marker = f"swap-{os.urandom(3).hex()}"
    argv = [rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "sandbox", "--workspace", ws, "--",
            "/bin/sh", "-c", f"echo x > /workspace/{marker}"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, AGENTSBX_TEST_STOP_AT="create:state-dir:stop"))
    try:
        assert _stopped(p.pid), "create did not reach the stop point"
        os.rename(ws, ws + ".orig")
        os.symlink(decoy, ws)
        os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=60)
        assert p.returncode != 0, (out, err)
        assert "is not the checked" in err or "was replaced" in err, err
        assert not os.path.exists(os.path.join(decoy, marker))
        assert not os.path.exists(os.path.join(ws + ".orig", marker))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        shutil.rmtree(top, ignore_errors=True)


def test_home_bound_from_inside_the_workspace_refused(rt):
    """/home/X a bind of /srv/S/X, --workspace /srv/S: the workspace holds X's home (its
    ~/.ssh writable at /workspace/X/.ssh); only mounts at or above the workspace were judged
    (outside tester, 3/3)."""
    store = os.path.join("/srv", f"asbx-store-{os.getpid()}-{os.urandom(2).hex()}")
    home = os.path.join("/home", f"asbx-bob-{os.getpid()}-{os.urandom(2).hex()}")
    os.makedirs(os.path.join(store, "bob", ".ssh"))
    try:
        _bind(os.path.join(store, "bob"), home)
        _refused_and_not_run(rt, store, f"is also `{home}` (a bind mount)")
        assert not os.listdir(os.path.join(store, "bob", ".ssh"))
    finally:
        _unbind(home)
        shutil.rmtree(store, ignore_errors=True)


def test_stale_audit_registry_entry_replaced_by_a_symlink_is_not_hidden(rt, ws):
    """A registered --audit-dir under a world-writable directory was removed, and a link to
    /usr/lib planted at its path: every later sandbox hid /usr/lib and failed to run anything
    (outside tester, 3/3). The stale entry must hide nothing."""
    top = os.path.join("/var/tmp", f"asbx-reg-{os.getpid()}-{os.urandom(2).hex()}")
    adir = os.path.join(top, "audit")
    os.makedirs(adir)
    try:
        r = rt.cmd("sandbox", "--workspace", ws, "--", "/bin/true", global_args=["--audit-dir", adir], timeout=60)
        assert r.rc == 0, r
        shutil.rmtree(adir)
        os.symlink("/usr/lib", adir)
        r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c", "ls /usr/lib | wc -l")
        assert r.rc == 0 and int(r.out.split()[-1]) > 5, r
    finally:
        shutil.rmtree(top, ignore_errors=True)
        if os.path.islink(adir):
            os.unlink(adir)


@pytest.mark.parametrize("shape", ["credential-dir-bound", "home-bound"])
def test_denied_credentials_hidden_at_a_bind_source(rt, ws, shape):
    """~/.aws bound from /srv/S/aws, or a whole home bound from /srv/S/h: masked at the home,
    but the read-only host view showed them at the bind's source (outside tester). Judged by
    what the agent copies into a host file."""
    src = os.path.join("/srv", f"asbx-creds-{os.getpid()}-{os.urandom(2).hex()}")
    home = os.path.join("/home", f"asbx-h-{os.getpid()}-{os.urandom(2).hex()}")
    if shape == "credential-dir-bound":
        store, bind_src, bind_dst = os.path.join(src, "aws"), os.path.join(src, "aws"), os.path.join(home, ".aws")
        secret_rel = "credentials"
    else:
        store, bind_src, bind_dst = os.path.join(src, "h", ".ssh"), os.path.join(src, "h"), home
        secret_rel = "id_rsa"
    os.makedirs(store)
    os.makedirs(bind_dst, exist_ok=True)
    with open(os.path.join(store, secret_rel), "w") as f:
        f.write(SECRET + "\n")
    try:
        _bind(bind_src, bind_dst)
        r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c",
                        f"cat {store}/{secret_rel} > /workspace/out 2>&1; echo ok")
        assert r.rc == 0 and "ok" in r.out, r
        with open(os.path.join(ws, "out")) as f:
            assert SECRET not in f.read()
    finally:
        _unbind(bind_dst)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(src, ignore_errors=True)


def test_audit_dir_hidden_where_a_bind_shows_it(rt, ws):
    """A host bind of /var/log at /srv/Y: the default audit dir was hidden at /var/log/agentsbx
    only, and other sandboxes' logs were read at /srv/Y/agentsbx (outside retest, 3/3)."""
    os.makedirs("/var/log/agentsbx", exist_ok=True)
    probe = os.path.join("/var/log/agentsbx", f"asbx-probe-{os.urandom(3).hex()}.jsonl")
    with open(probe, "w") as f:
        f.write(SECRET + "\n")
    alias = os.path.join("/srv", f"asbx-vl-{os.getpid()}-{os.urandom(2).hex()}")
    try:
        _bind("/var/log", alias)
        r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c",
                        f"cat {alias}/agentsbx/* > /workspace/out 2>&1; echo ok")
        assert r.rc == 0 and "ok" in r.out, r
        with open(os.path.join(ws, "out")) as f:
            assert SECRET not in f.read()
    finally:
        _unbind(alias)
        os.unlink(probe)


def test_user_workspace_its_owner_cannot_reach_refused(rt):
    """A user-owned project under a parent made mode 000: quick mode fell back to no user
    namespace and ran the agent as host root in it (outside retest, deterministic). It must be
    refused, not run as root."""
    top = os.path.join("/srv", f"asbx-noreach-{os.getpid()}-{os.urandom(2).hex()}")
    ws = os.path.join(top, "p", "proj")
    os.makedirs(ws)
    os.chown(ws, 23456, 23456)
    os.chmod(os.path.join(top, "p"), 0)
    marker = f"asbx-ran-{os.urandom(3).hex()}"
    try:
        r = sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c", f"echo x > /workspace/{marker}")
        assert r.rc != 0 and "cannot reach it" in r.err, r
        assert not os.path.exists(os.path.join(ws, marker))
    finally:
        os.chmod(os.path.join(top, "p"), 0o755)
        shutil.rmtree(top, ignore_errors=True)


def test_audit_dir_in_a_parent_others_can_write_refused(rt, ws):
    """A registered --audit-dir whose parent another user could write was renamed by that user
    (`mv aud proj`) onto a later workspace, whose agent read and rewrote the logs (outside
    retest, 4/4). Such a directory is refused at create; a sticky parent (/tmp) is fine."""
    top = os.path.join("/srv", f"asbx-audpar-{os.getpid()}-{os.urandom(2).hex()}")
    os.makedirs(top)
    os.chmod(top, 0o777)
    marker = f"asbx-ran-{os.urandom(3).hex()}"
    try:
        r = rt.cmd("sandbox", "--workspace", ws, "--", "/bin/sh", "-c", f"echo x > /workspace/{marker}",
                   global_args=["--audit-dir", os.path.join(top, "aud")], timeout=60)
        assert r.rc != 0 and f"`{top}` is writable by group or others" in r.err, r
        assert not os.path.exists(os.path.join(ws, marker))
        os.chmod(top, 0o1777)
        r = rt.cmd("sandbox", "--workspace", ws, "--", "/bin/true",
                   global_args=["--audit-dir", os.path.join(top, "aud")], timeout=60)
        assert r.rc == 0, r
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _run_with_host_step(rt, ws, then, host_step):
    """A sandbox that waits for the host: it marks /workspace/ready, the host runs host_step(),
    then the sandbox runs the shell command `then` and exits 0 with "done"."""
    p = subprocess.Popen([rt.binary, "--root", rt.root, "--audit-dir", audit_dir(rt), "sandbox",
                          "--workspace", ws, "--", "/bin/sh", "-c",
                          "touch /workspace/ready; while [ ! -e /workspace/go ]; do sleep 0.05; done; "
                          f"{then}; echo done"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_file(os.path.join(ws, "ready"))
        host_step()
        open(os.path.join(ws, "go"), "w").close()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0 and "done" in out, (out, err)


def test_credential_created_after_start_unreadable_at_a_bind_alias(rt, ws):
    """A home bound at /srv/Y: ~/.netrc created after the sandbox started was unreadable at the
    home (the carve) but read at /srv/Y/.netrc, where Landlock's walk met /srv's full read right
    (outside retest, 4/4). Judged by what the agent copies into a host file."""
    home = os.path.join("/home", f"asbx-late-{os.getpid()}-{os.urandom(2).hex()}")
    alias = os.path.join("/srv", f"asbx-lateal-{os.getpid()}-{os.urandom(2).hex()}")
    os.makedirs(home)
    try:
        _bind(home, alias)
        def create():
            with open(os.path.join(home, ".netrc"), "w") as f:
                f.write(SECRET + "\n")

        _run_with_host_step(rt, ws, f"cat {alias}/.netrc {home}/.netrc > /workspace/out 2>&1", create)
        with open(os.path.join(ws, "out")) as f:
            assert SECRET not in f.read()
    finally:
        _unbind(alias)
        shutil.rmtree(home, ignore_errors=True)


def test_credential_bind_source_replaced_after_start_unreadable(rt, ws):
    """~/.netrc a file bind of /srv/S/netrc: the host rotated the source (write + rename) while
    the sandbox ran, the mask on the old file went with it, and the new one was read at
    /srv/S/netrc (outside retest, 3/3). The carve denies that name too."""
    home = os.path.join("/home", f"asbx-rot-{os.getpid()}-{os.urandom(2).hex()}")
    src = os.path.join("/srv", f"asbx-rotsrc-{os.getpid()}-{os.urandom(2).hex()}")
    os.makedirs(home)
    os.makedirs(src)
    with open(os.path.join(src, "netrc"), "w") as f:
        f.write("old\n")
    open(os.path.join(home, ".netrc"), "w").close()
    try:
        subprocess.run(["mount", "--bind", os.path.join(src, "netrc"), os.path.join(home, ".netrc")], check=True)
        def rotate():
            with open(os.path.join(src, "netrc.new"), "w") as f:
                f.write(SECRET + "\n")
            os.rename(os.path.join(src, "netrc.new"), os.path.join(src, "netrc"))

        _run_with_host_step(rt, ws, f"cat {src}/netrc > /workspace/out 2>&1", rotate)
        with open(os.path.join(ws, "out")) as f:
            assert SECRET not in f.read()
    finally:
        subprocess.run(["umount", os.path.join(home, ".netrc")], check=False)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(src, ignore_errors=True)


def test_audit_prints_no_terminal_controls(rt, ws):
    """`agentsbx audit` prints the agent's values (an exec's argv) with every control escaped,
    quoted or not: an argv without spaces carrying an OSC title, a BEL, a clear screen and a C1
    CSI reached the reader's terminal raw (outside retest)."""
    adir = os.path.join(rt.workdir, "ctl-audit")
    cid = f"sbxctl{os.getpid()}"
    r = rt.cmd("sandbox", "--id", cid, "--workspace", ws, "--", "/bin/sh", "-c",
               "/bin/true \"$(printf '\\033]0;OWNED\\007\\033[2J\\302\\2332J')\"",
               global_args=["--audit-dir", adir])
    assert r.rc == 0, r
    assert "OWNED" in read_log(adir, cid)  # the exec record is there
    a = subprocess.run([rt.binary, "--audit-dir", adir, "audit", cid], capture_output=True)
    assert a.returncode == 0, a
    assert b"OWNED" in a.stdout, a.stdout
    for bad in (b"\x1b", b"\x07", b"\xc2\x9b"):
        assert bad not in a.stdout, a.stdout
