/* crl_host_probe_path: load and init a plugin in a forked child so a crash is reported, not suffered. */
#define _GNU_SOURCE /* pipe2 */
#include "host-private.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the child writes: stage bytes as it goes, then RESULT and the error. */
#define PROBE_RESULT CRL__PROBE_STAGE_REPORT

static G_NORETURN void child(crl_host *host, const char *path, int fd)
{
    host->probe_fd = fd;
    /* Let a crash kill the child with its signal so the parent can name it,
     * even when the parent installed handlers (sanitizers, crash reporters). */
    static const int fatal[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        signal(fatal[i], SIG_DFL);
    crl_error e = { 0 };
    crl_host_load_path(host, path, &e);
    char tag = PROBE_RESULT;
    if (crl__write_all(fd, &tag, 1))
        crl__write_all(fd, &e, sizeof e);
    fflush(stdout);
    fflush(stderr);
    /* _exit: no atexit handlers, no fini, nothing of the parent's state is
     * flushed or torn down twice. */
    _exit(0);
}

int crl_host_probe_path(crl_host *host, const char *path, crl_error *err)
{
    if (!host || !path || !*path)
        return crl_error_set(err, CRL_E_INVALID, "crl_host_probe_path: host and path must be given");
    if (host->current)
        return crl_error_set(err, CRL_E_INVALID, "cannot probe plugins while plugin '%s' runs its init",
                             host->current->info.name);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return crl_error_set(err, CRL_E_IO, "cannot probe plugin %s: pipe: %s", path, g_strerror(errno));
    /* Buffered output must not be written twice (once by each process). */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return crl_error_set(err, CRL_E_IO, "cannot probe plugin %s: fork: %s", path, g_strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        child(host, path, fds[1]);
    }
    close(fds[1]);

    GByteArray *buf = g_byte_array_new();
    for (;;) {
        guint8 chunk[4096];
        ssize_t r = read(fds[0], chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        g_byte_array_append(buf, chunk, (guint)r);
    }
    close(fds[0]);
    int status = 0;
    pid_t w;
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    int wait_errno = errno;

    char stage = 0;
    const crl_error *result = NULL;
    for (guint i = 0; i < buf->len; i++) {
        if (buf->data[i] == PROBE_RESULT) {
            if (buf->len - i - 1 >= sizeof(crl_error))
                result = (const crl_error *)(const void *)(buf->data + i + 1);
            break;
        }
        stage = (char)buf->data[i];
    }

    char *name = crl__plugin_name_from_path(path);
    int rc;
    if (w < 0 && !result) {
        /* (With SIGCHLD ignored the child is reaped for us: ECHILD, but the
         * report, when complete, still says what happened.) */
        rc = crl_error_set(err, CRL_E_IO, "cannot probe plugin '%s' (%s): waitpid: %s", name, path,
                           g_strerror(wait_errno));
    } else if (w >= 0 && WIFSIGNALED(status)) {
        char sbuf[32];
        rc = crl_error_set(err, CRL_E_CRASH, "plugin '%s' (%s) crashed with %s %s", name, path,
                           crl__signal_name(WTERMSIG(status), sbuf, sizeof sbuf), crl__stage_text(stage));
    } else if (result) {
        crl_error copy;
        memcpy(&copy, result, sizeof copy);
        copy.message[sizeof copy.message - 1] = '\0';
        rc = crl_error_pass(err, &copy, CRL_OK);
    } else {
        rc = crl_error_set(err, CRL_E_CRASH,
                           "plugin '%s' (%s) ended the process with exit status %d %s without reporting "
                           "back (does it call exit()?)",
                           name, path, WIFEXITED(status) ? WEXITSTATUS(status) : -1, crl__stage_text(stage));
    }
    g_free(name);
    g_byte_array_free(buf, TRUE);
    return rc;
}
