/* libarchive_dl.h - libarchive, loaded when an OCI layer is read or written (sandbox --image,
 * workspace export), not at every start: linked, libarchive pulls in 14 more shared objects
 * (libxml2, ICU, libstdc++ among them) that every `run` would map and relocate for nothing
 * (issue 20: the start path). The callers include this header instead of <archive.h> and call
 * libarchive_load() first; their archive_* calls go through the table, with the types of
 * libarchive's own prototypes (__typeof__), so a mismatch is a compile error. */
#ifndef ASBX_CORE_LIBARCHIVE_DL_H
#define ASBX_CORE_LIBARCHIVE_DL_H

#include <archive.h>
#include <archive_entry.h>

#include "core/error.h"

/* libarchive's soname (Debian 12: libarchive13) */
#define LIBARCHIVE_SONAME "libarchive.so.13"

#define LIBARCHIVE_FUNCS(X)                                                                                            \
  X (archive_entry_filetype)                                                                                           \
  X (archive_entry_free)                                                                                               \
  X (archive_entry_gid)                                                                                                \
  X (archive_entry_hardlink)                                                                                           \
  X (archive_entry_mtime)                                                                                              \
  X (archive_entry_mtime_nsec)                                                                                         \
  X (archive_entry_new)                                                                                                \
  X (archive_entry_pathname)                                                                                           \
  X (archive_entry_perm)                                                                                               \
  X (archive_entry_set_gid)                                                                                            \
  X (archive_entry_set_hardlink)                                                                                       \
  X (archive_entry_set_mode)                                                                                           \
  X (archive_entry_set_mtime)                                                                                          \
  X (archive_entry_set_pathname)                                                                                       \
  X (archive_entry_set_size)                                                                                           \
  X (archive_entry_set_symlink)                                                                                        \
  X (archive_entry_set_uid)                                                                                            \
  X (archive_entry_size)                                                                                               \
  X (archive_entry_symlink)                                                                                            \
  X (archive_entry_uid)                                                                                                \
  X (archive_entry_xattr_next)                                                                                         \
  X (archive_entry_xattr_reset)                                                                                        \
  X (archive_errno)                                                                                                    \
  X (archive_error_string)                                                                                             \
  X (archive_read_data_block)                                                                                          \
  X (archive_read_free)                                                                                                \
  X (archive_read_new)                                                                                                 \
  X (archive_read_next_header)                                                                                         \
  X (archive_read_open)                                                                                                \
  X (archive_read_support_filter_gzip)                                                                                 \
  X (archive_read_support_filter_zstd)                                                                                 \
  X (archive_read_support_format_tar)                                                                                  \
  X (archive_set_error)                                                                                                \
  X (archive_write_add_filter_gzip)                                                                                    \
  X (archive_write_close)                                                                                              \
  X (archive_write_data)                                                                                               \
  X (archive_write_free)                                                                                               \
  X (archive_write_header)                                                                                             \
  X (archive_write_new)                                                                                                \
  X (archive_write_open)                                                                                               \
  X (archive_write_set_bytes_per_block)                                                                                \
  X (archive_write_set_filter_option)                                                                                  \
  X (archive_write_set_format_pax_restricted)

struct libarchive_api
{
#define LIBARCHIVE_FIELD(n) __typeof__ (n) *n;
  LIBARCHIVE_FUNCS (LIBARCHIVE_FIELD)
#undef LIBARCHIVE_FIELD
};

/* the table; filled by libarchive_load */
extern struct libarchive_api libarchive_api;

/* dlopen(3) LIBARCHIVE_SONAME once (RTLD_NOW | RTLD_LOCAL) and look up every function of the
 * table. Idempotent, not thread-safe (the CLI's verbs are single-threaded). 0, or -1 with *err
 * (ENOENT: the library is not installed - `apt-get install -y libarchive13` - or lacks a
 * function: dlerror(3)'s text). */
int libarchive_load (asbx_err_t *err);

#ifndef LIBARCHIVE_DL_IMPL
#define archive_entry_filetype (*libarchive_api.archive_entry_filetype)
#define archive_entry_free (*libarchive_api.archive_entry_free)
#define archive_entry_gid (*libarchive_api.archive_entry_gid)
#define archive_entry_hardlink (*libarchive_api.archive_entry_hardlink)
#define archive_entry_mtime (*libarchive_api.archive_entry_mtime)
#define archive_entry_mtime_nsec (*libarchive_api.archive_entry_mtime_nsec)
#define archive_entry_new (*libarchive_api.archive_entry_new)
#define archive_entry_pathname (*libarchive_api.archive_entry_pathname)
#define archive_entry_perm (*libarchive_api.archive_entry_perm)
#define archive_entry_set_gid (*libarchive_api.archive_entry_set_gid)
#define archive_entry_set_hardlink (*libarchive_api.archive_entry_set_hardlink)
#define archive_entry_set_mode (*libarchive_api.archive_entry_set_mode)
#define archive_entry_set_mtime (*libarchive_api.archive_entry_set_mtime)
#define archive_entry_set_pathname (*libarchive_api.archive_entry_set_pathname)
#define archive_entry_set_size (*libarchive_api.archive_entry_set_size)
#define archive_entry_set_symlink (*libarchive_api.archive_entry_set_symlink)
#define archive_entry_set_uid (*libarchive_api.archive_entry_set_uid)
#define archive_entry_size (*libarchive_api.archive_entry_size)
#define archive_entry_symlink (*libarchive_api.archive_entry_symlink)
#define archive_entry_uid (*libarchive_api.archive_entry_uid)
#define archive_entry_xattr_next (*libarchive_api.archive_entry_xattr_next)
#define archive_entry_xattr_reset (*libarchive_api.archive_entry_xattr_reset)
#define archive_errno (*libarchive_api.archive_errno)
#define archive_error_string (*libarchive_api.archive_error_string)
#define archive_read_data_block (*libarchive_api.archive_read_data_block)
#define archive_read_free (*libarchive_api.archive_read_free)
#define archive_read_new (*libarchive_api.archive_read_new)
#define archive_read_next_header (*libarchive_api.archive_read_next_header)
#define archive_read_open (*libarchive_api.archive_read_open)
#define archive_read_support_filter_gzip (*libarchive_api.archive_read_support_filter_gzip)
#define archive_read_support_filter_zstd (*libarchive_api.archive_read_support_filter_zstd)
#define archive_read_support_format_tar (*libarchive_api.archive_read_support_format_tar)
#define archive_set_error (*libarchive_api.archive_set_error)
#define archive_write_add_filter_gzip (*libarchive_api.archive_write_add_filter_gzip)
#define archive_write_close (*libarchive_api.archive_write_close)
#define archive_write_data (*libarchive_api.archive_write_data)
#define archive_write_free (*libarchive_api.archive_write_free)
#define archive_write_header (*libarchive_api.archive_write_header)
#define archive_write_new (*libarchive_api.archive_write_new)
#define archive_write_open (*libarchive_api.archive_write_open)
#define archive_write_set_bytes_per_block (*libarchive_api.archive_write_set_bytes_per_block)
#define archive_write_set_filter_option (*libarchive_api.archive_write_set_filter_option)
#define archive_write_set_format_pax_restricted (*libarchive_api.archive_write_set_format_pax_restricted)
#endif

#endif
