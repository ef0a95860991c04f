"""The command line: runc's verbs, global options, output formats and exit codes.

runc 1.1.5 is the reference: the same invocation must succeed or fail the same way, and JSON
outputs must have the same shape.
"""

import json
import os

import pytest

from conftest import assert_refused

pytestmark = pytest.mark.runc_reference

VERBS = ["create", "start", "run", "state", "kill", "delete", "list", "spec", "features"]


def test_help_lists_verbs(rt):
    r = rt.cmd("--help", root=False)
    assert r.ok, r
    for v in VERBS:
        assert v in r.out, f"--help does not mention {v}"


@pytest.mark.parametrize("verb", VERBS)
def test_verb_help(rt, verb):
    r = rt.cmd(verb, "--help", root=False)
    assert r.ok, r
    assert r.out.strip()


def test_version(rt):
    r = rt.cmd("--version", root=False)
    assert r.ok, r
    first = r.out.splitlines()[0]
    assert "version" in first
    assert any(line.startswith("spec:") for line in r.out.splitlines()), r.out


def test_unknown_verb_fails(rt):
    r = rt.cmd("no-such-verb")
    assert_refused(rt, r, "no-such-verb")


@pytest.mark.parametrize("verb", [["state"], ["start"], ["kill"], ["delete"],
                                  ["kill", "--all"]])
def test_unknown_id_fails(rt, verb):
    r = rt.cmd(*verb[:1], *verb[1:], "does-not-exist")
    assert r.rc != 0
    assert "does-not-exist" in r.err or "not exist" in r.err or "not found" in r.err, r


def test_delete_force_unknown_id(rt):
    # runc: `delete --force` of an unknown id succeeds (nothing to do).
    r = rt.cmd("delete", "--force", "does-not-exist")
    assert r.ok, r


def test_missing_id_argument(rt):
    for verb in ("state", "start", "delete", "kill", "create"):
        r = rt.cmd(verb)
        assert_refused(rt, r, f"agentsbx {verb}:", "container id")


@pytest.mark.parametrize("bad", ["../x", "a/b", "..", "x/../../y", ""])
def test_bad_id_refused(rt, bundle, bad):
    r, _ = rt.create(bundle, bad)
    assert_refused(rt, r, "container id", bad)
    # Nothing was created anywhere near the state dir.
    if os.path.isdir(rt.root):
        assert os.listdir(rt.root) == [], os.listdir(rt.root)
    assert not os.path.exists(os.path.join(os.path.dirname(rt.root), "x"))
    r = rt.state(bad)
    assert_refused(rt, r, "container id", bad)


def test_state_json_shape(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    bundle.config["annotations"] = {"org.example.k": "v"}
    r, cid = rt.create(bundle)
    assert r.ok, r
    st = rt.state(cid).json()
    for key in ("ociVersion", "id", "status", "pid", "bundle"):
        assert key in st, st
    assert st["id"] == cid
    assert st["status"] == "created"
    assert os.path.isabs(st["bundle"])
    assert os.path.realpath(st["bundle"]) == os.path.realpath(bundle.path)
    assert st.get("annotations", {}).get("org.example.k") == "v"
    # runc's extra fields, which tools read from `state`
    assert os.path.realpath(st["rootfs"]) == os.path.realpath(os.path.join(bundle.path, "rootfs")), st
    assert st["created"].endswith("Z") and st["created"][:4].isdigit(), st
    assert st["owner"] == "", st


def test_list_formats(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    table = rt.cmd("list")
    assert table.ok, table
    lines = table.out.splitlines()
    assert lines[0].split() == ["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"]
    row = [ln for ln in lines[1:] if ln.split()[0] == cid]
    assert len(row) == 1 and row[0].split()[2] == "created", table.out
    js = rt.cmd("list", "--format", "json")
    assert js.ok, js
    items = js.json()
    assert isinstance(items, list)
    me = [i for i in items if i["id"] == cid]
    assert len(me) == 1
    assert me[0]["status"] == "created"
    assert me[0]["pid"] == rt.state(cid).json()["pid"]
    assert os.path.realpath(me[0]["bundle"]) == os.path.realpath(bundle.path)
    q = rt.cmd("list", "--quiet")
    assert q.ok
    assert q.out.split() == [cid]
    q = rt.cmd("list", "-q")
    assert q.out.split() == [cid]


def test_list_empty(rt):
    r = rt.cmd("list", "--format", "json")
    assert r.ok, r
    assert r.json() in (None, [])  # runc prints null for no containers
    r = rt.cmd("list", "--quiet")
    assert r.ok and r.out.strip() == ""


def test_spec_writes_valid_config(rt, tmp_path):
    d = str(tmp_path)
    r = rt.cmd("spec", "--bundle", d, root=False)
    assert r.ok, r
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    assert cfg["ociVersion"].startswith("1.")
    assert cfg["root"]["path"] == "rootfs"
    assert cfg["process"]["args"]
    assert {"type": "mount"} in cfg["linux"]["namespaces"]


def test_spec_in_cwd(rt, tmp_path):
    r = rt.cmd("spec", root=False, cwd=str(tmp_path))
    assert r.ok, r
    assert os.path.exists(tmp_path / "config.json")


def test_spec_refuses_overwrite(rt, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text("sentinel")
    r = rt.cmd("spec", "--bundle", str(tmp_path), root=False)
    assert_refused(rt, r, str(cfg), "exists")
    assert cfg.read_text() == "sentinel"


def test_spec_rootless(rt, tmp_path):
    r = rt.cmd("spec", "--rootless", "--bundle", str(tmp_path), root=False)
    assert r.ok, r
    cfg = json.loads((tmp_path / "config.json").read_text())
    types = [n["type"] for n in cfg["linux"]["namespaces"]]
    assert "user" in types
    assert cfg["linux"]["uidMappings"] and cfg["linux"]["gidMappings"]


def test_features_json(rt):
    r = rt.cmd("features", root=False)
    assert r.ok, r
    f = r.json()
    for key in ("ociVersionMin", "ociVersionMax", "hooks", "mountOptions", "linux"):
        assert key in f, f
    assert "prestart" in f["hooks"] and "poststop" in f["hooks"]
    lin = f["linux"]
    assert "mount" in lin["namespaces"] and "user" in lin["namespaces"]
    assert "CAP_SYS_ADMIN" in lin["capabilities"]
    assert "bind" in f["mountOptions"]


def test_log_json_format(rt, tmp_path):
    log = tmp_path / "log.json"
    r = rt.cmd("state", "does-not-exist",
               global_args=["--log", str(log), "--log-format", "json"])
    assert r.rc != 0
    lines = [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()]
    assert lines, "the error must be logged to --log"
    assert any(ln.get("level") == "error" and ln.get("msg") for ln in lines), lines


def test_log_text_format(rt, tmp_path):
    log = tmp_path / "log.txt"
    r = rt.cmd("state", "does-not-exist", global_args=["--log", str(log)])
    assert r.rc != 0
    assert "error" in log.read_text()


def test_bad_log_format_refused(rt, tmp_path):
    r = rt.cmd("list", global_args=["--log-format", "yaml"])
    assert_refused(rt, r, "--log-format", "yaml")


def test_debug_flag_accepted(rt):
    r = rt.cmd("list", global_args=["--debug"])
    assert r.ok, r


def test_kill_bad_signal(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert_refused(rt, rt.kill(cid, "NOTASIGNAL"), "signal", "NOTASIGNAL")
    assert rt.status(cid) == "created"


@pytest.mark.parametrize("flag", ["--no-pivot", "--no-new-keyring"])
def test_create_flags_accepted(rt, bundle, flag):
    bundle.args("/probe", "report")
    r, _ = rt.run(bundle, None, flag)
    assert r.ok, r
    rep = json.loads(r.out.strip().splitlines()[-1])
    assert rep["pid"] == 1
    # --no-pivot still confines the root: the host's files are not there.
    assert rep["cwd"] == "/"


def test_bundle_short_flag_and_cwd_default(rt, bundle):
    bundle.save()
    cid = rt.new_id()
    rt.created.append(cid)
    r = rt.cmd("run", "-b", bundle.path, cid)
    assert r.ok, r
    cid2 = rt.new_id()
    rt.created.append(cid2)
    r = rt.cmd("run", cid2, cwd=bundle.path)  # bundle defaults to the current directory
    assert r.ok, r


@pytest.mark.parametrize("version", ["1.0.0", "1.2.1", "1.3.0", "1.4.0-rc.1", "1.17.2"])
def test_oci_version_every_1x_runs(rt, bundle, version):
    """Minor versions of the runtime spec are backward compatible: a config written by a newer
    engine with a newer 1.y is run, not refused (runtime-tools writes 1.3.0)."""
    bundle.config["ociVersion"] = version
    r, _ = rt.run(bundle.args("/probe", "exit", "0"))
    assert r.ok, r


@pytest.mark.agentsbx_only("runc 1.1.5 does not check ociVersion at all")
@pytest.mark.parametrize("version", ["2.0.0", "0.6.0"])
def test_oci_version_other_major_refused(rt, bundle, version):
    bundle.config["ociVersion"] = version
    r, _ = rt.run(bundle.args("/probe", "exit", "0"))
    assert r.rc != 0 and "ociVersion" in r.err and version in r.err, r


def test_features_version_max_is_1_3(rt):
    f = rt.cmd("features", root=False).json()
    if rt.is_runc:
        assert f["ociVersionMax"].startswith("1."), f
    else:
        assert f["ociVersionMax"] == "1.3.0" and f["ociVersionMin"] == "1.0.0", f
