/* Async stepping (EnvPool's send/recv): executor = threads with batch_size < num_envs.
 *
 * How it works.  Every env has its own backend instance (exec.c makes one
 * per env in async mode) bound to its row of the host's buffers.  send
 * checks the actions, writes them into the envs' action rows and pushes
 * the env ids on a lock-free work queue; a fixed pool of worker threads
 * (one less than num_workers, at most the cores: the caller steps envs
 * itself while it waits in recv) pops ids, steps (or, for an env that ended, resets) that one instance and
 * does the host's per-env bookkeeping (step counter, time limit, done =
 * terminated | truncated, frame skip, pixels), then pushes the id on the
 * ready queue.  recv takes the first batch_size ids that are ready and
 * gathers their rows.  An env's rows belong to the worker from send until
 * recv hands them out, so no row is ever touched by two threads at once,
 * and the queues' release/acquire order the writes.  Waiting spins briefly
 * and then sleeps on a futex (DESIGN.md: a futex round trip costs ~100 us,
 * a spin hand-off well under 1 us). */
#define _GNU_SOURCE 1 /* pthread_setaffinity_np, CPU_SET */
#include "exec-private.h"
#include "env-private.h"
#include "spin-private.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>

#define SPIN_NS 50000

enum { AJOB_STEP = 0, AJOB_RESET = 1 };

/* Vyukov's bounded multi-producer multi-consumer queue of env ids.  Its
 * capacity is at least num_envs and an env is queued at most once, so a
 * push never finds it full. */
typedef struct aqcell {
    _Atomic size_t seq;
    int64_t id;
} aqcell;

typedef struct aqueue {
    aqcell *cells;
    size_t mask;
    _Alignas(64) _Atomic size_t head;  /* next push */
    _Alignas(64) _Atomic size_t tail;  /* next pop */
} aqueue;

/* A counting semaphore on a futex word: spin, then sleep. */
typedef struct asem {
    _Alignas(64) _Atomic uint32_t count;
    _Atomic int32_t waiters;
} asem;

typedef struct async {
    crl__exec *x;
    crl_env *env;
    int nthreads;
    pthread_t *th;
    int started_threads;
    aqueue work, ready;
    asem work_sem, ready_sem;
    _Atomic bool quit;
    uint8_t *job;                /* per env, written by the caller before the push */
    bool *in_flight;             /* caller's view: sent (or reset) and not yet received */
    int64_t nflight;
    bool *seed_pending;          /* the seeds async_reset took from the env */
    uint64_t *seeds;
    int *env_rc;                 /* per env: the worker's status for its last job */
    crl_error *env_err;
    bool reset_done;             /* async_reset ran */
    bool failed;                 /* a backend error: every call but async_reset repeats it */
    crl_error fail;
    int64_t *ids;                /* scratch: batch_size ids for recv, num for send */
    bool *seen;                  /* scratch for send's duplicate check */
} async;

/* ---- queue and semaphore ------------------------------------------------------------------- */

static void aq_init(aqueue *q, int64_t n)
{
    size_t cap = 2;
    while (cap < (size_t)n)
        cap <<= 1;
    q->cells = g_new(aqcell, cap);
    for (size_t i = 0; i < cap; i++)
        atomic_init(&q->cells[i].seq, i);
    q->mask = cap - 1;
    atomic_init(&q->head, 0);
    atomic_init(&q->tail, 0);
}

static void aq_push(aqueue *q, int64_t id)
{
    size_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);
    aqcell *c;
    for (;;) {
        c = &q->cells[pos & q->mask];
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)pos;
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else {
            /* dif < 0 would be a full queue, which the capacity rules out. */
            pos = atomic_load_explicit(&q->head, memory_order_relaxed);
        }
    }
    c->id = id;
    atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
}

static bool aq_pop(aqueue *q, int64_t *id)
{
    size_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
    aqcell *c;
    for (;;) {
        c = &q->cells[pos & q->mask];
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)(pos + 1);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (dif < 0) {
            return false;
        } else {
            pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
        }
    }
    *id = c->id;
    atomic_store_explicit(&c->seq, pos + q->mask + 1, memory_order_release);
    return true;
}

/* Pop after taking a semaphore unit: an item is on its way.  A push that
 * took an earlier slot may still be filling it while a later one is
 * complete and posted, so the head can look empty for a moment. */
static int64_t aq_take(aqueue *q)
{
    int64_t id;
    while (!aq_pop(q, &id))
        crl__cpu_relax();
    return id;
}

static void as_post(asem *s, uint32_t n)
{
    atomic_fetch_add(&s->count, n);
    if (atomic_load(&s->waiters) > 0)
        crl__futex_wake(&s->count, INT_MAX);
}

static bool as_try(asem *s)
{
    uint32_t v = atomic_load_explicit(&s->count, memory_order_relaxed);
    while (v > 0)
        if (atomic_compare_exchange_weak(&s->count, &v, v - 1))
            return true;
    return false;
}

/* Take one unit; false when quit was raised (workers only). */
static bool as_wait(asem *s, _Atomic bool *quit)
{
    crl__spin sp = { 0, 0 };
    for (;;) {
        if (as_try(s))
            return true;
        if (quit && atomic_load_explicit(quit, memory_order_acquire))
            return false;
        if (crl__spin_on(&sp, SPIN_NS))
            continue;
        /* Announce the sleep, then re-check inside the futex call (seq_cst
         * on both sides: a post either sees the waiter or is seen here). */
        atomic_fetch_add(&s->waiters, 1);
        if (atomic_load(&s->count) == 0 && !(quit && atomic_load(quit)))
            crl__futex_wait(&s->count, 0);
        atomic_fetch_sub(&s->waiters, 1);
    }
}

/* ---- one env's job, in a worker ------------------------------------------------------------ */

static void zero_rewards(crl_env *env, int64_t i)
{
    for (size_t j = 0; j < env->nleaves; j++) {
        crl__env_leaf *l = &env->leaves[j];
        if (l->role == CRL__ROLE_REWARD)
            memset(l->bdata + (size_t)i * l->row_bytes, 0, l->row_bytes);
    }
}

static int render_row(async *a, int64_t i, crl_error *e)
{
    crl__env_leaf *p = a->env->pixels_leaf;
    if (!p)
        return CRL_OK;
    int rc = a->x->real.render(a->x->inst[i].benv, 0, (uint8_t *)p->bdata + (size_t)i * p->row_bytes, e);
    if (rc)
        crl_error_prefix(e, "render: ");
    return rc;
}

static int reset_one(async *a, int64_t i, crl_error *e)
{
    crl_env *env = a->env;
    uint64_t seed = a->seeds[i];
    int rc = a->x->real.reset(a->x->inst[i].benv, NULL, a->seed_pending[i] ? &seed : NULL, false, e);
    if (rc) {
        crl_error_prefix(e, "reset: ");
        return rc;
    }
    a->seed_pending[i] = false;
    env->steps[i] = 0;
    env->needs_reset[i] = false;
    env->done_p[i] = env->term_p[i] = env->trunc_p[i] = 0;
    zero_rewards(env, i);
    return render_row(a, i, e);
}

static int step_one(async *a, int64_t i, crl_error *e)
{
    crl_env *env = a->env;
    crl__env_skip_begin(env, i);
    bool done = false;
    for (int64_t k = 0; k < env->frame_skip && !done; k++) {
        int rc = a->x->real.step(a->x->inst[i].benv, e);
        if (rc) {
            crl_error_prefix(e, "step: ");
            return rc;
        }
        done = crl__env_frame_row(env, i);
    }
    crl__env_skip_end(env, i);
    env->needs_reset[i] = done;
    return render_row(a, i, e);
}

/* Env i's job (a unit of work_sem already taken), then its id on the ready queue. */
static void run_one(async *a, int64_t i)
{
    crl_error *e = &a->env_err[i];
    crl_error_clear(e);
    a->env_rc[i] = a->job[i] == AJOB_RESET ? reset_one(a, i, e) : step_one(a, i, e);
    aq_push(&a->ready, i);
    as_post(&a->ready_sem, 1);
}

static void *worker_main(void *arg)
{
    async *a = arg;
    /* quit is raised after a drain, so the units posted with it are the
     * only ones left then. */
    while (as_wait(&a->work_sem, &a->quit) && !atomic_load_explicit(&a->quit, memory_order_acquire))
        run_one(a, aq_take(&a->work));
    return NULL;
}

/* The caller's wait for the next ready env: it runs queued envs itself
 * meanwhile (so the pool needs one thread less than the cores, and with no
 * helper thread at all the caller steps every env), and sleeps only when
 * every queued env is in a helper's hands. */
static int64_t take_ready(async *a)
{
    crl__spin sp = { 0, 0 };
    for (;;) {
        if (as_try(&a->ready_sem))
            return aq_take(&a->ready);
        if (as_try(&a->work_sem)) {
            run_one(a, aq_take(&a->work));
            continue;
        }
        if (crl__spin_on(&sp, SPIN_NS))
            continue;
        atomic_fetch_add(&a->ready_sem.waiters, 1);
        if (atomic_load(&a->ready_sem.count) == 0 && atomic_load(&a->work_sem.count) == 0)
            crl__futex_wait(&a->ready_sem.count, 0);
        atomic_fetch_sub(&a->ready_sem.waiters, 1);
    }
}

/* ---- the pool --------------------------------------------------------------------------------- */

/* Every env in flight finishes; their results are dropped. */
static void drain(async *a)
{
    while (a->nflight > 0) {
        a->in_flight[take_ready(a)] = false;
        a->nflight--;
    }
}

void crl__exec_async_free(crl__exec *x)
{
    async *a = x ? x->async : NULL;
    if (!a)
        return;
    /* Workers finish what they hold before the instances close. */
    if (a->started_threads == a->nthreads)
        drain(a);
    atomic_store(&a->quit, true);
    if (a->nthreads)
        as_post(&a->work_sem, (uint32_t)a->nthreads);
    for (int t = 0; t < a->started_threads; t++)
        pthread_join(a->th[t], NULL);
    g_free(a->th);
    g_free(a->work.cells);
    g_free(a->ready.cells);
    g_free(a->job);
    g_free(a->in_flight);
    g_free(a->seed_pending);
    g_free(a->seeds);
    g_free(a->env_rc);
    g_free(a->env_err);
    g_free(a->ids);
    g_free(a->seen);
    g_free(a);
    x->async = NULL;
}

static async *async_new(crl__exec *x, crl_env *env, crl_error *err)
{
    async *a = g_new0(async, 1);
    a->x = x;
    a->env = env;
    int64_t n = x->num, cores = g_get_num_processors();
    int64_t nt = x->o.num_workers > 0 ? x->o.num_workers : cores;
    /* Never more busy threads than cores: the caller is one of them (it
     * steps envs while it waits in recv). */
    if (nt > cores)
        nt = cores;
    if (nt > n)
        nt = n;
    a->nthreads = nt > 1 ? (int)nt - 1 : 0;
    aq_init(&a->work, n);
    aq_init(&a->ready, n);
    a->job = g_new0(uint8_t, (gsize)n);
    a->in_flight = g_new0(bool, (gsize)n);
    a->seed_pending = g_new0(bool, (gsize)n);
    a->seeds = g_new0(uint64_t, (gsize)n);
    a->env_rc = g_new0(int, (gsize)n);
    a->env_err = g_new0(crl_error, (gsize)n);
    a->ids = g_new0(int64_t, (gsize)n);
    a->seen = g_new0(bool, (gsize)n);
    a->th = g_new0(pthread_t, (gsize)a->nthreads + 1);
    x->async = a;
    for (int t = 0; t < a->nthreads; t++) {
        int e = pthread_create(&a->th[t], NULL, worker_main, a);
        if (e) {
            crl_error_set(err, CRL_E_RUNTIME, "async: cannot start worker thread %d of %d: %s; lower [%s] num_workers",
                          t + 1, a->nthreads, g_strerror(e), env->section);
            crl__exec_async_free(x);
            return NULL;
        }
        a->started_threads++;
        if (x->o.pin_threads) {
            int cpu = -1;
            e = crl__exec_pin_thread(a->th[t], t, &cpu);
            if (e) {
                crl_error_set(err, CRL_E_RUNTIME, "pin_threads: cannot pin async worker thread %d to core %d: %s; set "
                              "[%s] pin_threads = false", t, cpu, g_strerror(e), env->section);
                crl__exec_async_free(x);
                return NULL;
            }
        }
    }
    return a;
}

/* ---- env.c's hooks ------------------------------------------------------------------------------ */

bool crl__exec_is_async(const crl__exec *x)
{
    return x && x->o.batch_size > 0 && x->o.batch_size < x->num;
}

/* ---- the public calls ---------------------------------------------------------------------------- */

/* The async state of env for fn, or NULL with err set. */
static async *usable(crl_env *env, const char *fn, bool need_reset, crl_error *err)
{
    if (!env) {
        crl_error_set(err, CRL_E_INVALID, "%s: env is NULL", fn);
        return NULL;
    }
    crl__exec *x = crl__exec_of(env);
    if (!crl__exec_is_async(x)) {
        crl_error_set(err, CRL_E_INVALID, "%s: [%s] steps synchronously (batch_size = num_envs); async send/recv "
                      "needs executor = threads and batch_size < num_envs; use crl_env_reset and crl_env_step here",
                      fn, env->section);
        return NULL;
    }
    async *a = x->async;
    if (need_reset && (!a || !a->reset_done)) {
        crl_error_set(err, CRL_E_INVALID, "%s: call crl_env_async_reset first (it starts every env)", fn);
        return NULL;
    }
    if (need_reset && a->failed) {
        crl_error_set(err, a->fail.code, "%s: the env stopped after an error (%s); call crl_env_async_reset to start "
                      "every env again", fn, a->fail.message);
        return NULL;
    }
    return a;
}

/* The backend's own async mode (below). */
static int native_reset(crl_env *env, crl_error *err);
static int native_send(crl_env *env, const crl_td *td, crl_error *err);
static crl_td *native_recv(crl_env *env, crl_error *err);

static void queue_envs(async *a, const int64_t *ids, int64_t k)
{
    for (int64_t m = 0; m < k; m++) {
        a->in_flight[ids[m]] = true;
        aq_push(&a->work, ids[m]);
    }
    a->nflight += k;
    as_post(&a->work_sem, (uint32_t)k);
}

int crl_env_async_reset(crl_env *env, crl_error *err)
{
    if (env && env->async_batch && !crl__exec_of(env))
        return native_reset(env, err);
    crl_error e;
    crl_error_clear(&e);
    if (!usable(env, "async_reset", false, &e) && (!env || !crl__exec_is_async(crl__exec_of(env))))
        return crl_error_pass(err, &e, CRL_E_INVALID);
    crl__exec *x = crl__exec_of(env);
    async *a = x->async;
    if (!a && !(a = async_new(x, env, &e)))
        return crl_error_pass(err, &e, CRL_E_RUNTIME);
    drain(a);
    /* The seeds set_seed left wait for this reset; later auto-resets go on
     * from each instance's own stream. */
    for (int64_t i = 0; i < env->num; i++) {
        a->seed_pending[i] = env->seed_pending[i];
        a->seeds[i] = env->seeds[i];
        env->seed_pending[i] = false;
        a->job[i] = AJOB_RESET;
        a->ids[i] = i;
    }
    a->failed = false;
    crl_error_clear(&a->fail);
    a->reset_done = true;
    queue_envs(a, a->ids, env->num);
    return CRL_OK;
}

/* td's action leaf l for the k envs, copied into their rows. */
static int load_rows(crl_env *env, crl__env_leaf *l, const crl_td *td, const int64_t *ids, int64_t k, crl_error *err)
{
    crl_tensor *t = crl_td_get(td, l->key);
    if (!t)
        return crl_error_set(err, CRL_E_NOT_FOUND, "send: the TensorDict has no '%s'; give one action per env_id",
                             l->key);
    int nd = crl_tensor_ndim(t);
    const int64_t *sh = crl_tensor_shape(t), *row = crl_tensor_shape(l->buf) + 1;
    bool ok = crl_tensor_dtype(t) == crl_tensor_dtype(l->buf) && nd == crl_tensor_ndim(l->buf) && sh[0] == k &&
              !memcmp(sh + 1, row, sizeof(int64_t) * (size_t)(nd - 1));
    if (!ok) {
        int64_t want[CRL_MAX_DIMS];
        want[0] = k;
        memcpy(want + 1, row, sizeof(int64_t) * (size_t)(crl_tensor_ndim(l->buf) - 1));
        char *w = crl__env_dims(crl_tensor_ndim(l->buf), want), *g = crl__env_dims(nd, sh);
        crl_error_set(err, crl_tensor_dtype(t) != crl_tensor_dtype(l->buf) ? CRL_E_DTYPE : CRL_E_SHAPE,
                      "send: key '%s': expected %s %s but got %s %s (the action spec with the env_id dim first)",
                      l->key, crl_dtype_name(crl_tensor_dtype(l->buf)), w, crl_dtype_name(crl_tensor_dtype(t)), g);
        crl_free(w);
        crl_free(g);
        return crl_tensor_dtype(t) != crl_tensor_dtype(l->buf) ? CRL_E_DTYPE : CRL_E_SHAPE;
    }
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *c = crl_tensor_is_contiguous(t) ? crl_tensor_ref(t) : crl_tensor_contiguous(t, &e);
    if (!c)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    const char *src = crl_tensor_data(c);
    for (int64_t m = 0; m < k; m++)
        memcpy(l->bdata + (size_t)ids[m] * l->row_bytes, src + (size_t)m * l->row_bytes, l->row_bytes);
    crl_tensor_unref(c);
    (void)env;
    return CRL_OK;
}

/* send's checks and copies, shared by both async modes: td's env ids into ids (*k of them), each in range,
 * once and not in flight; the action rows loaded and checked.  On error nothing is sent. */
static int take_send(crl_env *env, const crl_td *td, const bool *in_flight, bool *seen, int64_t *ids, int64_t *kout,
                     crl_error *err)
{
    if (!td)
        return crl_error_set(err, CRL_E_INVALID, "send: the TensorDict is NULL");
    if (crl_td_batch_ndim(td) != 1)
        return crl_error_set(err, CRL_E_SHAPE, "send: the TensorDict needs batch shape [k] (one row per env_id), "
                             "not %d dims", crl_td_batch_ndim(td));
    int64_t k = crl_td_batch_shape(td)[0];
    if (k < 1 || k > env->num)
        return crl_error_set(err, CRL_E_SHAPE, "send: %" G_GINT64_FORMAT " rows; send 1 to num_envs = %"
                             G_GINT64_FORMAT " envs at a time", (gint64)k, (gint64)env->num);
    crl_tensor *idt = crl_td_get(td, "env_id");
    if (!idt)
        return crl_error_set(err, CRL_E_NOT_FOUND, "send: the TensorDict has no 'env_id' (int64 [%" G_GINT64_FORMAT
                             "]) saying which envs the actions are for", (gint64)k);
    if (crl_tensor_dtype(idt) != CRL_I64 || crl_tensor_numel(idt) != k ||
        !(crl_tensor_ndim(idt) == 1 || (crl_tensor_ndim(idt) == 2 && crl_tensor_shape(idt)[1] == 1)))
        return crl_error_set(err, CRL_E_SHAPE, "send: 'env_id' must be int64 [%" G_GINT64_FORMAT "] (one per row), "
                             "got %s with %" G_GINT64_FORMAT " elements", (gint64)k,
                             crl_dtype_name(crl_tensor_dtype(idt)), (gint64)crl_tensor_numel(idt));
    int rc = CRL_OK;
    for (int64_t m = 0; m < k && !rc; m++) {
        int64_t i = (int64_t)crl_tensor_flat_get(idt, m);
        ids[m] = i;
        if (i < 0 || i >= env->num)
            rc = crl_error_set(err, CRL_E_RANGE, "send: env_id %" G_GINT64_FORMAT " (row %" G_GINT64_FORMAT ") is out "
                               "of range 0..%" G_GINT64_FORMAT, (gint64)i, (gint64)m, (gint64)(env->num - 1));
        else if (seen[i])
            rc = crl_error_set(err, CRL_E_INVALID, "send: env_id %" G_GINT64_FORMAT " appears twice; send each env "
                               "at most once per call", (gint64)i);
        else if (in_flight[i])
            rc = crl_error_set(err, CRL_E_INVALID, "send: env %" G_GINT64_FORMAT " is already in flight; crl_env_recv "
                               "its result before sending it an action again", (gint64)i);
        else
            seen[i] = true;
    }
    for (int64_t m = 0; m < k; m++)
        if (ids[m] >= 0 && ids[m] < env->num)
            seen[ids[m]] = false;
    /* The rows of envs not in flight are the caller's, so a failure past
     * here leaves nothing half-sent. */
    for (size_t q = 0; !rc && q < env->nact; q++)
        rc = load_rows(env, &env->leaves[env->act_idx[q]], td, ids, k, err);
    if (!rc)
        rc = crl__env_check_action_rows(env, ids, k, "send", err);
    *kout = k;
    return rc;
}

int crl_env_send(crl_env *env, const crl_td *td, crl_error *err)
{
    if (env && env->async_batch && !crl__exec_of(env))
        return native_send(env, td, err);
    crl_error e;
    crl_error_clear(&e);
    async *a = usable(env, "send", true, &e);
    if (!a)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    int64_t k = 0, *ids = a->ids;
    int rc = take_send(env, td, a->in_flight, a->seen, ids, &k, err);
    if (rc)
        return rc;
    for (int64_t m = 0; m < k; m++)
        a->job[ids[m]] = env->needs_reset[ids[m]] ? AJOB_RESET : AJOB_STEP;
    queue_envs(a, ids, k);
    return CRL_OK;
}

/* recv's TensorDict of batch [B]: "env_id" and the output rows of envs ids.  Its tensors are carved from
 * one allocation (each 64-byte aligned, as crl_tensor_new's), not one each: glibc's aligned allocations
 * bypass its per-thread cache, and a recv of a light task's few rows spent more on them than on the copies
 * (2-3 us a recv of cheetah's 7 leaves, against its 7 us steps).  The block lives while any of them does. */
#define ALIGN64(n) (((n) + 63) & ~(size_t)63)
static crl_td *gather(crl_env *env, const int64_t *ids, int64_t B, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    size_t total = ALIGN64(sizeof(int64_t) * (size_t)B);
    for (size_t q = 0; q < env->nout; q++)
        total += ALIGN64(env->leaves[env->out_idx[q]].row_bytes * (size_t)B);
    int64_t nbytes = (int64_t)total;
    crl_td *out = crl_td_new(1, &B, &e);
    crl_tensor *block = out ? crl_tensor_new(CRL_U8, 1, &nbytes, &e) : NULL;
    if (!block) {
        crl_td_unref(out);
        crl_error_pass(err, &e, CRL_E_NOMEM);
        return NULL;
    }
    char *at = crl_tensor_data(block);
    crl_tensor *idt = crl__tensor_carve(block, CRL_I64, 1, &B, at);
    memcpy(at, ids, sizeof(int64_t) * (size_t)B);
    at += ALIGN64(sizeof(int64_t) * (size_t)B);
    int rc = crl_td_set(out, "env_id", idt, err);
    crl_tensor_unref(idt);
    for (size_t q = 0; !rc && q < env->nout; q++) {
        const crl__env_leaf *l = &env->leaves[env->out_idx[q]];
        int64_t shape[CRL_MAX_DIMS];
        memcpy(shape, crl_tensor_shape(l->buf), sizeof(int64_t) * (size_t)crl_tensor_ndim(l->buf));
        shape[0] = B;
        crl_tensor *t = crl__tensor_carve(block, crl_tensor_dtype(l->buf), crl_tensor_ndim(l->buf), shape, at);
        for (int64_t m = 0; m < B; m++)
            memcpy(at + (size_t)m * l->row_bytes, l->bdata + (size_t)ids[m] * l->row_bytes, l->row_bytes);
        at += ALIGN64(l->row_bytes * (size_t)B);
        rc = crl_td_set(out, l->key, t, err);
        crl_tensor_unref(t);
    }
    crl_tensor_unref(block);
    if (rc) {
        crl_td_unref(out);
        return NULL;
    }
    return out;
}

crl_td *crl_env_recv(crl_env *env, crl_error *err)
{
    if (env && env->async_batch && !crl__exec_of(env))
        return native_recv(env, err);
    async *a = usable(env, "recv", true, err);
    if (!a)
        return NULL;
    int64_t B = crl__exec_of(env)->o.batch_size;
    if (a->nflight < B) {
        crl_error_set(err, CRL_E_INVALID, "recv: %" G_GINT64_FORMAT " env%s in flight but batch_size = %"
                      G_GINT64_FORMAT "; crl_env_send actions for at least %" G_GINT64_FORMAT " more first",
                      (gint64)a->nflight, a->nflight == 1 ? " is" : "s are", (gint64)B, (gint64)(B - a->nflight));
        return NULL;
    }
    int64_t *ids = a->ids;
    for (int64_t m = 0; m < B; m++)
        ids[m] = take_ready(a);
    for (int64_t m = 0; m < B; m++)
        a->in_flight[ids[m]] = false;
    a->nflight -= B;
    for (int64_t m = 0; m < B; m++) {
        int64_t i = ids[m];
        if (a->env_rc[i]) {
            char nb[300];
            crl_error_set(&a->fail, a->env_rc[i], "%s: env %" G_GINT64_FORMAT ": %s",
                          crl__env_name(env, nb, sizeof nb), (gint64)i, a->env_err[i].message);
            a->failed = true;
            crl_error_pass(err, &a->fail, CRL_E_RUNTIME);
            return NULL;
        }
    }
    return gather(env, ids, B, err);
}

/* ---- the backend's own async mode (EnvPool's send/recv; executor = inline) ----------------------- */

/* The host's side of it: which envs are in flight and what each was sent (a step or, for an env that ended, a
 * reset), so a recv can do the bookkeeping the threads pool's workers do (step counter, time limit, done). */
typedef struct nasync {
    bool *in_flight, *seen, *ended;
    uint8_t *job;
    int64_t *ids;
    int64_t nflight;
    bool reset_done;
    bool failed;
    crl_error fail;
} nasync;

static void native_free(crl_env *env)
{
    nasync *a = env->native_async;
    if (!a)
        return;
    g_free(a->in_flight);
    g_free(a->seen);
    g_free(a->ended);
    g_free(a->job);
    g_free(a->ids);
    g_free(a);
    env->native_async = NULL;
}

static nasync *native_of(crl_env *env, const char *fn, bool need_reset, crl_error *err)
{
    nasync *a = env->native_async;
    if (!a && !need_reset) {
        gsize n = (gsize)env->num;
        a = g_new0(nasync, 1);
        a->in_flight = g_new0(bool, n);
        a->seen = g_new0(bool, n);
        a->ended = g_new0(bool, n);
        a->job = g_new0(uint8_t, n);
        a->ids = g_new0(int64_t, n);
        env->native_async = a;
        env->native_async_free = native_free;
    }
    if (need_reset && (!a || !a->reset_done)) {
        crl_error_set(err, CRL_E_INVALID, "%s: call crl_env_async_reset first (it starts every env)", fn);
        return NULL;
    }
    if (need_reset && a->failed) {
        crl_error_set(err, a->fail.code, "%s: the env stopped after an error (%s); call crl_env_async_reset to start "
                      "every env again", fn, a->fail.message);
        return NULL;
    }
    return a;
}

/* A backend error (why: its message): every later call but async_reset repeats it. */
static int native_fail(crl_env *env, nasync *a, const char *fn, int rc, const char *why, crl_error *err)
{
    char nb[300];
    crl_error_set(&a->fail, rc, "%s: %s: %s", crl__env_name(env, nb, sizeof nb), fn, why);
    a->failed = true;
    return crl_error_pass(err, &a->fail, CRL_E_RUNTIME);
}

static int native_reset(crl_env *env, crl_error *err)
{
    nasync *a = native_of(env, "async_reset", false, err);
    bool seeded = false;
    for (int64_t i = 0; i < env->num; i++)
        seeded |= env->seed_pending[i];
    crl_error e;
    crl_error_clear(&e);
    int rc = env->ops.async_reset(env->benv, seeded ? env->seeds : NULL, &e);
    if (rc) {
        a->reset_done = true;
        return native_fail(env, a, "async_reset", rc, e.message, err);
    }
    for (int64_t i = 0; i < env->num; i++) {
        env->seed_pending[i] = false;
        a->in_flight[i] = true;
        a->job[i] = AJOB_RESET;
    }
    a->nflight = env->num;
    a->failed = false;
    crl_error_clear(&a->fail);
    a->reset_done = true;
    return CRL_OK;
}

static int native_send(crl_env *env, const crl_td *td, crl_error *err)
{
    crl_error le;
    crl_error_clear(&le);
    nasync *a = native_of(env, "send", true, &le);
    if (!a)
        return crl_error_pass(err, &le, CRL_E_INVALID);
    int64_t k = 0;
    int rc = take_send(env, td, a->in_flight, a->seen, a->ids, &k, err);
    if (rc)
        return rc;
    for (int64_t m = 0; m < k; m++) {
        a->ended[m] = env->needs_reset[a->ids[m]];
        a->job[a->ids[m]] = a->ended[m] ? AJOB_RESET : AJOB_STEP;
    }
    crl_error e;
    crl_error_clear(&e);
    rc = env->ops.send(env->benv, a->ids, a->ended, k, &e);
    if (rc)
        return native_fail(env, a, "send", rc, e.message, err);
    for (int64_t m = 0; m < k; m++)
        a->in_flight[a->ids[m]] = true;
    a->nflight += k;
    return CRL_OK;
}

static crl_td *native_recv(crl_env *env, crl_error *err)
{
    nasync *a = native_of(env, "recv", true, err);
    if (!a)
        return NULL;
    int64_t B = env->async_batch;
    if (a->nflight < B) {
        crl_error_set(err, CRL_E_INVALID, "recv: %" G_GINT64_FORMAT " env%s in flight but batch_size = %"
                      G_GINT64_FORMAT "; crl_env_send actions for at least %" G_GINT64_FORMAT " more first",
                      (gint64)a->nflight, a->nflight == 1 ? " is" : "s are", (gint64)B, (gint64)(B - a->nflight));
        return NULL;
    }
    int64_t *ids = a->ids;
    crl_error e;
    crl_error_clear(&e);
    int rc = env->ops.recv(env->benv, B, ids, &e);
    /* The backend must name B distinct envs that were in flight. */
    for (int64_t m = 0; !rc && m < B; m++) {
        int64_t i = ids[m];
        if (i < 0 || i >= env->num || !a->in_flight[i] || a->seen[i])
            rc = crl_error_set(&e, CRL_E_PLUGIN, "recv gave env id %" G_GINT64_FORMAT ", which is %s (plugin bug)",
                               (gint64)i, i < 0 || i >= env->num ? "out of range" : a->seen[i] ? "given twice"
                               : "not in flight");
        else
            a->seen[i] = true;
    }
    for (int64_t m = 0; m < B; m++)
        if (ids[m] >= 0 && ids[m] < env->num)
            a->seen[ids[m]] = false;
    if (rc) {
        native_fail(env, a, "recv", rc, e.message, err);
        return NULL;
    }
    for (int64_t m = 0; m < B; m++) {
        int64_t i = ids[m];
        a->in_flight[i] = false;
        if (a->job[i] == AJOB_RESET) {
            env->steps[i] = 0;
            env->needs_reset[i] = false;
            env->done_p[i] = env->term_p[i] = env->trunc_p[i] = 0;
            zero_rewards(env, i);
        } else {
            crl__env_skip_begin(env, i);
            env->needs_reset[i] = crl__env_frame_row(env, i);
            crl__env_skip_end(env, i);
        }
    }
    a->nflight -= B;
    return gather(env, ids, B, err);
}
