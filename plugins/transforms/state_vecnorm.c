/* VecNorm: running mean/variance normalisation (TorchRL's VecNorm), optionally shared between processes. */
#define _GNU_SOURCE /* memfd_create */
#include "config.h"
#include "state_common.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The statistics of one key.  With shared = true this lives in a MAP_SHARED
 * mapping (memfd, or shm_open when shm_name is given) and every update runs
 * under the process-shared robust mutex.  Layout version 1. */
#define VN_MAGIC 0x6d726f6e76726c63ULL /* "crlvnorm" */
typedef struct vn_region {
    uint64_t magic;
    int64_t F;
    _Atomic uint32_t ready;
    uint32_t version;
    pthread_mutex_t lock;
    double count;
    double data[];         /* sum[F], then ssq[F] */
} vn_region;

typedef struct vn_key {
    vn_region *r;
    size_t bytes;
    bool mapped;
    char *shm_path;        /* set when this process created the named segment */
    pid_t creator;
    int64_t spec_F;        /* from the specs; -1 unknown */
} vn_key;

typedef struct vnorm {
    tf_keys k;
    double decay, eps;
    bool shared, frozen;
    char *shm_name;
    vn_key *keys;
    st_scratch x, stats;
} vnorm;

static size_t region_bytes(int64_t F)
{
    return offsetof(vn_region, data) + (size_t)(2 * F) * sizeof(double);
}

static void key_release(vn_key *kk)
{
    if (!kk->r)
        return;
    if (kk->mapped) {
        munmap(kk->r, kk->bytes);
        if (kk->shm_path && kk->creator == getpid())
            shm_unlink(kk->shm_path);
    } else {
        free(kk->r);
    }
    free(kk->shm_path);
    kk->r = NULL;
    kk->shm_path = NULL;
}

static void vnorm_destroy(void *p)
{
    vnorm *t = p;
    if (!t)
        return;
    for (size_t i = 0; t->keys && i < t->k.n; i++)
        key_release(&t->keys[i]);
    free(t->keys);
    free(t->shm_name);
    st_scratch_free(&t->x);
    st_scratch_free(&t->stats);
    tf_keys_free(&t->k);
    free(t);
}

static int vnorm_create(const crl_opts *o, void **out, crl_error *err)
{
    vnorm *t = calloc(1, sizeof *t);
    if (!t)
        return crl_error_set(err, CRL_E_NOMEM, "VecNorm: out of memory");
    const char *name = NULL;
    int rc;
    if ((rc = tf_keys_read(o, "in_keys", "out_keys", false, "VecNorm", &t->k, err)) ||
        (rc = crl_opts_double(o, "decay", &t->decay, err)) || (rc = crl_opts_double(o, "eps", &t->eps, err)) ||
        (rc = crl_opts_bool(o, "shared", &t->shared, err)) || (rc = crl_opts_bool(o, "frozen", &t->frozen, err)) ||
        (crl_opts_is_set(o, "shm_name") && (rc = crl_opts_string(o, "shm_name", &name, err)))) {
        vnorm_destroy(t);
        return rc;
    }
    char v[64];
    if (!(t->decay >= 0 && t->decay <= 1)) {
        snprintf(v, sizeof v, "%g", t->decay);
        vnorm_destroy(t);
        return st_bad_option(err, o, "decay", v, "must be in [0, 1] (1: plain running sums)");
    }
    if (!(t->eps > 0)) {
        snprintf(v, sizeof v, "%g", t->eps);
        vnorm_destroy(t);
        return st_bad_option(err, o, "eps", v, "must be > 0");
    }
    if (name) {
        if (!t->shared) {
            vnorm_destroy(t);
            return st_bad_option(err, o, "shm_name", name, "only used with shared = true; set shared = true");
        }
        if (name[0] != '/' || strchr(name + 1, '/') || strlen(name) < 2 || strlen(name) > 160) {
            vnorm_destroy(t);
            return st_bad_option(err, o, "shm_name", name,
                                 "a POSIX shared memory name is '/' then up to 160 characters without '/' "
                                 "(e.g. /crl-vecnorm)");
        }
        if (!(t->shm_name = tf_strdup(name))) {
            vnorm_destroy(t);
            return crl_error_set(err, CRL_E_NOMEM, "VecNorm: out of memory");
        }
    }
    t->keys = calloc(t->k.n, sizeof *t->keys);
    if (!t->keys) {
        vnorm_destroy(t);
        return crl_error_set(err, CRL_E_NOMEM, "VecNorm: out of memory");
    }
    for (size_t i = 0; i < t->k.n; i++)
        t->keys[i].spec_F = -1;
    *out = t;
    return CRL_OK;
}

static int init_lock(vn_region *r, const char *who, crl_error *err)
{
    pthread_mutexattr_t a;
    int rc = pthread_mutexattr_init(&a);
    if (!rc)
        rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (!rc)
        rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (!rc)
        rc = pthread_mutex_init(&r->lock, &a);
    pthread_mutexattr_destroy(&a);
    if (rc)
        return crl_error_set(err, CRL_E_RUNTIME, "%s: cannot make the process-shared lock: %s", who, strerror(rc));
    return CRL_OK;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { 0, ms * 1000000L };
    nanosleep(&ts, NULL);
}

/* Join or create the named segment of key i. */
static int open_named(vnorm *t, size_t i, int64_t F, const char *who, crl_error *err)
{
    vn_key *kk = &t->keys[i];
    char path[256];
    snprintf(path, sizeof path, "%s.%s", t->shm_name, t->k.in[i]);
    for (char *c = path + 1; *c; c++)
        if (*c == '/')
            *c = '_';
    size_t bytes = region_bytes(F);
    bool creator = true;
    int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) {
        creator = false;
        fd = shm_open(path, O_RDWR, 0600);
    }
    if (fd < 0)
        return crl_error_set(err, CRL_E_IO, "%s: shm_open('%s') for key '%s' failed: %s", who, path, t->k.in[i],
                             strerror(errno));
    if (creator && ftruncate(fd, (off_t)bytes) != 0) {
        int e = errno;
        close(fd);
        shm_unlink(path);
        return crl_error_set(err, CRL_E_IO, "%s: sizing shared memory '%s' failed: %s", who, path, strerror(e));
    }
    /* A joiner waits (up to 5 s) for the creator to size and initialise the segment. */
    struct stat st;
    int waited = 0;
    while (!creator && (fstat(fd, &st) != 0 || (size_t)st.st_size < offsetof(vn_region, data)) && waited < 5000) {
        sleep_ms(1);
        waited++;
    }
    if (!creator && (fstat(fd, &st) != 0 || (size_t)st.st_size < offsetof(vn_region, data))) {
        close(fd);
        return crl_error_set(err, CRL_E_TIMEOUT, "%s: shared memory '%s' was never initialised by its creator", who,
                             path);
    }
    size_t map_bytes = creator ? bytes : (size_t)st.st_size;
    void *m = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        if (creator)
            shm_unlink(path);
        return crl_error_set(err, CRL_E_IO, "%s: mapping shared memory '%s' failed: %s", who, path, strerror(errno));
    }
    vn_region *r = m;
    if (creator) {
        r->magic = VN_MAGIC;
        r->version = 1;
        r->F = F;
        int rc = init_lock(r, who, err);
        if (rc) {
            munmap(m, map_bytes);
            shm_unlink(path);
            return rc;
        }
        atomic_store_explicit(&r->ready, 1, memory_order_release);
    } else {
        for (waited = 0; !atomic_load_explicit(&r->ready, memory_order_acquire) && waited < 5000; waited++)
            sleep_ms(1);
        if (!atomic_load_explicit(&r->ready, memory_order_acquire) || r->magic != VN_MAGIC || r->version != 1 ||
            r->F != F || map_bytes < bytes) {
            int64_t have = r->magic == VN_MAGIC ? r->F : -1;
            munmap(m, map_bytes);
            if (have >= 0 && have != F)
                return crl_error_set(err, CRL_E_SHAPE,
                                     "%s: shared memory '%s' holds VecNorm statistics of %lld elements but key '%s' "
                                     "has %lld per env; use another shm_name",
                                     who, path, (long long)have, t->k.in[i], (long long)F);
            return crl_error_set(err, CRL_E_CORRUPT,
                                 "%s: shared memory '%s' does not hold VecNorm statistics (or its creator never "
                                 "finished); remove it (/dev/shm%s) or use another shm_name",
                                 who, path, path);
        }
    }
    kk->r = r;
    kk->bytes = map_bytes;
    kk->mapped = true;
    kk->creator = getpid();
    if (creator && !(kk->shm_path = tf_strdup(path))) {
        key_release(kk);
        return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
    }
    return CRL_OK;
}

/* Statistics of key i for F elements per env: allocated once, kept across rebinding. */
static int ensure_region(vnorm *t, size_t i, int64_t F, const char *who, crl_error *err)
{
    vn_key *kk = &t->keys[i];
    if (kk->r) {
        if (kk->r->F == F)
            return CRL_OK;
        if (kk->mapped)
            return crl_error_set(err, CRL_E_SHAPE,
                                 "%s: key '%s' now has %lld elements per env but its shared statistics hold %lld", who,
                                 t->k.in[i], (long long)F, (long long)kk->r->F);
        key_release(kk);
    }
    size_t bytes = region_bytes(F);
    if (!t->shared) {
        kk->r = calloc(1, bytes);
        if (!kk->r)
            return crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
        kk->r->magic = VN_MAGIC;
        kk->r->F = F;
        kk->bytes = bytes;
        kk->mapped = false;
        return CRL_OK;
    }
    if (t->shm_name)
        return open_named(t, i, F, who, err);
    int fd = memfd_create("crl-vecnorm", MFD_CLOEXEC);
    if (fd < 0)
        return crl_error_set(err, CRL_E_IO, "%s: memfd_create failed: %s", who, strerror(errno));
    void *m = MAP_FAILED;
    if (ftruncate(fd, (off_t)bytes) == 0)
        m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED)
        return crl_error_set(err, CRL_E_IO, "%s: shared memory of %zu bytes failed: %s", who, bytes, strerror(e));
    vn_region *r = m;
    r->magic = VN_MAGIC;
    r->version = 1;
    r->F = F;
    int rc = init_lock(r, who, err);
    if (rc) {
        munmap(m, bytes);
        return rc;
    }
    atomic_store(&r->ready, 1);
    kk->r = r;
    kk->bytes = bytes;
    kk->mapped = true;
    kk->creator = getpid();
    return CRL_OK;
}

static void region_lock(vn_region *r, bool shared)
{
    if (!shared)
        return;
    /* A process that died holding the lock leaves it to the next one (robust mutex). */
    if (pthread_mutex_lock(&r->lock) == EOWNERDEAD)
        pthread_mutex_consistent(&r->lock);
}

static void region_unlock(vn_region *r, bool shared)
{
    if (shared)
        pthread_mutex_unlock(&r->lock);
}

static int vnorm_specs(void *p, crl_transform_specs *s, crl_error *err)
{
    vnorm *t = p;
    int rc;
    for (size_t i = 0; i < t->k.n; i++) {
        crl_error e;
        crl_error_clear(&e);
        crl_spec *leaf = st_spec_leaf(s, t->k.in[i], "VecNorm", &e);
        if (!leaf)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        if ((rc = st_need_float(leaf, t->k.in[i], "VecNorm", err)))
            return rc;
        t->keys[i].spec_F = st_numel_from(crl_spec_ndim(leaf), crl_spec_shape(leaf), s->batch_ndim);
        crl_spec *ns = crl_spec_unbounded(crl_spec_dtype(leaf), crl_spec_ndim(leaf), crl_spec_shape(leaf), &e);
        if ((rc = st_spec_set(s, t->k.out[i], ns, &e, err)))
            return rc;
    }
    return CRL_OK;
}

/* Allocate the statistics before the env is used, so processes forked later share them. */
static int vnorm_bind(void *p, crl_transform_ctx *ctx, crl_error *err)
{
    vnorm *t = p;
    int rc;
    for (size_t i = 0; i < t->k.n; i++)
        if (t->keys[i].spec_F >= 0 && (rc = ensure_region(t, i, t->keys[i].spec_F, crl_transform_ctx_name(ctx), err)))
            return rc;
    return CRL_OK;
}

/* TorchRL's VecNorm._update: sums decay then add this batch (rows in mask), count likewise; then
 * y = (x - mean) / max(sqrt(max(ssq / count - mean^2, eps)), eps). */
static int vnorm_run(vnorm *t, crl_td *td, const bool *mask, bool allow_none, const char *who, crl_error *err)
{
    int64_t rows = st_rows(td);
    size_t present = 0;
    for (size_t i = 0; i < t->k.n; i++) {
        crl_error e = { 0 };
        crl_tensor *x = st_input(td, t->k.in[i], who, true, true, &e);
        if (!x) {
            if (e.code == CRL_OK)
                continue;
            return crl_error_pass(err, &e, e.code);
        }
        present++;
        int64_t n = crl_tensor_numel(x), F = rows ? n / rows : 0;
        int nd = crl_tensor_ndim(x);
        int64_t shape[CRL_MAX_DIMS];
        memcpy(shape, crl_tensor_shape(x), (size_t)nd * sizeof(int64_t));
        crl_dtype dt = crl_tensor_dtype(x);
        double *v = NULL, *st = NULL;
        int rc = ensure_region(t, i, F, who, err);
        if (!rc && (v = st_scratch_get(&t->x, (size_t)n, who, err)))
            st = st_scratch_get(&t->stats, (size_t)(2 * F), who, err);
        if (!rc && !st)
            rc = CRL_E_NOMEM;   /* st_scratch_get's only failure */
        if (rc) {
            crl_tensor_unref(x);
            return rc;
        }
        st_load(crl_tensor_data(x), dt, 0, n, v);
        crl_tensor_unref(x);
        vn_region *r = t->keys[i].r;
        double *sum = r->data, *ssq = r->data + F;
        region_lock(r, t->shared);
        if (!t->frozen) {
            int64_t used = 0;
            for (int64_t row = 0; row < rows; row++)
                used += !mask || mask[row];
            for (int64_t j = 0; j < F; j++) {
                double s1 = 0, s2 = 0;
                for (int64_t row = 0; row < rows; row++)
                    if (!mask || mask[row]) {
                        double a = v[row * F + j];
                        s1 += a;
                        s2 += a * a;
                    }
                sum[j] = sum[j] * t->decay + s1;
                ssq[j] = ssq[j] * t->decay + s2;
            }
            r->count = r->count * t->decay + (double)used;
        }
        double count = r->count;
        for (int64_t j = 0; j < F; j++) {
            if (count > 0) {
                double mean = sum[j] / count;
                double var = ssq[j] / count - mean * mean;
                double sd = sqrt(var > t->eps ? var : t->eps);
                st[j] = mean;
                st[F + j] = sd > t->eps ? sd : t->eps;
            } else { /* frozen before any data: leave the values as they are */
                st[j] = 0;
                st[F + j] = 1;
            }
        }
        region_unlock(r, t->shared);
        for (int64_t q = 0; q < n; q++) {
            int64_t j = q % (F ? F : 1);
            v[q] = (v[q] - st[j]) / st[F + j];
        }
        crl_error_clear(&e);
        crl_tensor *out = crl_transform_output(td, t->k.out[i], dt, nd, shape, &e);
        if (!out)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        st_store(crl_tensor_data(out), dt, 0, n, v);
    }
    if (present == 0 && !allow_none) {
        char want[512] = "";
        size_t len = 0;
        for (size_t i = 0; i < t->k.n && len < sizeof want; i++)
            len += (size_t)snprintf(want + len, sizeof want - len, "%s'%s'", i ? ", " : "", t->k.in[i]);
        crl_error e = { 0 };
        crl_transform_missing_td_key(&e, who, t->k.in[0], td);
        return crl_error_set(err, CRL_E_NOT_FOUND, "%s (VecNorm found none of its in_keys %s)", e.message, want);
    }
    return CRL_OK;
}

static int vnorm_call(void *p, crl_td *td, crl_error *err)
{
    return vnorm_run(p, td, NULL, false, "VecNorm", err);
}

/* The reset output lacks the reward: absent keys are skipped, and only the envs that were reset feed the statistics. */
static int vnorm_reset(void *p, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    return vnorm_run(p, td, mask, true, crl_transform_ctx_name(ctx), err);
}

const crl_option st_vecnorm_options[] = {
    { "in_keys", CRL_OPT_LIST, 0, "observation, reward", 0, 0, NULL, "keys to normalise (floating-point)" },
    { "out_keys", CRL_OPT_LIST, 0, "", 0, 0, NULL, "where to write them (empty: in place)" },
    { "decay", CRL_OPT_DOUBLE, 0, "0.9999", 0, 0, NULL, "factor on the running sums before each update, in [0, 1]" },
    { "eps", CRL_OPT_DOUBLE, 0, "1e-4", 0, 0, NULL, "lower bound on the variance and the std" },
    { "shared", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "keep the statistics in shared memory under a process-shared lock (shared with forked processes)" },
    { "shm_name", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "with shared: a POSIX shm name (/name) so unrelated processes join the same statistics (one segment per "
      "key: NAME.KEY)" },
    { "frozen", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, "normalise with the statistics without updating them" },
    CRL_OPTIONS_END
};

const crl_transform_ops st_vecnorm_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = vnorm_create,
    .transform_specs = vnorm_specs,
    .bind = vnorm_bind,
    .call = vnorm_call,
    .reset = vnorm_reset,
    .destroy = vnorm_destroy,
};
