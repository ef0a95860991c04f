"""The egress's TLS interception (issue 19; monitor/tls_relay.h): network.credentials and
network.http hosts, end to end in the egress lab of test_egress.py.

The lab's upstream namespace runs a fake HTTPS API (egress/upstream.py with $UPSTREAM_TLS) whose
certificates come from an upstream CA made here with the `openssl` CLI (the monitor trusts it
through upstreamCaFile), plus a host with a self-signed certificate and one answered with another
name's certificate. The API logs every request it receives, headers included, so the checks are
made where the request lands: the injected header, what never arrived.

The interception comes from the policy (network.credentials, network.http) and the host config
(secretsDir, upstreamCaFile, given with --config); the in-container client verifies the relay's
leaves against the trust bundle the runtime binds at the distro path (runtime/egress_trust.c)."""
import json
import os
import subprocess
import threading
import time

import pytest

from test_egress import HOSTUP4, UP4, UP4B, audit_args, ebundle, lab, usr_template  # noqa: F401

pytestmark = [pytest.mark.agentsbx_only("agent policy network modes")]

SECRET1, SECRET2 = "s3cret-one-7f1c", "s3cret-two-9a2e"


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def certs(tmp_path):
    """The upstream CA, api.test's certificate (signed by it), and rogue.test's self-signed one."""
    d = tmp_path / "certs"
    d.mkdir()
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", d / "ca.key", "-out", d / "ca.pem", "-days", "2",
            "-subj", "/CN=agentsbx test upstream CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign")
    openssl("req", *ec, "-keyout", d / "api.key", "-out", d / "api.csr", "-subj", "/CN=api.test")
    (d / "api.ext").write_text("subjectAltName=DNS:api.test,DNS:rules.test\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", d / "api.csr", "-CA", d / "ca.pem", "-CAkey", d / "ca.key", "-CAcreateserial",
            "-out", d / "api.pem", "-days", "2", "-extfile", d / "api.ext")
    openssl("req", "-x509", *ec, "-keyout", d / "rogue.key", "-out", d / "rogue.pem", "-days", "2",
            "-subj", "/CN=rogue.test", "-addext", "subjectAltName=DNS:rogue.test")
    return d


@pytest.fixture
def lab_env(certs):
    # the first is the default: wrongname.test is answered with api.test's certificate
    return {"UPSTREAM_TLS": f"api.test={certs}/api.pem:{certs}/api.key,rogue.test={certs}/rogue.pem:{certs}/rogue.key"}


ZONE = {"api.test": {"A": [UP4]}, "rogue.test": {"A": [UP4]}, "wrongname.test": {"A": [UP4]},
        "nosecret.test": {"A": [UP4]}, "rules.test": {"A": [UP4]}, "plain.test": {"A": [UP4B]}}
POLICY = {"version": 1, "extends": "agent",
          "network": {"mode": "filtered", "allowedDomains": ["api.test", "rogue.test", "wrongname.test",
                                                           "nosecret.test", "rules.test", "plain.test"],
                      "ports": [443],
                      "credentials": [{"host": "api.test", "header": "Authorization", "value": "Bearer ${secret:tok}"},
                                      {"host": "nosecret.test", "header": "X-Key", "value": "${secret:absent}"}],
                      "http": [{"host": "api.test", "maxBodyBytes": 100,
                                "allow": [{"methods": ["GET", "HEAD"]}, {"methods": ["POST"], "paths": ["/upload*"]}]},
                               {"host": "rogue.test"}, {"host": "wrongname.test"}, {"host": "rules.test"}]},
          "approvals": {"network": "deny"}}
CA = "/etc/ssl/certs/ca-certificates.crt"  # in the container: the bundle the runtime binds there


def get(path, host="api.test", extra="", close=True):
    c = "Connection: close\r\n" if close else ""
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer agent-fake\r\n{c}{extra}\r\n"


def https(name, request, alpn=None, chunks=None):
    return ["https", name, CA, request, alpn, chunks]


@pytest.fixture
def intercepted(rt, ebundle, lab, tmp_path, certs):
    """run(actions, on_first=fn) -> (results, audit records, the API's log, the audit text)."""
    lab.zone(ZONE)
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    # `absent` exists at create (create checks every named secret) and is removed while the
    # container runs (test_interception_framing): a secret gone at request time is a 502
    for name, value in (("tok", SECRET1), ("absent", "short-lived")):
        (secrets / name).write_text(value + "\n")
        os.chmod(secrets / name, 0o600)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(POLICY))
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"secretsDir": str(secrets), "upstreamCaFile": str(certs / "ca.pem")}))
    os.makedirs(os.path.join(ebundle.rootfs, "etc", "ssl", "certs"), exist_ok=True)
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)

    def go(actions, on_first=None):
        ebundle.args("/usr/bin/python3", "/egress/client.py", json.dumps(actions))
        out = {}
        t = threading.Thread(target=lambda: out.update(
            r=rt.run(ebundle, global_args=audit_args(tmp_path, "--config", str(cfg), "--policy", str(pol)), env=env)))
        t.start()
        if on_first:
            deadline = time.monotonic() + 60
            while not lab.log("https.log") and t.is_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            on_first(secrets)
        t.join(120)
        r, cid = out["r"]
        assert r.ok, r
        with open(tmp_path / "audit" / f"{cid}.jsonl") as f:
            text = f.read()
        recs = [json.loads(line) for line in text.splitlines()]
        api = [json.loads(line) for line in lab.log("https.log")]
        return json.loads(r.out.strip().splitlines()[-1]), recs, api, text
    return go


def header(entry, name):
    return [v for k, v in entry["headers"] if k.lower() == name.lower()]


def test_interception_end_to_end(intercepted, ebundle, lab):
    def rotate(secrets):
        (secrets / "tok.new").write_text(SECRET2 + "\n")
        os.rename(secrets / "tok.new", secrets / "tok")
        open(os.path.join(ebundle.rootfs, "egress", "go"), "w").close()

    body200, body50 = "x" * 200, "y" * 50
    chunked = "POST /upload HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n"
    res, recs, api, audit_text = intercepted([
        https("api.test", get("/user?q=1")),                                                     # 0
        ["wait_file", "/egress/go"],                                                             # 1
        https("api.test", get("/again")),                                                        # 2
        https("api.test", "DELETE /user HTTP/1.1\r\nHost: api.test\r\n\r\n"),                    # 3
        https("api.test", "POST /other HTTP/1.1\r\nHost: api.test\r\nContent-Length: 2\r\n\r\nhi"),  # 4
        https("api.test", get("/", host="other.test")),                                          # 5
        https("api.test", f"POST /upload HTTP/1.1\r\nHost: api.test\r\nContent-Length: 200\r\n\r\n{body200}"),  # 6
        https("api.test", chunked, chunks=[f"32\r\n{'c' * 50}\r\n"] * 3 + ["0\r\n\r\n"]),        # 7
        https("api.test", f"POST /upload HTTP/1.1\r\nHost: api.test\r\nContent-Length: 50\r\nConnection: close\r\n\r\n{body50}"),  # 8
        https("rogue.test", get("/", host="rogue.test")),                                        # 9
        https("wrongname.test", get("/", host="wrongname.test")),                               # 10
        https("api.test", get("/h2"), alpn=["h2"]),                                              # 11
        https("api.test", get("/alpn"), alpn=["h2", "http/1.1"]),                                # 12
        https("api.test", "POST /upload HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),                        # 13
    ], on_first=rotate)
    (first, _, again, delete, other, fronting, big, chunk_big, small, rogue, wrongname, h2, alpn, smuggle) = res

    # allowed: the agent's own Authorization replaced by the secret's; Connection: close both ways
    assert first["ok"] and first["status"] == "HTTP/1.1 200 OK" and first["body"] == "ok GET /user?q=1\n", first
    assert "Connection: close" in first["headers"], first
    by_path = {e["path"]: e for e in api}
    assert header(by_path["/user?q=1"], "Authorization") == [f"Bearer {SECRET1}"], by_path["/user?q=1"]
    assert header(by_path["/user?q=1"], "Connection") == ["close"]
    # the rotated secret applies to the next request
    assert again["ok"] and again["status"] == "HTTP/1.1 200 OK", again
    assert header(by_path["/again"], "Authorization") == [f"Bearer {SECRET2}"], by_path["/again"]

    # refused with a 403 the agent can read; none of them reached the API
    for r, why in ((delete, "method not allowed: DELETE"), (other, "path not allowed"),
                   (fronting, "domain fronting"), (big, "body too large")):
        assert r["ok"] and r["status"] == "HTTP/1.1 403 Forbidden", r
        assert why in r["body"], r
    assert {e["method"] for e in api} <= {"GET", "POST"}
    assert "/other" not in by_path and "/" not in by_path
    # the body cap: the 200-byte body refused at once; the chunked one cut before its end, so the
    # API never saw a complete request; the 50-byte body passed whole
    uploads = [e["body"] for e in api if e["path"] == "/upload"]
    assert uploads == [50], api
    assert small["ok"] and small["status"] == "HTTP/1.1 200 OK", small
    assert chunk_big["status"] in ("HTTP/1.1 403 Forbidden", "") if chunk_big["ok"] else True, chunk_big
    # the upstream is verified: a self-signed certificate and another name's are a 502, never a downgrade
    for r in (rogue, wrongname):
        assert r["ok"] and r["status"] == "HTTP/1.1 502 Bad Gateway", r
        assert "certificate verification failed" in r["body"], r
    assert not any(e.get("sni") in ("rogue.test", "wrongname.test") and e["path"] == "/" for e in api)
    # ALPN: http/1.1 only - an h2-only client fails the handshake, one offering both gets http/1.1
    assert not h2["ok"], h2
    assert any(r["event"] == "http" and r["rule"] == "tls with the agent failed: no application protocol"
               for r in recs), [r for r in recs if r["event"] == "http" and r["method"] == "-"]
    assert alpn["ok"] and alpn["alpn"] == "http/1.1" and alpn["status"] == "HTTP/1.1 200 OK", alpn
    # ambiguous framing: a 400
    assert smuggle["ok"] and smuggle["status"] == "HTTP/1.1 400 Bad Request", smuggle

    # one `http` record per request; the query string dropped; names of credentials, never values
    http = [r for r in recs if r["event"] == "http"]
    rec = next(r for r in http if r["path"] == "/user")
    assert rec["method"] == "GET" and rec["host"] == "api.test" and rec["status"] == 200, rec
    assert rec["rule"] == "allow[0]" and rec["credentials"] == ["Authorization"], rec
    assert rec["bytesUp"] > 0 and rec["bytesDown"] > 0, rec
    d = next(r for r in http if r["method"] == "DELETE")
    assert d["status"] == 403 and d["rule"] == "method not allowed: DELETE", d
    assert any(r["status"] == 403 and r["rule"].startswith("body too large") and r["path"] == "/upload"
               and r["bytesUp"] == 0 for r in http), http
    assert any(r["status"] == 502 and r["host"] == "rogue.test" for r in http), http
    assert SECRET1 not in audit_text and SECRET2 not in audit_text
    assert max(r["secs"] for i, r in enumerate(res) if i != 1) < 5, [r["secs"] for r in res]
    net = [(r["port"], r["decision"], r["rule"]) for r in recs if r["event"] == "network" and r.get("host") == "api.test"]
    assert net and all(n == (443, "allowed", "sni: intercepted") for n in net if n[0] == 443), net


def test_interception_framing(intercepted, ebundle):
    """Responses larger than the relay's buffers, chunked ones, 100 Continue, HEAD; a missing
    secret is a 502 naming it, and the request never leaves."""
    def remove_secret(secrets):
        os.unlink(secrets / "absent")
        open(os.path.join(ebundle.rootfs, "egress", "go"), "w").close()

    res, recs, api, _ = intercepted([
        https("api.test", get("/big/3000000")),
        ["wait_file", "/egress/go"],
        https("api.test", get("/chunked")),
        https("api.test", "POST /upload HTTP/1.1\r\nHost: api.test\r\nExpect: 100-continue\r\nConnection: close\r\n"
                          "Content-Length: 5\r\n\r\nhello"),
        https("api.test", "HEAD /head HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n"),
        https("nosecret.test", get("/", host="nosecret.test")),
        # keep-alive: two requests one after the other, two pipelined, one allowed then one refused
        https("api.test", get("/ka1", close=False), chunks=[get("/ka2")]),
        https("api.test", get("/pl1", close=False) + get("/pl2")),
        https("api.test", get("/ok-then", close=False) + "DELETE /x HTTP/1.1\r\nHost: api.test\r\n\r\n"),
        https("rules.test", get("/rules-only", host="rules.test")),
    ], on_first=remove_secret)
    big, _, chunked, expect, head, nosecret, ka, pl, then_refused, rules_only = res
    # a host with rules and no credential: intercepted, checked, nothing added (api.test's secret
    # never goes to another host, the agent's own header passes as sent)
    assert rules_only["ok"] and rules_only["status"] == "HTTP/1.1 200 OK", rules_only
    e = next(e for e in api if e["path"] == "/rules-only")
    assert e["sni"] == "rules.test" and header(e, "Authorization") == ["Bearer agent-fake"], e
    assert big["ok"] and big["status"] == "HTTP/1.1 200 OK" and big["body"] == "z" * 3000000, \
        {k: v for k, v in big.items() if k != "body"}
    assert chunked["ok"] and "Transfer-Encoding: chunked" in chunked["headers"], chunked
    assert chunked["body"] == "6\r\nfirst \r\n7\r\nsecond \r\n6\r\nthird\n\r\n0\r\n\r\n", chunked
    assert expect["ok"] and expect["status"] == "HTTP/1.1 100 Continue", expect
    assert "HTTP/1.1 200 OK" in expect["body"] and expect["body"].endswith("ok POST /upload\n"), expect
    assert head["ok"] and head["status"] == "HTTP/1.1 200 OK" and head["body"] == "", head
    assert nosecret["ok"] and nosecret["status"] == "HTTP/1.1 502 Bad Gateway", nosecret
    assert "secret absent" in nosecret["body"], nosecret
    assert [e["body"] for e in api if e["path"] == "/upload"] == [5]
    assert not any(e.get("sni") == "nosecret.test" for e in api)
    for r, paths in ((ka, ("/ka1", "/ka2")), (pl, ("/pl1", "/pl2"))):
        assert r["ok"] and r["status"] == "HTTP/1.1 200 OK" and "Connection: keep-alive" in r["headers"], r
        assert r["body"].startswith(f"ok GET {paths[0]}\nHTTP/1.1 200 OK\r\n"), r
        assert r["body"].endswith(f"Connection: close\r\n\r\nok GET {paths[1]}\n"), r
    assert then_refused["ok"] and then_refused["body"].startswith("ok GET /ok-then\nHTTP/1.1 403 Forbidden"), then_refused
    for p in ("/ka1", "/ka2", "/pl1", "/pl2"):  # each with the credential, each its own record
        e = next(e for e in api if e["path"] == p)
        assert header(e, "Authorization") == [f"Bearer {SECRET1}"], e
    http = {r["path"]: r for r in recs if r["event"] == "http"}
    assert all(http[p]["status"] == 200 for p in ("/ka1", "/ka2", "/pl1", "/pl2")), http
    assert http["/x"]["status"] == 403, http
    assert max(r["secs"] for i, r in enumerate(res) if i != 1) < 5, [r["secs"] for r in res]  # no answer waited for a timeout
    assert http["/big/3000000"]["status"] == 200 and http["/big/3000000"]["bytesDown"] > 3000000, http
    assert http["/upload"]["status"] == 200, http  # the final status, not the 100


def test_interception_large_downloads(intercepted):
    """64 MiB answers through the interception arrive whole: the relay drives a connection at
    most 1000 rounds per wake-up, and one stopped there while still moving must be driven again
    (it was not: its epoll interests were empty and the download stopped, in 2-3 of every 4-5 in
    `make bench --only egress`). Three in a row, each must not wait for the client's 10 s timeout."""
    size = 64 << 20
    res, recs, api, _ = intercepted([["https_count", "api.test", CA, get(f"/big/{size}")] for _ in range(3)])
    for r in res:
        assert r["ok"] and r["status"] == "HTTP/1.1 200 OK" and r["bytes"] == size, r
    http = [r for r in recs if r["event"] == "http" and r["path"] == f"/big/{size}"]
    assert len(http) == 3 and all(r["status"] == 200 and r["bytesDown"] > size for r in http), http


def test_interception_stalled_agent(intercepted):
    """A stalled agent stalls only its own connections: with a half ClientHello, an idle TLS
    connection and one whose 30 MB answer is never read held open, another request is answered
    at once (the monitor never blocks on the agent)."""
    res, recs, api, _ = intercepted([
        ["hold", "hello", "api.test"],
        ["hold", "tls", "api.test", CA],
        ["hold", "noread", "api.test", CA, get("/big/30000000")],
        ["hold", "noread", "api.test", CA, get("/big/30000000")],
        https("api.test", get("/after")),
        ["resolve", "api.test"],
    ])
    assert all(r["ok"] for r in res), res
    after, resolved = res[4], res[5]
    assert after["status"] == "HTTP/1.1 200 OK" and after["body"] == "ok GET /after\n", after
    assert after["secs"] < 3 and resolved["secs"] < 3, (after["secs"], resolved["secs"])
    assert [e["path"] for e in api].count("/big/30000000") == 2


def test_other_name_on_an_intercepted_address_refused(intercepted):
    """Another allowed (not intercepted) name's SNI on the address an intercepted host's answer
    gave is refused: behind it the server may route the request to the intercepted host, past
    its rules (outside test: SNI plain.test to api.test's address carried a refused DELETE and a
    body 50 times the cap to the API). The same name on its own address still works."""
    dele = "DELETE /user HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n"
    res, recs, api, _ = intercepted([
        ["resolve", "plain.test"],
        ["resolve", "api.test"],
        ["tls_as", UP4, "plain.test"],
        ["tls_as", UP4B, "plain.test"],
        https("api.test", dele),
    ])
    _, _, fronted, own, control = res
    assert fronted["ok"] and fronted["handshake"] != "done", fronted
    assert own["ok"] and own["handshake"] == "done", own  # its own address: the SNI check only
    assert control["ok"] and control["status"] == "HTTP/1.1 403 Forbidden", control
    assert not any(e.get("sni") == "plain.test" for e in api), api
    net = [(r.get("addr"), r["decision"], r["rule"]) for r in recs
           if r["event"] == "network" and r.get("host") == "plain.test"]
    assert (UP4, "refused", "sni: another name on an intercepted host's address") in net, net


def test_shared_egress_intercepts_for_the_sharer(rt, ebundle, make_bundle, usr_template, lab, tmp_path, certs):
    """One egress per network namespace (runtime/egress_share.h) with interception: a container
    joining the owner's namespace with the same policy trusts the OWNER's CA (the owner's relay
    mints the leaves), so its verified HTTPS request to api.test passes and gets the secret."""
    lab.zone(ZONE)
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    for name, value in (("tok", SECRET1), ("absent", "x")):
        (secrets / name).write_text(value + "\n")
        os.chmod(secrets / name, 0o600)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(POLICY))
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"secretsDir": str(secrets), "upstreamCaFile": str(certs / "ca.pem")}))
    args = audit_args(tmp_path, "--config", str(cfg), "--policy", str(pol))
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)
    os.makedirs(os.path.join(ebundle.rootfs, "etc", "ssl", "certs"), exist_ok=True)
    ebundle.args("/usr/bin/sleep", "600")
    r, owner = rt.create(ebundle, global_args=args, env=env)
    assert r.ok, r
    pid = rt.state(owner).json()["pid"]
    b = make_bundle(rootfs_template=usr_template)
    b.add_mount("/usr", "bind", "/usr", ["rbind", "ro", "nosuid", "nodev"])
    b.set_namespace("network", f"/proc/{pid}/ns/net")
    os.makedirs(os.path.join(b.rootfs, "etc", "ssl", "certs"), exist_ok=True)
    b.args("/usr/bin/python3", "/egress/client.py", json.dumps([https("api.test", get("/shared"))]))
    r, cid = rt.run(b, global_args=args, env=env)
    assert r.ok, r
    res, = json.loads(r.out.strip().splitlines()[-1])
    assert res["ok"] and res["status"] == "HTTP/1.1 200 OK", res
    by_path = {e["path"]: e for e in (json.loads(line) for line in lab.log("https.log"))}
    assert header(by_path["/shared"], "Authorization") == [f"Bearer {SECRET1}"], by_path
