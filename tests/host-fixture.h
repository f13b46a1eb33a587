/* A config and a host with some plugins loaded, for the suites that build envs and collectors from INI text. */
#ifndef CRL_TEST_HOST_FIXTURE_H
#define CRL_TEST_HOST_FIXTURE_H

#include <check.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include <crl/crl.h>
#include <crl/config.h>
#include <crl/host.h>

typedef struct crl_test_host {
    crl_config *cfg;
    crl_host *host;
} crl_test_host;

/* Load "[plugins] load = <plugins>" plus `ini` (as test.ini) and the plugins it names. */
static inline void crl_test_host_open(crl_test_host *f, const char *plugins, const char *ini)
{
    memset(f, 0, sizeof *f);
    crl_error e = { 0 };
    f->cfg = crl_config_new(&e);
    ck_assert_ptr_nonnull(f->cfg);
    char *text = g_strdup_printf("[plugins]\nload = %s\n%s", plugins, ini);
    int rc = crl_config_load_buffer(f->cfg, "test.ini", text, strlen(text), CRL_LAYER_FILE, &e);
    g_free(text);
    ck_assert_msg(rc == CRL_OK, "config: %s", e.message);
    f->host = crl_host_new(f->cfg, &e);
    ck_assert_msg(f->host != NULL, "host: %s", e.message);
    rc = crl_host_load_configured(f->host, &e);
    ck_assert_msg(rc == CRL_OK, "plugins: %s (CRL_PLUGIN_PATH=%s)", e.message,
                  getenv("CRL_PLUGIN_PATH") ? getenv("CRL_PLUGIN_PATH") : "unset");
}

static inline void crl_test_host_close(crl_test_host *f)
{
    crl_host_free(f->host);
    crl_config_free(f->cfg);
    memset(f, 0, sizeof *f);
}

#endif
