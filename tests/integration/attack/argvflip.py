"""The argv race of issue 14 §4: a sibling thread rewrites the argv buffer while its thread is in
execve, so the monitor's copy and the kernel's may differ. N children, each execs /bin/sh -c
with a last argument that flips between INNOCENT-ARGUMENT-NN and EXFIL-SECRET-MARK-NN; the shell
writes the one it got ($0) to /workspace/truth.txt: the ground truth."""
import ctypes, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
n = int(sys.argv[1])
script = b'sleep 0.3; echo "$0" >> /workspace/truth.txt'
for i in range(n):
    pid = os.fork()
    if pid == 0:
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
        os._exit(127)
    os.waitpid(pid, 0)
