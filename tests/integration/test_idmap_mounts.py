"""Idmapped bind mounts: mounts[].uidMappings/gidMappings and the idmap/ridmap options
(runtime-spec 1.2; mount_setattr MOUNT_ATTR_IDMAP), with and without a user namespace (issue 15).

The probe stats files inside; the host made them with known owners. runc 1.1.5 predates
idmapped mounts (it refuses the options), so these are agentsbx-only.
"""

import json
import os
import subprocess

import pytest

from conftest import run

pytestmark = pytest.mark.agentsbx_only("runc 1.1.5 has no idmapped mounts")

USERNS = [{"containerID": 0, "hostID": 200000, "size": 65536}]


def stat_in(rt, bundle, path):
    # the mount points exist in the rootfs (a mapped root cannot mkdir in a host-owned rootfs)
    for m in bundle.config["mounts"]:
        if m["destination"].startswith("/mnt/"):
            os.makedirs(os.path.join(bundle.rootfs, m["destination"].lstrip("/")), exist_ok=True)
    r = run(rt, bundle, ["/probe", "stat", path])
    assert r.ok, r
    return json.loads(r.out.strip().splitlines()[-1])


@pytest.fixture
def src(rt):
    """A host directory with a root-owned file and a file owned by 1000:1000."""
    d = os.path.join(rt.workdir, f"idmap-src-{os.urandom(3).hex()}")
    os.makedirs(d)
    os.chmod(d, 0o755)
    for name, ids in (("root-file", (0, 0)), ("user-file", (1000, 1000))):
        p = os.path.join(d, name)
        with open(p, "w") as f:
            f.write(name)
        os.chown(p, *ids)
    return d


def test_idmapped_mount_without_user_namespace(rt, bundle, src):
    """On-disk 0 appears as 1234 and 1000 as 1000+5000, through the mount only."""
    m = bundle.add_mount("/mnt/idm", "bind", src, ["bind"])
    m["uidMappings"] = [{"containerID": 0, "hostID": 1234, "size": 1},
                        {"containerID": 1000, "hostID": 6000, "size": 1}]
    m["gidMappings"] = [{"containerID": 0, "hostID": 4321, "size": 1},
                        {"containerID": 1000, "hostID": 6000, "size": 1}]
    st = stat_in(rt, bundle, "/mnt/idm/root-file")
    assert (st["uid"], st["gid"]) == (1234, 4321), st
    st = stat_in(rt, bundle, "/mnt/idm/user-file")
    assert (st["uid"], st["gid"]) == (6000, 6000), st
    # the host's view of the source is unchanged
    assert os.stat(os.path.join(src, "root-file")).st_uid == 0


def test_idmap_option_uses_the_container_user_namespace(rt, bundle, src):
    """`idmap` without mappings on the mount: the container's mapping, so host root's files are
    the container root's (without it they are the overflow uid 65534)."""
    bundle.set_namespace("user")
    bundle.linux["uidMappings"] = USERNS
    bundle.linux["gidMappings"] = USERNS
    bundle.add_mount("/mnt/idm", "bind", src, ["bind", "idmap"])
    bundle.add_mount("/mnt/plain", "bind", src, ["bind"])
    st = stat_in(rt, bundle, "/mnt/idm/root-file")
    assert (st["uid"], st["gid"]) == (0, 0), st
    st = stat_in(rt, bundle, "/mnt/idm/user-file")
    assert (st["uid"], st["gid"]) == (1000, 1000), st
    st = stat_in(rt, bundle, "/mnt/plain/root-file")
    assert st["uid"] == 65534, st


def test_idmapped_mount_with_explicit_mapping_in_user_namespace(rt, bundle, src):
    """Explicit mount mappings in a user namespace: on-disk 1000 -> host 200000 = container 0."""
    bundle.set_namespace("user")
    bundle.linux["uidMappings"] = USERNS
    bundle.linux["gidMappings"] = USERNS
    m = bundle.add_mount("/mnt/idm", "bind", src, ["bind"])
    m["uidMappings"] = [{"containerID": 1000, "hostID": 200000, "size": 1}]
    m["gidMappings"] = [{"containerID": 1000, "hostID": 200000, "size": 1}]
    st = stat_in(rt, bundle, "/mnt/idm/user-file")
    assert (st["uid"], st["gid"]) == (0, 0), st
    st = stat_in(rt, bundle, "/mnt/idm/root-file")
    assert st["uid"] == 65534, st  # on-disk 0 is not in the mount's mapping


@pytest.mark.parametrize("edit,needle", [
    (lambda m: m.update(type="tmpfs", options=["idmap"], source="tmpfs"), "bind mounts"),
    (lambda m: m.update(uidMappings=[{"containerID": 0, "hostID": 1, "size": 1}]), "together"),
    (lambda m: m["options"].append("idmap"), "linux.uidMappings"),
])
def test_idmapped_mount_refusals(rt, bundle, src, edit, needle):
    m = bundle.add_mount("/mnt/idm", "bind", src, ["bind"])
    edit(m)
    r = run(rt, bundle, ["/probe", "exit", "0"])
    assert r.rc != 0 and needle in r.err and "mounts[" in r.err, r


def test_features_lists_idmap(rt):
    r = rt.cmd("features", root=False)
    assert r.ok, r
    f = r.json()
    assert f["linux"]["mountExtensions"]["idmap"]["enabled"] is True
    assert {"idmap", "ridmap"} <= set(f["mountOptions"])


@pytest.mark.parametrize("opt,want_sub", [("ridmap", 1234), ("idmap", 0)])
def test_ridmap_maps_submounts_idmap_only_the_top(rt, bundle, src, opt, want_sub):
    """An rbind of a source with a submount (a tmpfs the test mounts on the host): `ridmap`
    idmaps the submount too, `idmap` only the top mount."""
    sub = os.path.join(src, "sub")
    os.makedirs(sub)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", sub], check=True)
    try:
        with open(os.path.join(sub, "f"), "w") as f:
            f.write("x")
        m = bundle.add_mount("/mnt/idm", "bind", src, ["rbind", opt])
        m["uidMappings"] = [{"containerID": 0, "hostID": 1234, "size": 1}]
        m["gidMappings"] = [{"containerID": 0, "hostID": 1234, "size": 1}]
        assert stat_in(rt, bundle, "/mnt/idm/root-file")["uid"] == 1234
        assert stat_in(rt, bundle, "/mnt/idm/sub/f")["uid"] == want_sub
    finally:
        subprocess.run(["umount", "-l", sub], check=False)
