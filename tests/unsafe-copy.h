/* A copy of a library where another user could replace it: for the suites that check a library in a
 * world-writable directory is refused. */
#ifndef CRL_TEST_UNSAFE_COPY_H
#define CRL_TEST_UNSAFE_COPY_H

#include <check.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <sys/stat.h>

/* Copy `src` as NAME (mode 0755) into a new temporary directory of mode 0777, named from `tmpl` (as
 * g_dir_make_tmp takes it).  Returns the copy's path; *dir receives the directory.  Both are removed,
 * and freed, by crl_test_unsafe_copy_free. */
static inline char *crl_test_unsafe_copy(const char *src, const char *tmpl, const char *name, char **dir)
{
    GError *ge = NULL;
    *dir = g_dir_make_tmp(tmpl, &ge);
    ck_assert_msg(*dir != NULL, "%s", ge ? ge->message : "");
    char *copy = g_build_filename(*dir, name, NULL);
    char *data;
    gsize len;
    ck_assert(g_file_get_contents(src, &data, &len, NULL));
    ck_assert(g_file_set_contents(copy, data, (gssize)len, NULL));
    g_free(data);
    ck_assert_int_eq(chmod(copy, 0755), 0);
    ck_assert_int_eq(chmod(*dir, 0777), 0);
    return copy;
}

static inline void crl_test_unsafe_copy_free(char *copy, char *dir)
{
    ck_assert_int_eq(chmod(dir, 0700), 0);
    g_unlink(copy);
    g_rmdir(dir);
    g_free(copy);
    g_free(dir);
}

#endif
