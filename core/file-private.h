/* Reading files that may be hostile (file_read.c): the checks behind crl_file_open, for callers in libcrl that
 * frame the messages themselves. */
#ifndef CRL_FILE_PRIVATE_H
#define CRL_FILE_PRIVATE_H

#include "crl-private.h"

#include <crl/file.h>
#include <sys/stat.h>

/* "a FIFO", "a directory", "a character device", ... for "it is %s, not a regular file". */
CRL_INTERNAL const char *crl__file_kind(mode_t m);

/* crl_file_open without the framing: the message in err is the reason alone ("No such file or directory",
 * "it is a FIFO, not a regular file; ...", "it is N bytes, more than the 16 MiB limit; ..."), so callers put
 * their own "PATH: cannot open checkpoint: " before it (crl_error_prefix).  Fills *st (may be NULL) from fstat
 * of the open file.  Codes as crl_file_open. */
CRL_INTERNAL int crl__file_open(const char *path, unsigned flags, uint64_t max_bytes, struct stat *st,
                                crl_error *err);

/* pread exactly len bytes at off.  0, or the errno that stopped it; ENODATA when the file ends first (it
 * shrank since it was looked at). */
CRL_INTERNAL int crl__file_pread(int fd, void *buf, size_t len, uint64_t off);

#endif
