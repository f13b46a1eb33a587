/* Scanning a plugin file out of process: start crl-plugin-scanner on it, read its report with a deadline, and
 * say how it ended.  Nothing of the plugin's code runs in the calling process. */
#define _GNU_SOURCE /* pipe2, secure_getenv */
#include "host-private.h"
#include "scan-private.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CRL_SCANNER_PATH
#error "CRL_SCANNER_PATH must be defined by the build (core/core.am)"
#endif

extern char **environ;

#define REPORT_MAX (16u << 20)  /* a report is a few KiB; more is a broken scanner */
#define OUTPUT_KEEP 4096        /* the tail of the plugin's output kept for a broken plugin's reason */

const char *crl__scanner_path(void)
{
    const char *env = secure_getenv("CRL_PLUGIN_SCANNER");
    return env && *env ? env : CRL_SCANNER_PATH;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A pipe whose ends sit above fd 3, both close-on-exec: the child's end is dup2'd into place. */
static int pipe_high(int fds[2])
{
    int raw[2];
    if (pipe2(raw, O_CLOEXEC) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        fds[i] = fcntl(raw[i], F_DUPFD_CLOEXEC, 10);
        close(raw[i]);
    }
    if (fds[0] < 0 || fds[1] < 0) {
        if (fds[0] >= 0)
            close(fds[0]);
        if (fds[1] >= 0)
            close(fds[1]);
        return -1;
    }
    return 0;
}

typedef struct {
    GByteArray *report;   /* everything on the report pipe */
    GString *output;      /* the tail of stdout+stderr */
    bool timed_out;
    int status;           /* waitpid status */
} run_state;

/* Read both pipes until the scanner closes them or the deadline passes; then reap it (killing its whole
 * process group on timeout, so nothing it started lives on). */
static void collect(pid_t pid, int rep, int out, double timeout_s, run_state *st)
{
    double deadline = now_s() + timeout_s;
    struct pollfd p[2] = { { rep, POLLIN, 0 }, { out, POLLIN, 0 } };
    int open_fds = 2;
    while (open_fds > 0) {
        double left = deadline - now_s();
        if (left <= 0) {
            st->timed_out = true;
            break;
        }
        int r = poll(p, 2, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[4096];
            ssize_t n = read(p[i].fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                p[i].fd = -1;
                open_fds--;
                continue;
            }
            if (i == 0) {
                if (st->report->len + (size_t)n <= REPORT_MAX)
                    g_byte_array_append(st->report, (const guint8 *)buf, (guint)n);
            } else {
                g_string_append_len(st->output, buf, n);
                if (st->output->len > 2 * OUTPUT_KEEP)
                    g_string_erase(st->output, 0, (gssize)(st->output->len - OUTPUT_KEEP));
            }
        }
    }
    /* Closed its pipes but still running (a fini that hangs after closing them): wait out the deadline. */
    while (!st->timed_out) {
        pid_t w = waitpid(pid, &st->status, WNOHANG);
        if (w == pid)
            return;
        if (w < 0 && errno != EINTR) {
            st->status = 0;
            return;
        }
        if (now_s() >= deadline) {
            st->timed_out = true;
            break;
        }
        g_usleep(2000);
    }
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, &st->status, 0) < 0 && errno == EINTR)
        ;
}

/* The last line the plugin printed, for a broken plugin's reason ("" when silent). */
static char *last_output(const GString *out)
{
    char *s = g_strndup(out->str, out->len);
    g_strstrip(s);
    char *nl = strrchr(s, '\n');
    char *line = g_strdup(nl ? nl + 1 : s);
    g_free(s);
    if (strlen(line) > 200)
        line[200] = '\0';
    if (!*line) {
        g_free(line);
        return g_strdup("");
    }
    char *r = g_strdup_printf(" (its last output: \"%s\")", line);
    g_free(line);
    return r;
}

static void set_broken(crl__scan_result *r, int code, char *reason)
{
    r->status = code;
    g_free(r->reason);
    r->reason = reason;
}

/* Turn what the scanner left into a result.  Returns whether the result is worth caching (the plugin's
 * own doing, not a deadline on a busy machine or a missing scanner). */
static bool interpret(crl__scan_result *r, const char *name, const run_state *st, double timeout_s)
{
    const guint8 *b = st->report->data;
    size_t n = st->report->len, i = 0;
    char stage = 0;
    while (i < n && b[i] != CRL__PROBE_STAGE_REPORT)
        stage = (char)b[i++];
    GVariant *v = NULL;
    bool done = false;
    if (i < n && n - i >= 9) {
        uint64_t len = 0;
        for (int k = 0; k < 8; k++)
            len |= (uint64_t)b[i + 1 + k] << (8 * k);
        if (len <= n - i - 9) {
            GBytes *bytes = g_bytes_new(b + i + 9, (gsize)len);
            v = g_variant_ref_sink(g_variant_new_from_bytes(G_VARIANT_TYPE("v"), bytes, FALSE));
            g_bytes_unref(bytes);
            /* After the report: the fini marker, then the end. */
            for (size_t k = i + 9 + (size_t)len; k < n; k++) {
                stage = (char)b[k];
                done = b[k] == CRL__PROBE_STAGE_DONE;
            }
        }
    }
    char *tail = last_output(st->output);
    char sbuf[32];
    bool cacheable = true;
    if (st->timed_out) {
        set_broken(r, CRL_E_TIMEOUT,
                   g_strdup_printf("plugin '%s' (%s) did not finish scanning within %g s: it hung %s%s (raise "
                                   "[plugins] scan_timeout if it is only slow)",
                                   name, r->path, timeout_s, crl__stage_text(stage), tail));
        cacheable = false;
    } else if (WIFSIGNALED(st->status)) {
        set_broken(r, CRL_E_CRASH,
                   g_strdup_printf("plugin '%s' (%s) crashed with %s %s%s", name, r->path,
                                   crl__signal_name(WTERMSIG(st->status), sbuf, sizeof sbuf), crl__stage_text(stage),
                                   tail));
    } else if (!v || !done || !WIFEXITED(st->status) || WEXITSTATUS(st->status) != 0) {
        set_broken(r, CRL_E_CRASH,
                   g_strdup_printf("plugin '%s' (%s) ended the scanner with exit status %d %s without reporting "
                                   "back (does it call exit()?)%s",
                                   name, r->path, WIFEXITED(st->status) ? WEXITSTATUS(st->status) : -1,
                                   crl__stage_text(stage), tail));
    } else {
        crl_error e = { 0 };
        GVariant *inner = g_variant_get_variant(v);
        crl__scan_result *got = crl__scan_result_from_variant(inner, &e);
        g_variant_unref(inner);
        if (!got) {
            set_broken(r, CRL_E_CORRUPT, g_strdup_printf("the scanner's report on plugin '%s' (%s) is unreadable: %s",
                                                         name, r->path, e.message));
            cacheable = false;
        } else {
            /* Keep the host's view of the file; take everything else from the report. */
            g_free(got->path);
            got->path = r->path;
            got->id = r->id;
            r->path = NULL;
            crl__scan_result tmp = *r;
            *r = *got;
            *got = tmp;
            crl__scan_result_free(got);
        }
    }
    if (v)
        g_variant_unref(v);
    g_free(tail);
    return cacheable;
}

int crl__scan_file(const char *path, const crl__file_id *id, double timeout_s, crl__scan_result **out)
{
    crl__scan_result *r = crl__scan_result_new(path);
    r->id = *id;
    *out = r;
    char *name = crl__plugin_name_from_path(path);
    const char *scanner = crl__scanner_path();
    crl_error e = { 0 };
    if (crl__secure_path_check(scanner, "the plugin scanner", NULL, &e)) {
        set_broken(r, CRL_E_PLUGIN,
                   g_strdup_printf("plugin '%s' (%s) was not scanned: %s (install crl's crl-plugin-scanner, or "
                                   "point CRL_PLUGIN_SCANNER at it)",
                                   name, path, e.message));
        g_free(name);
        return CRL_E_PLUGIN;
    }
    int rep[2], outp[2];
    if (pipe_high(rep) != 0) {
        set_broken(r, CRL_E_IO, g_strdup_printf("cannot scan plugin '%s': pipe: %s", name, g_strerror(errno)));
        g_free(name);
        return CRL_E_IO;
    }
    if (pipe_high(outp) != 0) {
        set_broken(r, CRL_E_IO, g_strdup_printf("cannot scan plugin '%s': pipe: %s", name, g_strerror(errno)));
        close(rep[0]);
        close(rep[1]);
        g_free(name);
        return CRL_E_IO;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 2);
    posix_spawn_file_actions_adddup2(&fa, rep[1], 3);
    posix_spawnattr_init(&at);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    char *argv[] = { (char *)scanner, (char *)"--report-fd", (char *)"3", (char *)path, NULL };
    pid_t pid;
    int serr = posix_spawn(&pid, scanner, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(rep[1]);
    close(outp[1]);
    int rc = CRL_OK;
    if (serr != 0) {
        set_broken(r, CRL_E_PLUGIN,
                   g_strdup_printf("plugin '%s' (%s) was not scanned: cannot start the scanner %s: %s (install "
                                   "crl's crl-plugin-scanner, or point CRL_PLUGIN_SCANNER at it)",
                                   name, path, scanner, g_strerror(serr)));
        rc = CRL_E_PLUGIN;
    } else {
        run_state st = { g_byte_array_new(), g_string_new(NULL), false, 0 };
        collect(pid, rep[0], outp[0], timeout_s, &st);
        if (!interpret(r, name, &st, timeout_s))
            rc = r->status;
        g_byte_array_free(st.report, TRUE);
        g_string_free(st.output, TRUE);
    }
    close(rep[0]);
    close(outp[0]);
    g_free(name);
    return rc;
}
