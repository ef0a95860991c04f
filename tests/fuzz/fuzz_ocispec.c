/* fuzz_ocispec.c - libFuzzer entry point for the config.json and process.json parsers.
 *
 * Whatever the bytes, the parsers must return a spec or an error (never crash, leak, read out
 * of bounds or recurse without bound); ASan/UBSan/LeakSanitizer check that. A parsed spec is
 * walked a little so that use of half-initialised fields would show, and the state writer is
 * fed parsed strings (arbitrary UTF-8) to exercise yajl_gen's validation.
 * Build and run: tests/fuzz/run-fuzz.sh [seconds].
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libocispec/oci_spec.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static size_t
touch_spec (const struct oci_spec *s)
{
  size_t n = strlen (s->oci_version);
  for (size_t i = 0; i < s->mounts_len; i++)
    n += strlen (s->mounts[i].destination) + s->mounts[i].options_len;
  if (s->process)
    n += strlen (s->process->cwd) + s->process->args_len;
  if (s->linux_)
    for (size_t i = 0; i < s->linux_->namespaces_len; i++)
      n += strlen (s->linux_->namespaces[i].type);
  for (size_t i = 0; i < s->annotations.len; i++)
    n += strlen (s->annotations.keys[i]) + strlen (s->annotations.values[i]);
  return n;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  asbx_err_t err = NULL;
  struct oci_spec *s = oci_spec_parse ((const char *) data, size, "fuzz.json", &err);
  struct oci_process *p;

  if (s)
    {
      struct oci_state st = { .oci_version = s->oci_version,
                              .id = s->hostname ? s->hostname : "x",
                              .status = "created",
                              .pid = 1,
                              .bundle = s->oci_version,
                              .annotations = &s->annotations };
      char *j;
      if (touch_spec (s) == (size_t) -1)
        abort ();
      j = oci_state_to_json (&st, size & 1, &err);
      free (j);
      asbx_error_free (&err);
      oci_spec_free (s);
    }
  else if (err == NULL || err->msg == NULL || strchr (err->msg, '\n'))
    abort (); /* an error must be set and be one line */
  asbx_error_free (&err);

  p = oci_process_parse ((const char *) data, size, "process.json", &err);
  if (p == NULL && err == NULL)
    abort ();
  oci_process_free (p);
  asbx_error_free (&err);
  return 0;
}
