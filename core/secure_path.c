/* Whether a file may be trusted as code: every component of its path, symlinks resolved one by one, can be
 * changed only by root or the invoking user. */
#define _GNU_SOURCE
#include "host-private.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* As the kernel's limit on symlinks followed in one lookup. */
#define MAX_LINKS 40

static const char *entry_kind(mode_t m)
{
    return S_ISDIR(m) ? "directory" : S_ISLNK(m) ? "symlink" : "file";
}

/* Whoever may replace `path` (or, for a directory, its entries): refuse anyone but root and `me`.  A
 * world-writable directory with the sticky bit (/tmp) is allowed: there only an entry's owner may rename or
 * remove it, and each entry on the way is checked in turn. */
static int check_component(const char *what, const char *path, const struct stat *st, uid_t me,
                           const char *via, crl_error *err)
{
    char why[256];
    const char *fix;
    if (st->st_uid != 0 && st->st_uid != me) {
        g_snprintf(why, sizeof why, "is owned by uid %u, neither root nor you (uid %u)", (unsigned)st->st_uid,
                   (unsigned)me);
        fix = "chown root";
    } else if ((st->st_mode & S_IWOTH) && !(S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX))) {
        g_snprintf(why, sizeof why, "is world-writable (mode %04o)", (unsigned)(st->st_mode & 07777));
        fix = "chmod o-w";
    } else if ((st->st_mode & S_IWGRP) && st->st_gid != 0) {
        g_snprintf(why, sizeof why, "is writable by group %u (mode %04o)", (unsigned)st->st_gid,
                   (unsigned)(st->st_mode & 07777));
        fix = "chmod g-w";
    } else {
        return CRL_OK;
    }
    return crl_error_set(err, CRL_E_PERM,
                         "refusing to load %s: the %s %s%s%s%s %s, so another user could replace the code; "
                         "run '%s %s'%s",
                         what, entry_kind(st->st_mode), path, via ? " (reached through symlink " : "",
                         via ? via : "", via ? ")" : "", why, fix, path,
                         st->st_uid != 0 && st->st_uid != me ? " or remove the plugin" : "");
}

/* Push the '/'-separated parts of `rel` onto the front of `todo`, in order. */
static void push_parts(GQueue *todo, const char *rel)
{
    char **parts = g_strsplit(rel, "/", -1);
    guint n = g_strv_length(parts);
    for (guint i = n; i-- > 0;) {
        if (parts[i][0] && strcmp(parts[i], "."))
            g_queue_push_head(todo, parts[i]);
        else
            g_free(parts[i]);
    }
    g_free(parts);
}

int crl__secure_path_check(const char *path, const char *what, char **resolved, crl_error *err)
{
    if (resolved)
        *resolved = NULL;
    uid_t me = geteuid();
    char *start = NULL;
    if (path[0] != '/') {
        char *cwd = g_get_current_dir();
        start = g_build_filename(cwd, path, NULL);
        g_free(cwd);
    }
    GQueue todo = G_QUEUE_INIT;
    push_parts(&todo, start ? start : path);
    g_free(start);

    GString *cur = g_string_new("/");
    char *via = NULL;     /* the last symlink followed, for messages */
    int links = 0, rc = CRL_OK;
    struct stat st;
    if (stat("/", &st) != 0)
        rc = crl_error_set(err, CRL_E_IO, "cannot load %s: stat /: %s", what, g_strerror(errno));
    else
        rc = check_component(what, "/", &st, me, NULL, err);

    char *part;
    while (!rc && (part = g_queue_pop_head(&todo))) {
        if (!strcmp(part, "..")) {
            /* cur holds no symlink, so its parent is textual. */
            char *up = g_path_get_dirname(cur->str);
            g_string_assign(cur, up);
            g_free(up);
            g_free(part);
            continue;
        }
        char *next = g_build_filename(cur->str, part, NULL);
        g_free(part);
        if (lstat(next, &st) != 0) {
            int e = errno;
            if (e == ENOENT)
                rc = crl_error_set(err, CRL_E_NOT_FOUND, "cannot load %s: %s does not exist", what, next);
            else
                rc = crl_error_set(err, CRL_E_IO, "cannot load %s: %s: %s", what, next, g_strerror(e));
        } else if (S_ISLNK(st.st_mode)) {
            /* The link's own directory is cur, already checked; its owner is irrelevant, its target is what
             * counts, and every part of the target is checked in turn. */
            char target[PATH_MAX];
            ssize_t n = ++links > MAX_LINKS ? -2 : readlink(next, target, sizeof target - 1);
            if (n < 0) {
                rc = crl_error_set(err, CRL_E_IO, "cannot load %s: cannot resolve symlink %s: %s", what, next,
                                   n == -2 ? "too many levels of symbolic links" : g_strerror(errno));
            } else {
                target[n] = '\0';
                if (target[0] == '/')
                    g_string_assign(cur, "/");
                push_parts(&todo, target);
                g_free(via);
                via = g_strdup(next);
            }
        } else {
            rc = check_component(what, next, &st, me, via, err);
            if (!rc && !S_ISDIR(st.st_mode) && !g_queue_is_empty(&todo))
                rc = crl_error_set(err, CRL_E_IO, "cannot load %s: %s is not a directory", what, next);
            g_string_assign(cur, next);
        }
        g_free(next);
    }
    if (!rc && stat(cur->str, &st) == 0 && !S_ISREG(st.st_mode))
        rc = crl_error_set(err, CRL_E_PLUGIN, "cannot load %s: %s is not a regular file", what, cur->str);
    if (!rc && resolved)
        *resolved = g_strdup(cur->str);
    g_queue_clear_full(&todo, g_free);
    g_string_free(cur, TRUE);
    g_free(via);
    return rc;
}
