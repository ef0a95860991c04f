#!/usr/bin/python3
"""Run inside a container by tests/integration/test_egress_credentials.py: looks for a secret
it must never find, and reports what it saw as one JSON line.

    secret_probe.py PREFIX SHA256 LENGTH [SKIP_DIR...]

The secret is never passed in: only its first bytes (PREFIX), the SHA-256 of the whole value and
its length. A place "holds the secret" when PREFIX occurs there and the LENGTH bytes from that
offset hash to SHA256, so this process never has the value in its memory unless it read it from
somewhere. Searched: the environment of every process of the container (/proc/*/environ), every
regular file readable under / (a bounded walk: not /proc, /sys, /dev nor the SKIP_DIRs, at most
MAX_FILES files and MAX_BYTES bytes each) and the memory of every process (/proc/PID/maps and
/proc/PID/mem, readable regions only). Also reports the trust-store env vars and the bundle."""
import hashlib
import json
import os
import sys

PREFIX, DIGEST, LENGTH = sys.argv[1].encode(), sys.argv[2], int(sys.argv[3])
SKIP = {"/proc", "/sys", "/dev", *sys.argv[4:]}
MAX_FILES, MAX_BYTES = 20000, 4 << 20
TRUST_VARS = ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT",
              "NODE_EXTRA_CA_CERTS"]


def holds(data):
    i = data.find(PREFIX)
    while i >= 0:
        if hashlib.sha256(data[i:i + LENGTH]).hexdigest() == DIGEST:
            return True
        i = data.find(PREFIX, i + 1)
    return False


def pids():
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())


ENV_PIDS, MEM_PIDS = [], []   # the pids whose environ / some memory this process could read


def search_env():
    hits, seen = [], 0
    for pid in pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                data = f.read()
        except OSError:
            continue
        seen += 1
        ENV_PIDS.append(pid)
        if holds(data):
            hits.append(pid)
    return hits, seen


def search_files():
    hits, count, errors = [], 0, 0
    for top, dirs, files in os.walk("/", followlinks=False):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in SKIP]
        for name in files:
            path = os.path.join(top, name)
            if count >= MAX_FILES:
                return hits, count, errors, True
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                errors += 1
                continue
            try:
                if not os.path.isfile(f"/proc/self/fd/{fd}"):
                    continue
                count += 1
                data = os.read(fd, MAX_BYTES)
                if holds(data):
                    hits.append(path)
            except OSError:
                errors += 1
            finally:
                os.close(fd)
    return hits, count, errors, False


def search_memory():
    hits, regions, readable = [], 0, 0
    for pid in pids():
        try:
            maps = open(f"/proc/{pid}/maps").read().splitlines()
            mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
        except OSError:
            continue
        with mem:
            for line in maps:
                fields = line.split()
                if "r" not in fields[1]:
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                regions += 1
                # read in chunks, overlapping by the longest needle: a sanitizer build maps
                # terabytes of shadow (never backed, read as zeros) that one read cannot hold;
                # such reservations (over 1 GiB) are skipped and counted as unread
                if end - start > (1 << 30):
                    continue
                found, ok, pos, tail = False, False, start, b""
                while pos < end and not found:
                    try:
                        mem.seek(pos)
                        chunk = mem.read(min(1 << 22, end - pos))
                    except (OSError, OverflowError, ValueError):
                        break
                    if not chunk:
                        break
                    ok = True
                    found = holds(tail + chunk)
                    tail = chunk[-max(256, LENGTH + len(PREFIX)):]
                    pos += len(chunk)
                if not ok:
                    continue
                readable += 1
                if pid not in MEM_PIDS:
                    MEM_PIDS.append(pid)
                if found:
                    hits.append(f"{pid}:{fields[0]}:{fields[-1] if len(fields) > 5 else ''}")
    return hits, regions, readable


def main():
    env_hits, env_seen = search_env()
    file_hits, files, file_errors, truncated = search_files()
    mem_hits, regions, readable = search_memory()
    trust = {v: os.environ.get(v) for v in TRUST_VARS}
    bundle = {}
    for p in ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"):
        try:
            bundle[p] = open(p).read()
        except OSError as e:
            bundle[p] = None if e.errno == 2 else f"error {e.errno}"
    extra = {}
    for p in os.environ.get("PROBE_LIST", "").split(":"):
        if p:
            try:
                extra[p] = sorted(os.listdir(p))
            except OSError as e:
                extra[p] = f"error {e.errno}"
    print(json.dumps({"env_hits": env_hits, "env_seen": env_seen, "file_hits": file_hits, "files": files,
                      "file_errors": file_errors, "truncated": truncated, "mem_hits": mem_hits,
                      "regions": regions, "readable_regions": readable, "trust": trust, "bundle": bundle,
                      "listed": extra, "env_pids": ENV_PIDS, "mem_pids": MEM_PIDS,
                      "pid": os.getpid()}))


main()
