/* Lexical path normalisation (core/pathlex.h). One walk over the components, no strtok: the
 * input is const and may be a JSON value still in use. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/pathlex.h"
#include "core/util.h"

char *
asbx_path_lexical (const char *path, bool absolute)
{
  size_t o = 0;
  char *out = xmalloc (strlen (path) + 2);

  for (const char *p = path; *p;)
    {
      while (*p == '/')
        p++;
      if (!*p)
        break;
      const char *e = strchrnul (p, '/');
      size_t len = (size_t) (e - p);
      if (len == 2 && p[0] == '.' && p[1] == '.')
        {
          free (out);
          return NULL;
        }
      if (!(len == 1 && p[0] == '.'))
        {
          if (absolute || o > 0)
            out[o++] = '/';
          memcpy (out + o, p, len);
          o += len;
        }
      p = e;
    }
  if (o == 0 && absolute)
    out[o++] = '/';
  out[o] = '\0';
  return out;
}
