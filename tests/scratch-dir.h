/* A scratch directory per test (made in setup, removed in teardown) for suites that write files. */
#ifndef CRL_TEST_SCRATCH_DIR_H
#define CRL_TEST_SCRATCH_DIR_H

#include <check.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <sys/stat.h>

static char *tmp_root;

/* Remove path and everything below it; directories a test made unwritable are opened up first. */
static void rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0700);
        GDir *d = g_dir_open(path, 0, NULL);
        if (d) {
            const char *n;
            while ((n = g_dir_read_name(d))) {
                char *c = g_build_filename(path, n, NULL);
                rm_rf(c);
                g_free(c);
            }
            g_dir_close(d);
        }
        g_rmdir(path);
    } else {
        g_unlink(path);
    }
}

/* tmp_root = a new directory from the g_dir_make_tmp template. */
static inline void scratch_open(const char *tmpl)
{
    tmp_root = g_dir_make_tmp(tmpl, NULL);
    ck_assert_ptr_nonnull(tmp_root);
}

static inline void scratch_close(void)
{
    rm_rf(tmp_root);
    g_free(tmp_root);
    tmp_root = NULL;
}

/* tmp_root/name; g_free. */
static inline char *tpath(const char *name)
{
    return g_build_filename(tmp_root, name, NULL);
}

#endif
