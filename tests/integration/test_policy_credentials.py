"""Agent policy, credentials hidden in every home (issue 13 §3; docs/policy.md "Credentials").

A fake of every credential store the built-in profiles list is planted in four homes of the
test rootfs: /root, /home/user, a symlinked home /home/linked -> /srv/linked, and the home of a
service user that only /etc/passwd names (postgres: /var/lib/postgresql). The sandboxed command
`cat`s each of them; the test passes only when no planted content is printed (a mask reads as
an empty file or an empty directory). The quick-mode test plants a fake other sandbox's audit
log and approvals socket in a configured audit directory and state root under /var (visible
through the sandbox's /var bind) and reads nothing back, connects nowhere.
"""

import os
import socket

import pytest

from policyutil import policy_bundle, prun

pytestmark = pytest.mark.agentsbx_only("agent policy")

# (path under the home, a file inside it when the rule is a directory)
CREDENTIALS = [
    (".ssh", "id_ed25519"), (".gnupg", "private-keys-v1.d/k.key"), (".netrc", None),
    (".git-credentials", None), (".config/git/credentials", None),
    (".aws", "credentials"), (".azure", "msal_token_cache.json"), (".config/gcloud", "credentials.db"),
    (".oci", "config"), (".config/doctl", "config.yaml"), (".bluemix", "config.json"),
    (".aliyun", "config.json"), (".config/hcloud", "cli.toml"), (".s3cfg", None), (".boto", None),
    (".config/rclone", "rclone.conf"), (".terraform.d/credentials.tfrc.json", None), (".terraformrc", None),
    (".kube", "config"), (".vault-token", None), (".config/gh", "hosts.yml"), (".config/hub", None),
    (".config/glab-cli", "config.yml"),
    (".npmrc", None), (".yarnrc.yml", None), (".pypirc", None), (".config/pip/pip.conf", None),
    (".pip/pip.conf", None), (".config/pypoetry/auth.toml", None), (".cargo/credentials", None),
    (".cargo/credentials.toml", None), (".gem/credentials", None), (".config/composer/auth.json", None),
    (".composer/auth.json", None), (".m2/settings.xml", None), (".m2/settings-security.xml", None),
    (".gradle/gradle.properties", None), (".nuget/NuGet/NuGet.Config", None),
    (".config/NuGet/NuGet.Config", None),
    (".docker", "config.json"), (".docker", "contexts/meta/x/meta.json"),
    (".config/containers/auth.json", None),
    (".pgpass", None), (".my.cnf", None), (".mylogin.cnf", None), (".mongoshrc.js", None),
    (".mongorc.js", None),
    (".claude/.credentials.json", None), (".claude.json", None), (".codex", "auth.json"),
    (".gemini", "oauth_creds.json"), (".config/github-copilot", "hosts.json"), (".aider.conf.yml", None),
    (".env", None), (".password-store", "x.gpg"), (".local/share/keyrings", "login.keyring"),
    (".mozilla", "firefox/p/cookies.sqlite"), (".config/google-chrome", "Default/Cookies"),
    (".config/chromium", "Default/Cookies"),
    (".bash_history", None), (".zsh_history", None), (".psql_history", None), (".mysql_history", None),
    # the runtime's own per-user data (masked whatever the policy): review layers, audit, config
    (".local/share/agentsbx", "workspaces/x/upper/s.txt"), (".local/state/agentsbx", "audit/x.jsonl"),
    (".config/agentsbx", "secrets/token"),
]

HOMES = ["/root", "/home/user", "/home/linked", "/var/lib/postgresql"]

# host secrets outside any home (the file, or a file inside the masked directory)
HOST_SECRETS = [
    "/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/security/opasswd",
    "/var/backups/shadow.bak", "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_dsa_key", "/etc/ssl/private/server.key",
    "/etc/letsencrypt/live/x/privkey.pem", "/etc/krb5.keytab", "/etc/NetworkManager/system-connections/wifi",
    "/etc/wireguard/wg0.conf", "/etc/ipsec.secrets", "/etc/kubernetes/admin.conf",
    "/etc/rancher/k3s/k3s.yaml", "/var/lib/kubelet/pki/kubelet-client.key", "/etc/gitlab-runner/config.toml",
]


def plant(rootfs):
    """Returns {marker: path in the container}."""
    os.makedirs(os.path.join(rootfs, "srv/linked"), exist_ok=True)
    os.makedirs(os.path.join(rootfs, "home"), exist_ok=True)
    os.symlink("/srv/linked", os.path.join(rootfs, "home/linked"))
    with open(os.path.join(rootfs, "etc/passwd"), "a") as f:
        f.write("postgres:x:105:105:PostgreSQL:/var/lib/postgresql:/bin/sh\n")
    planted = {}
    for h, home in enumerate(HOMES):
        real = "/srv/linked" if home == "/home/linked" else home
        for i, (rel, inner) in enumerate(CREDENTIALS):
            path = os.path.join(home, rel, inner) if inner else os.path.join(home, rel)
            host = os.path.join(rootfs, real.lstrip("/"), rel, inner or "")
            host = host.rstrip("/")
            os.makedirs(os.path.dirname(host), exist_ok=True)
            marker = f"PLANTED-{h}-{i}-{len(planted)}"
            with open(host, "w") as f:
                f.write(marker + "\n")
            planted[marker] = path
    for i, path in enumerate(HOST_SECRETS):
        host = os.path.join(rootfs, path.lstrip("/"))
        os.makedirs(os.path.dirname(host), exist_ok=True)
        marker = f"PLANTED-host-{i}"
        with open(host, "w") as f:
            f.write(marker + "\n")
        planted[marker] = path
    return planted


def test_every_credential_in_every_home_hidden(rt, make_bundle):
    b = policy_bundle(make_bundle)
    planted = plant(b.rootfs)
    # one cat for all files (it goes on past unreadable ones; each process exiting non-zero counts
    # for limits.failedExecs); the control line proves that cat ran and printed what it could read
    with open(os.path.join(b.rootfs, "workspace/control"), "w") as f:
        f.write("CONTROL-READABLE\n")
    paths = " ".join(sorted(set(planted.values())))
    r, _ = prun(rt, b, ["/bin/sh", "-c", f"/bin/cat /workspace/control {paths} 2>/dev/null; true"],
                profile="agent")
    assert r.rc == 0, r
    assert "CONTROL-READABLE" in r.out, r
    leaked = sorted(planted[m] for m in planted if m in r.out)
    assert not leaked, f"{len(leaked)} of {len(planted)} planted credentials readable: {leaked}"


def test_locked_hides_the_same(rt, make_bundle):
    b = policy_bundle(make_bundle)
    planted = plant(b.rootfs)
    paths = " ".join(sorted(set(planted.values())))
    r, _ = prun(rt, b, ["/bin/sh", "-c", f"/bin/cat {paths} 2>/dev/null; echo done"],
                profile="locked")
    assert r.rc == 0 and "done" in r.out, r
    leaked = sorted(planted[m] for m in planted if m in r.out)
    assert not leaked, f"{len(leaked)} of {len(planted)} planted credentials readable: {leaked}"


@pytest.fixture
def var_dirs(rt):
    """An audit directory and a state root under /var/tmp (the sandbox binds the host's /var)."""
    base = os.path.join("/var/tmp", f"asbx-hide-{os.getpid()}-{os.urandom(3).hex()}")
    audit, root = os.path.join(base, "audit"), os.path.join(base, "root")
    os.makedirs(os.path.join(root, "other-container"))
    os.makedirs(audit)
    with open(os.path.join(audit, "other-sandbox.jsonl"), "w") as f:
        f.write('{"event":"exec","argv":["AUDIT-SECRET-ARGV"]}\n')
    with open(os.path.join(root, "other-container", "state.json"), "w") as f:
        f.write('{"id":"STATE-SECRET"}\n')
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(os.path.join(root, "other-container", "approvals.sock"))
    srv.listen(4)
    srv.setblocking(False)
    yield base, audit, root, srv
    srv.close()
    import shutil
    shutil.rmtree(base, ignore_errors=True)


PY_CONNECT = ("import socket,sys\n"
              "s=socket.socket(socket.AF_UNIX)\n"
              "try:\n s.connect(sys.argv[1]); print('CONNECTED')\n"
              "except OSError as e: print('refused', e.errno)\n")


def test_audit_dir_and_state_root_hidden_from_sandbox(rt, var_dirs, tmp_path):
    base, audit, root, srv = var_dirs
    ws = tmp_path / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    sock = os.path.join(root, "other-container", "approvals.sock")
    script = (f"cat {audit}/other-sandbox.jsonl {root}/other-container/state.json; ls -la {audit} {root}; "
              f"python3 -c \"$1\" {sock}; echo done")
    r = rt.cmd("sandbox", "--workspace", str(ws), "--", "/bin/sh", "-c", script, "sh", PY_CONNECT,
               root=False, global_args=["--root", root, "--audit-dir", audit], timeout=60)
    assert r.rc == 0 and "done" in r.out, r
    for secret in ("AUDIT-SECRET-ARGV", "STATE-SECRET", "other-sandbox", "other-container", "CONNECTED"):
        assert secret not in r.out, (secret, r)
    try:
        conn, _ = srv.accept()
        conn.close()
        pytest.fail("the sandbox connected to another container's approvals socket")
    except BlockingIOError:
        pass


def test_sandbox_hides_other_users_agentsbx_data(rt, tmp_path):
    """A root sandbox (quick mode: the host's /home read-only, root with CAP_DAC_OVERRIDE) does not
    read a user's review layers, audit logs or user config/secrets (outside tester: it read and
    rewrote another user's ~/.local/share/agentsbx/workspaces/ID/meta.json and upper)."""
    home = f"/home/asbx-b5a-{os.getpid()}-{os.urandom(3).hex()}"
    files = {"WS-UPPER-SECRET": ".local/share/agentsbx/workspaces/u1/upper/secret.txt",
             "WS-META-SECRET": ".local/share/agentsbx/workspaces/u1/meta.json",
             "AUDIT-SECRET": ".local/state/agentsbx/audit/u1.jsonl",
             "CONFIG-SECRET": ".config/agentsbx/secrets/token"}
    try:
        for marker, rel in files.items():
            path = os.path.join(home, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(marker + "\n")
        for dirpath, _, names in os.walk(home):
            os.chown(dirpath, 4242, 4242)
            os.chmod(dirpath, 0o700)
            for n in names:
                os.chown(os.path.join(dirpath, n), 4242, 4242)
        ws = tmp_path / "ws"
        ws.mkdir()
        paths = " ".join(os.path.join(home, rel) for rel in files.values())
        w = os.path.join(home, files["WS-META-SECRET"])
        r = rt.cmd("sandbox", "--workspace", str(ws), "--", "/bin/sh", "-c",
                   f"cat {paths} 2>/dev/null; ls {home}/.local/share/agentsbx/workspaces 2>&1; "
                   f"echo x >> {w} && echo META-WRITTEN; echo done", timeout=60)
        assert r.rc == 0 and "done" in r.out, r
        for marker in list(files) + ["u1", "META-WRITTEN"]:
            assert marker not in r.out, (marker, r)
        with open(w) as f:
            assert f.read() == "WS-META-SECRET\n"
    finally:
        import shutil
        shutil.rmtree(home, ignore_errors=True)


def test_credentials_hidden_in_uneven_homes(rt, make_bundle):
    """The mount layer reads each home's entries once and looks a `~/x` rule up only in the homes
    that hold its first component (runtime/policy_homes.h policy_home_may_hold). Edges of that: a
    credential that exists in one home only (a /home entry, a home only /etc/passwd names, a
    symlinked home), a home holding `.config` without the rule's `.config/gh` but with
    `.config/gcloud`, a credential that is itself a symlink to a directory outside the home, and
    homes that are not directories (a file in /home, a passwd home that is a file) or do not exist:
    every planted file reads as nothing, and the unrelated file next to them still reads."""
    b = policy_bundle(make_bundle)
    r_ = b.rootfs
    for d in ("home/solo", "home/other", "srv/linked2", "srv/aws-real", "var/lib/svc", "var/lib/empty"):
        os.makedirs(os.path.join(r_, d), exist_ok=True)
    os.symlink("/srv/linked2", os.path.join(r_, "home/linked2"))
    with open(os.path.join(r_, "home/afile"), "w") as f:
        f.write("not a home\n")
    with open(os.path.join(r_, "etc/passwd"), "a") as f:
        f.write("svc:x:120:120::/var/lib/svc:/bin/sh\nfilehome:x:121:121::/etc/hostname-home:/bin/sh\n"
                "gone:x:122:122::/var/lib/nonexistent:/bin/sh\nempty:x:123:123::/var/lib/empty:/bin/sh\n")
    with open(os.path.join(r_, "etc/hostname-home"), "w") as f:
        f.write("a file\n")
    planted = {}

    def put(real, shown, text=None):
        host = os.path.join(r_, real.lstrip("/"))
        os.makedirs(os.path.dirname(host), exist_ok=True)
        marker = text or f"UNEVEN-{len(planted)}"
        with open(host, "w") as f:
            f.write(marker + "\n")
        planted[marker] = shown

    put("/home/solo/.ssh/id_rsa", "/home/solo/.ssh/id_rsa")                  # only this home has .ssh
    put("/var/lib/svc/.pgpass", "/var/lib/svc/.pgpass")                      # only the passwd home
    put("/srv/linked2/.netrc", "/home/linked2/.netrc")                       # only the symlinked home
    put("/home/other/.config/gcloud/credentials.db", "/home/other/.config/gcloud/credentials.db")
    put("/srv/aws-real/credentials", "/home/other/.aws/credentials")         # .aws -> /srv/aws-real
    os.symlink("/srv/aws-real", os.path.join(r_, "home/other/.aws"))
    with open(os.path.join(r_, "home/other/.config/unrelated"), "w") as f:  # next to them, not a rule
        f.write("UNRELATED-READABLE\n")
    paths = " ".join(sorted(set(planted.values())))
    r, _ = prun(rt, b, ["/bin/sh", "-c", f"/bin/cat /home/other/.config/unrelated {paths} 2>/dev/null; "
                        "echo MOUNTINFO; cat /proc/self/mountinfo"], profile="agent")
    assert r.rc == 0, r
    out, mountinfo = r.out.split("MOUNTINFO\n", 1)
    assert "UNRELATED-READABLE" in out, r
    leaked = sorted(planted[m] for m in planted if m in out)
    assert not leaked, f"{len(leaked)} of {len(planted)} planted credentials readable: {leaked}"
    # the mask layer itself, not only the Landlock carve behind it: a mount on each rule's path,
    # where the lookup inside the root led (symlinks followed)
    points = {ln.split()[4] for ln in mountinfo.splitlines() if len(ln.split()) > 4}
    want = {"/home/solo/.ssh", "/var/lib/svc/.pgpass", "/srv/linked2/.netrc", "/home/other/.config/gcloud",
            "/srv/aws-real"}
    assert want <= points, sorted(want - points)
    assert not {"/home/other/.config", "/home/other/.config/unrelated"} & points, sorted(points)


def test_credential_names_differing_only_in_case_are_denied(rt, make_bundle):
    """On a home that ignores case (ext4 casefold, FUSE, CIFS, vfat) the file a `~/.ssh` rule must
    hide is listed as `.SSH` when it was created so; the Landlock carve gave such a name every
    right as "another entry" (outside attack 13: a case-insensitive FUSE home's `.SSH/id_rsa` and
    `.NETRC` were read). A name that differs from a denied one only in ASCII case gets no access
    (on this case-sensitive rootfs that is a distinct file, denied as well: fail closed), while an
    unrelated name beside it still reads."""
    b = policy_bundle(make_bundle)
    home = os.path.join(b.rootfs, "home", "casey")
    os.makedirs(os.path.join(home, ".SSH"))
    for rel, text in ((".SSH/id_rsa", "CASE-SSH-KEY"), (".NETRC", "CASE-NETRC"), ("notes.txt", "CASE-NOTES")):
        with open(os.path.join(home, rel), "w") as f:
            f.write(text + "\n")
    r, _ = prun(rt, b, ["/bin/sh", "-c", "for f in /home/casey/.SSH/id_rsa /home/casey/.NETRC /home/casey/notes.txt; "
                        "do /bin/cat $f 2>/dev/null; done; true"], profile="agent")
    assert r.rc == 0, r
    assert "CASE-NOTES" in r.out, r
    assert "CASE-SSH-KEY" not in r.out and "CASE-NETRC" not in r.out, r
