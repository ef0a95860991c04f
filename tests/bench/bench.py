#!/usr/bin/python3
"""make bench: wall time of `RUNTIME run` of /bin/true on one busybox bundle, agentsbx against
runc and crun in the same run (interleaved, so machine noise hits all alike). Prints median and
p90 per runtime and the ratios to runc. Not a test: numbers only, never pass/fail.

crun 1.8 refuses this machine's hybrid cgroup layout; as TESTING.md describes, it is run inside a
private mount namespace where the cgroup2 mount at /sys/fs/cgroup/unified is unmounted, which
leaves the host untouched (and costs one `unshare` + `umount` per run, reported separately)."""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def make_bundle(d):
    rootfs = os.path.join(d, "rootfs")
    os.makedirs(os.path.join(rootfs, "bin"))
    bb = shutil.which("busybox") or "/bin/busybox"
    shutil.copy(bb, os.path.join(rootfs, "bin", "busybox"))
    for a in ("sh", "true"):
        os.symlink("busybox", os.path.join(rootfs, "bin", a))
    for x in ("proc", "sys", "dev", "tmp", "etc"):
        os.makedirs(os.path.join(rootfs, x), exist_ok=True)
    subprocess.run([os.path.join(TOP, "agentsbx"), "spec", "--bundle", d], check=True)
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = ["/bin/true"]
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))


def timed(argv):
    t = time.perf_counter()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({r.returncode}): {r.stderr.decode()[:300]}")
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="agentsbx-bench-")
    try:
        make_bundle(work)
        runtimes = {"agentsbx": [os.path.join(TOP, "agentsbx")]}
        if shutil.which("runc"):
            runtimes["runc"] = [shutil.which("runc")]
        if shutil.which("crun"):
            crun = shutil.which("crun")
            runtimes["crun"] = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                                'umount /sys/fs/cgroup/unified 2>/dev/null; exec "$@"', "sh", crun]
        times = {k: [] for k in runtimes}
        for i in range(args.n + 2):  # two warm-up rounds, not counted
            for name, argv in runtimes.items():
                root = os.path.join(work, "state-" + name)
                cid = f"bench-{name}-{i}"
                try:
                    dt = timed(argv + ["--root", root, "run", "--bundle", work, cid])
                except RuntimeError as e:
                    print(f"{name}: {e}", file=sys.stderr)
                    times[name] = None
                    continue
                if i >= 2 and times[name] is not None:
                    times[name].append(dt)
        print(f"`RUNTIME run` of /bin/true on a busybox bundle, {args.n} runs each, interleaved")
        print(f"{'runtime':10} {'median ms':>10} {'p90 ms':>8} {'vs runc':>8}")
        base = statistics.median(times["runc"]) if times.get("runc") else None
        for name, ts in times.items():
            if not ts:
                print(f"{name:10} {'failed':>10}")
                continue
            med = statistics.median(ts)
            p90 = sorted(ts)[int(0.9 * (len(ts) - 1))]
            ratio = f"{med / base:.2f}x" if base else "-"
            print(f"{name:10} {med * 1000:10.1f} {p90 * 1000:8.1f} {ratio:>8}")
    finally:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
