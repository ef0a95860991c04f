"""The compiled seccomp BPF cache (src/linux/seccomp_cache.c, issue #9).

`create` and `exec` look linux.seccomp up in <root>/@seccomp-cache/<key>.bpf before compiling it
with libseccomp. These tests check, from the outside (the entry files, the runtime's --debug log)
and from the inside (the probe's errno for a denied syscall), that:
  - a first run stores one entry, a second run with the same profile reuses it unchanged;
  - a corrupt, foreign, symlinked, group-writable or FIFO entry is ignored, the container still
    gets the right filter, and the entry is replaced by a valid one;
  - a different arch list or a changed profile gives a different key (and the new filter), while
    the same profile written with another JSON key order gives the same key;
  - a read-only, foreign or symlinked cache directory costs a compile, never a failed create;
  - a bad profile is never cached; the directory stays bounded;
  - the container cannot see the cache (escape-style probe: the path and the entries are not
    reachable from inside, not by path, not through /proc/*/root or an inherited fd).
agentsbx only: runc has no cache.
"""

import glob
import json
import os
import subprocess

import pytest

from conftest import probe_json

pytestmark = pytest.mark.agentsbx_only("the seccomp program cache is agentsbx's")

CACHE = "@seccomp-cache"
HEADER = 160  # struct entry_header
CONTAINERS_PROFILE = "/usr/share/containers/seccomp.json"


def profile(errno_ret=38, archs=None, reverse_keys=False):
    """mkdir/mkdirat -> errno_ret; everything else allowed."""
    r = {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno_ret}
    p = {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [r]}
    if archs is not None:
        p["architectures"] = archs
    if reverse_keys:
        p = {k: p[k] for k in reversed(list(p))}
        p["syscalls"] = [{k: r[k] for k in reversed(list(r))}]
    return p


def cache_dir(rt):
    return os.path.join(rt.root, CACHE)


def entries(rt):
    return sorted(glob.glob(os.path.join(cache_dir(rt), "*.bpf")))


def run_logged(rt, bundle, args, log):
    """Foreground run with --debug --log LOG; returns the Result."""
    bundle.args(*args)
    r, _ = rt.run(bundle, global_args=("--debug", "--log", log))
    return r


def cache_lines(log):
    if not os.path.exists(log):
        return []
    return [json.loads(l)["msg"] if l.startswith("{") else l for l in open(log).read().splitlines()
            if "seccomp cache" in l]


def mkdir_errno(rt, bundle, log):
    r = run_logged(rt, bundle, ["/probe", "syscall", "mkdir", "/newdir", 0o755], log)
    assert r.out.strip(), r
    return probe_json(r)["result"]


def test_first_run_stores_second_reuses(rt, bundle, tmp_path):
    bundle.linux["seccomp"] = profile()
    log = str(tmp_path / "log")
    assert mkdir_errno(rt, bundle, log) == "ENOSYS"
    es = entries(rt)
    assert len(es) == 1, es
    st = os.stat(es[0])
    assert (st.st_uid, st.st_mode & 0o7777) == (os.geteuid(), 0o600)
    d = os.stat(cache_dir(rt))
    assert (d.st_uid, d.st_mode & 0o7777) == (os.geteuid(), 0o700)
    assert any("stored" in l for l in cache_lines(log)), cache_lines(log)
    os.unlink(log)
    assert mkdir_errno(rt, bundle, log) == "ENOSYS"
    assert entries(rt) == es
    st2 = os.stat(es[0])
    assert (st2.st_ino, st2.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
    lines = cache_lines(log)
    assert any(" hit " in l for l in lines) and not any("stored" in l for l in lines), lines


def corrupt(path, how, work):
    if how == "flip-program":
        with open(path, "r+b") as f:
            f.seek(HEADER + 5)
            b = f.read(1)
            f.seek(HEADER + 5)
            f.write(bytes([b[0] ^ 0x40]))
    elif how == "flip-header":
        with open(path, "r+b") as f:
            f.seek(8 + 64)  # the instruction count
            f.write(b"\x01")
    elif how == "truncate":
        os.truncate(path, os.path.getsize(path) - 8)
    elif how == "empty":
        os.truncate(path, 0)
    elif how == "owner":
        os.chown(path, 65534, 65534)  # a valid entry, but not ours
    elif how == "group-writable":
        os.chmod(path, 0o620)
    elif how == "symlink":
        # a symlink to a perfectly valid copy: refused because it is a symlink
        copy = os.path.join(work, "valid-copy.bpf")
        with open(path, "rb") as src, open(copy, "wb") as dst:
            dst.write(src.read())
        os.chmod(copy, 0o600)
        os.unlink(path)
        os.symlink(copy, path)
    elif how == "fifo":
        os.unlink(path)
        os.mkfifo(path, 0o600)
    else:
        raise ValueError(how)


@pytest.mark.parametrize("how", ["flip-program", "flip-header", "truncate", "empty", "owner",
                                 "group-writable", "symlink", "fifo"])
def test_bad_entry_ignored_and_replaced(rt, bundle, tmp_path, how):
    bundle.linux["seccomp"] = profile()
    log = str(tmp_path / "log")
    assert mkdir_errno(rt, bundle, log) == "ENOSYS"
    (entry,) = entries(rt)
    corrupt(entry, how, str(tmp_path))
    os.unlink(log)
    # the container still gets the profile's filter (errnoRet 38), not whatever was on disk
    assert mkdir_errno(rt, bundle, log) == "ENOSYS"
    lines = cache_lines(log)
    assert any("ignored" in l for l in lines) and any("stored" in l for l in lines), lines
    st = os.lstat(entry)
    assert (st.st_uid, st.st_mode) == (os.geteuid(), 0o100600), oct(st.st_mode)
    # the replacement is valid: the next run hits it
    os.unlink(log)
    assert mkdir_errno(rt, bundle, log) == "ENOSYS"
    assert any(" hit " in l for l in cache_lines(log)), cache_lines(log)
    assert entries(rt) == [entry]


def test_key_follows_the_profile(rt, bundle, tmp_path):
    log = str(tmp_path / "log")
    bundle.linux["seccomp"] = profile(38)
    assert mkdir_errno(rt, bundle, log) == "ENOSYS"
    first = entries(rt)
    # a changed profile: new key, and the container gets the new errno (no stale hit)
    bundle.linux["seccomp"] = profile(6)
    assert mkdir_errno(rt, bundle, log) == "ENXIO"
    second = entries(rt)
    assert len(second) == 2 and set(first) < set(second)
    # a different architecture list: another key
    bundle.linux["seccomp"] = profile(38, archs=["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"])
    assert mkdir_errno(rt, bundle, log) == "ENOSYS"
    third = entries(rt)
    assert len(third) == 3
    # the same profile with its JSON keys in another order: the parsed struct is hashed, same key
    os.unlink(log)
    bundle.linux["seccomp"] = profile(6, reverse_keys=True)
    assert mkdir_errno(rt, bundle, log) == "ENXIO"
    assert entries(rt) == third
    assert any(" hit " in l for l in cache_lines(log)), cache_lines(log)


def test_bad_profile_is_never_cached(rt, bundle, tmp_path):
    log = str(tmp_path / "log")
    bundle.linux["seccomp"] = {"defaultAction": "SCMP_ACT_ALLOW",
                               "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_FOO"}]}
    for _ in range(2):
        r = run_logged(rt, bundle, ["/bin/true"], log)
        assert r.rc != 0 and "SCMP_ACT_FOO" in r.err, r
    assert entries(rt) == []


def run_in_private_ns(rt, bundle, setup, log, cid):
    """`agentsbx run` in a private mount namespace after the shell commands `setup` ($D = the
    cache dir): ro bind mounts vanish with the namespace, nothing on the host changes."""
    bundle.save()
    rt._track(cid, bundle)
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-ec",
            setup + '\nshift\nexec "$@"', "sh", cache_dir(rt),
            rt.binary, "--root", rt.root, "--debug", "--log", log, "run", "--bundle", bundle.path, cid]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=dict(os.environ, D=cache_dir(rt)))
    p.out, p.err, p.rc = p.stdout, p.stderr, p.returncode
    return p


def test_read_only_cache_dir(rt, bundle, tmp_path):
    log = str(tmp_path / "log")
    bundle.linux["seccomp"] = profile(38)
    assert mkdir_errno(rt, bundle, log) == "ENOSYS"
    before = entries(rt)
    ro = 'mount --bind "$D" "$D"\nmount -o remount,bind,ro "$D"'
    # a hit works on a read-only directory
    bundle.args("/probe", "syscall", "mkdir", "/newdir", 0o755)
    os.unlink(log)
    p = run_in_private_ns(rt, bundle, ro, log, rt.new_id())
    assert probe_json(p)["result"] == "ENOSYS", p
    assert any(" hit " in l for l in cache_lines(log)), cache_lines(log)
    # a miss compiles, cannot store, and the create still succeeds with the right filter
    bundle.linux["seccomp"] = profile(6)
    os.unlink(log)
    p = run_in_private_ns(rt, bundle, ro, log, rt.new_id())
    assert p.rc == 1 and probe_json(p)["result"] == "ENXIO", p
    assert any("store" in l and "Read-only" in l for l in cache_lines(log)), cache_lines(log)
    assert entries(rt) == before


@pytest.mark.parametrize("how", ["group-writable", "foreign-owner", "symlink"])
def test_untrusted_cache_dir_not_used(rt, bundle, tmp_path, how):
    log = str(tmp_path / "log")
    os.makedirs(rt.root, mode=0o700, exist_ok=True)
    d = cache_dir(rt)
    elsewhere = str(tmp_path / "elsewhere")
    os.mkdir(elsewhere, 0o700)
    if how == "symlink":
        os.symlink(elsewhere, d)
    else:
        os.mkdir(d, 0o700)
        if how == "group-writable":
            os.chmod(d, 0o770)
        else:
            os.chown(d, 65534, 65534)
    bundle.linux["seccomp"] = profile(38)
    assert mkdir_errno(rt, bundle, log) == "ENOSYS"
    assert any("unusable" in l for l in cache_lines(log)), cache_lines(log)
    assert os.listdir(elsewhere) == []
    if how != "symlink":
        assert os.listdir(d) == []


def test_bounded_size(rt, bundle, tmp_path):
    log = str(tmp_path / "log")
    os.makedirs(cache_dir(rt), mode=0o700)
    os.chmod(rt.root, 0o700)
    for i in range(70):
        p = os.path.join(cache_dir(rt), f"{i:064x}.bpf")
        with open(p, "wb") as f:
            f.write(b"x")
        os.chmod(p, 0o600)
        os.utime(p, (1000000 + i, 1000000 + i))
    bundle.linux["seccomp"] = profile(38)
    assert mkdir_errno(rt, bundle, log) == "ENOSYS"
    es = [os.path.basename(e) for e in entries(rt)]
    assert len(es) <= 64, len(es)
    # the oldest went first; the new entry stays
    assert f"{0:064x}.bpf" not in es and f"{69:064x}.bpf" in es
    assert any(not e.startswith("0000") for e in es)


def test_exec_uses_the_cache(rt, bundle, tmp_path):
    log = str(tmp_path / "log")
    bundle.linux["seccomp"] = profile(38)
    bundle.args("sleep", "60")
    r, cid = rt.create(bundle, global_args=("--debug", "--log", log))
    assert r.ok, r
    assert rt.start(cid).ok
    os.unlink(log)
    r = rt.cmd("--debug", "--log", log, "exec", cid, "/probe", "syscall", "mkdir", "/x", "493")
    assert probe_json(r)["result"] == "ENOSYS", r
    assert any(" hit " in l for l in cache_lines(log)), cache_lines(log)
    # escape-style: an exec'd process inherits no fd of the state root or the cache
    r = rt.cmd("exec", cid, "sh", "-c", "ls -l /proc/self/fd/ /proc/1/fd/ 2>&1")
    assert r.ok and CACHE not in r.out and rt.root not in r.out, r


def test_container_cannot_reach_the_cache(rt, bundle, tmp_path):
    """Escape-style: from inside, the cache is not reachable by its host path, by any *.bpf file,
    through /proc/1/root or /proc/self/root, through an inherited fd, or as a mount."""
    log = str(tmp_path / "log")
    bundle.linux["seccomp"] = profile(38)
    assert mkdir_errno(rt, bundle, log) == "ENOSYS"
    (entry,) = entries(rt)
    name = os.path.basename(entry)
    script = f"""
for p in '{cache_dir(rt)}' '{entry}' /proc/1/root'{cache_dir(rt)}' /proc/self/root'{entry}'; do
  if [ -e "$p" ]; then echo "REACHABLE $p"; fi
  if echo x 2>/dev/null > "$p"; then echo "WRITABLE $p"; fi
done
find / -xdev -name '*.bpf' 2>/dev/null | sed 's/^/FOUND /'
find / -xdev -name '{CACHE}' 2>/dev/null | sed 's/^/FOUND /'
ls -l /proc/self/fd/ /proc/1/fd/ 2>&1 | grep -e '{CACHE}' -e '{rt.root}' | sed 's/^/FD /'
grep -e '{rt.root}' -e '{CACHE}' /proc/self/mountinfo | sed 's/^/MOUNT /'
echo done
"""
    bundle.args("sh", "-c", script)
    r, _ = rt.run(bundle)
    assert r.ok and r.out.strip().endswith("done"), r
    bad = [l for l in r.out.splitlines() if l.split(" ")[0] in ("REACHABLE", "WRITABLE", "FOUND", "FD", "MOUNT")]
    assert not bad, bad
    # and the entry on the host is unchanged
    assert os.path.exists(entry) and os.path.getsize(entry) > HEADER and name in os.listdir(cache_dir(rt))


def docker_profile():
    prof = json.load(open(CONTAINERS_PROFILE))
    caps = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
    arch = "amd64"
    archs = []
    for m in prof.get("archMap", []):
        if m["architecture"] == "SCMP_ARCH_X86_64":
            archs = ["SCMP_ARCH_X86_64"] + m.get("subArchitectures", [])
    out = []
    for s in prof["syscalls"]:
        inc, exc = s.get("includes") or {}, s.get("excludes") or {}
        if (inc.get("arches") and arch not in inc["arches"]) or (exc.get("arches") and arch in exc["arches"]):
            continue
        if (inc.get("caps") and not all(c in caps for c in inc["caps"])) or \
                (exc.get("caps") and any(c in caps for c in exc["caps"])):
            continue
        r = {"names": s["names"], "action": s["action"]}
        for k in ("args", "errnoRet"):
            if s.get(k) is not None:
                r[k] = s[k]
        out.append(r)
    return {"defaultAction": prof["defaultAction"], "defaultErrnoRet": prof.get("defaultErrnoRet", 1),
            "architectures": archs, "syscalls": out}


@pytest.mark.skipif(not os.path.exists(CONTAINERS_PROFILE) or os.uname().machine != "x86_64",
                    reason=f"{CONTAINERS_PROFILE} missing (golang-github-containers-common) or not x86_64")
def test_docker_profile_from_cache(rt, bundle, tmp_path):
    """Docker's profile: the cached program denies what the compiled one denies (add_key, x86_64
    nr 248, is not in the profile: the default action, ENOSYS; the kernel alone says EFAULT)."""
    log = str(tmp_path / "log")
    bundle.linux["seccomp"] = docker_profile()
    results = []
    for _ in range(2):
        r = run_logged(rt, bundle, ["/probe", "syscall", "248", "0", "0", "0", "0", "0"], log)
        results.append(probe_json(r)["result"])
        r = run_logged(rt, bundle, ["/probe", "syscall", "getppid"], log)
        results.append(probe_json(r)["result"])
    assert results == ["ENOSYS", "ok"] * 2, results
    assert len(entries(rt)) == 1
    lines = cache_lines(log)
    assert sum(" hit " in l for l in lines) == 3 and sum("stored" in l for l in lines) == 1, lines
