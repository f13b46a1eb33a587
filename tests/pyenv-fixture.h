/* An env of a Python-backed plugin (gym, envpool, brax) made from INI text, and a Python reference script run
 * beside it, for the suites that check those plugins against Python. */
#ifndef CRL_TEST_PYENV_FIXTURE_H
#define CRL_TEST_PYENV_FIXTURE_H

#include <check.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include <crl/config.h>
#include <crl/env.h>
#include <crl/host.h>

#define EXPECT_HAS(msg, needle) \
    ck_assert_msg(strstr((msg), (needle)) != NULL, "message '%s' lacks '%s'", (msg), (needle))

typedef struct crl_test_pyenv {
    crl_config *cfg;
    crl_host *host;
    crl_env *env;
    crl_error err;
} crl_test_pyenv;

static inline void crl_test_pyenv_close(crl_test_pyenv *f)
{
    crl_env_free(f->env);
    crl_host_free(f->host);
    crl_config_free(f->cfg);
    memset(f, 0, sizeof *f);
}

/* Load `ini` (as test.ini), start a host, load the plugins (NULL-terminated) and make the env of [env].  Returns
 * the env's status (f->err holds the message); *stage says what failed (0 config, 1 host, 2 plugin, 3 env). */
static inline int crl_test_pyenv_open_at(crl_test_pyenv *f, const char *ini, const char *const *plugins, int *stage)
{
    memset(f, 0, sizeof *f);
    *stage = 0;
    f->cfg = crl_config_new(&f->err);
    int rc = f->cfg ? crl_config_load_buffer(f->cfg, "test.ini", ini, strlen(ini), CRL_LAYER_FILE, &f->err)
                    : f->err.code;
    if (rc)
        return rc;
    *stage = 1;
    if (!(f->host = crl_host_new(f->cfg, &f->err)))
        return f->err.code;
    *stage = 2;
    for (const char *const *p = plugins; *p; p++)
        if ((rc = crl_host_load_name(f->host, *p, &f->err)))
            return rc;
    *stage = 3;
    crl_error_clear(&f->err);
    f->env = crl_env_from_config(f->host, f->cfg, "env", &f->err);
    return f->env ? CRL_OK : f->err.code;
}

/* crl_test_pyenv_open_at where a failure before the env (config, host, plugin) fails the test. */
static inline int crl_test_pyenv_open(crl_test_pyenv *f, const char *ini, const char *const *plugins)
{
    static const char *const stages[] = { "loading the config", "starting the host", "loading the plugins" };
    int stage;
    int rc = crl_test_pyenv_open_at(f, ini, plugins, &stage);
    ck_assert_msg(rc == CRL_OK || stage == 3, "%s failed: %s (%s)", stages[stage], f->err.message,
                  crl_status_name(rc));
    return rc;
}

/* rc, the status of making the env of env_ini, must be CRL_OK. */
static inline void crl_test_pyenv_expect_made(const crl_test_pyenv *f, int rc, const char *env_ini)
{
    ck_assert_msg(rc == CRL_OK, "making the env of\n%s\nfailed: %s (%s)", env_ini, f->err.message,
                  crl_status_name(rc));
}

/* rc, the status of making an env, must be `code`, with a message holding every needle (NULL-terminated). */
static inline void crl_test_pyenv_expect_failed(const crl_test_pyenv *f, int rc, int code,
                                                const char *const *needles)
{
    ck_assert_msg(rc == code, "make gave %s (%s), expected %s", crl_status_name(rc), f->err.message,
                  crl_status_name(code));
    for (const char *const *n = needles; *n; n++)
        EXPECT_HAS(f->err.message, *n);
}

/* The lines `python script args...` (args NULL-terminated) prints with PYTHONPATH = pythonpath, in an
 * environment cleared of what the test run may add (PYTHONMALLOC, LD_PRELOAD); free with g_strfreev.  Failing to
 * run or a non-zero exit fails the test with the script's stderr. */
static inline char **crl_test_python_lines(const char *python, const char *script, const char *pythonpath,
                                           const char *const *args)
{
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, (char *)python);
    g_ptr_array_add(argv, (char *)script);
    for (const char *const *a = args; *a; a++)
        g_ptr_array_add(argv, (char *)*a);
    g_ptr_array_add(argv, NULL);
    char **envp = g_get_environ();
    envp = g_environ_setenv(envp, "PYTHONPATH", pythonpath, TRUE);
    envp = g_environ_setenv(envp, "PYTHONDONTWRITEBYTECODE", "1", TRUE);
    envp = g_environ_unsetenv(envp, "PYTHONMALLOC");
    envp = g_environ_unsetenv(envp, "LD_PRELOAD");
    char *out = NULL, *errout = NULL;
    int status = 0;
    GError *ge = NULL;
    gboolean ran = g_spawn_sync(NULL, (char **)argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL, &out, &errout,
                                &status, &ge);
    ck_assert_msg(ran, "cannot run %s: %s", python, ge ? ge->message : "?");
    ck_assert_msg(g_spawn_check_wait_status(status, NULL), "%s failed: %s", script, errout);
    char **lines = g_strsplit(out, "\n", -1);
    g_free(out);
    g_free(errout);
    g_strfreev(envp);
    g_ptr_array_free(argv, TRUE);
    return lines;
}

/* '%.9g' of every value of row i of t (f32, f64, bool or i64), space separated, appended to s. */
static inline void crl_test_fmt_row(GString *s, const crl_tensor *t, int64_t i)
{
    ck_assert(t);
    int64_t per = crl_tensor_numel(t) / crl_tensor_shape(t)[0];
    for (int64_t k = 0; k < per; k++) {
        double v = 0;
        int64_t at = i * per + k;
        switch (crl_tensor_dtype(t)) {
        case CRL_F32: v = ((const float *)crl_tensor_data(t))[at]; break;
        case CRL_F64: v = ((const double *)crl_tensor_data(t))[at]; break;
        case CRL_BOOL: v = ((const uint8_t *)crl_tensor_data(t))[at]; break;
        case CRL_I64: v = (double)((const int64_t *)crl_tensor_data(t))[at]; break;
        default: ck_abort_msg("unexpected dtype");
        }
        g_string_append_printf(s, k ? " %.9g" : "%.9g", v);
    }
}

#endif
