"""Secrets at the egress and HTTP rules (issue 19; docs/policy.md "Credentials and HTTP rules",
docs/security.md "Secrets at the egress").

(a) policy refusals: a credential on a plain-HTTP port, an unknown secret, a secrets directory of
    the wrong owner or mode, a request that adds or changes a credential, a request alone naming
    one: non-zero exit, one message naming the field, nothing left behind.
(b) inside the container: the container's CA is in the trust bundle at the distro paths, the env
    vars name it, the secret's value is nowhere the agent can read (the env of its processes,
    every readable file, the memory of its processes) and the secrets directory is masked.
(c) through the interception (the monitor's TLS relay): a fake HTTPS API in the
    egress lab (tests/integration/egress/upstream.py, $UPSTREAM_TLS and $UPSTREAM_WWW) with its OWN
    CA, which the host config's upstreamCaFile names: the injected header seen server-side, a rotated secret
    used by the next request, 403 + an audit record for a wrong method, path, fronting or an
    oversized body, curl and `git clone https://` unchanged.
"""
import hashlib
import json
import os
import re
import subprocess
import threading
import time
import uuid

import pytest

from conftest import assert_refused
from test_egress import HOSTUP4, UP4B, ebundle, lab, sh, usr_template  # noqa: F401 (fixtures)

HERE = os.path.dirname(os.path.abspath(__file__))
pytestmark = [pytest.mark.agentsbx_only("network.credentials (issue 19)")]

DISTRO_MARK = "# the rootfs's own distro bundle (test)"


def distro_bundle():
    """A bundle of the rootfs's own: a marker line and the host's first CA certificate."""
    with open("/etc/ssl/certs/ca-certificates.crt") as f:
        first = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n", f.read(), re.S).group(0)
    return DISTRO_MARK + "\n" + first
TRUST_VARS = ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT",
              "NODE_EXTRA_CA_CERTS"]
def run_env(rt, **extra):
    return dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4, **extra)


class Secrets:
    """A host secrets directory (root-owned 0700) and the host config naming it."""

    def __init__(self, tmp_path, ca_file=None):
        self.dir = tmp_path / "host" / "secrets"
        self.dir.mkdir(parents=True)
        os.chmod(self.dir, 0o700)
        self.value = "sk-test-" + uuid.uuid4().hex + uuid.uuid4().hex[:8]
        self.put("api-token", self.value)
        self.config = tmp_path / "config.json"
        cfg = {"secretsDir": str(self.dir)}
        if ca_file:
            cfg["upstreamCaFile"] = str(ca_file)
        self.config.write_text(json.dumps(cfg))

    def put(self, name, value):
        p = self.dir / name
        p.write_text(value)
        os.chmod(p, 0o600)
        return value

    def probe_args(self):
        """What secret_probe.py gets: the prefix, SHA-256 and length, never the value."""
        return [self.value[:8], hashlib.sha256(self.value.encode()).hexdigest(), len(self.value)]


def policy(hosts=("api.test",), ports=(443,), credentials=None, http=None, **net):
    creds = credentials if credentials is not None else [
        {"host": "api.test", "header": "Authorization", "value": "Bearer ${secret:api-token}"}]
    n = {"mode": "filtered", "allowedDomains": list(hosts), "ports": list(ports), "credentials": creds, **net}
    if http is not None:
        n["http"] = http
    return {"version": 1, "extends": "agent", "network": n}


def gargs(tmp_path, secrets, pol, name="policy.json"):
    p = tmp_path / name
    p.write_text(json.dumps(pol))
    return ["--config", str(secrets.config), "--policy", str(p), "--audit-dir", str(tmp_path / "audit")]


def assert_nothing_left(rt, cid):
    r = rt.cmd("state", cid)
    assert r.rc != 0, f"container {cid} left behind: {r}"


# ---- (a) refusals -----------------------------------------------------------------------------

def test_credential_on_plain_http_port_refused(rt, bundle, tmp_path):
    s = Secrets(tmp_path)
    r, cid = rt.run(bundle, global_args=gargs(tmp_path, s, policy(ports=(80, 443))), env=run_env(rt))
    assert_refused(rt, r, "network.credentials[0].host", "network.ports", "port 80", "credentials only ride TLS")
    assert_nothing_left(rt, cid)


def test_unknown_secret_refused(rt, bundle, tmp_path):
    s = Secrets(tmp_path)
    pol = policy(credentials=[{"host": "api.test", "header": "X-Key", "value": "${secret:nope}"}])
    r, cid = rt.run(bundle, global_args=gargs(tmp_path, s, pol), env=run_env(rt))
    assert_refused(rt, r, 'secret "nope"', str(s.dir), "network.credentials[0]")
    assert s.value not in r.err and s.value not in r.out
    assert_nothing_left(rt, cid)


@pytest.mark.parametrize("bad", ["mode-0755", "mode-0710", "owner-nobody", "symlink"])
def test_secrets_dir_owner_and_mode_refused(rt, bundle, tmp_path, bad):
    s = Secrets(tmp_path)
    if bad.startswith("mode-"):
        os.chmod(s.dir, int(bad[5:], 8))
        names = [str(s.dir), f"mode {bad[5:]}", "refused"]
    elif bad == "owner-nobody":
        os.chown(s.dir, 65534, 65534)
        names = [str(s.dir), "uid 65534", "refused"]
    else:
        link = tmp_path / "host" / "secrets-link"
        os.symlink(s.dir, link)
        s.config.write_text(json.dumps({"secretsDir": str(link)}))
        names = [str(link), "secrets directory"]
    r, cid = rt.run(bundle, global_args=gargs(tmp_path, s, policy()), env=run_env(rt))
    assert_refused(rt, r, *names)
    assert_nothing_left(rt, cid)


def test_secret_that_is_a_symlink_refused(rt, bundle, tmp_path):
    s = Secrets(tmp_path)
    os.symlink("/etc/shadow", s.dir / "shadow")
    pol = policy(credentials=[{"host": "api.test", "header": "X-Key", "value": "${secret:shadow}"}])
    r, cid = rt.run(bundle, global_args=gargs(tmp_path, s, pol), env=run_env(rt))
    assert_refused(rt, r, 'secret "shadow"', "not a regular file")
    assert_nothing_left(rt, cid)


@pytest.mark.parametrize("request_creds", [
    [{"host": "api.test", "header": "Authorization", "value": "${secret:api-token}"}],   # other template
    [{"host": "evil.test", "header": "Authorization", "value": "Bearer ${secret:api-token}"}],  # other host
])
def test_request_widening_credentials_refused(rt, bundle, tmp_path, request_creds):
    s = Secrets(tmp_path)
    bundle.config.setdefault("annotations", {})["io.agentsbx.policy"] = json.dumps(
        {"version": 1, "network": {"credentials": request_creds}})
    r, cid = rt.run(bundle, global_args=gargs(tmp_path, s, policy()), env=run_env(rt))
    assert_refused(rt, r, "network.credentials", request_creds[0]["host"], "is not allowed by policy")
    assert_nothing_left(rt, cid)


def test_request_alone_cannot_name_a_secret(rt, bundle, tmp_path):
    s = Secrets(tmp_path)
    bundle.config.setdefault("annotations", {})["io.agentsbx.policy"] = json.dumps(policy())
    r, cid = rt.run(bundle, global_args=["--config", str(s.config)], env=run_env(rt))
    assert_refused(rt, r, "annotation io.agentsbx.policy: network.credentials[0].host", "a request cannot add")
    assert_nothing_left(rt, cid)


# ---- (b) inside the container -------------------------------------------------------------------

@pytest.fixture
def cbundle(ebundle, tmp_path):
    """The egress lab's bundle with a distro bundle of the rootfs's own (Debian's path, and
    /etc/ssl/cert.pem a symlink to it as on Alpine) and the host side of the secrets dir bound in
    (at /hostside: the mask must hide it there too)."""
    certs = os.path.join(ebundle.rootfs, "etc", "ssl", "certs")
    os.makedirs(certs)
    with open(os.path.join(certs, "ca-certificates.crt"), "w") as f:
        f.write(distro_bundle())
    os.symlink("certs/ca-certificates.crt", os.path.join(ebundle.rootfs, "etc", "ssl", "cert.pem"))
    os.makedirs(os.path.join(ebundle.rootfs, "hostside"))
    (tmp_path / "host").mkdir(exist_ok=True)
    ebundle.add_mount("/hostside", "bind", str(tmp_path / "host"), ["rbind", "ro"])
    return ebundle


def secret_probe(rt, b, args, env, extra_env=()):
    b.args("/usr/bin/python3", "/egress/secret_probe.py", *[str(a) for a in args], "/usr")
    b.process["env"] = [e for e in b.process.get("env", []) if not e.startswith("PROBE_LIST=")] + [
        "PROBE_LIST=/hostside:/hostside/secrets", *extra_env]
    os.makedirs(os.path.join(b.rootfs, "egress"), exist_ok=True)
    subprocess.run(["cp", os.path.join(HERE, "egress", "secret_probe.py"), os.path.join(b.rootfs, "egress")],
                   check=True)
    return b


def last_cert(pem_text):
    certs = re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", pem_text, re.S)
    assert certs, pem_text[:400]
    return certs[-1] + "\n"


def test_probe_finds_a_planted_secret(rt, cbundle, tmp_path, lab):
    """The control: with the value in its env (no policy), the probe finds it in the env of its
    process and in its memory, so a clean result below means something."""
    s = Secrets(tmp_path)
    b = secret_probe(rt, cbundle, s.probe_args(), None, [f"PLANTED={s.value}"])
    r, _ = rt.run(b)
    assert r.ok, r
    rep = json.loads(r.out.strip().splitlines()[-1])
    assert rep["env_hits"] and rep["mem_hits"], rep


def test_trust_store_and_secret_invisible(rt, cbundle, tmp_path, lab):
    s = Secrets(tmp_path)
    b = secret_probe(rt, cbundle, s.probe_args(), None)
    r, cid = rt.run(b, global_args=gargs(tmp_path, s, policy()), env=run_env(rt))
    assert r.ok, r
    rep = json.loads(r.out.strip().splitlines()[-1])
    path = "/etc/ssl/certs/ca-certificates.crt"
    # the env vars of every tool name the bundle
    assert rep["trust"] == {v: path for v in TRUST_VARS}, rep["trust"]
    bundle_text = rep["bundle"][path]
    assert bundle_text.startswith(distro_bundle()), bundle_text[:200]       # the distro's first
    assert bundle_text.count("BEGIN CERTIFICATE") == 2, bundle_text
    assert rep["bundle"]["/etc/ssl/cert.pem"] == bundle_text                 # through the symlink
    assert rep["bundle"]["/etc/pki/tls/certs/ca-bundle.crt"] is None         # absent stays absent
    # the CA: this container's, a CA for exactly the intercepted host, nothing else
    ca = tmp_path / "ca.pem"
    ca.write_text(last_cert(bundle_text))
    text = sh("openssl", "x509", "-in", ca, "-noout", "-text").stdout
    assert f"agentsbx egress CA {cid}" in text, text
    assert re.search(r"Basic Constraints: critical\s+CA:TRUE, pathlen:0", text), text
    assert re.search(r"Key Usage: critical\s+Certificate Sign, CRL Sign", text), text
    assert re.search(r"Name Constraints: critical\s+Permitted:\s+DNS:api.test\s+Excluded:\s+IP:0.0.0.0/0.0.0.0"
                     r"\s+IP:0:0:0:0:0:0:0:0/0:0:0:0:0:0:0:0", text), text
    assert "ASN1 OID: prime256v1" in text, text
    # the bundle's copy is read-only, and the rootfs's own file is unchanged on the host
    with open(os.path.join(b.rootfs, "etc", "ssl", "certs", "ca-certificates.crt")) as f:
        assert f.read() == distro_bundle()
    # the secret: nowhere
    assert rep["env_hits"] == [] and rep["file_hits"] == [] and rep["mem_hits"] == [], rep
    assert rep["env_seen"] >= 1 and rep["files"] > 5 and rep["readable_regions"] > 10, rep
    # the secrets dir, bound in through its parent: masked (empty), its file unreadable
    assert rep["listed"]["/hostside/secrets"] in ([], "error 13"), rep["listed"]
    assert "secrets" in rep["listed"]["/hostside"], rep["listed"]
    # nor in the audit log, nor in the state dir's policy.json (a template, never a value)
    audit = (tmp_path / "audit" / f"{cid}.jsonl").read_text()
    assert s.value not in audit


def test_rootfs_without_bundle_gets_one(rt, ebundle, tmp_path, lab):
    """No distro bundle but /etc/ssl/certs: ca-certificates.crt is created there as the target."""
    os.makedirs(os.path.join(ebundle.rootfs, "etc", "ssl", "certs"))
    s = Secrets(tmp_path)
    ebundle.args("/usr/bin/python3", "-c", "import os,json; p=os.environ.get('SSL_CERT_FILE'); "
                 "print(json.dumps({'p': p, 'text': open(p).read() if p else None}))")
    r, _ = rt.run(ebundle, global_args=gargs(tmp_path, s, policy()), env=run_env(rt))
    assert r.ok, r
    got = json.loads(r.out.strip().splitlines()[-1])
    assert got["p"] == "/etc/ssl/certs/ca-certificates.crt"
    assert got["text"].count("BEGIN CERTIFICATE") == 1, got


def test_trust_path_that_is_not_a_bundle_left_alone(rt, ebundle, tmp_path, lab):
    """An image whose /etc/ssl/cert.pem is a symlink to its /etc/passwd: the file is neither read
    into the bundle nor hidden under it (and no other path exists: no bundle, a warning)."""
    os.makedirs(os.path.join(ebundle.rootfs, "etc", "ssl"))
    os.symlink("../passwd", os.path.join(ebundle.rootfs, "etc", "ssl", "cert.pem"))
    s = Secrets(tmp_path)
    ebundle.args("/usr/bin/python3", "-c", "import os,json; print(json.dumps({'env': os.environ.get('SSL_CERT_FILE'), "
                 "'pem': open('/etc/ssl/cert.pem').read()}))")
    r, _ = rt.run(ebundle, global_args=gargs(tmp_path, s, policy()), env=run_env(rt))
    assert r.ok, r
    got = json.loads(r.out.strip().splitlines()[-1])
    assert got["env"] is None and got["pem"].startswith("root:x:0:0:"), got
    assert "not a CA bundle" in r.err, r


def test_exec_gets_the_trust_env(rt, cbundle, tmp_path, lab):
    s = Secrets(tmp_path)
    cbundle.args("/usr/bin/python3", "-c", "import time; time.sleep(60)")
    r, cid = rt.create(cbundle, global_args=gargs(tmp_path, s, policy()), env=run_env(rt))
    assert r.ok, r
    try:
        r = rt.start(cid)
        assert r.ok, r
        r = rt.cmd("exec", cid, "/usr/bin/python3", "-c", "import os; print(os.environ.get('GIT_SSL_CAINFO'))")
        assert r.ok and r.out.strip() == "/etc/ssl/certs/ca-certificates.crt", r
    finally:
        rt.kill(cid, "KILL")
        rt.wait_status(cid, "stopped")
        rt.delete(cid, force=True)


# ---- (c) through the interception ---------------------------------------------------------------
# The lab's HTTPS API is egress/upstream.py's $UPSTREAM_TLS (eg-tls's extension of the lab: every
# request a JSON line in https.log) and $UPSTREAM_WWW (a directory served below /git/); the lab
# fixture takes them from this module's lab_env.

def ossl(*a):
    sh("openssl", *a)


@pytest.fixture
def upstream_certs(tmp_path):
    """The upstream's own CA (only the host config's upstreamCaFile makes the egress trust it), a
    certificate for api.test and git.test, and a bare git repository in dumb-HTTP form."""
    d = tmp_path / "upstream-certs"
    d.mkdir()
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    ossl("req", "-x509", *ec, "-days", "2", "-subj", "/CN=upstream test CA", "-keyout", d / "ca.key",
         "-out", d / "ca.pem", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    ossl("req", *ec, "-subj", "/CN=api.test", "-keyout", d / "server.key", "-out", d / "server.csr")
    # pypi.test and npm.test: test_egress_tools.py's package index and registry
    (d / "ext.cnf").write_text("subjectAltName=DNS:api.test,DNS:git.test,DNS:pypi.test,DNS:npm.test\n"
                               "extendedKeyUsage=serverAuth\n")
    ossl("x509", "-req", "-in", d / "server.csr", "-CA", d / "ca.pem", "-CAkey", d / "ca.key", "-CAcreateserial",
         "-days", "2", "-extfile", d / "ext.cnf", "-out", d / "server.pem")
    work, www = d / "work", d / "www" / "git"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main", str(work)], check=True)
    (work / "README").write_text("cloned through the egress\n")
    subprocess.run([*git, "-C", str(work), "add", "README"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-q", "-m", "readme"], check=True)
    www.mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(www / "repo.git")], check=True)
    subprocess.run(["git", "-C", str(www / "repo.git"), "update-server-info"], check=True)
    return d


@pytest.fixture
def lab_env(upstream_certs):
    d = upstream_certs
    return {"UPSTREAM_TLS": f"api.test={d}/server.pem:{d}/server.key,git.test={d}/server.pem:{d}/server.key",
            "UPSTREAM_WWW": str(d / "www")}


ZONE = {"api.test": {"A": [UP4B]}, "git.test": {"A": [UP4B]}}
HTTP_RULES = [
    {"host": "api.test", "allow": [{"methods": ["GET"], "paths": ["/v1/*"]},
                                   {"methods": ["POST"], "paths": ["/v1/issues"]}], "maxBodyBytes": 1024},
    {"host": "git.test", "allow": [{"methods": ["GET"], "paths": ["/git/repo.git/*"]}]},
]


@pytest.fixture
def intercept(rt, cbundle, lab, tmp_path, upstream_certs):
    """run(script) -> (result, https.log entries, http audit records): /bin/sh -c script in the
    container under the intercepting policy, upstreamCaFile = the lab's own CA."""
    lab.zone(ZONE)
    s = Secrets(tmp_path, ca_file=upstream_certs / "ca.pem")
    pol = policy(hosts=("api.test", "git.test"), http=HTTP_RULES)

    def go(script):
        cbundle.args("/bin/sh", "-c", script)
        r, cid = rt.run(cbundle, global_args=gargs(tmp_path, s, pol), env=run_env(rt))
        api = [json.loads(line) for line in lab.log("https.log")]
        ap = tmp_path / "audit" / f"{cid}.jsonl"
        recs = [json.loads(line) for line in ap.read_text().splitlines()] if ap.exists() else []
        assert s.value not in ap.read_text() if ap.exists() else True
        return r, api, [x for x in recs if x.get("event") == "http"]
    go.secrets = s
    return go


# Until monitor/unixsock.c opens the caller with PIDFD_THREAD, a connect(2) from any thread but a
# process's first fails under none/filtered (pidfd_open of a non-leader tid: EINVAL -> ESRCH), and
# curl's and git's resolver threads are such threads: resolve in the shell first (which opens the
# address in the egress sets), and let curl connect from its main thread (--resolve). The
# interception itself is what these tests check.
PRE = "getent hosts api.test git.test >/dev/null; "
CURL_ONLY = f"curl --resolve api.test:443:{UP4B} --resolve git.test:443:{UP4B}"
CURL = PRE + CURL_ONLY
GIT = f"{PRE}git -c http.curloptResolve=git.test:443:{UP4B}"


def header(entry, name):
    return [v for k, v in entry["headers"] if k.lower() == name.lower()]


def test_injected_header_seen_upstream(intercept):
    r, api, recs = intercept(f"{CURL} -sS https://api.test/v1/user")
    assert r.ok and "ok GET /v1/user" in r.out, r
    assert len(api) == 1 and header(api[0], "Authorization") == [f"Bearer {intercept.secrets.value}"], api
    assert intercept.secrets.value not in r.out + r.err
    rec = recs[-1]
    assert (rec["method"], rec["host"], rec["path"], rec["status"]) == ("GET", "api.test", "/v1/user", 200), rec
    assert rec["credentials"], rec   # the credential named (its header), never its value


def test_rotated_secret_applies_to_next_request(intercept, tmp_path, cbundle):
    sync = tmp_path / "sync"
    sync.mkdir()
    cbundle.add_mount("/sync", "bind", str(sync), ["rbind", "rw"])
    script = (f"{CURL} -sS https://api.test/v1/one; touch /sync/one; "
              f"while [ ! -e /sync/two ]; do sleep 0.1; done; {CURL} -sS https://api.test/v1/two")
    new = {}

    def rotate():
        deadline = time.monotonic() + 60
        while not (sync / "one").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        new["v"] = intercept.secrets.put("api-token", "sk-rotated-" + uuid.uuid4().hex)
        (sync / "two").touch()
    t = threading.Thread(target=rotate)
    t.start()
    r, api, _ = intercept(script)
    t.join()
    assert r.ok, r
    auth = [(e["path"], header(e, "Authorization")) for e in api]
    assert auth == [("/v1/one", [f"Bearer {intercept.secrets.value}"]), ("/v1/two", [f"Bearer {new['v']}"])], auth


@pytest.mark.parametrize("what,cmd,path", [
    ("method", f"{CURL} -sS -X DELETE https://api.test/v1/user", "/v1/user"),
    ("path", f"{CURL} -sS https://api.test/admin", "/admin"),
    ("fronting", f"{CURL} -sS -H 'Host: git.test' https://api.test/v1/user", "/v1/user"),
    ("body", f"{PRE}head -c 4096 /dev/zero | {CURL_ONLY} -sS --data-binary @- https://api.test/v1/issues",
     "/v1/issues"),
])
def test_refused_request_is_403_with_record(intercept, what, cmd, path):
    r, api, recs = intercept(cmd + " -w '\\nstatus=%{http_code}\\n'")
    assert "status=403" in r.out, r                           # the agent reads the refusal
    assert len(r.out.split("status=403")[0].strip()) > 0, r   # with a body that says why
    assert api == [], api                                     # nothing reached the upstream
    assert recs and recs[-1]["status"] == 403 and recs[-1]["path"] == path, recs
    assert recs[-1]["rule"] and not recs[-1]["rule"].startswith("allow"), recs


def test_git_clone_through_interception(intercept):
    r, api, recs = intercept(f"cd /tmp && {GIT} clone -q https://git.test/git/repo.git && cat repo/README")
    assert r.ok and "cloned through the egress" in r.out, r
    assert api and all(e["method"] == "GET" and e["path"].startswith("/git/repo.git/") for e in api), api
    assert recs and all(rec["status"] in (200, 404) for rec in recs), recs
