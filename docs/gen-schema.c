/* gen-schema.c - build tool: writes docs/policy.schema.json from docs/policy.schema.json.in with
 * every enumerated value set taken from the C table the parser uses, so the schema cannot drift
 * from what agentsbx accepts. A placeholder is a JSON string "@NAME@"; alone on its line it
 * becomes one value a line at its indentation, else the values in one line. NAME: SYSCALL_GROUPS
 * (POLICY_SYSCALL_GROUPS), CAPABILITIES (pdoc_caps), AUDIT_EVENTS (pdoc_audit_names), DEGRADE
 * (pdoc_degrade_names), NETWORK_MODES, APPROVALS, ON_TIMEOUT, ON_FULL (policy/plan.h).
 * Usage: gen-schema IN > OUT. Exit 1 (and a message naming the line) on an unknown placeholder
 * or an unreadable IN. Run by docs/local.am, never installed. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/doc.h"
#include "policy/plan.h"
#include "policy/syscall_groups.h"

#define MAX_VALUES 128

/* The values of table `name` into v (at most MAX_VALUES); returns how many, -1 if unknown. */
static int
table_values (const char *name, const char **v)
{
  const char *const *strv = NULL;
  int n = 0;
  if (strcmp (name, "SYSCALL_GROUPS") == 0)
    for (size_t i = 0; i < policy_syscall_groups_len && n < MAX_VALUES; i++)
      v[n++] = policy_syscall_groups[i].name;
  else if (strcmp (name, "AUDIT_EVENTS") == 0)
    for (size_t i = 0; i < sizeof (pdoc_audit_names) / sizeof (pdoc_audit_names[0]); i++)
      v[n++] = pdoc_audit_names[i];
  else if (strcmp (name, "CAPABILITIES") == 0)
    strv = pdoc_caps;
  else if (strcmp (name, "DEGRADE") == 0)
    strv = pdoc_degrade_names;
  else if (strcmp (name, "NETWORK_MODES") == 0)
    strv = policy_net_mode_names;
  else if (strcmp (name, "ISOLATION") == 0)
    strv = policy_isolation_names;
  else if (strcmp (name, "WORKSPACE_MODES") == 0)
    strv = policy_ws_mode_names;
  else if (strcmp (name, "APPROVALS") == 0)
    strv = policy_approval_names;
  else if (strcmp (name, "ON_TIMEOUT") == 0)
    strv = policy_on_timeout_names;
  else if (strcmp (name, "ON_FULL") == 0)
    strv = policy_on_full_names;
  else
    return -1;
  for (; strv && strv[n] && n < MAX_VALUES; n++)
    v[n] = strv[n];
  return n;
}

/* Writes `line` (no newline) with its placeholders expanded; returns 0, or -1 for an unknown one. */
static int
expand_line (const char *line, unsigned lineno)
{
  const char *p = line, *q;
  while ((q = strstr (p, "\"@")) != NULL)
    {
      const char *end = strstr (q + 2, "@\"");
      char name[64];
      const char *v[MAX_VALUES];
      if (end == NULL || (size_t) (end - q - 2) >= sizeof (name))
        break;
      snprintf (name, sizeof (name), "%.*s", (int) (end - q - 2), q + 2);
      int n = table_values (name, v);
      if (n < 0)
        {
          fprintf (stderr, "gen-schema: line %u: unknown placeholder \"@%s@\"\n", lineno, name);
          return -1;
        }
      bool alone = strspn (line, " ") == (size_t) (q - line) && end[2] == '\0';
      fwrite (p, 1, q - p, stdout);
      for (int i = 0; i < n; i++)
        {
          if (i && alone)
            printf (",\n%*s", (int) (q - line), "");
          else if (i)
            fputs (", ", stdout);
          printf ("\"%s\"", v[i]);
        }
      p = end + 2;
    }
  fputs (p, stdout);
  return 0;
}

int
main (int argc, char **argv)
{
  char line[4096];
  unsigned lineno = 0;
  FILE *in = argc == 2 ? fopen (argv[1], "r") : NULL;
  if (in == NULL)
    {
      fprintf (stderr, "usage: gen-schema docs/policy.schema.json.in (cannot read %s)\n", argc == 2 ? argv[1] : "-");
      return 1;
    }
  while (fgets (line, sizeof (line), in))
    {
      size_t l = strlen (line);
      bool nl = l && line[l - 1] == '\n';
      if (nl)
        line[--l] = '\0';
      if (expand_line (line, ++lineno) < 0)
        return 1;
      if (nl)
        putchar ('\n');
    }
  fclose (in);
  return fflush (stdout) == 0 ? 0 : 1;
}
