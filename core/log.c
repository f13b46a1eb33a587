/* crl_host_log: "crl: [plugin] message" lines on stderr, filtered by [log] level. */
#define _GNU_SOURCE /* dladdr */
#include "host-private.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int crl__log_level(const crl_host *host)
{
    int level = CRL_LOG_WARNING;
    if (!host || crl_config_get_enum(host->cfg, "log", "level", "error|warning|info|debug", CRL_LOG_WARNING,
                                     &level, NULL) != CRL_OK)
        return CRL_LOG_WARNING; /* a bad value is reported by validation, not here */
    return level;
}

/* Which plugin is speaking: the one in init or fini, else the loaded object
 * that contains the caller's code, else the host itself. */
static const char *speaker(const crl_host *host, const void *caller)
{
    if (!host)
        return "crl";
    if (host->current)
        return host->current->info.name;
    if (host->in_fini)
        return host->in_fini->info.name;
    Dl_info info;
    if (caller && dladdr(caller, &info) && info.dli_fbase)
        for (guint i = 0; i < host->plugins->len; i++) {
            const crl__plugin *p = g_ptr_array_index(host->plugins, i);
            if (p->base && p->base == info.dli_fbase)
                return p->info.name;
        }
    return "crl";
}

__attribute__((noinline)) void crl_host_log(crl_host *host, int level, const char *fmt, ...)
{
    const void *caller = __builtin_return_address(0);
    if (!fmt)
        return;
    if (level < CRL_LOG_ERROR)
        level = CRL_LOG_ERROR;
    if (level > crl__log_level(host))
        return;
    va_list ap;
    va_start(ap, fmt);
    char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n')
        msg[--n] = '\0';
    /* One write per line, so lines from threads do not interleave. */
    char *line = g_strdup_printf("crl: [%s] %s\n", speaker(host, caller), msg);
    if (host && host->log_sink) {
        host->log_sink(host->log_sink_user, level, line);
    } else {
        fputs(line, stderr);
        fflush(stderr);
    }
    g_free(line);
    g_free(msg);
}
