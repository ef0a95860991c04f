"""`agentsbx sandbox` run by an ordinary user under network.mode filtered (issue 17, networking;
docs/security.md "When the caller is not root").

The user is the throw-away one of test_rootless_sandbox.py (setpriv, no capability, no setuid
helper); the network is test_egress.py's lab: an "upstream" namespace holding the fake DNS and
HTTP servers, reached from the host only over the test's veth pair, no default route, ip_forward
off. The sandbox's network namespace belongs to its user namespace; the init (or, when it defers
it, the monitor's helper) loads the nftables table there, the monitor's helpers make the DNS stub's
and the relay's sockets there, and pasta runs as the user. What is judged
is what the fake upstream logged (a request that reached it, or none), what the command inside
saw, and the user's audit log. On main every case fails: filtered is refused up front for a
non-root caller."""

import json
import os
import shutil
import stat
import time
import uuid

import pytest

from test_egress import HOSTUP4, UP4, UP6, Approver, lab  # noqa: F401
from test_rootless_sandbox import as_user, binary, no_user_processes, policy_file, tun, user  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
ZONE = {"sbx.test": {"A": [HOSTUP4], "ttl": 60}, "other.test": {"A": [HOSTUP4]}}
POLICY = {"version": 1, "extends": "agent",
          "network": {"mode": "filtered", "allowedDomains": ["sbx.test"], "ports": [80]},
          "approvals": {"network": "deny"}, "degrade": ["cgroup"]}

pytestmark = [pytest.mark.agentsbx_only("agent policy network modes")]


@pytest.fixture(scope="module", autouse=True)
def pasta():
    if shutil.which("pasta") is None:
        pytest.skip("pasta not installed (Debian package passt)")
    if not os.path.exists("/dev/net/tun"):
        pytest.skip("no /dev/net/tun on this host (pasta's tap device)")


@pytest.fixture
def ws(user):
    d = os.path.join(user.pw_dir, f"net-{uuid.uuid4().hex[:6]}")
    os.mkdir(d, 0o755)
    shutil.copy2(os.path.join(HERE, "egress", "client.py"), os.path.join(d, "client.py"))
    for p in (d, os.path.join(d, "client.py")):
        os.chown(p, user.pw_uid, user.pw_gid)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(user, binary, ws, actions, policy=POLICY, decide=None):
    """client.py's results, the run and the audit records of one sandbox run as the user; with
    decide, an Approver answers on the sandbox's approvals.sock (the user's fallback state root:
    no XDG_RUNTIME_DIR) and is returned fourth."""
    sid = f"rlnet-{uuid.uuid4().hex[:8]}"
    ap = None
    if decide:
        ap = Approver(type("Root", (), {"root": f"/tmp/agentsbx-{user.pw_uid}"}), sid, decide)
        ap.start()
    a = [binary, "sandbox", "--workspace", ws, "--id", sid, "--policy", policy_file(user, policy), "--",
         "/usr/bin/python3", "/workspace/client.py", json.dumps(actions)]
    try:
        r = as_user(user, a, env={"AGENTSBX_UPSTREAM_DNS": HOSTUP4}, cwd=ws)
    finally:
        if ap:
            ap.stop.set()
            ap.join(10)
    log = os.path.join(user.pw_dir, ".local", "state", "agentsbx", f"{sid}.jsonl")
    recs = [json.loads(x) for x in open(log)] if os.path.exists(log) else []
    assert not no_user_processes(user.pw_uid), "the user's sandbox processes (or pasta) outlived the run"
    assert r.rc == 0, r
    res = json.loads(r.out.strip().splitlines()[-1])
    return (res, r, recs, ap) if decide else (res, r, recs)


def test_allowed_domain_fetched_from_the_upstream(user, binary, ws, lab):
    """The allowed name resolves through the stub (the upstream logs the query) and its HTTP
    request reaches the fake upstream (its log holds the Host) through pasta run as the user."""
    lab.zone(ZONE)
    res, r, recs = run(user, binary, ws, [["run", "cat", "/etc/resolv.conf"], ["http", "sbx.test", 80]])
    resolv, http = res
    assert resolv["ok"] and resolv["out"].splitlines()[-1] == "nameserver 127.0.0.1", resolv
    assert http["ok"] and http["addr"] == HOSTUP4 and http["response"].endswith("ok sbx.test\n"), (http, r)
    assert lab.log("http.log") == ["sbx.test"], lab.log("http.log")
    assert set(lab.queries()) == {"sbx.test"}, lab.queries()
    dns = [x for x in recs if x["event"] == "dns" and x.get("host") == "sbx.test"]
    assert dns and all(x["decision"] == "allowed" for x in dns), recs


def test_unlisted_domain_refused_nothing_reaches_the_upstream(user, binary, ws, lab):
    """An unlisted name gets no address (through libc, and asked of the stub or of the upstream's
    address directly: the stub answers REFUSED with no answer record); the upstream never sees the
    name nor a request; the audit log records the denial."""
    lab.zone(ZONE)
    res, r, recs = run(user, binary, ws, [["http", "other.test", 80], ["resolve", "other.test"],
                                         ["rawdns", "127.0.0.1", "other.test"], ["rawdns", HOSTUP4, "other.test"]])
    http, gai, stub, direct = res
    assert not http["ok"] and http["error"].startswith("gai:"), http
    assert not gai["ok"] and gai["error"].startswith("gai:"), gai
    for q in (stub, direct):
        assert q["ok"] and q["rcode"] == 5 and q["answers"] == 0, q
    assert lab.queries() == [], lab.queries()
    assert lab.log("http.log") == [], lab.log("http.log")
    denied = [x for x in recs if x["event"] == "dns" and x.get("host") == "other.test"]
    assert denied and all(x["decision"] == "refused" for x in denied), recs


def test_table_out_of_the_agents_reach(user, binary, ws, lab):
    """Inside, `nft list ruleset`, `nft flush ruleset` and `nft delete table` fail (the agent
    holds no CAP_NET_ADMIN in its user namespace); afterwards the filter still holds: the allowed
    name is fetched, a direct connection to an unresolved upstream address is refused and never
    reaches it."""
    lab.zone(ZONE)
    res, r, _ = run(user, binary, ws, [["run", "nft", "list", "ruleset"], ["run", "nft", "flush", "ruleset"],
                                      ["run", "nft", "delete", "table", "inet", "agentsbx"],
                                      ["http", "sbx.test", 80], ["connect", UP4, 80]])
    listing, flush, delete, http, direct = res
    for x in (listing, flush, delete):
        assert x["ok"] and x["rc"] != 0 and "Operation not permitted" in x["err"], x
        assert "agentsbx" not in x["out"], x
    assert http["ok"] and http["response"].endswith("ok sbx.test\n"), (http, r)
    assert not direct["ok"], direct
    assert lab.log("http.log") == ["sbx.test"], lab.log("http.log")


def test_raw_socket_and_direct_address_refused(user, binary, ws, lab):
    """A raw ICMP socket cannot be made (v4, v6), and TCP straight to the upstream's addresses
    (never resolved) is refused at once, audited, and never reaches the upstream."""
    lab.zone(ZONE)
    res, r, recs = run(user, binary, ws, [["raw", UP4], ["raw", UP6], ["connect", UP4, 80],
                                         ["connect", HOSTUP4, 80]])
    raw4, raw6, direct, host = res
    for x in (raw4, raw6):
        assert not x["ok"] and x["error"] == "EPERM", x
    for x in (direct, host):
        assert not x["ok"] and x["error"] == "ECONNREFUSED", x
    assert lab.log("http.log") == [], lab.log("http.log")
    refused = {x.get("addr") for x in recs if x["event"] == "network" and x.get("decision") == "refused"}
    assert {UP4, HOSTUP4} <= refused, recs


def test_table_loaded_by_the_monitor_alone(user, binary, ws, lab):
    """Without `network` audit the init leaves the table to the monitor, which loads it (through
    its helper inside the namespace) right before pasta attaches: the allowed name is fetched, a
    port the policy does not list on that same address (the upstream serves HTTP there) is
    refused, and the agent cannot flush the table."""
    lab.zone(ZONE)
    # not `extends: agent`: its audit events (network among them) would be kept
    # (and allowLocalBinding, else the table must filter `lo` from the start)
    pol = {"version": 1, "network": dict(POLICY["network"], allowLocalBinding=True), "approvals": POLICY["approvals"],
           "audit": {"events": ["lifecycle", "policy", "dns"]}}
    res, r, _ = run(user, binary, ws, [["run", "nft", "flush", "ruleset"], ["http", "sbx.test", 80],
                                      ["connect", HOSTUP4, 8080]], policy=pol)
    flush, http, port = res
    assert flush["ok"] and flush["rc"] != 0 and "Operation not permitted" in flush["err"], flush
    assert http["ok"] and http["response"].endswith("ok sbx.test\n"), (http, r)
    assert not port["ok"] and port["error"] == "ECONNREFUSED", port
    assert lab.log("http.log") == ["sbx.test"], lab.log("http.log")


def test_host_and_sni_check_on_a_shared_address(user, binary, ws, lab):
    """sbx.test (allowed) opens HOSTUP4:80/443; other.test, never resolved, shares the address.
    Through the relay (its upstream sockets made in the sandbox's namespace by the monitor's
    helper): Host other.test gets 403 + X-Agentsbx-Blocked and never reaches the server, SNI
    other.test is cut before any byte reaches it; sbx.test passes both ways; all audited."""
    lab.zone(ZONE)
    pol = dict(POLICY, network=dict(POLICY["network"], ports=[80, 443]))
    res, r, recs = run(user, binary, ws, [["resolve", "sbx.test"], ["http_as", HOSTUP4, 80, "sbx.test"],
                                         ["http_as", HOSTUP4, 80, "other.test"], ["tls_as", HOSTUP4, "sbx.test"],
                                         ["tls_as", HOSTUP4, "other.test"]], policy=pol)
    _, good, evil, tls_good, tls_evil = res
    assert good["ok"] and good["response"].endswith("ok sbx.test\n"), (good, r)
    assert evil["ok"] and evil["response"].startswith("HTTP/1.1 403 "), evil
    assert "X-Agentsbx-Blocked: host not allowed: " in evil["response"], evil
    assert tls_good["ok"], tls_good
    assert tls_evil["ok"] and tls_evil["handshake"] in ("ECONNRESET", "ssl-error", "EPIPE"), tls_evil
    deadline = time.monotonic() + 10
    while "sbx.test" not in lab.log("sni.log") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lab.log("sni.log") == ["sbx.test"], lab.log("sni.log")
    assert lab.log("http.log") == ["sbx.test"], lab.log("http.log")
    net = {(x["addr"], x["port"], x.get("host"), x["decision"], x["rule"]) for x in recs
           if x["event"] == "network" and x.get("host") is not None}
    assert {(HOSTUP4, 80, "other.test", "refused", "host"), (HOSTUP4, 443, "other.test", "refused", "sni"),
            (HOSTUP4, 80, "sbx.test", "allowed", "host")} <= net, net


def test_approval_asked_and_allowed_once(user, binary, ws, lab):
    """approvals.network ask: the unlisted other.test is held, asked on the user's approvals.sock
    with the asking process found in the sandbox's namespace (the querier's socket is made there
    by the monitor's helper), allowed once: its request reaches the upstream; the next lookup asks
    again and is denied; every question and decision is audited."""
    lab.zone(ZONE)
    pol = dict(POLICY, approvals={"network": "ask", "timeoutSeconds": 30, "onTimeout": "deny"})
    answers = iter(["allow-once", "deny"])
    res, r, recs, ap = run(user, binary, ws, [["http", "other.test", 80], ["resolve", "other.test"]], policy=pol,
                           decide=lambda q: next(answers))
    http, again = res
    assert http["ok"] and http["response"].endswith("ok other.test\n"), (http, r)
    assert not again["ok"] and again["error"].startswith("gai:"), again
    assert [q["host"] for q in ap.questions] == ["other.test"] * 2, ap.questions
    assert all(isinstance(q["pid"], int) and "python3" in (q["exe"] or "") for q in ap.questions), ap.questions
    assert lab.log("http.log") == ["other.test"], lab.log("http.log")
    got = [(x["action"], x["host"], x.get("decision")) for x in recs if x["event"] == "approval"]
    assert got == [("asked", "other.test", None), ("decided", "other.test", "allow-once"),
                   ("asked", "other.test", None), ("decided", "other.test", "deny")], got


def test_tun_closed_to_the_user_refused(user, binary, ws, lab):
    """/dev/net/tun not open to the user: pasta could not attach, so create fails naming the
    device (fail closed), and nothing runs."""
    lab.zone(ZONE)
    mode = stat.S_IMODE(os.stat("/dev/net/tun").st_mode)
    marker = os.path.join(ws, "ran")
    os.chmod("/dev/net/tun", 0o600)
    try:
        r = as_user(user, [binary, "sandbox", "--workspace", ws, "--policy", policy_file(user, POLICY), "--",
                           "/bin/sh", "-c", f"touch {marker}"], env={"AGENTSBX_UPSTREAM_DNS": HOSTUP4}, cwd=ws)
    finally:
        os.chmod("/dev/net/tun", mode)
    assert r.rc != 0 and "/dev/net/tun" in r.err, r
    assert not os.path.exists(marker)
    assert lab.queries() == []


def test_pasta_missing_refused(user, binary, ws, lab):
    """No pasta binary where agentsbx looks ($AGENTSBX_PASTA names a missing one): create fails
    naming the package, nothing runs, nothing reaches the upstream."""
    lab.zone(ZONE)
    marker = os.path.join(ws, "ran")
    r = as_user(user, [binary, "sandbox", "--workspace", ws, "--policy", policy_file(user, POLICY), "--",
                       "/bin/sh", "-c", f"touch {marker}"],
                env={"AGENTSBX_UPSTREAM_DNS": HOSTUP4, "AGENTSBX_PASTA": "/nonexistent/pasta"}, cwd=ws)
    assert r.rc != 0 and "passt" in r.err, r
    assert not os.path.exists(marker)
    assert lab.queries() == []
