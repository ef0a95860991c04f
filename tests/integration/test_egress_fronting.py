"""Fronting between intercepted hosts and SNI-only ones (issue 19; monitor/dns_intercept.h,
monitor/splice.h): an intercepted host (network.http here) is reached only through the TLS relay,
whatever address the agent connects to and whatever the DNS says about other names.

The lab's upstream namespace (test_egress.py) serves one fake HTTPS API on every address (it
answers any SNI and logs every request with its SNI: egress/upstream.py). So "the request never
bypassed the rules" is checked where it would land: no fronted request in the API's log. Plain
HTTP is tried on port 443 (with interception network.ports may hold 443 only, policy/egress_doc.c):
the relay reads a request there too, and its Host is checked like an SNI. api.test is the
intercepted host (GET and HEAD only); plain.test, shared.test and alias.test are allowed SNI-only
names. Each case is one way to put api.test's server behind another name:
 (a) an address the monitor learnt from api.test's answer after a rotation, which the container
     never asked for (it was in the sets for plain.test already);
 (b) alias.test, a CNAME of api.test;
 (c) shared.test, whose answer includes api.test's address;
and the rotation of api.test's own answer, after which the old and new address stay
intercepted."""
import json
import os
import threading
import time

import pytest

from test_egress import HOSTUP4, UP4, UP4B, audit_args, ebundle, lab, usr_template  # noqa: F401
from test_egress_tls import certs, lab_env  # noqa: F401

pytestmark = [pytest.mark.agentsbx_only("agent policy network modes")]

# api.test's TTL is short so the monitor resolves it again within the test (DNS_INTERCEPT_REFRESH_MIN)
ZONE = {"api.test": {"A": [UP4], "ttl": 5}, "plain.test": {"A": [UP4B], "ttl": 300},
        "shared.test": {"A": [UP4, UP4B], "ttl": 300}, "alias.test": {"CNAME": "api.test", "ttl": 300}}
ROTATED = dict(ZONE, **{"api.test": {"A": [UP4B], "ttl": 5}})
POLICY = {"version": 1, "extends": "agent",
          "network": {"mode": "filtered", "ports": [443],
                      "allowedDomains": ["api.test", "plain.test", "shared.test", "alias.test"],
                      "http": [{"host": "api.test", "allow": [{"methods": ["GET", "HEAD"]}]}]},
          "approvals": {"network": "deny"}}
CA = "/etc/ssl/certs/ca-certificates.crt"  # in the container: the bundle the runtime binds there
OTHER_NAME = "sni: another name on an intercepted host's address"
# long enough for the monitor's refresh of api.test (5 s TTL) after the zone changed
WAIT = ["run", "/usr/bin/python3", "-c", "import time; time.sleep(8)"]


def req(method, path, host="api.test"):
    return f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"


@pytest.fixture
def fronting(rt, ebundle, lab, tmp_path, certs):
    """run(actions, rotate_after=PATH) -> (results, audit records, the API's log).
    rotate_after: once a request for PATH reached the API, the zone answers ROTATED."""
    lab.zone(ZONE)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(POLICY))
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"upstreamCaFile": str(certs / "ca.pem")}))
    os.makedirs(os.path.join(ebundle.rootfs, "etc", "ssl", "certs"), exist_ok=True)
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)

    def go(actions, rotate_after=None, policy=None):
        if policy is not None:
            pol.write_text(json.dumps(policy))
        ebundle.args("/usr/bin/python3", "/egress/client.py", json.dumps(actions))
        out = {}
        t = threading.Thread(target=lambda: out.update(
            r=rt.run(ebundle, global_args=audit_args(tmp_path, "--config", str(cfg), "--policy", str(pol)), env=env)))
        t.start()
        if rotate_after:
            deadline = time.monotonic() + 60
            while (not any(json.loads(x)["path"] == rotate_after for x in lab.log("https.log"))
                   and t.is_alive() and time.monotonic() < deadline):
                time.sleep(0.05)
            lab.zone(ROTATED)
        t.join(120)
        r, cid = out["r"]
        assert r.ok, r
        with open(tmp_path / "audit" / f"{cid}.jsonl") as f:
            recs = [json.loads(line) for line in f.read().splitlines()]
        api = [json.loads(line) for line in lab.log("https.log")]
        return json.loads(r.out.strip().splitlines()[-1]), recs, api
    return go


def refused(r):
    """the probe's view of a refused fronting attempt: the connection ended without an answer"""
    return not r["ok"] or not r.get("status")


def net(recs, host):
    return [(r.get("addr"), r.get("port"), r["decision"], r["rule"]) for r in recs
            if r["event"] == "network" and r.get("host") == host]


def test_rotated_address_never_asked_for_is_intercepted(fronting):
    """(a) api.test's answer rotates to plain.test's address UP4B; the container never asks for
    api.test, so only the monitor's own resolution learns it. Before the rotation the fronted
    request reaches the API through plain.test's SNI (the path the test closes); after it, the
    same request is refused, over TLS and over plain HTTP (403), and never reaches a server."""
    res, recs, api = fronting([
        ["resolve", "plain.test"],
        ["https_as", UP4B, "plain.test", req("GET", "/before-a")],
        WAIT,
        ["https_as", UP4B, "plain.test", req("DELETE", "/fronted-a")],
        ["http_as", UP4B, 443, "plain.test"],
    ], rotate_after="/before-a")
    resolved, before, _, fronted, plain = res
    assert resolved["addrs"] == [UP4B], resolved
    assert before["status"] == "HTTP/1.1 200 OK", before  # the bypass was open until the rotation
    assert refused(fronted), fronted
    assert plain["ok"] and plain["response"].startswith("HTTP/1.1 403"), plain
    assert "X-Agentsbx-Blocked: host not allowed: plain.test" in plain["response"], plain
    assert [e["path"] for e in api] == ["/before-a"], api
    n = net(recs, "plain.test")
    assert n.count((UP4B, 443, "refused", OTHER_NAME)) == 2, n  # the TLS and the plain-HTTP attempt


def test_cname_through_intercepted_host_refused(fronting):
    """(b) alias.test is a CNAME of api.test: its answer carries no address (each is audited,
    naming api.test), and alias.test's SNI on api.test's address never reaches the API."""
    res, recs, api = fronting([
        ["resolve", "alias.test"],
        ["resolve", "api.test"],
        ["https_as", UP4, "alias.test", req("DELETE", "/fronted-b")],
        ["http_as", UP4, 443, "alias.test"],
        ["https", "api.test", CA, req("GET", "/control-b")],
    ])
    alias, own, fronted, plain, control = res
    assert not alias["ok"] and alias["error"].startswith("gai:"), alias
    assert own["addrs"] == [UP4], own
    assert refused(fronted), fronted
    assert plain["ok"] and plain["response"].startswith("HTTP/1.1 403"), plain
    assert control["ok"] and control["status"] == "HTTP/1.1 200 OK", control  # the relay itself works
    assert [(e["path"], e["sni"]) for e in api] == [("/control-b", "api.test")], api
    dns = [(r.get("addr"), r.get("reason"), r.get("intercepted")) for r in recs
           if r["event"] == "dns" and r.get("host") == "alias.test" and r["decision"] == "refused"]
    assert (UP4, "CNAME chain through an intercepted host", "api.test") in dns, dns
    assert all(d == "refused" for _, _, d, _ in net(recs, "alias.test")), net(recs, "alias.test")
    assert net(recs, "alias.test"), recs


def test_answer_with_intercepted_address_refused(fronting):
    """(c) shared.test's answer includes api.test's address UP4: it is left out (audited, naming
    api.test); shared.test's own address still works, and its SNI or Host on UP4 is refused."""
    res, recs, api = fronting([
        ["resolve", "shared.test"],
        ["resolve", "api.test"],
        ["https_as", UP4, "shared.test", req("DELETE", "/fronted-c")],
        ["http_as", UP4, 443, "shared.test"],
        ["https_as", UP4B, "shared.test", req("GET", "/own-c")],
        ["http_as", UP4B, 443, "api.test"],
    ])
    shared, own, fronted, plain, control, plain_api = res
    assert shared["addrs"] == [UP4B], shared
    assert own["addrs"] == [UP4], own
    assert refused(fronted), fronted
    assert plain["ok"] and plain["response"].startswith("HTTP/1.1 403"), plain
    assert control["status"] == "HTTP/1.1 200 OK", control
    # plain HTTP (on 443: network.ports may hold no other port with interception) to the
    # intercepted host itself, on another address: its rules live inside TLS only
    assert plain_api["ok"] and plain_api["response"].startswith("HTTP/1.1 403"), plain_api
    assert [(e["path"], e["sni"]) for e in api] == [("/own-c", "shared.test")], api
    dns = [(r.get("addr"), r.get("reason"), r.get("intercepted")) for r in recs
           if r["event"] == "dns" and r.get("host") == "shared.test" and r["decision"] == "refused"]
    assert set(dns) == {(UP4, "an intercepted host's address", "api.test")}, dns
    n = net(recs, "shared.test")
    assert n.count((UP4, 443, "refused", OTHER_NAME)) == 2, n  # the TLS and the plain-HTTP attempt


def test_rotation_keeps_old_and_new_address_intercepted(fronting):
    """api.test's answer rotates from UP4 to UP4B (after its TTL): the container's next answer
    names UP4B, requests to it still go through the relay and its rules, and another name's SNI
    is refused on both the new and the old address."""
    res, recs, api = fronting([
        ["resolve", "api.test"],
        ["resolve", "plain.test"],
        ["https", "api.test", CA, req("GET", "/one")],
        WAIT,
        ["https_as", UP4B, "plain.test", req("DELETE", "/fronted-new")],
        ["resolve", "api.test"],
        ["https", "api.test", CA, req("GET", "/two")],
        ["https", "api.test", CA, req("DELETE", "/two")],
        ["https_as", UP4, "plain.test", req("DELETE", "/fronted-old")],
    ], rotate_after="/one")
    first, _, one, _, new, second, two, delete, old = res
    assert first["addrs"] == [UP4] and second["addrs"] == [UP4B], (first, second)
    assert one["status"] == "HTTP/1.1 200 OK" and two["status"] == "HTTP/1.1 200 OK", (one, two)
    assert delete["status"] == "HTTP/1.1 403 Forbidden", delete  # the rules at the new address
    assert refused(new) and refused(old), (new, old)
    assert [(e["method"], e["path"], e["sni"]) for e in api] == [("GET", "/one", "api.test"),
                                                                 ("GET", "/two", "api.test")], api
    n = net(recs, "plain.test")
    assert (UP4B, 443, "refused", OTHER_NAME) in n and (UP4, 443, "refused", OTHER_NAME) in n, n
    relayed = [r.get("addr") for r in recs if r["event"] == "network" and r.get("host") == "api.test"
               and r["decision"] == "allowed"]
    assert UP4 in relayed and UP4B in relayed, relayed


def test_allowed_cidr_holding_an_intercepted_address_is_refused(fronting):
    """An allowedCidrs range is accepted without the SNI/Host check; one that holds api.test's
    address (learnt by the monitor's own resolution at start, the container never asked) would
    reach the API around its rules (a DELETE). That address is refused before the ranges
    (policy/nft_ruleset.h POLICY_NFT_ICPT4); the same address through api.test's name still goes
    through the relay and its rules."""
    pol = json.loads(json.dumps(POLICY))
    pol["network"]["allowedCidrs"] = [f"{UP4}/32:443"]
    res, recs, api = fronting([
        ["run", "/usr/bin/python3", "-c", "import time; time.sleep(2.5)"],  # the monitor's first answers
        ["https_as", UP4, "api.test", req("DELETE", "/cidr-direct")],
        ["https_as", UP4, "plain.test", req("DELETE", "/cidr-other")],
        ["https", "api.test", CA, req("GET", "/via-relay")],
        ["https", "api.test", CA, req("DELETE", "/via-relay-refused")],
    ], policy=pol)
    _, direct, other, via, refused_by_rule = res
    assert refused(direct), direct
    assert refused(other), other
    assert via["status"] == "HTTP/1.1 200 OK", via
    assert refused_by_rule["status"].startswith("HTTP/1.1 403"), refused_by_rule
    assert [e["path"] for e in api] == ["/via-relay"], api
