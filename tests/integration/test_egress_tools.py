"""`pip install` and `npm install` through the egress's TLS interception (issue 19: the tools work
unchanged; docs/policy.md "Credentials and HTTP rules" says what interception changes for tools).

The egress lab's fake HTTPS upstream (tests/integration/egress/upstream.py, its OWN CA named by
the host config's upstreamCaFile) serves, for pypi.test, a PEP 503 simple index with one wheel
built here, and for npm.test an npm registry document with its tarball built here. Both hosts
have a credential (so they are intercepted) and `network.http` rules (GET below the index and
the files only). The host's own pip (/usr/bin/python3 -m pip) and npm (/usr/bin/npm) run in the
container with no TLS option, CA file or trust flag of any kind: only the trust bundle and the
variables agentsbx sets (PIP_CERT, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS...). The index URL is
the only option (the fake index is not pypi.org / registry.npmjs.org). Judged by: the package's
files installed in the target directory (read inside), the upstream's log (the injected
Authorization on every index and file request) and, for a path the rules refuse, the tool's own
report of the 403 and the `http` audit record.
"""
import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import zipfile

import pytest

from test_egress import HOSTUP4, UP4B, ebundle, lab, sh, usr_template  # noqa: F401 (fixtures)
from test_egress_credentials import Secrets, cbundle, gargs, header, policy, upstream_certs  # noqa: F401

pytestmark = [pytest.mark.agentsbx_only("TLS interception of package tools (issue 19)")]

MARK = "installed through the egress"
WHEEL = "agentsbx_demo-1.0-py3-none-any.whl"
TGZ = "agentsbx-demo-1.0.0.tgz"


def have_pip():
    return subprocess.run(["/usr/bin/python3", "-m", "pip", "--version"], capture_output=True).returncode == 0


def build_wheel(path):
    """A pure-Python wheel (PEP 427) of agentsbx_demo 1.0, written with zipfile: its RECORD
    lists every file with its sha256."""
    files = {
        "agentsbx_demo/__init__.py": f"MARK = {MARK!r}\n",
        "agentsbx_demo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: agentsbx-demo\nVersion: 1.0\n",
        "agentsbx_demo-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                             "Tag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            data = text.encode()
            z.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        record.append("agentsbx_demo-1.0.dist-info/RECORD,,")
        z.writestr("agentsbx_demo-1.0.dist-info/RECORD", "\n".join(record) + "\n")


def build_tgz(path):
    """An npm package tarball: package/package.json and package/index.js."""
    members = {
        "package/package.json": json.dumps({"name": "agentsbx-demo", "version": "1.0.0", "main": "index.js"}),
        "package/index.js": f"module.exports = {json.dumps(MARK)};\n",
    }
    with tarfile.open(path, "w:gz") as t:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))


@pytest.fixture
def lab_env(upstream_certs):
    """The upstream's TLS names and its files: the git repository of upstream_certs plus the
    simple index (/simple/), the npm registry document (/npm/) and both packages (/files/)."""
    d = upstream_certs
    www = d / "www"
    (www / "files").mkdir(parents=True)
    build_wheel(www / "files" / WHEEL)
    build_tgz(www / "files" / TGZ)
    wheel_sha = hashlib.sha256((www / "files" / WHEEL).read_bytes()).hexdigest()
    (www / "simple" / "agentsbx-demo").mkdir(parents=True)
    (www / "simple" / "agentsbx-private").mkdir()
    (www / "simple" / "index.html").write_text('<!DOCTYPE html><html><body>'
                                              '<a href="agentsbx-demo/">agentsbx-demo</a>'
                                              '<a href="agentsbx-private/">agentsbx-private</a></body></html>\n')
    # a project whose file lies where the rules refuse: the index is read, the download is a 403
    (www / "simple" / "agentsbx-private" / "index.html").write_text(
        '<!DOCTYPE html><html><body><a href="https://pypi.test/private/agentsbx_private-1.0-py3-none-any.whl">'
        'agentsbx_private-1.0-py3-none-any.whl</a></body></html>\n')
    (www / "simple" / "agentsbx-demo" / "index.html").write_text(
        '<!DOCTYPE html><html><body>'
        f'<a href="https://pypi.test/files/{WHEEL}#sha256={wheel_sha}">{WHEEL}</a></body></html>\n')
    tgz = (www / "files" / TGZ).read_bytes()
    (www / "npm").mkdir()
    (www / "npm" / "agentsbx-demo").write_text(json.dumps({
        "name": "agentsbx-demo", "dist-tags": {"latest": "1.0.0"},
        "versions": {"1.0.0": {"name": "agentsbx-demo", "version": "1.0.0", "main": "index.js", "dist": {
            "tarball": f"https://npm.test/files/{TGZ}",
            "shasum": hashlib.sha1(tgz).hexdigest(),
            "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()}}}}))
    tls = f"{d}/server.pem:{d}/server.key"
    return {"UPSTREAM_TLS": f"pypi.test={tls},npm.test={tls}", "UPSTREAM_WWW": str(www)}


ZONE = {"pypi.test": {"A": [UP4B]}, "npm.test": {"A": [UP4B]}}
RULES = [{"host": "pypi.test", "allow": [{"methods": ["GET"], "paths": ["/simple/*", "/files/*"]}]},
         {"host": "npm.test", "allow": [{"methods": ["GET"], "paths": ["/npm/*", "/files/*"]}]}]
CREDS = [{"host": h, "header": "Authorization", "value": "Bearer ${secret:api-token}"}
         for h in ("pypi.test", "npm.test")]


@pytest.fixture
def tools(rt, cbundle, lab, tmp_path, upstream_certs):
    """run(script) -> (result, https.log entries, http audit records): /bin/sh -c script in the
    container (HOME=/tmp: the tools' caches) under a policy intercepting pypi.test and npm.test."""
    lab.zone(ZONE)
    s = Secrets(tmp_path, ca_file=upstream_certs / "ca.pem")
    pol = policy(hosts=("pypi.test", "npm.test"), credentials=CREDS, http=RULES)
    cbundle.process["env"] = [e for e in cbundle.process.get("env", []) if not e.startswith("HOME=")] + ["HOME=/tmp"]

    def go(script):
        cbundle.args("/bin/sh", "-c", script)
        r, cid = rt.run(cbundle, global_args=gargs(tmp_path, s, pol),
                        env=dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4))
        api = [json.loads(line) for line in lab.log("https.log")]
        ap = tmp_path / "audit" / f"{cid}.jsonl"
        text = ap.read_text() if ap.exists() else ""
        assert s.value not in text and s.value not in r.out + r.err
        recs = [json.loads(line) for line in text.splitlines()]
        return r, api, [x for x in recs if x.get("event") == "http"]
    go.secrets = s
    return go


def assert_injected(api, value, host):
    assert api, "nothing reached the upstream"
    for e in api:
        assert e["sni"] == host and header(e, "Authorization") == [f"Bearer {value}"], e


@pytest.mark.skipif(not have_pip(), reason="/usr/bin/python3 -m pip is not installed on this host")
def test_pip_install_through_interception(tools):
    r, api, recs = tools("python3 -m pip install --index-url https://pypi.test/simple/ --target /tmp/pt "
                         "agentsbx-demo && ls /tmp/pt && cat /tmp/pt/agentsbx_demo/__init__.py")
    assert r.ok, r
    assert "agentsbx_demo-1.0.dist-info" in r.out and MARK in r.out, r
    assert_injected(api, tools.secrets.value, "pypi.test")
    paths = [e["path"] for e in api]
    assert "/simple/agentsbx-demo/" in paths and f"/files/{WHEEL}" in paths, paths
    assert recs and all(x["status"] == 200 for x in recs), recs


@pytest.mark.skipif(not have_pip(), reason="/usr/bin/python3 -m pip is not installed on this host")
def test_pip_refused_path_is_a_403_pip_reports(tools):
    r, api, recs = tools("python3 -m pip install --index-url https://pypi.test/simple/ --target /tmp/pt "
                         "agentsbx-private; echo rc=$?")
    assert "rc=0" not in r.out, r
    # pip says what and why
    assert "HTTP error 403 while getting https://pypi.test/private/agentsbx_private-1.0" in r.out + r.err, r
    assert [e["path"] for e in api] == ["/simple/agentsbx-private/"], api  # the refused one never got there
    assert [(x["path"], x["status"]) for x in recs] == [
        ("/simple/agentsbx-private/", 200), ("/private/agentsbx_private-1.0-py3-none-any.whl", 403)], recs


@pytest.mark.skipif(not shutil.which("npm", path="/usr/bin"), reason="/usr/bin/npm is not installed on this host")
def test_npm_install_through_interception(tools):
    r, api, recs = tools("mkdir -p /tmp/np && cd /tmp/np && npm install --registry https://npm.test/npm/ "
                         "agentsbx-demo && cat node_modules/agentsbx-demo/index.js")
    assert r.ok, r
    assert MARK in r.out, r
    assert_injected([e for e in api if e["sni"] == "npm.test"], tools.secrets.value, "npm.test")
    paths = [e["path"] for e in api]
    assert "/npm/agentsbx-demo" in paths and f"/files/{TGZ}" in paths, paths
    assert any(x["status"] == 200 and x["path"] == f"/files/{TGZ}" for x in recs), recs


@pytest.mark.skipif(not shutil.which("npm", path="/usr/bin"), reason="/usr/bin/npm is not installed on this host")
def test_npm_refused_path_is_a_403_npm_reports(tools):
    r, api, recs = tools("mkdir -p /tmp/np && cd /tmp/np && npm install --registry https://npm.test/private/ "
                         "agentsbx-demo; echo rc=$?")
    assert "rc=0" not in r.out, r
    assert "code E403" in r.err and "403 Forbidden - GET https://npm.test/private/agentsbx-demo" in r.err, r
    assert [e for e in api if e["path"].startswith("/private/")] == [], api
    assert any(x["status"] == 403 and x["path"] == "/private/agentsbx-demo" for x in recs), recs
