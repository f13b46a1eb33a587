/* Removing a directory tree without following links: shared by libcrl (checkpoint_dir.c's leftovers) and
 * crl run (--overwrite), which must not disagree on what is safe to delete. */
#ifndef CRL_REMOVE_TREE_H
#define CRL_REMOVE_TREE_H

#include <glib.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Remove name (in the directory dfd) and everything under it, relative to open descriptors: no symlink
 * is followed, even when the tree changes meanwhile, and no other filesystem than dev is entered.  0 or
 * the errno of the first failure (the rest is still tried). */
static inline int crl__remove_at(int dfd, const char *name, dev_t dev, int depth)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : errno;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dfd, name, 0) == 0 || errno == ENOENT ? 0 : errno;
    if (st.st_dev != dev)
        return EXDEV;
    if (depth > 64)
        return ELOOP;
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno;
    DIR *dh = fdopendir(fd);
    if (!dh) {
        int e = errno;
        close(fd);
        return e;
    }
    int first = 0;
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    struct dirent *de;
    while ((de = readdir(dh)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            g_ptr_array_add(names, g_strdup(de->d_name));
    for (guint i = 0; i < names->len; i++) {
        int e = crl__remove_at(fd, g_ptr_array_index(names, i), dev, depth + 1);
        if (e && !first)
            first = e;
    }
    g_ptr_array_free(names, TRUE);
    closedir(dh);
    if (unlinkat(dfd, name, AT_REMOVEDIR) != 0 && !first)
        first = errno;
    return first;
}

/* Remove path and everything under it without following symlinks (crl__remove_at from its parent directory).
 * 0 or the errno of the first failure. */
static inline int crl__remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : errno;
    char *parent = g_path_get_dirname(path), *base = g_path_get_basename(path);
    int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;
    if (dfd < 0) {
        rc = errno;
    } else {
        rc = crl__remove_at(dfd, base, st.st_dev, 0);
        close(dfd);
    }
    g_free(parent);
    g_free(base);
    return rc;
}

#endif
