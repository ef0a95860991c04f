/* fuzz_sni.c - libFuzzer entry point for the SNI/Host check's parsers (src/monitor/sni_parse.c).
 *
 * The input is the first bytes of a TCP connection as the container sends them. The splice
 * (splice.c on_hello) reads at most SPLICE_HELLO_MAX bytes, in pieces the sender chooses, and
 * calls the parser after every piece: TLS when the first byte is 0x16, else HTTP. So beyond the
 * sanitizers (exact-size copies: a read past the bytes received is an ASan report) this checks:
 *   - a found name is NUL-terminated, non-empty, lowercase host-name characters, no trailing dot;
 *   - a name buffer of any size (down to 1 byte) is never overrun;
 *   - the answer is stable under appending bytes, up to SPLICE_HELLO_MAX: once a prefix says
 *     -1 (refuse) or 1 (this name), the whole input says the same - else the name the splice
 *     decides on would depend on how the container split its writes;
 *   - both parsers run on every input, whatever its first byte (neither may assume its caller's
 *     dispatch).
 * Build and run: tests/fuzz/run-all.sh (FUZZ_TARGETS=sni). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/sni_parse.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define CHECK(c)                                                                                                       \
  do                                                                                                                   \
    {                                                                                                                  \
      if (!(c))                                                                                                        \
        abort ();                                                                                                      \
    }                                                                                                                  \
  while (0)

typedef int (*parser_fn) (const unsigned char *, size_t, char *, size_t);

static void
check_name (const char *name, size_t namelen)
{
  size_t n = strnlen (name, namelen);
  CHECK (n > 0 && n < namelen && name[n - 1] != '.');
  for (size_t i = 0; i < n; i++)
    {
      char c = name[i];
      CHECK (c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'));
    }
}

/* parse b[0..len) from an exact-size heap copy; name must hold namelen bytes */
static int
run (parser_fn f, const unsigned char *b, size_t len, char *name, size_t namelen)
{
  unsigned char *copy = malloc (len ? len : 1);
  memcpy (copy, b, len);
  int r = f (copy, len, name, namelen);
  free (copy);
  CHECK (r >= -1 && r <= 1);
  if (r == 1)
    check_name (name, namelen);
  return r;
}

static void
one (parser_fn f, const unsigned char *b, size_t len, size_t split, size_t small)
{
  char full[256], part[256];
  int r = run (f, b, len, full, sizeof full);
  if (len <= SPLICE_HELLO_MAX && split < len)
    {
      int p = run (f, b, split, part, sizeof part);
      if (p == -1)
        CHECK (r == -1);
      if (p == 1)
        CHECK (r == 1 && strcmp (part, full) == 0);
    }
  if (len >= SPLICE_HELLO_MAX)
    CHECK (r != 0); /* the splice never waits past SPLICE_HELLO_MAX bytes */
  /* a small name buffer (exactly `small` bytes on the heap): found only when the name fits */
  char *tiny = malloc (small);
  int t = run (f, b, len, tiny, small);
  if (r == 1)
    CHECK (t == (strlen (full) < small ? 1 : -1) && (t != 1 || strcmp (tiny, full) == 0));
  free (tiny);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size > 2 * SPLICE_HELLO_MAX)
    return 0;
  /* the split point and the small buffer's size come from the input's last bytes, so libFuzzer
   * can steer them; the parsers see every byte */
  size_t split = size >= 2 ? ((size_t) data[size - 1] << 8 | data[size - 2]) % size : 0;
  size_t small = size ? 1 + data[size - 1] % 32 : 1;
  one (splice_tls_sni, data, size, split, small);
  one (splice_http_host, data, size, split, small);
  /* the body check: a decided prefix stays decided; never undecided at 512 bytes or at the end */
  unsigned char *body = malloc (size ? size : 1);
  memcpy (body, data, size);
  int whole = splice_body_reads_as_request (body, size, false);
  int part = splice_body_reads_as_request (body, split, false);
  CHECK (part == 0 || part == whole);
  CHECK (size < 512 || whole != 0);
  CHECK (splice_body_reads_as_request (body, size, true) != 0);
  free (body);
  return 0;
}
