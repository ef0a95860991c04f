/* Lexical path normalisation: what a path string says, before any lookup. */
#ifndef ASBX_CORE_PATHLEX_H
#define ASBX_CORE_PATHLEX_H

#include <stdbool.h>

/* Normalise the '/'-separated `path` lexically: empty components ("//", a trailing '/') and "."
 * are dropped; a ".." component is refused, never resolved, because the callers (policy paths,
 * cgroupsPath, cgroup sub-paths) name a place that must not climb above its root and the string
 * alone cannot say what ".." would climb through.
 *
 * With `absolute` the result starts with '/' and the root is "/"; without, the components are
 * joined by '/' with no leading '/' and the root is "". A leading '/' in `path` is ignored either
 * way (the caller decides what the path is relative to).
 *
 * Returns a heap string the caller frees, or NULL when a component is "..". Never fails
 * otherwise (allocation failure aborts, as everywhere in the runtime). */
char *asbx_path_lexical (const char *path, bool absolute);

#endif
