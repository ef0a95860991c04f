"""A denied read stays denied while the host replaces or creates the file (issue 13; docs/security.md
"A mask is a mount on the file as it was at create", "A credential created after create").

A sandbox under the `agent` profile starts, writes /workspace/ready and waits; the host then
acts on denied paths - renames a new file over one (as passwd(1) rewrites /etc/shadow and editors
~/.netrc), deletes one and creates it again (a file, and a whole masked directory), or creates a
credential that did not exist at create (`gh auth login`, a new kubeconfig) - and touches
/workspace/go. The sandbox then `cat`s every path. Before the fix the kernel detached the mask
in the container's namespace (or there was nothing to mask) and the new content was printed;
each test passes only when no new content is printed and each denied read fails with EACCES.

Every run also checks that nothing else was taken away: an existing sibling of a denied file, a
file the host creates meanwhile in a directory that is not an ancestor of a denied path, and a
workspace below a carved home (read, write, create, and a file the host adds to it).
Quick mode (`agentsbx sandbox`, the host / read-only) uses a fake home under the host's /home;
OCI mode a bundle whose rootfs the host changes.
"""

import os
import shutil
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from policyutil import pcreate, policy_bundle, prun, sandbox_run  # noqa: E402

pytestmark = pytest.mark.agentsbx_only("agent policy")

WS_OWNER = 23456  # a workspace owned by a user: quick mode adds a user namespace

# (path under a home, what the host does, a file inside when the denied path is a directory)
ACTIONS = {
    "rename": [".netrc", ".git-credentials"],
    "recreate": [".pgpass", ".ssh/id_ed25519"],
    "create": [".config/gh/hosts.yml", ".kube/config", ".aws/credentials"],
}

SCRIPT = """echo ready > /workspace/ready
i=0; while [ ! -e /workspace/go ] && [ $i -lt 90 ]; do sleep 1; i=$((i+1)); done
for f in {paths}; do echo "== $f"; cat "$f" 2>&1; done
echo "== workspace"
echo W > /workspace/w1 && cat /workspace/w1 && mkdir /workspace/d && echo WS-MKDIR-OK
cat /workspace/hostnew
"""


def plant_home(home):
    """A home as a user has it: dotfiles, a .config without gh, an old .netrc/.pgpass/.ssh."""
    for d in (".config/git", ".ssh", "notes", "proj"):
        os.makedirs(os.path.join(home, d), exist_ok=True)
    files = {".bashrc": "SIBLING-BASHRC", ".netrc": "OLD-NETRC", ".git-credentials": "OLD-GITCRED",
             ".pgpass": "OLD-PGPASS", ".ssh/id_ed25519": "OLD-SSHKEY", ".config/git/config": "SIBLING-GITCFG"}
    for rel, text in files.items():
        with open(os.path.join(home, rel), "w") as f:
            f.write(text + "\n")
    os.chmod(os.path.join(home, "proj"), 0o777)


def host_act(home, action, tag):
    """Do `action` on the denied paths of `home` (host path); returns the markers written."""
    markers = []
    for rel in ACTIONS[action]:
        path = os.path.join(home, rel)
        marker = f"CARVE-NEW-{tag}-{action}-{len(markers)}"
        markers.append(marker)
        if action == "rename":
            with open(path + ".tmp", "w") as f:
                f.write(marker + "\n")
            os.rename(path + ".tmp", path)
        elif action == "recreate":
            top = os.path.join(home, rel.split("/")[0])
            if os.path.isdir(top):
                shutil.rmtree(top)
            else:
                os.unlink(path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(marker + "\n")
        else:
            assert not os.path.exists(path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(marker + "\n")
    return markers


def controls_after(home, ws, other_dir, tag):
    """What must stay readable: files the host creates outside the carved directories."""
    with open(os.path.join(home, "notes", "new.txt"), "w") as f:
        f.write(f"CONTROL-NOTES-{tag}\n")
    with open(os.path.join(other_dir, "new.txt"), "w") as f:
        f.write(f"CONTROL-OTHER-{tag}\n")
    with open(os.path.join(ws, "hostnew"), "w") as f:
        f.write(f"CONTROL-WS-{tag}\n")


def sections(out):
    got, cur = {}, None
    for line in out.splitlines():
        if line.startswith("== "):
            cur = line[3:]
            got[cur] = []
        elif cur is not None:
            got[cur].append(line)
    return {k: "\n".join(v) for k, v in got.items()}


def run_while_host_acts(start, ws, act):
    """start() runs the sandbox (blocking); act() is called once it is ready."""
    res = {}
    t = threading.Thread(target=lambda: res.setdefault("r", start()))
    t.start()
    end = time.monotonic() + 60
    while not os.path.exists(os.path.join(ws, "ready")) and time.monotonic() < end and t.is_alive():
        time.sleep(0.05)
    ready = os.path.exists(os.path.join(ws, "ready"))
    if ready:
        act()
    with open(os.path.join(ws, "go"), "w"):
        pass
    t.join(150)
    assert ready, f"the sandbox never became ready: {res.get('r')}"
    return res["r"]


def check(r, denied, markers, homes_in, controls):
    assert r.rc == 0, r
    got = sections(r.out)
    for m in markers:
        assert m not in r.out, f"new content {m} read inside: {r.out}"
    for p in denied:
        assert p in got, (p, r.out)
        assert "Permission denied" in got[p], f"{p}: {got[p]!r} (want EACCES)"
    for p, want in controls.items():
        assert want in got.get(p, ""), f"over-carved: {p} -> {got.get(p)!r} (want {want})"
    assert "W\nWS-MKDIR-OK" in got["workspace"], got["workspace"]
    assert "CONTROL-WS-" in got["workspace"], got["workspace"]


@pytest.fixture
def fake_home(rt):
    home = os.path.join("/home", f"asbx-carve-{os.getpid()}-{os.urandom(3).hex()}")
    plant_home(home)
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("owner", ["root-owned", "user-owned"])
@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_quick_mode_denied_read_survives_host_change(rt, fake_home, action, owner):
    """user-owned: quick mode's user namespace (container root is the workspace's owner), in
    which the runtime lists the carved directories with that uid's rights."""
    home, ws = fake_home, os.path.join(fake_home, "proj")
    if owner == "user-owned":
        os.chown(ws, WS_OWNER, WS_OWNER)
        os.chmod(ws, 0o755)
    # /tmp is the sandbox's own; /var/tmp is the host's (/var is carved, /var/tmp is not)
    other = os.path.join("/var/tmp", f"asbx-carve-{os.getpid()}-{os.urandom(3).hex()}")
    os.makedirs(other)
    denied = [os.path.join(home, rel) for rel in ACTIONS[action]]
    controls = {os.path.join(home, ".bashrc"): "SIBLING-BASHRC",
                os.path.join(home, ".config/git/config"): "SIBLING-GITCFG",
                os.path.join(home, "notes/new.txt"): "CONTROL-NOTES-",
                os.path.join(other, "new.txt"): "CONTROL-OTHER-"}
    script = SCRIPT.format(paths=" ".join(denied + list(controls)))
    markers = []

    def act():
        markers.extend(host_act(home, action, "quick"))
        controls_after(home, ws, other, "quick")

    try:
        r = run_while_host_acts(
            lambda: sandbox_run(rt, "--workspace", ws, "--", "/bin/sh", "-c", script, timeout=150),
            ws, act)
    finally:
        shutil.rmtree(other, ignore_errors=True)
    check(r, denied, markers, [home], controls)


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_oci_mode_denied_read_survives_host_change(rt, make_bundle, action):
    b = policy_bundle(make_bundle)
    homes = {"/root": os.path.join(b.rootfs, "root"), "/home/user": os.path.join(b.rootfs, "home/user")}
    for h in homes.values():
        plant_home(h)
    os.makedirs(os.path.join(b.rootfs, "srv/data"))
    with open(os.path.join(b.rootfs, "etc/shadow"), "w") as f:
        f.write("OLD-SHADOW\n")
    ws_in, ws = "/home/user/proj", homes["/home/user"] + "/proj"
    if action == "create":  # the test plants .aws/credentials in /home/user: not new there
        shutil.rmtree(os.path.join(b.rootfs, "home/user/.aws"))
    denied = [os.path.join(c, rel) for c in homes for rel in ACTIONS[action]]
    if action != "create":
        denied.append("/etc/shadow")
    controls = {"/root/.bashrc": "SIBLING-BASHRC", "/home/user/.config/git/config": "SIBLING-GITCFG",
                "/home/user/notes/new.txt": "CONTROL-NOTES-", "/srv/data/new.txt": "CONTROL-OTHER-"}
    script = SCRIPT.format(paths=" ".join(denied + list(controls))).replace("/workspace/", ws_in + "/")
    pol = {"version": 1, "extends": "agent",
           "filesystem": {"allowWrite": ["/workspace", "/tmp", ws_in]}}
    markers = []

    def act():
        for tag, h in homes.items():
            markers.extend(host_act(h, action, tag.replace("/", "_")))
        if action != "create":
            shadow = os.path.join(b.rootfs, "etc/shadow")
            marker = f"CARVE-NEW-shadow-{action}"
            markers.append(marker)
            if action == "rename":
                with open(shadow + "+", "w") as f:
                    f.write(marker + "\n")
                os.rename(shadow + "+", shadow)
            else:
                os.unlink(shadow)
                with open(shadow, "w") as f:
                    f.write(marker + "\n")
        controls_after(homes["/home/user"], ws, os.path.join(b.rootfs, "srv/data"), "oci")

    r = run_while_host_acts(
        lambda: prun(rt, b, ["/bin/sh", "-c", script], profile=None, policy=pol, timeout=150)[0], ws, act)
    check(r, denied, markers, list(homes), controls)


def test_carve_too_large_refused_not_widened(rt, make_bundle):
    """Fail closed: a denied path in a directory of more entries than the carve may add rules
    (POLICY_CARVE_MAX_RULES, 65536) refuses create naming the rule; it never falls back to the
    hierarchy rule (which would leave a later file at the denied name readable)."""
    b = policy_bundle(make_bundle)
    big = os.path.join(b.rootfs, "srv/big")
    os.makedirs(big)
    for i in range(66000):
        os.close(os.open(os.path.join(big, f"f{i}"), os.O_CREAT | os.O_WRONLY, 0o644))
    pol = {"version": 1, "extends": "agent",
           "filesystem": {"denyRead": ["/srv/big/secret"]}}
    r, _ = prun(rt, b, ["/bin/true"], profile=None, policy=pol)
    assert r.rc != 0, r
    assert "65536" in r.err and "/srv/big" in r.err, r


def test_exec_process_carved_from_the_view_at_exec(rt, make_bundle):
    """`agentsbx exec` builds its own Landlock ruleset: the carve is made again from the
    container's view at that time, so a credential the host created or replaced since create
    (its mask detached, or none) is unreadable to the exec'd process too."""
    b = policy_bundle(make_bundle, args=("/bin/sleep", "120"))
    home = os.path.join(b.rootfs, "root")
    plant_home(home)
    r, cid = pcreate(rt, b)
    assert r.rc == 0, r
    assert rt.start(cid).rc == 0
    markers = host_act(home, "rename", "exec") + host_act(home, "create", "exec")
    paths = [f"/root/{rel}" for rel in ACTIONS["rename"] + ACTIONS["create"]]
    r = rt.cmd("exec", cid, "/bin/sh", "-c",
               "for f in " + " ".join(paths + ["/root/.bashrc"]) + "; do echo \"== $f\"; cat \"$f\" 2>&1; done",
               timeout=60)
    got = sections(r.out)
    for m in markers:
        assert m not in r.out, f"new content {m} read by the exec'd process: {r.out}"
    for p in paths:
        assert "Permission denied" in got.get(p, ""), (p, r.out)
    assert "SIBLING-BASHRC" in got.get("/root/.bashrc", ""), r.out


def test_symlinked_home_and_symlinked_credential(rt, make_bundle):
    """A home that is a symlink (/home/linked -> /srv/linked) is carved where it really is, and a
    denied path that is itself a symlink (~/.netrc -> dotfiles/netrc, a dotfiles checkout) is
    carved at its target too: the host replacing either by rename leaves nothing readable."""
    b = policy_bundle(make_bundle)
    real = os.path.join(b.rootfs, "srv/linked")
    plant_home(real)
    os.symlink("/srv/linked", os.path.join(b.rootfs, "home/linked"))
    user = os.path.join(b.rootfs, "home/user")
    plant_home(user)
    os.makedirs(os.path.join(user, "dotfiles"))
    with open(os.path.join(user, "dotfiles/netrc"), "w") as f:
        f.write("OLD-DOTFILES-NETRC\n")
    with open(os.path.join(user, "dotfiles/vimrc"), "w") as f:
        f.write("SIBLING-VIMRC\n")
    os.unlink(os.path.join(user, ".netrc"))
    os.symlink("dotfiles/netrc", os.path.join(user, ".netrc"))
    ws_in, ws = "/home/user/proj", os.path.join(user, "proj")
    paths = ["/home/linked/.netrc", "/home/linked/.config/gh/hosts.yml", "/home/user/.netrc",
             "/home/user/dotfiles/netrc", "/home/user/dotfiles/vimrc", "/home/linked/.bashrc"]
    script = SCRIPT.format(paths=" ".join(paths)).replace("/workspace/", ws_in + "/")
    pol = {"version": 1, "extends": "agent", "filesystem": {"allowWrite": ["/workspace", "/tmp", ws_in]}}
    markers = []

    def act():
        markers.extend(host_act(real, "rename", "linked"))
        os.makedirs(os.path.join(real, ".config/gh"))
        with open(os.path.join(real, ".config/gh/hosts.yml"), "w") as f:
            f.write("CARVE-NEW-linked-gh\n")
        markers.append("CARVE-NEW-linked-gh")
        with open(os.path.join(user, "dotfiles/netrc+"), "w") as f:
            f.write("CARVE-NEW-dotfiles\n")
        os.rename(os.path.join(user, "dotfiles/netrc+"), os.path.join(user, "dotfiles/netrc"))
        markers.append("CARVE-NEW-dotfiles")
        with open(os.path.join(ws, "hostnew"), "w") as f:
            f.write("CONTROL-WS-sym\n")

    r = run_while_host_acts(
        lambda: prun(rt, b, ["/bin/sh", "-c", script], profile=None, policy=pol, timeout=150)[0], ws, act)
    check(r, paths[:4], markers, [], {"/home/user/dotfiles/vimrc": "SIBLING-VIMRC",
                                      "/home/linked/.bashrc": "SIBLING-BASHRC"})
