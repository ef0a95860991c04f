/* fuzz_policy.c - libFuzzer entry point for the policy parser, validator and `extends` merger
 * (src/policy/, through policy_check as `agentsbx policy check` runs it).
 * Whatever the bytes: a canonical document or one error, never a crash, leak or unbounded
 * recursion; a document that passes must pass again when re-checked from its canonical form.
 * Profiles are looked up in an empty directory, so only built-in `extends` resolve. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  asbx_err_t err = NULL;
  char *canon = policy_check ((const char *) data, size, "fuzz.json", "/nonexistent-asbx-profiles", &err);
  if (canon == NULL && (err == NULL || err->msg == NULL))
    abort ();
  asbx_error_free (&err);
  if (canon)
    {
      char *again = policy_check (canon, strlen (canon), "canon.json", "/nonexistent-asbx-profiles", &err);
      if (again == NULL)
        abort (); /* the canonical form of a valid document must be valid */
      free (again);
    }
  free (canon);
  asbx_error_free (&err);
  return 0;
}
