/* Batched executors (serial, threads, processes): several backend instances behind one crl_env_ops.
 *
 * The env host (env.c) keeps all its bookkeeping (done flags, time limits,
 * auto-reset, frame skip, pixels, transforms) and talks to one "backend"
 * through env->ops / env->benv.  With [env] executor = serial | threads |
 * processes, make_backend calls crl__exec_make instead of the component's
 * make: the executor makes the real backend's instances (one per block of
 * envs, or one per env with per-env options), concatenates their specs along
 * the batch dim, and installs crl__exec_env_ops as env->ops with itself as
 * env->benv.  Its bind hands each instance the rows of the host's buffers
 * that belong to it (views, no copies); reset(mask, seeds) and step run
 * every instance, in the calling thread (serial), on a pool of worker
 * threads (threads) or in worker processes over shared-memory buffers
 * (processes).  With executor = inline (the default) none of this runs: the
 * backend steps its `num` envs itself, as before. */
#ifndef CRL_EXEC_PRIVATE_H
#define CRL_EXEC_PRIVATE_H

#include "crl-private.h"
#include <crl/env.h>
#include "spin-private.h"

#include <pthread.h>
#include <sys/types.h>

typedef enum crl__exec_kind_id {
    CRL__EXEC_INLINE = 0,
    CRL__EXEC_SERIAL,
    CRL__EXEC_THREADS,
    CRL__EXEC_PROCESSES
} crl__exec_kind_id;

typedef enum crl__exec_failure { CRL__FAIL_FAIL = 0, CRL__FAIL_RESTART } crl__exec_failure;

/* The executor options of [env] (read by env.c's read_options). */
typedef struct crl__exec_opts {
    crl__exec_kind_id kind;
    int64_t num_workers;        /* 0: one per core (threads, processes), 1 for serial */
    int64_t batch_size;         /* 0: num_envs (sync); else async send/recv */
    bool pin_threads;
    double step_timeout;        /* seconds, 0: none */
    crl__exec_failure on_failure;
    int64_t max_restarts;
    /* per_env.KEY = v0, v1, ... (one value per env) as raw strings, parsed
     * against the backend's table for env i's own option set. */
} crl__exec_opts;

typedef struct crl__exec crl__exec;

/* pin_threads: pin thread `th` to the i-th CPU (modulo their count) this process may run on, which need not
 * start at CPU 0 (taskset, cpuset cgroups).  Returns 0 or an errno; *cpu is the CPU chosen. */
CRL_INTERNAL int crl__exec_pin_thread(pthread_t th, int i, int *cpu);

/* Builds an env from a description: crl_env_new, handed down by env_make.c so the executors make inner
 * envs (worker_transforms) without importing the layer above them. */
typedef crl_env *(*crl__env_factory)(const crl_env_desc *desc, crl_error *err);

/* In place of the backend's make: make d's instances (one per block of envs, or one per env with per-env
 * option sets or async; inner envs made by make_inner with worker_transforms) and the combined specs
 * (batch [num]); set env->benv to the executor, env->ops to crl__exec_env_ops and the env's executor hooks.
 * On error nothing is left. */
CRL_INTERNAL int crl__exec_make(crl_env *env, const crl_env_desc *d, crl_env_specs *specs,
                                crl__env_factory make_inner, crl_error *err);

/* The ops env.c calls once an executor is in place (bind, reset, step,
 * render, close dispatch to the instances). */
CRL_INTERNAL extern const crl_env_ops crl__exec_env_ops;

/* Buffers for processes must be shared with the workers: env.c allocates
 * the leaves' buffers with crl_tensor_new_shared when this is true. */
CRL_INTERNAL bool crl__exec_wants_shared_buffers(const crl__exec_opts *xo);

/* The executor behind env, or NULL (executor = inline). */
CRL_INTERNAL crl__exec *crl__exec_of(const crl_env *env);

/* Async (EnvPool's send/recv, batch_size < num_envs): see crl_env_send /
 * crl_env_recv in env.h.  NULL-safe queries for env.c. */
CRL_INTERNAL bool crl__exec_is_async(const crl__exec *x);
/* Stop the async workers (every env in flight finishes first, its result
 * dropped) and free x->async.  The executor's close must call it
 * before it closes the instances.  NULL-safe, idempotent. */
CRL_INTERNAL void crl__exec_async_free(crl__exec *x);

/* ---- the common layer and the kinds (exec.c; exec_serial.c, exec_threads.c, exec_procs.c) ---- */

/* One instance of the real backend and the envs it serves. */
typedef struct crl__exec_inst {
    void *benv;                 /* the real backend's instance (made in the parent) */
    int64_t start, count;       /* its envs: rows [start, start + count) of the host's buffers */
    crl_td *view;               /* those rows (what its bind got; batch [count]) */
    char *id;                   /* the env id it was made with (per_env.id may differ between instances) */
    crl_opts *opts;             /* processes: a copy of the options it was made with (a re-exec'd worker makes it
                                 * again from them), else NULL */
} crl__exec_inst;

/* A worker's share: instances [first, first + ninst), envs [start, start + count). */
typedef struct crl__exec_block {
    size_t first, ninst;
    int64_t start, count;
} crl__exec_block;

typedef enum crl__exec_job { CRL__JOB_NONE = 0, CRL__JOB_RESET = 1, CRL__JOB_STEP = 2 } crl__exec_job;

struct crl__exec_kind;

/* What the processes kind knows and a re-exec'd worker must be told (exec_procs.c fills it). */
typedef struct crl__exec_reexec_args {
    int ctl_fd, evfd;            /* the control region's memfd; the parent's wake-up eventfd */
    size_t map_len, nw, frame_bytes;
    pid_t parent;
    unsigned spin;
    bool crowded;
} crl__exec_reexec_args;

/* How to start a re-exec'd worker (exec_reexec.c makes it, exec_procs.c frees it): the program, the memfd
 * holding the description (owned) and the env buffers' memfds it maps (borrowed from the buffers). */
typedef struct crl__exec_reexec {
    char *program;
    int desc_fd;
    int *fds;
    size_t nfds;
} crl__exec_reexec;

struct crl__exec {
    crl_env *env;                    /* borrowed: the host env this executor serves */
    crl_env_ops real;                /* the component's ops (copied), or crl__wenv_ops */
    int (*backend_step)(void *, crl_error *);  /* the component's own step (where its code lives) */
    crl__exec_opts o;
    int64_t num;
    crl__exec_inst *inst;
    size_t ninst;
    char *ids_at;                    /* FILE:LINE of per_env.id, for its messages; NULL without */
    crl__exec_block *blocks;
    size_t nblocks;
    /* The job being run (set by the common layer before kind->run). */
    crl__exec_job job;
    const bool *mask;                /* reset: envs to reset (NULL: all), indexed by global env */
    const uint64_t *seeds;           /* reset: per global env, or NULL */
    bool from_state;
    crl_error *block_err;            /* nblocks: each block's error */
    /* Envs a failed worker's restart brought back (policy restart): env.c
     * marks them truncated and resets them.  num entries. */
    bool *restarted;
    bool any_restarted;
    const struct crl__exec_kind *kind;
    void *kstate;                    /* the kind's own state */
    /* exec_async.c's state (its worker pool and queues), made by the first
     * crl_env_async_reset; NULL until then. */
    void *async;
    /* The turn order (threads and processes with worker_transforms whose chain asked for it): a MAP_SHARED
     * page, so forked workers share it; NULL when no inner chain wants turns. */
    struct crl__exec_turns *turns;
    /* Processes with a backend that embeds CPython: the workers re-exec crl-env-worker, which needs these. */
    crl_host *host;                  /* borrowed (the description's) */
    char *plugin;                    /* the backend's plugin */
    crl_td *buffers;                 /* the host's buffers (exec_bind's), a reference */
    /* Describe the workers for crl-env-worker (exec_reexec.c; NULL in test builds of exec_procs.c alone).  New,
     * or NULL with err. */
    crl__exec_reexec *(*reexec_prepare)(crl__exec *x, const crl__exec_reexec_args *a, crl_error *err);
};

/* Instances pass their turn in env order within each reset or step job: instance k waits for word == k, then
 * sets it to k + 1.  The parent zeroes both words before each job; a worker found dead or hung sets abort
 * (crl__exec_turns_abort) so that nobody waits for it. */
typedef struct crl__exec_turns {
    _Atomic uint32_t word;
    _Atomic uint32_t abort;
} crl__exec_turns;

/* Release every waiter of the current job (a worker died or hangs).  NULL-safe.  Inline: exec_procs.c is
 * also built on its own into its suite. */
static inline void crl__exec_turns_abort(crl__exec_turns *t)
{
    if (!t)
        return;
    atomic_store(&t->abort, 1);
    /* Change the word too, so a waiter between its check and its futex wait does not sleep. */
    atomic_fetch_add(&t->word, 1u << 30);
    crl__futex_wake_shared(&t->word, INT_MAX);
}

/* What a worker does: x->job on block b's instances, each with its slice of
 * mask/seeds.  Errors name the global env index range and the backend. */
CRL_INTERNAL int crl__exec_run_block(crl__exec *x, size_t b, crl_error *err);

typedef struct crl__exec_kind {
    const char *name;
    /* After every instance is made and bound (in the parent). */
    int (*start)(crl__exec *x, crl_error *err);
    /* x->job on every block; back when all are done.  The first failing
     * block's error is returned (naming the env index, and for processes the
     * signal or exit status). */
    int (*run)(crl__exec *x, crl_error *err);
    /* Join / reap every worker; idempotent; never hangs. */
    void (*stop)(crl__exec *x);
} crl__exec_kind;

CRL_INTERNAL extern const crl__exec_kind crl__exec_kind_serial;
CRL_INTERNAL extern const crl__exec_kind crl__exec_kind_threads;
CRL_INTERNAL extern const crl__exec_kind crl__exec_kind_processes;

/* worker_transforms (exec_wenv.c): the inner crl_env d describes (made by make_inner), adapted to the
 * backend ops below, which the executor then uses in place of the component's. */
CRL_INTERNAL int crl__wenv_make(const crl_env_desc *d, crl__env_factory make_inner, crl_env_specs *specs,
                                void **benv, crl_error *err);
CRL_INTERNAL extern const crl_env_ops crl__wenv_ops;
/* The inner env of a crl__wenv_make instance (borrowed). */
CRL_INTERNAL crl_env *crl__wenv_inner(void *benv);

/* Worker restarts so far (processes; 0 for other kinds). */
CRL_INTERNAL int64_t crl__exec_procs_restarts(const crl__exec *x);

/* Render env i in the worker that owns it (processes: the parent's instance
 * copies are never stepped), into rgb (render_height * render_width * 3).
 * exec.c's render calls it when x->o.kind == CRL__EXEC_PROCESSES. */
CRL_INTERNAL int crl__exec_procs_render(crl__exec *x, int64_t i, uint8_t *rgb, crl_error *err);

/* exec_reexec.c: the description of x's workers for crl-env-worker (x->reexec_prepare). */
CRL_INTERNAL crl__exec_reexec *crl__exec_reexec_prepare(crl__exec *x, const crl__exec_reexec_args *a,
                                                        crl_error *err);

/* The job loop of a re-exec'd worker (exec_procs.c): map the control region a describes, answer the start-up
 * handshake for block b (with `made`'s error when its instances could not be made; restart: after resetting
 * them), run jobs until the parent says quit, then close_all(user, &e) its instances.  Returns the exit status
 * the worker should end with (its close's failure goes into its slot), or -1 with err when the control region
 * cannot be mapped. */
CRL_INTERNAL int crl__exec_procs_serve(crl__exec *x, const crl__exec_reexec_args *a, size_t b, uint32_t seen,
                                       bool restart, const crl_error *made,
                                       int (*close_all)(void *user, crl_error *e), void *user, crl_error *err);

/* After a successful backend step (env->after_backend_step): end the episodes of envs whose
 * worker was restarted (truncated, reward 0).  No-op unless x->any_restarted. */
CRL_INTERNAL void crl__exec_mark_restarted(crl__exec *x, crl_env *env);

#endif
