/* workspace_audit.c - the `workspace` audit record, written by the CLI side with one write(2)
 * on the container's O_APPEND audit log (monitor/audit.h), like the monitor's own records. */
#include <stdlib.h>

#include "core/cleanup.h"
#include "runtime/workspace_audit.h"

struct audit_rec *
workspace_audit_record (const char *id, const char *op, const struct ws_changes *c, const bool *applied)
{
  struct audit_rec *r = audit_rec_new (id, "workspace");
  int64_t count = 0;
  audit_rec_str (r, "op", op);
  audit_rec_list_open (r, "paths");
  for (size_t i = 0; i < c->n; i++)
    {
      const struct ws_change *ch = &c->v[i];
      if (ch->renamed)
        continue;
      audit_rec_item_open (r);
      audit_rec_str (r, "op", ws_op_name (ch->op));
      audit_rec_str (r, "path", ch->path);
      if (ch->old_path)
        audit_rec_str (r, "oldPath", ch->old_path);
      audit_rec_str (r, "type", ws_type_name (ch->mode));
      audit_rec_int (r, "size", (int64_t) ch->size);
      audit_rec_str (r, "sha256", *ch->sha256 ? ch->sha256 : NULL);
      if (applied)
        audit_rec_bool (r, "applied", applied[i]);
      audit_rec_item_close (r);
      count++;
    }
  audit_rec_list_close (r);
  audit_rec_int (r, "count", count);
  return r;
}

int
workspace_audit_open (const char *audit_dir, const char *config_path, const char *id, asbx_err_t *err)
{
  cleanup_free char *dir = audit_dir_resolve (audit_dir, config_path, err);
  if (!dir)
    return -1;
  return audit_open (dir, id, err);
}
