/* crl plugin SDK: reading files that may be hostile.  Since ABI 1.2.
 *
 * A path crl is given may name anything: a FIFO (whose open or first read blocks until someone writes to it),
 * a device (/dev/zero never ends), a directory, a socket, or a regular file far larger than its kind of file
 * can be.  These functions look at what the path is before reading a byte and never block: anything but a
 * regular file is refused with an error naming the path and what it is, and a file over the caller's size
 * limit is refused before it is read.  Every file libcrl and the bundled plugins read goes through them
 * (configs, checkpoints, replay storages, the plugin registry cache); a plugin reading a file of its own
 * should too. */
#ifndef CRL_FILE_H
#define CRL_FILE_H

#include <crl/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Refuse a symbolic link as the path's last component: for files crl itself creates inside a directory it
 * owns (a link there was put by someone else).  Paths a user names may be links and are followed. */
#define CRL_FILE_NOFOLLOW 0x1u
/* Open for reading and writing (to map the file shared), not read-only. */
#define CRL_FILE_RDWR 0x2u

/* Open regular file `path` for reading (or reading and writing with CRL_FILE_RDWR).  `what` names the file's
 * role in messages ("config file", "checkpoint"); NULL reads "file".  `max_bytes` is the largest size
 * accepted (a larger file is refused before anything is read); 0 accepts any size, for callers that check
 * *size against what the file's own header says.  Returns a file descriptor (close-on-exec, in blocking mode;
 * the caller closes it) and the file's size in *size (may be NULL), or -1 with err set:
 *   CRL_E_NOT_FOUND  path does not exist ("cannot read WHAT 'PATH': No such file or directory");
 *   CRL_E_IO         it is not a regular file ("...: it is a FIFO, not a regular file; ..."), a symbolic link
 *                    under CRL_FILE_NOFOLLOW, larger than max_bytes, or cannot be opened (the system's reason);
 *   CRL_E_INVALID    path is NULL or empty, or flags holds unknown bits.
 * A device, FIFO or socket is never opened at all. */
CRL_API int crl_file_open(const char *path, const char *what, unsigned flags, uint64_t max_bytes, uint64_t *size,
                          crl_error *err);

/* Read all of regular file `path` (refused as crl_file_open says) into *data, a NUL-terminated copy (the
 * file's bytes may hold NULs too: *len counts them, not the terminator), freed with crl_free.  At most
 * `max_bytes` (which must be > 0) are ever read: a file larger than that, or one that grows past it while
 * being read, is refused with CRL_E_IO; CRL_E_NOMEM when the copy cannot be allocated.  On failure *data is
 * NULL and *len 0. */
CRL_API int crl_file_read(const char *path, const char *what, unsigned flags, uint64_t max_bytes, char **data,
                          size_t *len, crl_error *err);

/* Whether `path` may be trusted as code to load (dlopen) into this process, by the rules the plugin host
 * loads plugins by: the root directory, every directory on the way and the file itself -- each symbolic link
 * followed one hop at a time and its target checked in turn -- owned by root or the invoking user, not
 * world-writable (a world-writable directory with the sticky bit, such as /tmp, excepted), not writable by a
 * group other than root's, and the file a regular file -- and, when it is an ELF object of this machine,
 * one whose program headers and loadable segments lie inside the file (a truncated library would be
 * mapped by dlopen and crash the process on first touch).  A relative path is taken from the working directory.
 * `what` names the file's role in messages ("simulator library 'libsim.so'"); NULL reads "file".  On
 * success returns CRL_OK and, when `resolved` is not NULL, sets *resolved to the file's path with every
 * symlink resolved (free with crl_free), the path to hand to dlopen.  On failure *resolved is NULL and:
 *   CRL_E_PERM       an entry could be changed by another user (the message names it and the chmod/chown
 *                    that fixes it);
 *   CRL_E_NOT_FOUND  an entry does not exist;
 *   CRL_E_IO         an entry cannot be examined, a non-directory is in the middle, or links loop;
 *   CRL_E_PLUGIN     the file is not a regular file;
 *   CRL_E_CORRUPT    an ELF object truncated or corrupt (a segment or the program headers past its end);
 *   CRL_E_INVALID    path is NULL or empty. */
CRL_API int crl_file_check_code(const char *path, const char *what, char **resolved, crl_error *err);

#ifdef __cplusplus
}
#endif
#endif
