"""linux.maskedPaths / linux.readonlyPaths while the path changes type during setup (issue 13 §5).

A host thread keeps RENAME_EXCHANGE-ing rootfs/d (a directory holding a secret file) with
rootfs/dlink (a dangling symlink) while 20 containers with maskedPaths ["/d"] (then
readonlyPaths ["/d"]) are created and run. Before the fix, an in-root lookup that met the
symlink got ENOENT and took it as "path missing, skip": /d stayed readable (12 of 20 runs) or
writable. Passes only when no run printed the secret (masked) and the host file is unchanged
(read-only); a run may instead be refused ("changed during setup"), never skipped.
"""

import os
import threading

import pytest

from test_mount_paths import _renameat2_exchange

SECRET = "MASKED-RACE-SECRET"
RUNS = 20


def race_runs(rt, make_bundle, key, script):
    swap = _renameat2_exchange()
    b = make_bundle(args=["/bin/sh", "-c", script])
    d = os.path.join(b.rootfs, "d")
    os.makedirs(d)
    with open(os.path.join(d, "secret"), "w") as f:
        f.write(SECRET + "\n")
    os.symlink("/nonexistent-target", os.path.join(b.rootfs, "dlink"))
    b.config.setdefault("linux", {})[key] = ["/d"]
    b.save()
    stop = threading.Event()
    swaps = [0]

    def flip():
        while not stop.is_set():
            if swap(d, os.path.join(b.rootfs, "dlink")) == 0:
                swaps[0] += 1

    t = threading.Thread(target=flip)
    t.start()
    results = []
    try:
        for _ in range(RUNS):
            r, cid = rt.run(b, None)
            results.append(r)
            rt.delete(cid, force=True)
    finally:
        stop.set()
        t.join()
    assert swaps[0] > 0
    # the loop stopped in either state: put the directory back where it was
    if os.path.islink(d):
        swap(d, os.path.join(b.rootfs, "dlink"))
    return b, results


def test_masked_path_swapped_with_dangling_symlink(rt, make_bundle, host_guard):
    b, results = race_runs(rt, make_bundle, "maskedPaths", "cat /d/secret; echo ran")
    leaked = [r for r in results if SECRET in r.out]
    ran = sum("ran" in r.out for r in results)
    refused = [r for r in results if r.rc != 0 and "ran" not in r.out]
    print(f"masked race: {ran} runs ran, {len(refused)} refused, {len(leaked)} leaked")
    assert not leaked, f"{len(leaked)} of {RUNS} runs read the masked /d: {leaked[0]}"
    # a refusal names the path and why, never another failure
    for r in refused:
        assert "/d" in r.err and ("symlink" in r.err or "changing" in r.err), r


def test_readonly_path_swapped_with_dangling_symlink(rt, make_bundle, host_guard):
    b, results = race_runs(rt, make_bundle, "readonlyPaths", "echo WRITTEN > /d/secret; echo ran")
    ran = sum("ran" in r.out for r in results)
    print(f"read-only race: {ran} runs ran, {RUNS - ran} refused")
    with open(os.path.join(b.rootfs, "d", "secret")) as f:
        content = f.read()
    assert content == SECRET + "\n", f"the read-only /d was written: {content!r}"
