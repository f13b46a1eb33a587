/* Checkpoint directories: write into "DIR.tmp-XXXXXX", fsync everything, swap it in for DIR, fsync the parent. */
#define _GNU_SOURCE
#include "checkpoint-private.h"
#include "remove-tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* dir without trailing slashes ("/" stays "/"). */
static char *trim_slashes(const char *dir)
{
    char *d = g_strdup(dir);
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/')
        d[--n] = '\0';
    return d;
}

char *crl_ckpt_dir_begin(const char *dir, crl_error *err)
{
    if (!dir || !*dir) {
        crl_error_set(err, CRL_E_INVALID, "crl_ckpt_dir_begin: checkpoint directory is %s", dir ? "empty" : "NULL");
        return NULL;
    }
    char *d = trim_slashes(dir);
    char *tmp = g_strdup_printf("%s.tmp-XXXXXX", d);
    g_free(d);
    if (!g_mkdtemp_full(tmp, 0755)) {
        int e = errno;
        char *parent = g_path_get_dirname(tmp);
        crl_error_set(err, CRL_E_IO, "%s: cannot create a temporary checkpoint directory in %s: %s", dir, parent,
                      g_strerror(e));
        g_free(parent);
        g_free(tmp);
        return NULL;
    }
    return tmp;
}

static int fsync_path(const char *path, int flags, crl_error *err)
{
    int fd = open(path, flags | O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return crl_error_set(err, CRL_E_IO, "%s: cannot open to fsync: %s", path, g_strerror(errno));
    int rc = CRL_OK;
    if (fsync(fd) != 0)
        rc = crl_error_set(err, CRL_E_IO, "%s: cannot fsync: %s", path, g_strerror(errno));
    close(fd);
    return rc;
}

/* fsync every regular file and directory under path, then path itself. */
static int fsync_tree(const char *path, int depth, crl_error *err)
{
    if (depth > 64)
        return crl_error_set(err, CRL_E_IO, "%s: checkpoint directory nests more than 64 levels", path);
    DIR *dh = opendir(path);
    if (!dh)
        return crl_error_set(err, CRL_E_IO, "%s: cannot list directory: %s", path, g_strerror(errno));
    int rc = CRL_OK;
    struct dirent *de;
    while (!rc && (de = readdir(dh))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *child = g_build_filename(path, de->d_name, NULL);
        struct stat st;
        if (lstat(child, &st) != 0)
            rc = crl_error_set(err, CRL_E_IO, "%s: cannot stat: %s", child, g_strerror(errno));
        else if (S_ISDIR(st.st_mode))
            rc = fsync_tree(child, depth + 1, err);
        else if (S_ISREG(st.st_mode))
            rc = fsync_path(child, 0, err);
        g_free(child);
    }
    closedir(dh);
    return rc ? rc : fsync_path(path, O_DIRECTORY, err);
}

/* Only names made by crl_ckpt_dir_begin ("X.tmp-XXXXXX") are ever removed
 * recursively, so a wrong argument cannot wipe an unrelated tree. */
static bool is_tmp_name(const char *tmpdir)
{
    char *t = trim_slashes(tmpdir);
    const char *base = strrchr(t, '/');
    base = base ? base + 1 : t;
    const char *m = strstr(base, ".tmp-");
    bool ok = m && m != base && strlen(m) == strlen(".tmp-XXXXXX");
    g_free(t);
    return ok;
}

int crl_ckpt_dir_commit(const char *tmpdir, const char *dir, crl_error *err)
{
    if (!tmpdir || !dir || !*dir)
        return crl_error_set(err, CRL_E_INVALID, "crl_ckpt_dir_commit: %s is %s", !tmpdir ? "tmpdir" : "dir",
                             (dir && !*dir) ? "empty" : "NULL");
    if (!is_tmp_name(tmpdir))
        return crl_error_set(err, CRL_E_INVALID,
                             "crl_ckpt_dir_commit: %s is not a directory made by crl_ckpt_dir_begin (DIR.tmp-XXXXXX)",
                             tmpdir);
    int rc = fsync_tree(tmpdir, 0, err);
    if (rc)
        return rc;
    char *d = trim_slashes(dir);
    char *parent = g_path_get_dirname(d);
    char *old = NULL;
    struct stat st;
    if (lstat(d, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            rc = crl_error_set(err, CRL_E_EXISTS,
                               "%s exists and is not a directory; remove it or checkpoint somewhere else", d);
            goto out;
        }
        /* Atomic swap where the filesystem supports it: DIR is never absent. */
        if (renameat2(AT_FDCWD, tmpdir, AT_FDCWD, d, RENAME_EXCHANGE) == 0) {
            old = g_strdup(tmpdir);
        } else {
            old = g_strdup_printf("%s.old-XXXXXX", d);
            if (!g_mkdtemp_full(old, 0700) || rename(d, old) != 0) {
                rc = crl_error_set(err, CRL_E_IO, "%s: cannot move the old checkpoint aside to %s: %s", d, old,
                                   g_strerror(errno));
                rmdir(old);
                goto out;
            }
            if (rename(tmpdir, d) != 0) {
                int e = errno;
                if (rename(old, d) != 0)
                    rc = crl_error_set(err, CRL_E_IO,
                                       "%s: cannot rename %s into place (%s), and the old checkpoint is left in %s",
                                       d, tmpdir, g_strerror(e), old);
                else
                    rc = crl_error_set(err, CRL_E_IO, "%s: cannot rename %s into place: %s", d, tmpdir,
                                       g_strerror(e));
                g_free(old);
                old = NULL;
                goto out;
            }
        }
    } else if (errno != ENOENT) {
        rc = crl_error_set(err, CRL_E_IO, "%s: cannot stat: %s", d, g_strerror(errno));
        goto out;
    } else if (rename(tmpdir, d) != 0) {
        rc = crl_error_set(err, CRL_E_IO, "%s: cannot rename %s into place: %s", d, tmpdir, g_strerror(errno));
        goto out;
    }
    rc = fsync_path(parent, O_DIRECTORY, err);
    if (old)
        crl__remove_tree(old);
out:
    g_free(old);
    g_free(parent);
    g_free(d);
    return rc;
}

void crl_ckpt_dir_abort(const char *tmpdir)
{
    if (tmpdir && is_tmp_name(tmpdir))
        crl__remove_tree(tmpdir);
}

/* "BASE.tmp-XXXXXX" or "BASE.old-XXXXXX" with the six characters of g_mkdtemp's alphabet. */
static bool is_leftover(const char *name, const char *base)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) || (strncmp(name + n, ".tmp-", 5) && strncmp(name + n, ".old-", 5)))
        return false;
    const char *x = name + n + 5;
    for (int i = 0; i < 6; i++)
        if (!g_ascii_isalnum(x[i]))
            return false;
    return x[6] == '\0';
}

int crl_ckpt_dir_clean(const char *dir, size_t *removed, crl_error *err)
{
    if (removed)
        *removed = 0;
    if (!dir || !*dir)
        return crl_error_set(err, CRL_E_INVALID, "crl_ckpt_dir_clean: checkpoint directory is %s",
                             dir ? "empty" : "NULL");
    char *d = trim_slashes(dir);
    char *parent = g_path_get_dirname(d), *base = g_path_get_basename(d);
    int rc = CRL_OK;
    int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dh = dfd < 0 ? NULL : fdopendir(dfd);
    if (!dh) {
        rc = crl_error_set(err, CRL_E_IO, "%s: cannot list %s for leftover temporary checkpoints: %s", d, parent,
                           g_strerror(errno));
        if (dfd >= 0)
            close(dfd);
        goto out;
    }
    /* The names first: removing while reading a directory may skip entries. */
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    struct dirent *de;
    while ((de = readdir(dh)))
        if (is_leftover(de->d_name, base))
            g_ptr_array_add(names, g_strdup(de->d_name));
    for (guint i = 0; i < names->len; i++) {
        const char *name = g_ptr_array_index(names, i);
        struct stat st;
        /* Only real directories of this user: a symlink or file of that name is not crl's. */
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
            continue;
        int e = crl__remove_at(dfd, name, st.st_dev, 0);
        if (e) {
            if (!rc)
                rc = crl_error_set(err, CRL_E_IO, "%s/%s: cannot remove this leftover temporary checkpoint: %s",
                                   parent, name, g_strerror(e));
        } else if (removed) {
            (*removed)++;
        }
    }
    g_ptr_array_free(names, TRUE);
    closedir(dh);
out:
    g_free(parent);
    g_free(base);
    g_free(d);
    return rc;
}
