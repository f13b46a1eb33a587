/* VecNorm: running mean/variance normalisation (TorchRL's VecNorm), optionally shared between processes. */
#define _GNU_SOURCE /* memfd_create, F_OFD_SETLK */
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
#include <unistd.h>

/* The statistics of one key.  With shared = true this lives in a MAP_SHARED
 * mapping (memfd, or shm_open when shm_name is given) and every update runs
 * under the process-shared robust mutex.  Layout version 2 (1 had no
 * creator); magic, F, ready and version stay where they are. */
#define VN_MAGIC 0x6d726f6e76726c63ULL /* "crlvnorm" */
#define VN_VERSION 2u
typedef struct vn_region {
    uint64_t magic;
    int64_t F;
    _Atomic uint32_t ready;
    uint32_t version;
    int32_t creator;       /* pid of the process that started these statistics */
    uint32_t pad;
    pthread_mutex_t lock;
    double count;
    double data[];         /* sum[F], then ssq[F] */
} vn_region;

/* A named segment lives while a process uses it.  Every user holds a read
 * lock on byte VN_USERS of it for as long as it has it open: an
 * open-file-description lock, which goes with the process however it ends
 * (kill -9 included) and is shared with children forked later.  Byte VN_GATE
 * is held exclusively by a process while it joins, starts or leaves, so
 * whether anyone still holds VN_USERS is decided by one process at a time:
 * the starter of two started together initialises, the other joins; the
 * last to leave unlinks the name; a segment that nobody holds was left by
 * processes that are gone, and starts over with a warning. */
#define VN_GATE 0
#define VN_USERS 1

typedef struct vn_key {
    vn_region *r;
    size_t bytes;
    bool mapped;
    int fd;                /* the named segment, holding our VN_USERS lock; -1 otherwise */
    char *shm_path;        /* the named segment's name */
    pid_t owner;           /* the process that opened it (a forked child only unmaps) */
    int64_t spec_F;        /* from the specs; -1 unknown */
} vn_key;

typedef struct vnorm {
    tf_keys k;
    double decay, eps;
    bool shared, frozen;
    char *shm_name;
    vn_key *keys;
    st_scratch x, stats;
    crl_transform_ctx *ctx;  /* from bind (NULL standalone): the workers' turn order */
} vnorm;

static size_t region_bytes(int64_t F)
{
    return offsetof(vn_region, data) + (size_t)(2 * F) * sizeof(double);
}

/* An open-file-description lock on byte `at` of fd (F_RDLCK, F_WRLCK or
 * F_UNLCK); 0 or the errno (EAGAIN: held by another description). */
static int ofd_lock(int fd, short type, off_t at, bool wait)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = at;
    fl.l_len = 1;
    int rc;
    while ((rc = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl)) != 0 && errno == EINTR)
        ;
    return rc == 0 ? 0 : errno == EACCES ? EAGAIN : errno;
}

/* Whether fd is the segment `name` names now (not one unlinked meanwhile). */
static bool still_named(int fd, const char *name)
{
    int fd2 = shm_open(name, O_RDONLY, 0);
    struct stat a, b;
    bool same = fd2 >= 0 && fstat(fd, &a) == 0 && fstat(fd2, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    if (fd2 >= 0)
        close(fd2);
    return same;
}

/* Leave a named segment: the last user (no other VN_USERS lock) removes the name. */
static void leave_named(vn_key *kk)
{
    if (ofd_lock(kk->fd, F_WRLCK, VN_GATE, true) != 0)
        return;
    if (ofd_lock(kk->fd, F_WRLCK, VN_USERS, false) == 0) {
        if (still_named(kk->fd, kk->shm_path))
            shm_unlink(kk->shm_path);
        ofd_lock(kk->fd, F_UNLCK, VN_USERS, false);
    }
    /* Unlocked by hand: a child forked meanwhile shares the description, so
     * closing it would not let the gate go. */
    ofd_lock(kk->fd, F_UNLCK, VN_GATE, false);
}

static void key_release(vn_key *kk)
{
    if (!kk->r)
        return;
    if (kk->mapped) {
        munmap(kk->r, kk->bytes);
        if (kk->fd >= 0) {
            if (kk->owner == getpid())
                leave_named(kk);
            close(kk->fd); /* the locks go with the last descriptor of the description */
        }
    } else {
        free(kk->r);
    }
    free(kk->shm_path);
    kk->r = NULL;
    kk->fd = -1;
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
    for (size_t i = 0; i < t->k.n; i++) {
        t->keys[i].spec_F = -1;
        t->keys[i].fd = -1;
    }
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

/* Where VecNorm's warnings go: the host that registered the group last,
 * forgotten in the plugin's fini (then crl_host_log's default applies). */
static crl_host *vn_host;

void tf_state_set_host(crl_host *host)
{
    __atomic_store_n(&vn_host, host, __ATOMIC_RELEASE);
}

void tf_state_forget_host(void)
{
    __atomic_store_n(&vn_host, NULL, __ATOMIC_RELEASE);
}

/* Start fresh statistics in the segment fd (no process uses it; we hold
 * VN_GATE and VN_USERS exclusively): size it, zero it, initialise it. */
static int start_named(int fd, const char *path, int64_t F, size_t bytes, vn_region **out, const char *who,
                       crl_error *err)
{
    if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)bytes) != 0)
        return crl_error_set(err, CRL_E_IO, "%s: sizing shared memory '%s' failed: %s", who, path, strerror(errno));
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return crl_error_set(err, CRL_E_IO, "%s: mapping shared memory '%s' failed: %s", who, path, strerror(errno));
    vn_region *r = m;
    r->magic = VN_MAGIC;
    r->version = VN_VERSION;
    r->F = F;
    r->creator = (int32_t)getpid();
    int rc = init_lock(r, who, err);
    if (rc) {
        munmap(m, bytes);
        return rc;
    }
    atomic_store_explicit(&r->ready, 1, memory_order_release);
    *out = r;
    return CRL_OK;
}

/* Join or start the named segment of key i. */
static int open_named(vnorm *t, size_t i, int64_t F, const char *who, crl_error *err)
{
    vn_key *kk = &t->keys[i];
    char path[256];
    snprintf(path, sizeof path, "%s.%s", t->shm_name, t->k.in[i]);
    for (char *c = path + 1; *c; c++)
        if (*c == '/')
            *c = '_';
    size_t bytes = region_bytes(F);
    /* Open it and hold the gate; if the last user unlinked the name in
     * between, that was another segment: open the name again. */
    int fd = -1, e = 0;
    for (int tries = 0; fd < 0; tries++) {
        if ((fd = shm_open(path, O_RDWR | O_CREAT, 0600)) < 0)
            return crl_error_set(err, CRL_E_IO, "%s: shm_open('%s') for key '%s' failed: %s", who, path,
                                 t->k.in[i], strerror(errno));
        if ((e = ofd_lock(fd, F_WRLCK, VN_GATE, true))) {
            close(fd);
            return crl_error_set(err, CRL_E_IO, "%s: cannot lock shared memory '%s': %s", who, path, strerror(e));
        }
        if (!still_named(fd, path)) {
            close(fd);
            fd = -1;
            if (tries == 100)
                return crl_error_set(err, CRL_E_IO,
                                     "%s: shared memory '%s' was removed 100 times while being opened; is "
                                     "something else removing it?",
                                     who, path);
        }
    }
    int rc = CRL_OK;
    vn_region *r = NULL;
    size_t map_bytes = bytes;
    struct stat st;
    vn_region head;
    memset(&head, 0, sizeof head);
    if (fstat(fd, &st) != 0) {
        rc = crl_error_set(err, CRL_E_IO, "%s: fstat of shared memory '%s' failed: %s", who, path, strerror(errno));
        goto out;
    }
    bool has_head = (size_t)st.st_size >= offsetof(vn_region, lock) &&
                    pread(fd, &head, offsetof(vn_region, lock), 0) == (ssize_t)offsetof(vn_region, lock);
    if (ofd_lock(fd, F_WRLCK, VN_USERS, false) == 0) {
        /* Nobody uses it: new, or left by processes that are gone (all zero:
         * one killed while starting it; start_named sizes it 0, then whole). */
        static const uint8_t zero[offsetof(vn_region, lock)];
        if (st.st_size > 0 && (!has_head || (head.magic != VN_MAGIC && memcmp(&head, zero, sizeof zero) != 0))) {
            rc = crl_error_set(err, CRL_E_CORRUPT,
                               "%s: shared memory '%s' does not hold VecNorm statistics; remove it (/dev/shm%s) "
                               "or use another shm_name",
                               who, path, path);
            goto out;
        }
        if (has_head && head.magic == VN_MAGIC) {
            double count = 0;
            char by[96] = " of an older crl";
            if (head.version == VN_VERSION) {
                if (!atomic_load(&head.ready) || (size_t)st.st_size < offsetof(vn_region, data) ||
                    pread(fd, &count, sizeof count, (off_t)offsetof(vn_region, count)) != (ssize_t)sizeof count)
                    count = 0;
                snprintf(by, sizeof by, " of process %d (%.0f samples)", (int)head.creator, count);
            }
            crl_host_log(__atomic_load_n(&vn_host, __ATOMIC_ACQUIRE), CRL_LOG_WARNING,
                         "%s: shared memory '%s' holds VecNorm statistics%s that no running process uses (their "
                         "processes were killed or never closed them); starting fresh statistics in it",
                         who, path, by);
        }
        if ((rc = start_named(fd, path, F, bytes, &r, who, err)))
            goto out;
        if ((e = ofd_lock(fd, F_RDLCK, VN_USERS, false))) {
            rc = crl_error_set(err, CRL_E_IO, "%s: cannot lock shared memory '%s': %s", who, path, strerror(e));
            goto out;
        }
    } else {
        /* In use: whoever started it did so holding the gate, so it is
         * complete now. */
        if (!has_head || head.magic != VN_MAGIC || !atomic_load(&head.ready)) {
            rc = crl_error_set(err, CRL_E_CORRUPT,
                               "%s: shared memory '%s' is in use but does not hold VecNorm statistics; use another "
                               "shm_name",
                               who, path);
            goto out;
        }
        if (head.version != VN_VERSION) {
            rc = crl_error_set(err, CRL_E_CORRUPT,
                               "%s: shared memory '%s' holds VecNorm statistics of another crl version (layout %u, "
                               "this one reads %u) in use by a running process; use another shm_name",
                               who, path, head.version, VN_VERSION);
            goto out;
        }
        if (head.F != F) {
            rc = crl_error_set(err, CRL_E_SHAPE,
                               "%s: shared memory '%s' holds VecNorm statistics of %lld elements but key '%s' has "
                               "%lld per env; use another shm_name",
                               who, path, (long long)head.F, t->k.in[i], (long long)F);
            goto out;
        }
        if ((size_t)st.st_size < bytes) {
            rc = crl_error_set(err, CRL_E_CORRUPT, "%s: shared memory '%s' is %lld bytes, VecNorm statistics of %lld "
                               "elements need %zu; use another shm_name",
                               who, path, (long long)st.st_size, (long long)F, bytes);
            goto out;
        }
        map_bytes = (size_t)st.st_size;
        void *m = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            rc = crl_error_set(err, CRL_E_IO, "%s: mapping shared memory '%s' failed: %s", who, path, strerror(errno));
            goto out;
        }
        r = m;
        if ((e = ofd_lock(fd, F_RDLCK, VN_USERS, false))) {
            rc = crl_error_set(err, CRL_E_IO, "%s: cannot lock shared memory '%s': %s", who, path, strerror(e));
            goto out;
        }
    }
    if (!(kk->shm_path = tf_strdup(path))) {
        rc = crl_error_set(err, CRL_E_NOMEM, "%s: out of memory", who);
        goto out;
    }
    kk->r = r;
    kk->bytes = map_bytes;
    kk->mapped = true;
    kk->fd = fd;
    kk->owner = getpid();
out:
    if (rc) {
        if (r)
            munmap(r, map_bytes);
        /* A segment we started is left to the next one, as a dead one would be. */
        ofd_lock(fd, F_UNLCK, VN_USERS, false);
        ofd_lock(fd, F_UNLCK, VN_GATE, false);
        close(fd);
        return rc;
    }
    ofd_lock(fd, F_UNLCK, VN_GATE, false);
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
    kk->owner = getpid();
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
    t->ctx = ctx;
    /* Workers joining the same named statistics update them in env order, whatever their timing (a memfd
     * is each instance's own). */
    if (t->shared && t->shm_name)
        crl_transform_ctx_use_turns(ctx);
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
        if (t->shared && t->shm_name)
            crl_transform_ctx_wait_turn(t->ctx);
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

/* The running statistics of each key i that has them: "sum<i>", "ssq<i>" (F each) and "count<i>" (1), float64. */
static int vnorm_state(void *p, crl_td *out, crl_error *err)
{
    vnorm *t = p;
    int rc = CRL_OK;
    for (size_t i = 0; i < t->k.n && !rc; i++) {
        vn_region *r = t->keys[i].r;
        if (!r)
            continue;
        int64_t F = r->F;
        double *copy = malloc((size_t)(2 * F + 1) * sizeof *copy);
        if (!copy)
            return crl_error_set(err, CRL_E_NOMEM, "VecNorm: out of memory");
        region_lock(r, t->shared);
        memcpy(copy, r->data, (size_t)(2 * F) * sizeof *copy);
        copy[2 * F] = r->count;
        region_unlock(r, t->shared);
        char ks[40], kq[40], kc[40];
        snprintf(ks, sizeof ks, "sum%zu", i);
        snprintf(kq, sizeof kq, "ssq%zu", i);
        snprintf(kc, sizeof kc, "count%zu", i);
        if (!(rc = st_state_put(out, ks, copy, F, err)) && !(rc = st_state_put(out, kq, copy + F, F, err)))
            rc = st_state_put(out, kc, copy + 2 * F, 1, err);
        free(copy);
    }
    return rc;
}

/* Take another instance's statistics into statistics of this instance's own (a shared segment is left, for
 * the others that share it), frozen when asked: TorchRL's VecNorm frozen_copy. */
static int vnorm_load_state(void *p, const crl_td *state, bool freeze, crl_error *err)
{
    vnorm *t = p;
    const crl_tensor **x = calloc(3 * t->k.n + 1, sizeof *x);   /* sum, ssq, count of key i at 3i.. */
    if (!x)
        return crl_error_set(err, CRL_E_NOMEM, "VecNorm: out of memory");
    int rc = CRL_OK;
    for (size_t i = 0; i < t->k.n && !rc; i++) {
        char ks[40], kq[40], kc[40];
        snprintf(ks, sizeof ks, "sum%zu", i);
        snprintf(kq, sizeof kq, "ssq%zu", i);
        snprintf(kc, sizeof kc, "count%zu", i);
        if (!crl_td_has(state, ks) && !crl_td_has(state, kq) && !crl_td_has(state, kc))
            continue;
        int64_t F = t->keys[i].r ? t->keys[i].r->F : t->keys[i].spec_F;
        if (!(rc = st_state_vector(state, ks, F, "VecNorm", &x[3 * i], err)) &&
            !(rc = st_state_vector(state, kq, crl_tensor_numel(x[3 * i]), "VecNorm", &x[3 * i + 1], err)))
            rc = st_state_vector(state, kc, 1, "VecNorm", &x[3 * i + 2], err);
    }
    for (size_t i = 0; i < t->k.n && !rc; i++) {
        if (!x[3 * i])
            continue;
        vn_key *kk = &t->keys[i];
        int64_t F = crl_tensor_numel(x[3 * i]);
        if (kk->r && kk->mapped)
            key_release(kk);
        if (!kk->r) {
            size_t bytes = region_bytes(F);
            if (!(kk->r = calloc(1, bytes))) {
                rc = crl_error_set(err, CRL_E_NOMEM, "VecNorm: out of memory");
                break;
            }
            kk->r->magic = VN_MAGIC;
            kk->r->F = F;
            kk->bytes = bytes;
            kk->mapped = false;
        }
        memcpy(kk->r->data, crl_tensor_data(x[3 * i]), (size_t)F * sizeof(double));
        memcpy(kk->r->data + F, crl_tensor_data(x[3 * i + 1]), (size_t)F * sizeof(double));
        kk->r->count = ((const double *)crl_tensor_data(x[3 * i + 2]))[0];
    }
    free(x);
    if (rc)
        return rc;
    /* every region is this instance's own now (or none was there to share yet: nothing to leave) */
    bool own = true;
    for (size_t i = 0; i < t->k.n; i++)
        own = own && (!t->keys[i].r || !t->keys[i].mapped);
    if (own)
        t->shared = false;
    if (freeze)
        t->frozen = true;
    return CRL_OK;
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
    .state = vnorm_state,
    .load_state = vnorm_load_state,
};
