#!/usr/bin/python3
"""make bench: agentsbx against runc and crun, every scenario of issue 9, in one run.

Scenarios (each runtime gets the same bundle, runs are interleaved round-robin so that machine
noise hits all runtimes alike; two warm-up rounds are not counted):
  run          `R run` of /bin/true (create + start + wait + delete)
  run-seccomp  the same with Docker's default seccomp profile (containers-common's seccomp.json,
               turned into linux.seccomp the way the engines do for the default capabilities)
  exec         `R exec ID /bin/true` into a running container
  external     the second timing method: `run` and `exec` again, timed by hyperfine -N from
               outside (its own clock and process start), printed beside the bench's medians
  rss          peak RSS of the runtime process tree (wait4 rusage ru_maxrss: the maximum over the
               process and the descendants it reaped, not a sum; what /usr/bin/time -v prints)
  memlimit     smallest memory cgroup limit under which `R run` still succeeds (bisection, 16 KiB
               steps, on a memory cgroup the bench creates and puts the runtime process into)
  syscalls     syscalls per `R run` (strace -f -c: runtime, its helpers and the container's /bin/true)
  parallel     100 `R run` started at once on this machine: wall time and containers per second
  sandbox      `agentsbx sandbox --rootfs ROOTFS -- /bin/true` (agent profile) against a plain
               `agentsbx run` of a bundle with the same rootfs
  sandbox-user `agentsbx sandbox --profile rootless -- /bin/true` run by a throw-away user the bench
               creates (issue 17: own user namespace, no cgroup, per-user state) against the
               same command as root; both through the same setpriv + env -i exec chain, on the
               same user-owned workspace (so root's run has quick mode's user namespace too); then
               again with the workspace a git repository (sandbox-user-git: root pins .git/config
               and .git/hooks in its mount namespace, the user cannot and records them unpinned)
  vm           (optional: --only vm) the vm isolation tier's create-to-exit and peak RSS against
               the container tier, same bundle and policy (issue 22)
  review       (optional: --only review) issue 18's review workspace against a direct bind: start
               (sandbox --review vs sandbox of /bin/true), a 10,000-file npm-style write inside,
               `workspace diff --json` and `workspace apply` of those files
  egress       network.mode filtered vs open, same container: TCP connect, a small HTTP request
               and a 64 MiB download through the SNI/Host splice, DNS through the stub, TLS on
               the SNI-only and the intercepted (network.credentials) path, 100 parallel
               connections, a streaming connection (see tests/bench/egress_bench.py; a fake
               upstream in namespaces of its own; --egress-baseline BIN alternates another binary)
Numbers only, never pass/fail; not part of `make check`. JSON lands in bench/results/.

crun 1.8 refuses this machine's hybrid cgroup layout; on hybrid hosts it runs in a private mount
namespace where the cgroup2 mount at /sys/fs/cgroup/unified is detached (the host is untouched).
The namespace is made in the forked child before the timing helper (tests/bench/measure.c)
starts, so its cost is not in crun's numbers."""
import argparse, ctypes, datetime, json, os, shutil, signal, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
DOCKER_PROFILE = "/usr/share/containers/seccomp.json"
UNIFIED = "/sys/fs/cgroup/unified"
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, MS_REC, MS_PRIVATE, MNT_DETACH = 0x20000, 0x4000, 0x40000, 2


def hybrid_host():
    try:
        return os.path.ismount(UNIFIED) and os.statvfs(UNIFIED) is not None and \
            subprocess.run(["stat", "-fc", "%T", UNIFIED], capture_output=True, text=True).stdout.strip() == "cgroup2fs"
    except OSError:
        return False


def private_cgroup_v1_ns():
    """In the forked child: a private mount namespace without the cgroup2 mount (for crun)."""
    if libc.unshare(CLONE_NEWNS) != 0:
        os._exit(120)
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        os._exit(121)
    libc.umount2(UNIFIED.encode(), MNT_DETACH)


class Runtime:
    def __init__(self, name, path, needs_ns=False):
        self.name, self.path, self.needs_ns = name, path, needs_ns

    def argv(self, root, *args):
        return [self.path, "--root", root, *args]


def spawn(argv, setup=None, cgroup_procs=None, cwd=None, errlog=None):
    """fork + exec with stdio on /dev/null (stderr to `errlog` if given); returns the pid.
    `setup` runs in the child first."""
    pid = os.fork()
    if pid == 0:
        try:
            if cgroup_procs:
                with open(cgroup_procs, "w") as f:
                    f.write("0")
            if setup:
                setup()
            if cwd:
                os.chdir(cwd)
            fd = os.open("/dev/null", os.O_RDWR)
            for i in (0, 1, 2):
                os.dup2(fd, i)
            if errlog:
                os.dup2(os.open(errlog, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    return pid


MEASURE = None  # path of the compiled measure.c helper
_out_seq = [0]
LAST_ERR = [""]


def build_measure(work):
    global MEASURE
    MEASURE = os.path.join(work, "measure")
    src = os.path.join(HERE, "measure.c")
    for extra in (["-static"], []):
        if subprocess.run(["cc", "-O2", *extra, "-o", MEASURE, src]).returncode == 0:
            return
    raise SystemExit("cannot build tests/bench/measure.c")


def timed(argv, setup=None, **kw):
    """(seconds, exit code, peak RSS KiB) of one command, measured by the static helper."""
    _out_seq[0] += 1
    out = os.path.join(os.path.dirname(MEASURE), f"m{_out_seq[0]}")
    pid = spawn([MEASURE, out] + argv, setup, errlog=out + ".err", **kw)
    _, status, _ = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or not os.path.exists(out):
        return 0.0, 255, 0
    ns, code, rss = (int(x) for x in open(out).read().split())
    if code != 0:
        LAST_ERR[0] = open(out + ".err").read()[-300:]
    os.unlink(out)
    os.unlink(out + ".err")
    return ns / 1e9, code, rss


def quiet(argv, setup=None):
    pid = spawn(argv, setup)
    os.waitpid(pid, 0)


def summary(xs, scale=1.0):
    if not xs:
        return None
    xs = [x * scale for x in xs]
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def oci_from_docker_profile(prof, caps, arch="amd64"):
    """containers-common profile -> linux.seccomp for the given capabilities (what the engines do)."""
    native = {"amd64": "SCMP_ARCH_X86_64"}[arch]
    archs = []
    for m in prof.get("archMap", []):
        if m["architecture"] == native:
            archs = [native] + m.get("subArchitectures", [])
    out = []
    for s in prof["syscalls"]:
        inc, exc = s.get("includes") or {}, s.get("excludes") or {}
        if inc.get("arches") and arch not in inc["arches"]:
            continue
        if exc.get("arches") and arch in exc["arches"]:
            continue
        if inc.get("caps") and not all(c in caps for c in inc["caps"]):
            continue
        if exc.get("caps") and any(c in caps for c in exc["caps"]):
            continue
        r = {"names": s["names"], "action": s["action"]}
        for k in ("args", "errnoRet"):
            if s.get(k) is not None:
                r[k] = s[k]
        out.append(r)
    o = {"defaultAction": prof["defaultAction"], "architectures": archs, "syscalls": out}
    if "defaultErrnoRet" in prof:
        o["defaultErrnoRet"] = prof["defaultErrnoRet"]
    return o


def make_bundle(d, args, seccomp=None):
    """A busybox bundle from `runc spec` (ociVersion every runtime here accepts)."""
    rootfs = os.path.join(d, "rootfs")
    if not os.path.isdir(rootfs):
        os.makedirs(os.path.join(rootfs, "bin"))
        shutil.copy(shutil.which("busybox") or "/bin/busybox", os.path.join(rootfs, "bin", "busybox"))
        for a in ("sh", "true", "sleep"):
            os.symlink("busybox", os.path.join(rootfs, "bin", a))
        for x in ("proc", "sys", "dev", "tmp", "etc", "workspace", "run"):
            os.makedirs(os.path.join(rootfs, x), exist_ok=True)
    if os.path.exists(os.path.join(d, "config.json")):
        os.unlink(os.path.join(d, "config.json"))
    spec = ["runc", "spec"] if shutil.which("runc") else [os.path.join(TOP, "agentsbx"), "spec"]
    subprocess.run(spec + ["--bundle", d], check=True)
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = args
    # runc 1.1's spec raises ambient caps without inheritable ones; runc ignores the failed raise,
    # agentsbx refuses it (fail closed). Not what is measured here: drop ambient for everyone.
    cfg["process"]["capabilities"].pop("ambient", None)
    if seccomp:
        cfg["linux"]["seccomp"] = seccomp
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    return cfg


class Bench:
    def __init__(self, a, work):
        self.a, self.work, self.results, self.seq = a, work, {}, 0
        self.rts = [Runtime("agentsbx", os.path.join(TOP, "agentsbx"))]
        if a.baseline:  # another agentsbx binary (e.g. main's), interleaved with this one
            self.rts.append(Runtime("agentsbx-base", os.path.abspath(a.baseline)))
        if shutil.which("runc"):
            self.rts.append(Runtime("runc", shutil.which("runc")))
        if shutil.which("crun"):
            self.rts.append(Runtime("crun", shutil.which("crun"), needs_ns=hybrid_host()))

    def setup_of(self, rt):
        return private_cgroup_v1_ns if rt.needs_ns else None

    def root(self, rt):
        return os.path.join(self.work, "state-" + rt.name)

    def cid(self, rt):
        self.seq += 1
        return f"bench{os.getpid()}-{self.seq}-{rt.name}"

    def cmd(self, rt, *args):
        return rt.argv(self.root(rt), *args)

    def interleave(self, fn, n, rts=None):
        """fn(rt) -> seconds or raises; n counted rounds after two warm-up rounds."""
        rts = rts or self.rts
        out = {rt.name: [] for rt in rts}
        for i in range(n + 2):
            for rt in rts:
                if out[rt.name] is None:
                    continue
                try:
                    v = fn(rt)
                except RuntimeError as e:
                    print(f"  {rt.name}: {e}", file=sys.stderr)
                    out[rt.name] = None
                    continue
                if i >= 2:
                    out[rt.name].append(v)
        return out

    def run_once(self, rt, bundle, extra=(), **kw):
        dt, rc, rss = timed(self.cmd(rt, "run", "--bundle", bundle, self.cid(rt), *extra), self.setup_of(rt), **kw)
        if rc != 0:
            raise RuntimeError(f"run failed ({rc}): {LAST_ERR[0].strip()}")
        return dt, rss

    def record(self, name, unit, per_rt, scale=1.0, lower_better=True, note=""):
        self.results[name] = {"unit": unit, "note": note,
                              "runtimes": {k: summary(v, scale) if v else None for k, v in per_rt.items()}}
        print_scenario(name, self.results[name])

    def start_sleepers(self, ids, what):
        """One running container of b-sleep per runtime (the target of `exec`): ids[name] = id."""
        b = os.path.join(self.work, "b-sleep")
        for rt in self.rts:
            ids[rt.name] = cid = self.cid(rt)
            for verb in (("create", "--bundle", b, cid), ("start", cid)):
                _, rc, _ = timed(self.cmd(rt, *verb), self.setup_of(rt))
                if rc != 0:
                    raise SystemExit(f"{what}: {rt.name} {verb[0]} failed: {LAST_ERR[0].strip()}")

    def stop_sleepers(self, ids):
        for rt in self.rts:
            if rt.name in ids:
                quiet(self.cmd(rt, "delete", "-f", ids[rt.name]), self.setup_of(rt))

    # ---- scenarios ----
    def s_floor(self):
        per = {"true": []}
        for i in range(self.a.n + 2):
            dt, _, _ = timed(["/bin/true"])
            if i >= 2:
                per["true"].append(dt)
        self.record("floor", "ms", per, 1000, note="the timer's floor: vfork+exec+wait of /bin/true")

    def s_run(self):
        b = os.path.join(self.work, "b-true")
        self.record("run", "ms", self.interleave(lambda rt: self.run_once(rt, b)[0], self.a.n), 1000)

    def s_run_seccomp(self):
        if not os.path.exists(DOCKER_PROFILE):
            print(f"run-seccomp: {DOCKER_PROFILE} missing (golang-github-containers-common)", file=sys.stderr)
            return
        b = os.path.join(self.work, "b-seccomp")
        self.record("run-seccomp", "ms", self.interleave(lambda rt: self.run_once(rt, b)[0], self.a.n), 1000,
                    note="Docker's default profile from containers-common")

    def s_exec(self):
        ids = {}
        try:
            self.start_sleepers(ids, "exec")

            def one(rt):
                dt, rc, _ = timed(self.cmd(rt, "exec", ids[rt.name], "/bin/true"), self.setup_of(rt))
                if rc != 0:
                    raise RuntimeError(f"exec failed ({rc}): {LAST_ERR[0].strip()}")
                return dt
            self.record("exec", "ms", self.interleave(one, self.a.n), 1000)
        finally:
            self.stop_sleepers(ids)

    def s_rss(self):
        b = os.path.join(self.work, "b-true")
        self.record("rss", "KiB", self.interleave(lambda rt: self.run_once(rt, b)[1], max(5, self.a.n // 2)),
                    note="peak RSS of the runtime process tree (ru_maxrss)")

    def s_syscalls(self):
        if not shutil.which("strace"):
            print("syscalls: strace missing", file=sys.stderr)
            return
        b = os.path.join(self.work, "b-true")
        out = os.path.join(self.work, "strace.out")

        def one(rt):
            argv = ["strace", "-f", "-c", "-o", out] + self.cmd(rt, "run", "--bundle", b, self.cid(rt))
            _, rc, _ = timed(argv, self.setup_of(rt))
            if rc != 0:
                raise RuntimeError(f"strace run failed ({rc})")
            for line in open(out):
                t = line.split()
                if t and t[-1] == "total":
                    return int(t[3])
            raise RuntimeError("no strace total")
        self.record("syscalls", "calls", self.interleave(one, 3), note="strace -f -c, whole tree")

    def s_memlimit(self):
        cg = MemCgroup()
        if not cg.ok:
            print("memlimit: no memory cgroup available", file=sys.stderr)
            return
        b = os.path.join(self.work, "b-true")
        res = {}
        try:
            for rt in self.rts:
                def ok(limit):
                    cg.set(limit)
                    cid = self.cid(rt)
                    _, rc, _ = timed(self.cmd(rt, "run", "--bundle", b, cid), self.setup_of(rt), cgroup_procs=cg.procs)
                    cg.drain()
                    quiet(self.cmd(rt, "delete", "-f", cid), self.setup_of(rt))
                    leaks = remove_cgroups_named(cid)
                    if leaks:
                        print(f"  memlimit: {rt.name} left cgroups behind at {limit} B: {leaks}", file=sys.stderr)
                    return rc == 0
                lo, hi = 0, 64 << 20
                if not ok(hi):
                    res[rt.name] = None
                    continue
                while hi - lo > 16 << 10:
                    mid = (lo + hi) // 2 // 4096 * 4096
                    if ok(mid):
                        hi = mid
                    else:
                        lo = mid
                res[rt.name] = [hi // 1024]
        finally:
            cg.remove()
        self.record("memlimit", "KiB", res, note=f"smallest {cg.knob} that still runs /bin/true (16 KiB steps)")

    def s_parallel(self):
        b = os.path.join(self.work, "b-true")
        n = self.a.parallel

        def one(rt):
            t = time.perf_counter()
            logs = [os.path.join(self.work, f"par{i}.err") for i in range(n)]
            pids = [spawn(self.cmd(rt, "run", "--bundle", b, self.cid(rt)), self.setup_of(rt), errlog=logs[i])
                    for i in range(n)]
            bad = [i for i, p in enumerate(pids) if os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) != 0]
            dt = time.perf_counter() - t
            if bad:
                raise RuntimeError(f"{len(bad)}/{n} parallel runs failed, e.g. {open(logs[bad[0]]).read().strip()[:300]}")
            return n / dt
        per = self.interleave(one, 3)
        self.record("parallel", "containers/s", per, lower_better=False,
                    note=f"{n} `run` of /bin/true started at once, {os.cpu_count()} CPUs")

    def s_external(self):
        """The second timing method (issue 20): hyperfine (Debian's package) times the same `run`
        and `exec` commands from outside, with its own clock and process start (no shell: -N),
        and the bench's medians are printed beside its. hyperfine runs one command's series at a
        time, so the runtimes take turns in rounds of a few runs each (order reversed every
        round) to spread machine noise over all of them. crun's hyperfine runs in the private
        mount namespace the bench gives crun on hybrid hosts (made before hyperfine starts)."""
        hf = shutil.which("hyperfine")
        if not hf:
            print("external: hyperfine missing (apt-get install hyperfine)", file=sys.stderr)
            return
        bt = os.path.join(self.work, "b-true")
        ids, times = {}, {}
        rounds, per_round = 4, max(2, self.a.n // 4)
        try:
            self.start_sleepers(ids, "external")
            for verb in ("run", "exec"):
                times[verb] = {rt.name: [] for rt in self.rts}
                for r in range(rounds):
                    for rt in (self.rts if r % 2 == 0 else list(reversed(self.rts))):
                        if verb == "run":
                            argv = self.cmd(rt, "run", "--bundle", bt, f"ext{os.getpid()}-{rt.name}")
                        else:
                            argv = self.cmd(rt, "exec", ids[rt.name], "/bin/true")
                        out = os.path.join(self.work, "hyperfine.json")
                        pid = spawn([hf, "-N", "--warmup", "1" if r else "2", "--runs", str(per_round),
                                     "--export-json", out, " ".join(argv)], self.setup_of(rt))
                        _, status = os.waitpid(pid, 0)
                        if os.waitstatus_to_exitcode(status) != 0:
                            print(f"  external: hyperfine of {rt.name} {verb} failed", file=sys.stderr)
                            times[verb][rt.name] = None
                            continue
                        if times[verb][rt.name] is not None:
                            times[verb][rt.name] += json.load(open(out))["results"][0]["times"]
                        os.unlink(out)
                self.record(f"external-{verb}", "ms", times[verb], 1000,
                            note=f"hyperfine -N, {rounds} rounds of {per_round} runs per runtime")
                mine = self.results.get(verb)
                ext = self.results[f"external-{verb}"]["runtimes"]
                if mine:
                    for k, s in ext.items():
                        b = mine["runtimes"].get(k)
                        if s and b:
                            print(f"  {k:14} hyperfine / bench median: {s['median'] / b['median']:.2f}")
                    for base in ("crun", "runc"):
                        a0, b0 = ext.get("agentsbx"), ext.get(base)
                        a1, b1 = mine["runtimes"].get("agentsbx"), mine["runtimes"].get(base)
                        if a0 and b0 and a1 and b1:
                            print(f"  agentsbx / {base}: hyperfine {a0['median'] / b0['median']:.2f}, "
                                  f"bench {a1['median'] / b1['median']:.2f}")
        finally:
            self.stop_sleepers(ids)

    def s_vm(self):
        """The vm isolation tier (issue 22), optional (--only vm: each run boots a guest, ~6-15 s
        under TCG): `agentsbx run` of the busybox /bin/true bundle under {"isolation": "vm",
        "network": {"mode": "none"}} against the same bundle and policy without `isolation`, both
        as `run` (create-to-exit); peak RSS is the largest process of the tree (QEMU). The bundle
        is owned by an unprivileged uid (QEMU runs as the bundle's owner; a root-owned one is
        refused)."""
        if not shutil.which("qemu-system-x86_64"):
            print("vm: qemu-system-x86_64 missing (apt-get install qemu-system-x86)", file=sys.stderr)
            return
        r = subprocess.run([os.path.join(TOP, "contrib", "vm", "fetch-kernel.sh"), "/var/cache/agentsbx-vm"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"vm: no guest kernel: {r.stderr.strip()[-200:]}", file=sys.stderr)
            return
        b = os.path.join(self.work, "b-vm")
        make_bundle(b, ["/bin/true"])
        os.chmod(self.work, 0o755)
        subprocess.run(["chown", "-R", "47391:47391", b], check=True)
        pols = {}
        for name, extra in (("vm", {"isolation": "vm"}), ("container", {})):
            pols[name] = os.path.join(self.work, f"policy-{name}.json")
            json.dump({"version": 1, "network": {"mode": "none"}, **extra}, open(pols[name], "w"))
        vm, ct = Runtime("vm", self.rts[0].path), Runtime("container", self.rts[0].path)
        rss = {"vm": [], "container": []}

        def one(rt):
            dt, rc, peak = timed([rt.path, "--root", self.root(rt), "--policy", pols[rt.name], "run", "--bundle", b,
                                  self.cid(rt)])
            if rc != 0:
                raise RuntimeError(f"vm run failed ({rc}): {LAST_ERR[0].strip()}")
            rss[rt.name].append(peak)
            return dt
        n = max(3, self.a.n // 5)
        self.record("vm", "ms", self.interleave(one, n, [vm, ct]), 1000,
                    note=f"create-to-exit of `run` under isolation vm (TCG unless /dev/kvm works) vs container, {n} runs")
        self.record("vm-rss", "KiB", {k: v[2:] for k, v in rss.items()}, note="peak RSS of the tree (QEMU for vm)")

    def s_sandbox(self):
        b = os.path.join(self.work, "b-true")
        ws = os.path.join(self.work, "workspace")
        os.makedirs(ws, exist_ok=True)
        asbx = self.rts[0]
        sandbox = Runtime("sandbox-agent", asbx.path)
        plain = Runtime("agentsbx-run", asbx.path)
        pair = [plain, sandbox]
        if self.a.baseline:
            pair += [Runtime("base-run", os.path.abspath(self.a.baseline)),
                     Runtime("base-sandbox-agent", os.path.abspath(self.a.baseline))]

        def one(rt):
            if rt.name.endswith("-run"):
                return self.run_once(rt, b)[0]
            dt, rc, _ = timed(self.cmd(rt, "sandbox", "--id", self.cid(rt), "--rootfs", os.path.join(b, "rootfs"),
                                       "--workspace", ws, "--", "/bin/true"), cwd=ws)
            if rc != 0:
                raise RuntimeError(f"sandbox failed ({rc}): {LAST_ERR[0].strip()}")
            return dt
        self.record("sandbox", "ms", self.interleave(one, self.a.n, pair), 1000,
                    note="agentsbx sandbox (profile agent) vs agentsbx run, same rootfs")


    def s_sandbox_user(self):
        if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"):
            print("sandbox-user: needs root, useradd and setpriv", file=sys.stderr)
            return
        name = f"asbxb{os.getpid() % 100000}"
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True)
        import pwd
        pw = pwd.getpwnam(name)
        # --profile rootless is agent's filtered network: pasta's /dev/net/tun must be open to the
        # user (Debian's udev: 0666); a host without udev may leave 0600, opened for the run
        tun = os.stat("/dev/net/tun").st_mode & 0o7777 if os.path.exists("/dev/net/tun") else None
        if tun is not None:
            os.chmod("/dev/net/tun", tun | 0o666)
        try:
            ws = os.path.join(pw.pw_dir, "ws")
            os.mkdir(ws, 0o755)
            os.chown(ws, pw.pw_uid, pw.pw_gid)
            binary = os.path.join(self.work, "agentsbx-user")
            shutil.copy2(self.rts[0].path, binary)
            os.chmod(self.work, 0o755)
            os.chmod(binary, 0o755)
            as_root = Runtime("sandbox-root", binary)
            as_user = Runtime("sandbox-user", binary)

            def one(rt):
                ids = (0, 0, "/root") if rt is as_root else (pw.pw_uid, pw.pw_gid, pw.pw_dir)
                argv = ["setpriv", f"--reuid={ids[0]}", f"--regid={ids[1]}", "--init-groups", "env", "-i",
                        f"HOME={ids[2]}", "PATH=/usr/bin:/bin", binary]
                if rt is as_root:
                    argv += ["--root", self.root(rt)]
                argv += ["sandbox", "--profile", "rootless", "--id", self.cid(rt), "--workspace", ws, "--", "/bin/true"]
                dt, rc, _ = timed(argv, cwd=ws)
                if rc != 0:
                    raise RuntimeError(f"sandbox failed ({rc}): {LAST_ERR[0].strip()}")
                return dt
            self.record("sandbox-user", "ms", self.interleave(one, self.a.n, [as_root, as_user]), 1000,
                        note="agentsbx sandbox --profile rootless as a non-root user vs as root, same workspace")
            if shutil.which("git"):
                # a git workspace: .git/config and .git/hooks are denied inside the writable
                # workspace; root pins them in its mount namespace, the user records them unpinned
                subprocess.run(["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups",
                                "git", "init", "-q", ws], check=True, env={"HOME": pw.pw_dir, "PATH": "/usr/bin:/bin"})
                self.record("sandbox-user-git", "ms", self.interleave(one, self.a.n, [as_root, as_user]), 1000,
                            note="the same on a git workspace (root: host pins of .git/config and .git/hooks; "
                            "user: degrade pin, unpinned)")
        finally:
            if tun is not None:
                os.chmod("/dev/net/tun", tun)
            subprocess.run(["userdel", "-r", "-f", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            shutil.rmtree(f"/tmp/agentsbx-{pw.pw_uid}", ignore_errors=True)

    def s_review(self):
        """issue 18: a review workspace (overlay, upper kept by agentsbx) against a direct bind"""
        if os.geteuid() != 0:
            print("review: needs root", file=sys.stderr)
            return
        b = os.path.join(self.work, "b-true")
        rootfs = os.path.join(b, "rootfs")
        cfg = os.path.join(self.work, "review-config.json")
        json.dump({"workspacesDir": os.path.join(self.work, "workspaces")}, open(cfg, "w"))
        audit = os.path.join(self.work, "review-audit")
        asbx = self.rts[0]
        runc = next((rt for rt in self.rts if rt.name == "runc"), None)
        plain = Runtime("agentsbx-run", asbx.path)
        direct = Runtime("sandbox-direct", asbx.path)
        review = Runtime("sandbox-review", asbx.path)
        made = []  # review ids whose workspace is left to discard

        def g(rt, *args):
            return self.cmd(rt, "--config", cfg, "--audit-dir", audit, *args)

        def sandbox(rt, ws, args):
            sid = self.cid(rt)
            extra = ["--review"] if rt is review else []
            dt, rc, _ = timed(g(rt, "sandbox", "--id", sid, *extra, "--rootfs", rootfs, "--workspace", ws, "--",
                                *args), cwd=ws)
            if rc != 0:
                raise RuntimeError(f"sandbox failed ({rc}): {LAST_ERR[0].strip()}")
            if rt is review:
                made.append(sid)
            return dt, sid

        def discard():
            while made:
                quiet(g(review, "workspace", "discard", made.pop()))

        ws = os.path.join(self.work, "review-ws")
        os.makedirs(ws, exist_ok=True)

        def start(rt):
            if rt is plain or rt is runc:
                return self.run_once(rt, b)[0]
            dt = sandbox(rt, ws, ["/bin/true"])[0]
            discard()
            return dt
        self.record("review-start", "ms",
                    self.interleave(start, self.a.n, [r for r in (runc, plain, direct, review) if r]), 1000,
                    note="sandbox --review vs sandbox (direct bind) of /bin/true, same rootfs; `run` of the "
                    "bundle for reference")

        # an npm-style install: 100 packages x 100 small files in nested dirs = 10,000 files
        script = ('i=0; while [ $i -lt 100 ]; do d=node_modules/pkg$i/lib/sub; mkdir -p $d; j=0; '
                  'while [ $j -lt 100 ]; do echo "module.exports = $i.$j;" > $d/f$j.js; j=$((j+1)); done; '
                  'i=$((i+1)); done')
        bw = os.path.join(self.work, "b-write")
        wcfg = make_bundle(bw, ["/bin/sh", "-c", script])
        wcfg["process"]["cwd"] = "/workspace"
        wcfg["mounts"].append({"destination": "/workspace", "type": "bind", "source": ws,
                               "options": ["rbind", "rw"]})
        json.dump(wcfg, open(os.path.join(bw, "config.json"), "w"))
        diffs, applies, rounds = [], [], max(3, self.a.n // 4)

        def write(rt):
            shutil.rmtree(os.path.join(ws, "node_modules"), ignore_errors=True)
            if rt is runc:
                return self.run_once(rt, bw)[0]
            dt, sid = sandbox(rt, ws, ["/bin/sh", "-c", script])
            if rt is review:
                # the same workspace is reviewed: diff of the 10,000 added files, then apply to
                # the (empty) host workspace; apply removes <id>/
                d, rc, _ = timed(g(rt, "workspace", "diff", "--json", sid))
                if rc != 0:
                    raise RuntimeError(f"workspace diff failed ({rc}): {LAST_ERR[0].strip()}")
                a, rc, _ = timed(g(rt, "workspace", "apply", sid))
                if rc != 0:
                    raise RuntimeError(f"workspace apply failed ({rc}): {LAST_ERR[0].strip()}")
                made.remove(sid)
                if not os.path.isfile(os.path.join(ws, "node_modules/pkg99/lib/sub/f99.js")):
                    raise RuntimeError("workspace apply: the files are not on the host")
                diffs.append(d)
                applies.append(a)
            return dt
        try:
            per = self.interleave(write, rounds, [r for r in (runc, direct, review) if r])
        finally:
            discard()
            shutil.rmtree(os.path.join(ws, "node_modules"), ignore_errors=True)
        self.record("review-write-10k", "ms", per, 1000,
                    note="10,000 small files in 100 nested package dirs written by busybox sh: into the overlay "
                    "(review) vs the bind (direct, runc)")
        # two warm-up rounds of `write` are not counted; neither are their diff/apply
        self.record("review-diff-10k", "ms", {"agentsbx": diffs[2:]}, 1000,
                    note="workspace diff --json of those 10,000 added files (sha256 of each)")
        self.record("review-apply-10k", "ms", {"agentsbx": applies[2:]}, 1000,
                    note="workspace apply of those 10,000 files to an empty host workspace (atomic per file)")

    def s_egress(self):
        import egress_bench  # tests/bench/egress_bench.py (sys.path[0] is this directory)
        try:
            egress_bench.run(self, rounds=max(3, self.a.n // 4), baseline=self.a.egress_baseline)
        except RuntimeError as e:
            print(f"egress: {e}", file=sys.stderr)


class MemCgroup:
    """A memory cgroup for the runtime process: v1 (memory.limit_in_bytes) or v2 (memory.max)."""

    def __init__(self):
        name = f"agentsbx-bench-{os.getpid()}"
        self.ok = True
        if os.path.isdir("/sys/fs/cgroup/memory"):
            self.path = f"/sys/fs/cgroup/memory/{name}"
            self.knob = "memory.limit_in_bytes"
        elif os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            self.path = f"/sys/fs/cgroup/{name}"
            self.knob = "memory.max"
        else:
            self.ok = False
            self.knob = "-"
            return
        os.mkdir(self.path)
        self.procs = os.path.join(self.path, "cgroup.procs")
        if self.knob == "memory.max" and os.path.exists(os.path.join(self.path, "memory.swap.max")):
            open(os.path.join(self.path, "memory.swap.max"), "w").write("0")

    def set(self, limit):
        open(os.path.join(self.path, self.knob), "w").write(str(limit))

    def drain(self):
        """Processes left in the cgroup after an OOM (ours: started by this bench) are killed by pid."""
        for _ in range(100):
            pids = [int(p) for p in open(self.procs).read().split()]
            if not pids:
                return
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)

    def remove(self):
        if self.ok:
            self.set(-1 if self.knob.endswith("in_bytes") else "max")
            self.drain()
            for d in sorted((r for r, _, _ in os.walk(self.path)), key=len, reverse=True):
                os.rmdir(d)


def remove_cgroups_named(name):
    """Cgroup dirs called `name` (a container id of this bench) under any hierarchy, at depth <= 3,
    left by a runtime killed mid-create: their processes (ours) are killed by pid, the dirs removed."""
    found = []
    for top in ("/sys/fs/cgroup",):
        for root, dirs, _ in os.walk(top):
            if root.count("/") - top.count("/") >= 3:
                dirs[:] = []
            if os.path.basename(root) == name:
                found.append(root)
                dirs[:] = []
    for d in sorted(found, key=len, reverse=True):
        for _ in range(50):
            try:
                for p in open(os.path.join(d, "cgroup.procs")).read().split():
                    os.kill(int(p), signal.SIGKILL)
                os.rmdir(d)
                break
            except (ProcessLookupError, OSError):
                time.sleep(0.02)
    return found


def print_scenario(name, r):
    rts = r["runtimes"]
    print(f"\n{name} ({r['unit']}){': ' + r['note'] if r['note'] else ''}")
    base = {k: rts[k]["median"] for k in ("runc", "crun") if rts.get(k)}
    for k, s in rts.items():
        if not s:
            print(f"  {k:14} failed")
            continue
        ratios = "  ".join(f"{s['median'] / v:5.2f}x {b}" for b, v in base.items() if b != k and v)
        print(f"  {k:14} median {s['median']:10.1f}   min-max {s['min']:9.1f} - {s['max']:<9.1f} {ratios}")


def ensure_packages(a):
    missing = [p for p, exe in (("runc", "runc"), ("crun", "crun"), ("strace", "strace"), ("hyperfine", "hyperfine"), ("busybox-static", "busybox"))
               if not shutil.which(exe)]
    if not os.path.exists(DOCKER_PROFILE):
        missing.append("golang-github-containers-common")
    if missing and not a.no_install:
        print("installing " + " ".join(missing), file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-q"] + missing, stdout=subprocess.DEVNULL)


SCENARIOS = ["floor", "run", "run_seccomp", "exec", "external", "rss", "syscalls", "memlimit", "parallel", "sandbox", "sandbox_user", "egress"]
# not in the default run (review's 10,000-file rounds, vm's guest boots take a while): --only review, --only vm
OPTIONAL = ["review", "vm"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=20, help="counted runs per scenario and runtime")
    ap.add_argument("--parallel", type=int, default=100)
    ap.add_argument("--only", default="", help="comma-separated subset of " + ",".join(SCENARIOS + OPTIONAL)
                    + " (default: all but " + ",".join(OPTIONAL) + ")")
    ap.add_argument("--no-install", action="store_true")
    ap.add_argument("--no-save", action="store_true", help="do not write bench/results/*.json")
    ap.add_argument("--baseline", metavar="AGENTSBX", help="a second agentsbx binary (say main's, copied aside) run"
                    " interleaved with this tree's as runtime agentsbx-base (and base-* in the sandbox scenario)")
    ap.add_argument("--egress-baseline", metavar="AGENTSBX", help="egress: another agentsbx binary, its runs "
                    "alternated with this tree's (labels filtered@base, open@base)")
    a = ap.parse_args()
    ensure_packages(a)
    work = tempfile.mkdtemp(prefix="agentsbx-bench-")
    try:
        build_measure(work)
        cfg = make_bundle(os.path.join(work, "b-true"), ["/bin/true"])
        make_bundle(os.path.join(work, "b-sleep"), ["/bin/sleep", "100000"])
        if os.path.exists(DOCKER_PROFILE):
            caps = cfg["process"]["capabilities"]["bounding"]
            make_bundle(os.path.join(work, "b-seccomp"), ["/bin/true"],
                        oci_from_docker_profile(json.load(open(DOCKER_PROFILE)), caps))
        b = Bench(a, work)
        if any(rt.needs_ns for rt in b.rts):
            print("hybrid cgroups: crun runs in a private mount ns with /sys/fs/cgroup/unified detached")
        print("runtimes: " + ", ".join(f"{rt.name} ({rt.path})" for rt in b.rts))
        for s in (a.only.split(",") if a.only else SCENARIOS):
            getattr(b, "s_" + s.replace("-", "_"))()
        save(a, b)
    finally:
        subprocess.run(["rm", "-rf", work])


def save(a, b):
    commit = subprocess.run(["git", "-C", TOP, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", TOP, "status", "--porcelain", "--untracked-files=no", "src"],
                           capture_output=True, text=True).stdout.strip()
    vers = {}
    for rt in b.rts:
        r = subprocess.run([rt.path, "--version"], capture_output=True, text=True)
        vers[rt.name] = (r.stdout.splitlines() or ["?"])[0]
    doc = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": commit + ("-dirty" if dirty else ""),
           "kernel": os.uname().release, "cpus": os.cpu_count(), "n": a.n, "versions": vers,
           "crun_private_ns": any(rt.needs_ns for rt in b.rts), "scenarios": b.results}
    if a.no_save:
        return
    d = os.path.join(TOP, "bench", "results")
    os.makedirs(d, exist_ok=True)
    # the time too: an idle and a loaded run of one commit on one day are two files
    f = os.path.join(d, f"{datetime.datetime.now().strftime('%Y-%m-%d-%H%M')}-{doc['commit']}.json")
    json.dump(doc, open(f, "w"), indent=1)
    print(f"\nresults: {os.path.relpath(f, TOP)}")


if __name__ == "__main__":
    main()
