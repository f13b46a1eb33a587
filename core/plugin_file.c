/* What the loader, the probe and the scanner share about a plugin file and the process that opens it: the
 * plugin name its file dictates, the stage markers sent on a report pipe, and how a process ended. */
#include "host-private.h"

#include <crl/file.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SO_SUFFIX ".so"

char *crl__plugin_name_from_path(const char *path)
{
    char *base = g_path_get_basename(path);
    size_t n = strlen(base);
    if (n > strlen(SO_SUFFIX) && g_str_has_suffix(base, SO_SUFFIX))
        base[n - strlen(SO_SUFFIX)] = '\0';
    return base;
}

bool crl__write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

void crl__probe_stage(crl_host *host, char stage)
{
    if (host->probe_fd >= 0)
        crl__write_all(host->probe_fd, &stage, 1);
}

const char *crl__signal_name(int sig, char *buf, size_t n)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {
        { SIGSEGV, "SIGSEGV" }, { SIGBUS, "SIGBUS" }, { SIGABRT, "SIGABRT" }, { SIGFPE, "SIGFPE" },
        { SIGILL, "SIGILL" },   { SIGKILL, "SIGKILL" }, { SIGTERM, "SIGTERM" }, { SIGTRAP, "SIGTRAP" },
        { SIGSYS, "SIGSYS" },   { SIGPIPE, "SIGPIPE" }, { SIGINT, "SIGINT" },  { SIGQUIT, "SIGQUIT" },
        { SIGALRM, "SIGALRM" }, { SIGXCPU, "SIGXCPU" }, { SIGXFSZ, "SIGXFSZ" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
        if (names[i].sig == sig)
            return names[i].name;
    snprintf(buf, n, "signal %d", sig);
    return buf;
}

const char *crl__stage_text(char stage)
{
    switch (stage) {
    case CRL__PROBE_STAGE_INIT:
        return "during init";
    case CRL__PROBE_STAGE_OPEN:
        return "while being loaded (dlopen: relocation or constructors)";
    case CRL__PROBE_STAGE_ENTRY:
        return "in its entry point crl_plugin_v1";
    case CRL__PROBE_STAGE_FINI:
        return "during fini";
    default:
        return "before it was loaded";
    }
}

/* The SDK's check of a library a plugin loads itself (the ffi backend): the rules plugins are loaded by,
 * then the ELF extent check, so a truncated library is refused instead of crashing dlopen. */
int crl_file_check_code(const char *path, const char *what, char **resolved, crl_error *err)
{
    if (resolved)
        *resolved = NULL;
    if (!path || !*path)
        return crl_error_set(err, CRL_E_INVALID, "crl_file_check_code: a path must be given");
    char *real = NULL;
    int rc = crl__secure_path_check(path, what ? what : "file", &real, err);
    if (!rc)
        rc = crl__elf_extent_check(real, what ? what : "file", err);
    if (!rc && resolved)
        *resolved = real;
    else
        g_free(real);
    return rc;
}
