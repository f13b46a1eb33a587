/* Re-exec'd process workers (backends that embed CPython): the parent's description and crl-env-worker's main. */
#define _GNU_SOURCE /* memfd_create */
#include "exec-private.h"
#include "config-private.h"
#include "host-private.h"
#include "tensor-private.h"

#include <crl/config.h>
#include <crl/host.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Why re-exec and not fork: a forked child of a process running CPython inherits its GIL, its thread states
 * and numpy/OpenBLAS thread pools in whatever state the fork caught them, and only CPython's own os.fork
 * repairs that (for the calling thread, with the GIL held).  A worker that execs a small program instead
 * starts its own interpreter from nothing; the cost is that it must make its instances again, from the
 * plugin file, the parent's configuration and each instance's option set, which this description carries. */

#define GROUP "worker"

static const char *env_worker_path(void)
{
    const char *env = secure_getenv("CRL_ENV_WORKER");
    return env && *env ? env : CRL_ENV_WORKER_PATH;
}

/* Write all of `text` into a new memfd (the workers pread it: they share its offset). */
static int text_memfd(const char *text, size_t n, crl_error *err)
{
    int fd = memfd_create("crl-env-worker-desc", MFD_CLOEXEC);
    if (fd < 0)
        return crl_error_set(err, CRL_E_IO, "memfd for the worker description: %s", g_strerror(errno)), -1;
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, text + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            return crl_error_set(err, CRL_E_IO, "writing the worker description: %s", g_strerror(e)), -1;
        }
        off += (size_t)w;
    }
    return fd;
}

crl__exec_reexec *crl__exec_reexec_prepare(crl__exec *x, const crl__exec_reexec_args *a, crl_error *err)
{
    const char *program = env_worker_path();
    crl_error e = { 0 };
    if (crl__secure_path_check(program, "the env worker program", NULL, &e)) {
        crl_error_set(err, CRL_E_PLUGIN, "%s (install crl's crl-env-worker, or point CRL_ENV_WORKER at it)",
                      e.message);
        return NULL;
    }
    if (access(program, X_OK) != 0) {
        crl_error_set(err, CRL_E_PLUGIN, "cannot run the env worker program %s: %s (install crl's crl-env-worker, "
                      "or point CRL_ENV_WORKER at it)", program, g_strerror(errno));
        return NULL;
    }
    const crl__plugin *pl = x->host && x->plugin ? crl__host_find_plugin(x->host, x->plugin) : NULL;
    if (!pl || !pl->path || !x->buffers) {
        crl_error_set(err, CRL_E_UNSUPPORTED, "the backend's plugin %s %s, so a worker cannot load it again",
                      x->plugin ? x->plugin : "?", !pl ? "is not loaded from a file" : "has no file");
        return NULL;
    }
    GKeyFile *kf = g_key_file_new();
    char *ini = crl_config_to_ini(x->host->cfg);
    g_key_file_set_string(kf, GROUP, "config", ini ? ini : "");
    g_free(ini);
    g_key_file_set_string(kf, GROUP, "plugin_path", pl->path);
    g_key_file_set_string(kf, GROUP, "backend", crl_env_backend_name(x->env));
    g_key_file_set_int64(kf, GROUP, "num", x->num);
    g_key_file_set_uint64(kf, GROUP, "nblocks", x->nblocks);
    g_key_file_set_uint64(kf, GROUP, "ninst", x->ninst);
    g_key_file_set_integer(kf, GROUP, "ctl_fd", a->ctl_fd);
    g_key_file_set_integer(kf, GROUP, "evfd", a->evfd);
    g_key_file_set_uint64(kf, GROUP, "map_len", a->map_len);
    g_key_file_set_uint64(kf, GROUP, "nw", a->nw);
    g_key_file_set_uint64(kf, GROUP, "frame_bytes", a->frame_bytes);
    g_key_file_set_int64(kf, GROUP, "parent", a->parent);
    g_key_file_set_uint64(kf, GROUP, "spin", a->spin);
    g_key_file_set_boolean(kf, GROUP, "crowded", a->crowded);
    for (size_t b = 0; b < x->nblocks; b++) {
        char *g = g_strdup_printf("block.%zu", b);
        const crl__exec_block *bl = &x->blocks[b];
        g_key_file_set_uint64(kf, g, "first", bl->first);
        g_key_file_set_uint64(kf, g, "ninst", bl->ninst);
        g_key_file_set_int64(kf, g, "start", bl->start);
        g_key_file_set_int64(kf, g, "count", bl->count);
        g_free(g);
    }
    for (size_t k = 0; k < x->ninst; k++) {
        const crl__exec_inst *in = &x->inst[k];
        char *g = g_strdup_printf("inst.%zu", k), *og = g_strdup_printf("opts.%zu", k);
        g_key_file_set_string(kf, g, "id", in->id);
        g_key_file_set_int64(kf, g, "start", in->start);
        g_key_file_set_int64(kf, g, "count", in->count);
        if (in->opts)
            crl__opts_save(in->opts, kf, og);
        g_free(g);
        g_free(og);
    }
    crl__exec_reexec *re = g_new0(crl__exec_reexec, 1);
    re->desc_fd = -1;
    re->program = g_strdup(program);
    int rc = CRL_OK;
    char **keys = crl_td_leaf_keys(x->buffers, err);
    size_t nleaves = 0;
    while (keys && keys[nleaves])
        nleaves++;
    if (!keys)
        rc = CRL_E_NOMEM;
    re->fds = g_new(int, nleaves + 1);
    for (size_t i = 0; !rc && i < nleaves; i++) {
        crl_tensor *t = crl_td_get(x->buffers, keys[i]);
        size_t off = 0, len = 0;
        int fd = t ? crl__tensor_shared_fd(t, &off, &len) : -1;
        if (fd < 0 || !crl_tensor_is_contiguous(t)) {
            rc = crl_error_set(err, CRL_E_UNSUPPORTED, "env buffer '%s' is not in shared memory a worker program can "
                               "map", keys[i]);
            break;
        }
        char *g = g_strdup_printf("leaf.%zu", i);
        g_key_file_set_string(kf, g, "key", keys[i]);
        g_key_file_set_string(kf, g, "dtype", crl_dtype_name(crl_tensor_dtype(t)));
        int nd = crl_tensor_ndim(t);
        gint64 *shape = g_new(gint64, (gsize)nd + 1);
        for (int d = 0; d < nd; d++)
            shape[d] = crl_tensor_shape(t)[d];
        char **sv = g_new0(char *, (gsize)nd + 1);
        for (int d = 0; d < nd; d++)
            sv[d] = g_strdup_printf("%" G_GINT64_FORMAT, shape[d]);
        g_key_file_set_string_list(kf, g, "shape", (const char *const *)sv, (gsize)nd);
        g_strfreev(sv);
        g_free(shape);
        g_key_file_set_integer(kf, g, "fd", fd);
        g_key_file_set_uint64(kf, g, "offset", off);
        g_key_file_set_uint64(kf, g, "map_len", len);
        g_free(g);
        re->fds[re->nfds++] = fd;
    }
    crl_free(keys);
    g_key_file_set_uint64(kf, GROUP, "nleaves", nleaves);
    if (!rc) {
        gsize n = 0;
        char *text = g_key_file_to_data(kf, &n, NULL);
        re->desc_fd = text_memfd(text, n, err);
        if (re->desc_fd < 0)
            rc = CRL_E_IO;
        g_free(text);
    }
    g_key_file_free(kf);
    if (rc) {
        g_free(re->program);
        g_free(re->fds);
        g_free(re);
        return NULL;
    }
    return re;
}

/* ---- the worker program -------------------------------------------------------------------- */

typedef struct worker {
    crl__exec x;
    crl_config *cfg;
    crl_host *host;
    size_t block;
    char label[96];          /* "env worker 1 (envs 2-3)" for its log lines */
    GString *closing;        /* warnings logged while its envs close */
} worker;

static void worker_log(void *user, int level, const char *line)
{
    worker *w = user;
    if (w->closing && level <= CRL_LOG_WARNING)
        g_string_append(w->closing, g_str_has_prefix(line, "crl: ") ? line + 5 : line);
    /* "crl: [gym] ..." becomes "crl: env worker 1 (envs 2-3): [gym] ...". */
    const char *rest = g_str_has_prefix(line, "crl: ") ? line + 5 : line;
    char *out = g_strdup_printf("crl: %s: %s", w->label, rest);
    fputs(out, stderr);
    fflush(stderr);
    g_free(out);
}

static int close_all(void *user, crl_error *err)
{
    worker *w = user;
    crl__exec *x = &w->x;
    w->closing = g_string_new(NULL);
    for (size_t k = 0; k < x->ninst; k++)
        if (x->inst[k].benv) {
            x->real.close(x->inst[k].benv);
            x->inst[k].benv = NULL;
        }
    int rc = CRL_OK;
    if (w->closing->len) {
        while (w->closing->len && w->closing->str[w->closing->len - 1] == '\n')
            g_string_truncate(w->closing, w->closing->len - 1);
        rc = crl_error_set(err, CRL_E_RUNTIME, "%s", w->closing->str);
    }
    g_string_free(w->closing, TRUE);
    w->closing = NULL;
    return rc;
}

/* A whole read of fd (a memfd: pread from 0, the offset is shared with the other workers). */
static char *read_desc(int fd, gsize *n, crl_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size > (off_t)(256 << 20)) {
        crl_error_set(err, CRL_E_IO, "the description fd %d is not a readable description", fd);
        return NULL;
    }
    char *buf = g_malloc((gsize)st.st_size + 1);
    size_t off = 0;
    while (off < (size_t)st.st_size) {
        ssize_t r = pread(fd, buf + off, (size_t)st.st_size - off, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            crl_error_set(err, CRL_E_IO, "reading the description (fd %d): %s", fd, r < 0 ? g_strerror(errno)
                                                                                       : "truncated");
            g_free(buf);
            return NULL;
        }
        off += (size_t)r;
    }
    buf[off] = '\0';
    *n = off;
    return buf;
}

static const crl_option no_options[] = { CRL_OPTIONS_END };

/* The host buffers, over the parent's memfds. */
static crl_td *map_buffers(GKeyFile *kf, int64_t num, crl_error *err)
{
    crl_td *td = crl_td_new(1, &num, err);
    guint64 n = g_key_file_get_uint64(kf, GROUP, "nleaves", NULL);
    for (guint64 i = 0; td && i < n; i++) {
        char *g = g_strdup_printf("leaf.%" G_GUINT64_FORMAT, i);
        char *key = g_key_file_get_string(kf, g, "key", NULL), *dts = g_key_file_get_string(kf, g, "dtype", NULL);
        gsize nd = 0;
        char **sv = g_key_file_get_string_list(kf, g, "shape", &nd, NULL);
        int fd = g_key_file_get_integer(kf, g, "fd", NULL);
        size_t off = g_key_file_get_uint64(kf, g, "offset", NULL), len = g_key_file_get_uint64(kf, g, "map_len", NULL);
        crl_dtype dt;
        int64_t shape[CRL_MAX_DIMS];
        bool ok = key && dts && crl_dtype_from_name(dts, &dt) && nd <= CRL_MAX_DIMS && len > 0;
        for (gsize d = 0; ok && d < nd; d++)
            shape[d] = g_ascii_strtoll(sv[d], NULL, 10);
        void *mem = ok ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
        crl_tensor *t = mem != MAP_FAILED ? crl_tensor_wrap((char *)mem + off, dt, (int)nd, shape, NULL, NULL, NULL,
                                                            err)
                                          : NULL;
        if (!t || crl_td_set(td, key, t, err)) {
            if (!ok || mem == MAP_FAILED)
                crl_error_set(err, CRL_E_IO, "cannot map env buffer %s (fd %d): %s", key ? key : "?", fd,
                              ok ? g_strerror(errno) : "bad description");
            crl_td_unref(td);
            td = NULL;
        }
        if (mem != MAP_FAILED)
            close(fd);
        crl_tensor_unref(t);
        g_strfreev(sv);
        g_free(key);
        g_free(dts);
        g_free(g);
    }
    return td;
}

/* Load the plugin, make and bind block b's instances.  The error names what failed; the parent adds which
 * worker and envs. */
static int build(worker *w, GKeyFile *kf, crl_error *err)
{
    crl__exec *x = &w->x;
    char *ini = g_key_file_get_string(kf, GROUP, "config", NULL);
    char *path = g_key_file_get_string(kf, GROUP, "plugin_path", NULL);
    char *backend = g_key_file_get_string(kf, GROUP, "backend", NULL);
    int rc = !ini || !path || !backend ? crl_error_set(err, CRL_E_INVALID, "the description names no plugin")
                                       : CRL_OK;
    if (!rc && !(w->cfg = crl_config_new(err)))
        rc = CRL_E_NOMEM;
    if (!rc && (rc = crl_config_load_buffer(w->cfg, "the parent's configuration", ini, strlen(ini), CRL_LAYER_FILE,
                                            err)))
        crl_error_prefix(err, "worker configuration: ");
    if (!rc && !(w->host = crl_host_new(w->cfg, err)))
        rc = CRL_E_NOMEM;
    if (!rc) {
        w->host->log_sink = worker_log;
        w->host->log_sink_user = w;
        rc = crl_host_load_path(w->host, path, err);
    }
    const crl_component *comp = NULL;
    if (!rc && !(comp = crl_host_find(w->host, CRL_KIND_ENV, backend)))
        rc = crl_error_set(err, CRL_E_NOT_FOUND, "plugin %s registered no env backend '%s'", path, backend);
    if (!rc) {
        const crl_env_ops *ops = comp->ops;
        size_t n = ops && ops->struct_size < sizeof x->real ? ops->struct_size : sizeof x->real;
        if (ops)
            memcpy(&x->real, ops, n);
        if (!ops || !x->real.make || !x->real.bind || !x->real.step || !x->real.reset || !x->real.close)
            rc = crl_error_set(err, CRL_E_PLUGIN, "env backend '%s' lacks ops", backend);
        x->backend_step = x->real.step;
    }
    crl_td *buffers = NULL;
    if (!rc && !(buffers = map_buffers(kf, x->num, err)))
        rc = CRL_E_IO;
    const crl_option *tables[2] = { crl_env_options(), comp && comp->options ? comp->options : no_options };
    const crl__exec_block *bl = &x->blocks[w->block];
    for (size_t k = bl->first; !rc && k < bl->first + bl->ninst; k++) {
        crl__exec_inst *in = &x->inst[k];
        char *og = g_strdup_printf("opts.%zu", k);
        in->opts = crl__opts_load(kf, og, tables, 2, err);
        g_free(og);
        if (!in->opts) {
            rc = CRL_E_CONFIG;
            break;
        }
        crl_env_specs specs = { .struct_size = sizeof specs };
        rc = x->real.make(in->id, in->count, in->opts, &specs, &in->benv, err);
        crl_spec *all[6] = { specs.observation, specs.action, specs.reward, specs.done, specs.state, specs.info };
        for (int s = 0; s < 6; s++)
            crl_spec_unref(all[s]);
        if (!rc && !in->benv)
            rc = crl_error_set(err, CRL_E_PLUGIN, "make returned no env");
        if (!rc && !(in->view = crl_td_slice(buffers, 0, in->start, in->start + in->count, 1, err)))
            rc = CRL_E_RUNTIME;
        if (!rc)
            rc = x->real.bind(in->benv, in->view, err);
        if (rc)
            crl_error_prefix(err, "%s/%s: ", backend, in->id);
    }
    crl_td_unref(buffers);
    g_free(ini);
    g_free(path);
    g_free(backend);
    return rc;
}

static int usage(const char *why)
{
    fprintf(stderr, "crl-env-worker: %s\n"
            "crl-env-worker runs one block of a Python env backend for crl's processes executor; crl starts it,\n"
            "it is not for use by hand.\n", why);
    return 2;
}

int crl_env_worker_main(int argc, char **argv)
{
    int desc_fd = -1;
    long long block = -1, seen = -1;
    bool restart = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--restart"))
            restart = true;
        else if (i + 1 < argc && !strcmp(argv[i], "--desc-fd"))
            desc_fd = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--block"))
            block = atoll(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--seen"))
            seen = atoll(argv[++i]);
        else
            return usage("unknown argument");
    }
    if (desc_fd < 0 || block < 0 || seen < 0 || seen > UINT32_MAX)
        return usage("--desc-fd, --block and --seen are required");
    crl_error err = { 0 };
    gsize n = 0;
    char *text = read_desc(desc_fd, &n, &err);
    GKeyFile *kf = g_key_file_new();
    GError *ge = NULL;
    if (!text || !g_key_file_load_from_data(kf, text, n, G_KEY_FILE_NONE, &ge)) {
        fprintf(stderr, "crl-env-worker: %s\n", text ? ge->message : err.message);
        return 2;
    }
    g_free(text);
    close(desc_fd);
    worker *w = g_new0(worker, 1);
    crl__exec *x = &w->x;
    w->block = (size_t)block;
    x->num = g_key_file_get_int64(kf, GROUP, "num", NULL);
    x->nblocks = g_key_file_get_uint64(kf, GROUP, "nblocks", NULL);
    x->ninst = g_key_file_get_uint64(kf, GROUP, "ninst", NULL);
    x->o.kind = CRL__EXEC_PROCESSES;
    if (x->num <= 0 || x->nblocks == 0 || x->nblocks > 4096 || x->ninst > (guint64)x->num || w->block >= x->nblocks) {
        fprintf(stderr, "crl-env-worker: the description does not fit block %lld\n", block);
        return 2;
    }
    x->blocks = g_new0(crl__exec_block, x->nblocks);
    x->inst = g_new0(crl__exec_inst, x->ninst);
    for (size_t b = 0; b < x->nblocks; b++) {
        char *g = g_strdup_printf("block.%zu", b);
        crl__exec_block *bl = &x->blocks[b];
        bl->first = g_key_file_get_uint64(kf, g, "first", NULL);
        bl->ninst = g_key_file_get_uint64(kf, g, "ninst", NULL);
        bl->start = g_key_file_get_int64(kf, g, "start", NULL);
        bl->count = g_key_file_get_int64(kf, g, "count", NULL);
        g_free(g);
        if (bl->first + bl->ninst > x->ninst) {
            fprintf(stderr, "crl-env-worker: block %zu of the description is out of range\n", b);
            return 2;
        }
    }
    for (size_t k = 0; k < x->ninst; k++) {
        char *g = g_strdup_printf("inst.%zu", k);
        x->inst[k].id = g_key_file_get_string(kf, g, "id", NULL);
        x->inst[k].start = g_key_file_get_int64(kf, g, "start", NULL);
        x->inst[k].count = g_key_file_get_int64(kf, g, "count", NULL);
        g_free(g);
    }
    const crl__exec_block *bl = &x->blocks[w->block];
    if (bl->count == 1)
        snprintf(w->label, sizeof w->label, "env worker %zu (env %lld)", w->block, (long long)bl->start);
    else
        snprintf(w->label, sizeof w->label, "env worker %zu (envs %lld-%lld)", w->block, (long long)bl->start,
                 (long long)(bl->start + bl->count - 1));
    crl__exec_reexec_args a = { 0 };
    a.ctl_fd = g_key_file_get_integer(kf, GROUP, "ctl_fd", NULL);
    a.evfd = g_key_file_get_integer(kf, GROUP, "evfd", NULL);
    a.map_len = g_key_file_get_uint64(kf, GROUP, "map_len", NULL);
    a.nw = g_key_file_get_uint64(kf, GROUP, "nw", NULL);
    a.frame_bytes = g_key_file_get_uint64(kf, GROUP, "frame_bytes", NULL);
    a.parent = (pid_t)g_key_file_get_int64(kf, GROUP, "parent", NULL);
    a.spin = (unsigned)g_key_file_get_uint64(kf, GROUP, "spin", NULL);
    a.crowded = g_key_file_get_boolean(kf, GROUP, "crowded", NULL);
    /* Python backends leave os._exit real here (pyembed guards it in the host process): in a worker, exiting
     * is the failure the parent detects and reports. */
    setenv("CRL_ENV_WORKER_PROCESS", "1", 1);
    crl_error made = { 0 };
    int mrc = build(w, kf, &made);
    g_key_file_free(kf);
    int st = crl__exec_procs_serve(x, &a, w->block, (uint32_t)seen, restart, mrc ? &made : NULL, close_all, w,
                                   &err);
    if (st < 0)
        fprintf(stderr, "crl-env-worker: %s\n", err.message);
    fflush(NULL);
    /* No interpreter finalisation or plugin fini: the parent only waits for the exit status. */
    _exit(st < 0 ? 2 : st);
}
