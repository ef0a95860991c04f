/* profiles.h - internal to src/policy: the built-in profiles compiled into the binary
 * (every contrib/profiles/NAME.json -> profiles_data.c by gen-profiles.sh). */
#ifndef ASBX_POLICY_PROFILES_H
#define ASBX_POLICY_PROFILES_H

#include <stddef.h>

struct policy_builtin
{
  const char *name;
  const char *json;
  size_t len;
};

/* NULL-name terminated, in the C-locale order of the file names */
extern const struct policy_builtin policy_builtins[];

#endif
