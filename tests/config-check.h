/* `crl config check` on a config text, for the suites that check a bad description exits 2 naming FILE:LINE. */
#ifndef CRL_TEST_CONFIG_CHECK_H
#define CRL_TEST_CONFIG_CHECK_H

#include <check.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Write `text` to a temporary .ini, run `$CRL config check` on it, and assert that it exits 2 with the
 * file's path and `line` (1-based, of `text`) as PATH:LINE in its stderr, and `want` there too. */
static inline void crl_test_config_check_fails(const char *text, int line, const char *want)
{
    const char *crl = getenv("CRL");
    ck_assert_msg(crl != NULL, "CRL is not set (run through make check)");
    GError *ge = NULL;
    char *path = NULL;
    int fd = g_file_open_tmp("crl-check-XXXXXX.ini", &path, &ge);
    ck_assert_msg(fd >= 0, "%s", ge ? ge->message : "");
    close(fd);
    ck_assert(g_file_set_contents(path, text, -1, NULL));
    char *argv[] = { (char *)crl, "config", "check", path, NULL };
    char *out = NULL, *errs = NULL;
    int status = 0;
    ck_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errs, &status, &ge));
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 2, "status %d: %s%s", status, out, errs);
    char *where = g_strdup_printf("%s:%d", path, line);
    ck_assert_msg(strstr(errs, where) != NULL, "want %s in: %s", where, errs);
    ck_assert_msg(strstr(errs, want) != NULL, "want '%s' in: %s", want, errs);
    g_free(where);
    g_unlink(path);
    g_free(path);
    g_free(out);
    g_free(errs);
}

#endif
