/* crl run's mpi backend: `mpirun -np K crl run EXP.ini` with [distributed] backend = mpi.
 *
 * Rank 0 learns (crl_trainer_from_config_remote); rank r = 1..K-1 is sub-collector r-1 of the collector
 * [collector] describes (crl_collector_sub_from_config: its env seeded as in one process) acting with its
 * own policy copy (crl_policy_copy).  Messages, all from or to rank 0:
 *   REQ    0 -> r   int64 {T, version, explore_frames, weights bytes (0: keep yours)}, then WEIGHTS
 *   BATCH  r -> 0   the sub-collector's batch (serialized below), its trajectory-start flags, then its
 *                   policy copy's stream and the actions it took for the batch (for checkpoints)
 *   REPLAY 0 -> r   int64 {action bytes, 0, 0, 0}, then ACTIONS: resume, the actions to re-collect with
 *   RESTORE 0 -> r  int64 {version, explore_frames, weights bytes, 0}, then STATE (its stream, the
 *                   weights): resume, after re-collecting
 *   ERR    r -> 0   what failed, as text; the rank then waits for STOP
 *   STOP   0 -> r   the run is over
 * The learner polls (MPI_Iprobe) with [distributed] timeout: a rank that reports an error ends the run
 * with its message, a silent one with the timeout; a crashed rank is mpirun's to report (it ends the job
 * and names the rank and signal).  MPI's own errors return codes (MPI_ERRORS_RETURN). */
#include "config.h"
#include "cli-private.h"

#include <crl/collector.h>
#include <crl/trainer.h>

#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CRL_HAVE_MPI
#include <mpi.h>
#endif

/* The FILE:LINE of [distributed] backend, for messages. */
static const char *backend_origin(const crl_config *cfg)
{
    const char *o = crl_config_origin(cfg, "distributed", "backend");
    return o ? o : "[distributed]";
}

bool crl__mpi_wanted(const crl_config *cfg)
{
    const char *b = crl_config_get(cfg, "distributed", "backend");
    return b && !strcmp(b, "mpi");
}

#ifndef CRL_HAVE_MPI

int crl__mpi_begin(crl_cli_ctx *ctx, bool resume, int *rank, crl_error *err)
{
    (void)resume;
    *rank = 0;
    crl_error_set(err, CRL_E_CONFIG, "%s: [distributed] backend = mpi: this crl was built without Open MPI "
                  "(install libopenmpi-dev and openmpi-bin, then configure --with-mpi); or set backend = none",
                  backend_origin(ctx->cfg));
    return CRL_EXIT_USAGE;
}
int crl__mpi_collector_main(crl_cli_ctx *ctx) { (void)ctx; return CRL_EXIT_RUNTIME; }
crl_trainer *crl__mpi_trainer(crl_cli_ctx *ctx, crl_error *err)
{
    (void)ctx;
    crl_error_set(err, CRL_E_UNSUPPORTED, "this crl was built without Open MPI");
    return NULL;
}
int crl__mpi_end(int status) { return status; }
void crl__mpi_summary(FILE *f) { (void)f; }

#else

enum { TAG_REQ = 1, TAG_WEIGHTS, TAG_BATCH, TAG_ERR, TAG_STOP, TAG_REPLAY, TAG_ACTIONS, TAG_RESTORE, TAG_STATE };
#define BATCH_MAGIC 0x63726c6d70693031LL  /* "crlmpi01" */

static struct {
    bool started;
    bool agreed;         /* every rank checked the config: the collector ranks wait for STOP */
    int rank, size;
    double timeout;
    /* learner */
    bool *outstanding;   /* [size] a REQ waits for its answer */
    bool *has_weights;   /* [size] the rank holds the current weights */
    bool abort;          /* a rank cannot be stopped cleanly (silent, or the transport failed) */
    GByteArray *weights;
    int64_t version, explore;
    /* [size] each rank's policy copy as of its last batch (its stream, its actions), for checkpoints */
    GByteArray **acts;
    crl_rng *rng;
    /* figures of `crl bench mpi` (learner) */
    int64_t batches, batch_bytes, syncs, sync_bytes;
    double recv_s, sync_s;
} M;

static int mpi_error(int code, const char *what, crl_error *err)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(code, s, &n) != MPI_SUCCESS)
        snprintf(s, sizeof s, "MPI error %d", code);
    return crl_error_set(err, CRL_E_RUNTIME, "mpi: %s: %s", what, s);
}

/* ---- batches on the wire -------------------------------------------------------------------- */

static void put_i64(GByteArray *b, int64_t v) { g_byte_array_append(b, (const guint8 *)&v, sizeof v); }

static int serialize(const crl_td *td, const bool *starts, int64_t nstarts, const crl_rng *rng, const void *acts,
                     size_t nacts, GByteArray *b, crl_error *err)
{
    char **keys = crl_td_leaf_keys(td, err);
    if (!keys)
        return CRL_E_NOMEM;
    int64_t n = 0;
    while (keys[n])
        n++;
    put_i64(b, BATCH_MAGIC);
    put_i64(b, n);
    put_i64(b, crl_td_batch_ndim(td));
    for (int d = 0; d < crl_td_batch_ndim(td); d++)
        put_i64(b, crl_td_batch_shape(td)[d]);
    int rc = CRL_OK;
    for (int64_t i = 0; i < n && !rc; i++) {
        crl_tensor *x = crl_td_get(td, keys[i]);
        crl_tensor *c = crl_tensor_contiguous(x, err);
        if (!c) {
            rc = CRL_E_NOMEM;
            break;
        }
        put_i64(b, (int64_t)strlen(keys[i]));
        g_byte_array_append(b, (const guint8 *)keys[i], (guint)strlen(keys[i]));
        put_i64(b, crl_tensor_dtype(c));
        put_i64(b, crl_tensor_ndim(c));
        for (int d = 0; d < crl_tensor_ndim(c); d++)
            put_i64(b, crl_tensor_shape(c)[d]);
        g_byte_array_append(b, crl_tensor_data(c), (guint)crl_tensor_nbytes(c));
        crl_tensor_unref(c);
    }
    crl_free(keys);
    put_i64(b, nstarts);
    for (int64_t i = 0; i < nstarts; i++) {
        guint8 v = starts[i];
        g_byte_array_append(b, &v, 1);
    }
    g_byte_array_append(b, (const guint8 *)rng, sizeof *rng);
    put_i64(b, (int64_t)nacts);
    g_byte_array_append(b, acts, (guint)nacts);
    return rc;
}

typedef struct reader {
    const guint8 *p;
    size_t left;
} reader;

static bool get_i64(reader *r, int64_t *v)
{
    if (r->left < sizeof *v)
        return false;
    memcpy(v, r->p, sizeof *v);
    r->p += sizeof *v;
    r->left -= sizeof *v;
    return true;
}

static bool get_bytes(reader *r, void *dst, size_t n)
{
    if (r->left < n)
        return false;
    memcpy(dst, r->p, n);
    r->p += n;
    r->left -= n;
    return true;
}

/* A batch from rank `rank`; NULL with err set when the message is malformed. */
static crl_td *deserialize(const guint8 *buf, size_t len, int rank, bool **starts, crl_rng *rng, GByteArray *acts,
                           crl_error *err)
{
    reader r = { buf, len };
    int64_t magic, n, nb, bs[CRL_MAX_DIMS], nst;
    crl_td *td = NULL;
    char *key = NULL;
    crl_error e;
    crl_error_clear(&e);
    if (!get_i64(&r, &magic) || magic != BATCH_MAGIC || !get_i64(&r, &n) || n < 0 || n > 100000 ||
        !get_i64(&r, &nb) || nb < 0 || nb >= CRL_MAX_DIMS)
        goto bad;
    for (int64_t d = 0; d < nb; d++)
        if (!get_i64(&r, &bs[d]) || bs[d] < 0)
            goto bad;
    if (!(td = crl_td_new((int)nb, bs, &e)))
        goto bad;
    for (int64_t i = 0; i < n; i++) {
        int64_t kl, dt, nd, shape[CRL_MAX_DIMS];
        if (!get_i64(&r, &kl) || kl < 1 || (uint64_t)kl > r.left)
            goto bad;
        key = g_malloc((gsize)kl + 1);
        if (!get_bytes(&r, key, (size_t)kl))
            goto bad;
        key[kl] = 0;
        if (!get_i64(&r, &dt) || dt < 0 || dt >= CRL_DTYPE_COUNT || !get_i64(&r, &nd) || nd < 0 ||
            nd > CRL_MAX_DIMS)
            goto bad;
        for (int64_t d = 0; d < nd; d++)
            if (!get_i64(&r, &shape[d]) || shape[d] < 0)
                goto bad;
        crl_tensor *x = crl_tensor_new((crl_dtype)dt, (int)nd, shape, &e);
        if (!x)
            goto bad;
        if (!get_bytes(&r, crl_tensor_data(x), crl_tensor_nbytes(x)) || crl_td_set(td, key, x, &e)) {
            crl_tensor_unref(x);
            goto bad;
        }
        crl_tensor_unref(x);
        g_free(key);
        key = NULL;
    }
    int64_t na;
    if (!get_i64(&r, &nst) || nst < 0 || (uint64_t)nst > r.left || r.left - (size_t)nst < sizeof *rng + 8)
        goto bad;
    reader tail = { r.p + nst, r.left - (size_t)nst };
    if (!get_bytes(&tail, rng, sizeof *rng) || !get_i64(&tail, &na) || na < 0 || (uint64_t)na != tail.left ||
        (uint64_t)acts->len + (uint64_t)na > G_MAXUINT)
        goto bad;
    g_byte_array_append(acts, tail.p, (guint)na);
    *starts = g_new0(bool, nst ? (gsize)nst : 1);
    for (int64_t i = 0; i < nst; i++)
        (*starts)[i] = r.p[i] != 0;
    return td;
bad:
    g_free(key);
    crl_td_unref(td);
    crl_error_set(err, CRL_E_RUNTIME, "mpi: collector rank %d sent a malformed batch%s%s", rank,
                  e.code ? ": " : "", e.code ? e.message : "");
    return NULL;
}

/* ---- start ------------------------------------------------------------------------------------ */

static bool under_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

int crl__mpi_begin(crl_cli_ctx *ctx, bool resume, int *rank, crl_error *err)
{
    (void)resume;   /* the learner resumes; it hands the collector ranks what they replay */
    *rank = 0;
    if (!under_mpirun()) {
        crl_error_set(err, CRL_E_CONFIG, "%s: [distributed] backend = mpi, but crl run was not started by mpirun: "
                      "start it as mpirun -np K crl run ... (rank 0 learns, ranks 1..K-1 collect; as root add "
                      "--allow-run-as-root), or set backend = none", backend_origin(ctx->cfg));
        return CRL_EXIT_USAGE;
    }
    int rc = MPI_Init(NULL, NULL);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, "MPI_Init", err), CRL_EXIT_RUNTIME;
    M.started = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &M.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &M.size);
    *rank = M.rank;
    crl_error e;
    crl_error_clear(&e);
    int64_t k = 0;
    const char *kset = crl_config_get(ctx->cfg, "collector", "num_collectors");
    if (M.size < 2)
        crl_error_set(&e, CRL_E_CONFIG, "%s: [distributed] backend = mpi needs at least 2 ranks (a learner and a "
                      "collector): mpirun -np K crl run ... with K >= 2", backend_origin(ctx->cfg));
    else if (kset && (crl_config_get_int(ctx->cfg, "collector", "num_collectors", 1, &k, &e) || k != M.size - 1)) {
        if (!e.code)
            crl_error_set(&e, CRL_E_CONFIG, "%s: [collector] num_collectors = %lld, but mpirun started %d collector "
                          "rank%s (-np %d): drop num_collectors (it follows the ranks) or start mpirun -np %lld",
                          crl_config_origin(ctx->cfg, "collector", "num_collectors"), (long long)k, M.size - 1,
                          M.size == 2 ? "" : "s", M.size, (long long)k + 1);
    } else if (!kset) {
        char *a = g_strdup_printf("collector.num_collectors=%d", M.size - 1);
        crl_config_override(ctx->cfg, ctx->schema, a, &e);
        g_free(a);
    }
    if (!e.code)
        crl_config_get_double(ctx->cfg, "distributed", "timeout", 600, &M.timeout, &e);
    if (!e.code)
        crl_experiment_check(ctx->host, ctx->cfg, NULL, CRL_CHECK_TRAIN, &e);
    /* Every rank checked the same config: all go on, or all stop with the worst code; rank 0 speaks for
     * all unless only others failed. */
    int mine = e.code ? crl__cli_exit_code(&e) : 0;
    int *all = g_new0(int, (gsize)M.size);
    rc = MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    int worst = 0;
    for (int i = 0; i < M.size; i++)
        worst = all[i] > worst ? all[i] : worst;
    bool learner_failed = all[0] != 0;
    g_free(all);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, "MPI_Allgather", err), CRL_EXIT_RUNTIME;
    if (!worst) {
        M.agreed = true;
        return CRL_OK;
    }
    if (mine && (M.rank == 0 || !learner_failed)) {
        if (M.rank > 0)
            crl_error_prefix(&e, "collector rank %d: ", M.rank);
        crl_error_pass(err, &e, CRL_E_CONFIG);
        return worst;
    }
    crl_error_clear(err);
    return worst;   /* another rank reports it */
}

/* ---- collector ranks ------------------------------------------------------------------------- */

typedef struct rank_policy {
    crl_policy_copy *copy;
} rank_policy;

static int rank_act(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    return crl_policy_copy_act(((rank_policy *)user)->copy, env, td, err);
}

static void send_err(const crl_error *e)
{
    const char *m = e->message[0] ? e->message : "failed";
    MPI_Send(m, (int)strlen(m) + 1, MPI_CHAR, 0, TAG_ERR, MPI_COMM_WORLD);
}

int crl__mpi_collector_main(crl_cli_ctx *ctx)
{
    crl_error e;
    crl_error_clear(&e);
    rank_policy pol = { NULL };
    size_t index = (size_t)M.rank - 1;
    crl__blas_single_thread();
    crl_collector *c = crl_collector_sub_from_config(ctx->host, ctx->cfg, "collector", "env", index, rank_act, &pol,
                                                     &e);
    if (c)
        pol.copy = crl_policy_copy_new(ctx->host, ctx->cfg, crl_collector_env(c, 0), index, &e);
    bool failed = !c || !pol.copy;
    size_t sent_acts = 0;   /* bytes of the copy's actions the learner has */
    GByteArray *w = g_byte_array_new(), *out = g_byte_array_new();
    for (;;) {
        MPI_Status st;
        int64_t hdr[4];
        if (MPI_Recv(hdr, 4, MPI_INT64_T, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st) != MPI_SUCCESS ||
            st.MPI_TAG == TAG_STOP)
            break;
        if (st.MPI_TAG == TAG_REPLAY || st.MPI_TAG == TAG_RESTORE) {
            /* resume: an error surfaces as the answer to the next request */
            bool replay = st.MPI_TAG == TAG_REPLAY;
            int64_t n = replay ? hdr[0] : (int64_t)sizeof(crl_rng) + hdr[2];
            if (n < 0 || n > INT_MAX)
                break;
            g_byte_array_set_size(w, (guint)n);
            if (MPI_Recv(w->data, (int)n, MPI_BYTE, 0, replay ? TAG_ACTIONS : TAG_STATE, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE) != MPI_SUCCESS)
                break;
            if (failed)
                continue;
            if (replay) {
                failed = crl_policy_copy_replay(pol.copy, w->data, (size_t)n, &e) != CRL_OK;
            } else {
                crl_policy_copy_state cs = { .struct_size = sizeof cs, .version = hdr[0], .explore_frames = hdr[1] };
                memcpy(&cs.rng, w->data, sizeof cs.rng);
                failed = crl_policy_copy_restore(pol.copy, &cs, hdr[2] > 0 ? w->data + sizeof cs.rng : NULL,
                                                 (size_t)hdr[2], &e) != CRL_OK;
            }
            if (!failed) {
                crl_policy_copy_state cs = { .struct_size = sizeof cs };
                crl_policy_copy_get_state(pol.copy, &cs);
                sent_acts = cs.actions_len;
            }
            continue;
        }
        if (hdr[3] > 0) {
            g_byte_array_set_size(w, (guint)hdr[3]);
            if (MPI_Recv(w->data, (int)hdr[3], MPI_BYTE, 0, TAG_WEIGHTS, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
                MPI_SUCCESS)
                break;
        }
        if (failed) {
            send_err(&e);
            continue;
        }
        crl_td *b = NULL;
        bool *starts = NULL;
        g_byte_array_set_size(out, 0);
        crl_policy_copy_state cs = { .struct_size = sizeof cs };
        if (crl_policy_copy_set(pol.copy, hdr[1], hdr[2], hdr[3] > 0 ? w->data : NULL, (size_t)hdr[3], &e) ||
            crl_collector_collect(c, hdr[0], &b, &starts, &e) || crl_policy_copy_stamp(pol.copy, b, &e) ||
            crl_policy_copy_get_state(pol.copy, &cs) ||
            serialize(b, starts, crl_env_num(crl_collector_env(c, 0)) * hdr[0], &cs.rng,
                      (const guint8 *)cs.actions + sent_acts, cs.actions_len - sent_acts, out, &e)) {
            failed = true;
            send_err(&e);
        } else if (out->len > INT_MAX) {
            failed = true;
            crl_error_set(&e, CRL_E_UNSUPPORTED, "a batch of %u bytes is more than one MPI message takes; lower "
                          "[collector] frames_per_batch", out->len);
            send_err(&e);
        } else {
            MPI_Send(out->data, (int)out->len, MPI_BYTE, 0, TAG_BATCH, MPI_COMM_WORLD);
            sent_acts = cs.actions_len;
        }
        crl_td_unref(b);
        crl_free(starts);
    }
    g_byte_array_free(w, TRUE);
    g_byte_array_free(out, TRUE);
    crl_policy_copy_free(pol.copy);
    crl_collector_free(c);
    return CRL_EXIT_OK;   /* the learner's status is the job's */
}

/* ---- the learner --------------------------------------------------------------------------- */

static int publish(void *user, crl_trainer *t, int64_t version, int64_t explore, bool weights, crl_error *err)
{
    (void)user;
    M.version = version;
    M.explore = explore;
    if (!weights)
        return CRL_OK;
    size_t n = crl_trainer_weights_size(t);
    g_byte_array_set_size(M.weights, (guint)n);
    int rc = crl_trainer_weights(t, M.weights->data, n, err);
    for (int r = 0; r < M.size; r++)
        M.has_weights[r] = false;
    return rc;
}

/* A send that gives up after the timeout: a stopped rank never takes a message too big to go eagerly. */
static int send_timed(const void *buf, int n, MPI_Datatype type, int dest, int tag, crl_error *err)
{
    MPI_Request req;
    int rc = MPI_Isend(buf, n, type, dest, tag, MPI_COMM_WORLD, &req);
    double t0 = MPI_Wtime();
    for (int done = 0; rc == MPI_SUCCESS && !done;) {
        if ((rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS || done)
            break;
        if (MPI_Wtime() - t0 > M.timeout) {
            M.abort = true;
            return crl_error_set(err, CRL_E_RUNTIME, "mpi: collector rank %d took no request within [distributed] "
                                 "timeout = %g s (hung or stopped); ending the job", dest, M.timeout);
        }
        g_usleep(100);
    }
    if (rc != MPI_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "sending to collector rank %d", dest);
        M.abort = true;
        return mpi_error(rc, what, err);
    }
    return CRL_OK;
}

static int request(void *user, size_t k, int64_t T, crl_error *err)
{
    (void)user;
    int r = (int)k + 1;
    bool send_w = !M.has_weights[r];
    int64_t hdr[4] = { T, M.version, M.explore, send_w ? (int64_t)M.weights->len : 0 };
    double t0 = MPI_Wtime();
    int rc = send_timed(hdr, 4, MPI_INT64_T, r, TAG_REQ, err);
    if (!rc && send_w && M.weights->len)
        rc = send_timed(M.weights->data, (int)M.weights->len, MPI_BYTE, r, TAG_WEIGHTS, err);
    if (rc)
        return rc;
    if (send_w) {
        M.sync_s += MPI_Wtime() - t0;
        M.syncs++;
        M.sync_bytes += M.weights->len;
    }
    M.has_weights[r] = true;
    M.outstanding[r] = true;
    return CRL_OK;
}

/* Wait up to the timeout for the next message of any rank with an outstanding request. */
static int next_message(int *src, int *tag, GByteArray *buf, crl_error *err)
{
    double t0 = MPI_Wtime();
    for (;;) {
        int flag = 0;
        MPI_Status st;
        int rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (rc != MPI_SUCCESS) {
            M.abort = true;
            return mpi_error(rc, "MPI_Iprobe", err);
        }
        if (flag) {
            int n = 0;
            MPI_Get_count(&st, MPI_BYTE, &n);
            double r0 = MPI_Wtime();
            g_byte_array_set_size(buf, (guint)n);
            if ((rc = MPI_Recv(buf->data, n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE)) != MPI_SUCCESS) {
                M.abort = true;
                return mpi_error(rc, "MPI_Recv", err);
            }
            M.recv_s += MPI_Wtime() - r0;
            *src = st.MPI_SOURCE;
            *tag = st.MPI_TAG;
            if (*src > 0 && *src < M.size)
                M.outstanding[*src] = false;
            return CRL_OK;
        }
        if (MPI_Wtime() - t0 > M.timeout) {
            GString *who = g_string_new(NULL);
            for (int r = 1; r < M.size; r++)
                if (M.outstanding[r])
                    g_string_append_printf(who, "%s%d", who->len ? ", " : "", r);
            M.abort = true;
            crl_error_set(err, CRL_E_RUNTIME, "mpi: collector rank %s sent nothing within [distributed] timeout = "
                          "%g s (hung or stopped); ending the job", who->str, M.timeout);
            g_string_free(who, TRUE);
            return CRL_E_RUNTIME;
        }
        g_usleep(100);
    }
}

static int wait_batch(void *user, size_t *k, crl_td **out, bool **starts, crl_error *err)
{
    (void)user;
    GByteArray *buf = g_byte_array_new();
    int src = 0, tag = 0;
    int rc = next_message(&src, &tag, buf, err);
    if (!rc && tag == TAG_ERR) {
        g_byte_array_append(buf, (const guint8 *)"", 1);
        rc = crl_error_set(err, CRL_E_RUNTIME, "mpi: collector rank %d (sub-collector %d) failed: %s", src, src - 1,
                           (const char *)buf->data);
    } else if (!rc && (tag != TAG_BATCH || src < 1)) {
        M.abort = true;
        rc = crl_error_set(err, CRL_E_RUNTIME, "mpi: rank %d sent an unexpected message (tag %d)", src, tag);
    } else if (!rc) {
        double d0 = MPI_Wtime();
        if (!(*out = deserialize(buf->data, buf->len, src, starts, &M.rng[src], M.acts[src], err)))
            rc = CRL_E_RUNTIME;
        M.recv_s += MPI_Wtime() - d0;
        *k = (size_t)src - 1;
        M.batches++;
        M.batch_bytes += buf->len;
    }
    g_byte_array_free(buf, TRUE);
    return rc;
}

static const crl_collector_remote remote_collector = { sizeof(crl_collector_remote), request, wait_batch };

static int copy_state(void *user, size_t k, crl_policy_copy_state *st, crl_error *err)
{
    (void)user;
    int r = (int)k + 1;
    if (r >= M.size)
        return crl_error_set(err, CRL_E_INVALID, "mpi: no collector rank %d", r);
    /* sync runs: every rank takes the last published policy with its next request, as local copies
     * take it at once (async runs are not resumed) */
    st->version = M.version;
    st->explore_frames = M.explore;
    st->rng = M.rng[r];
    st->actions = M.acts[r]->data;
    st->actions_len = M.acts[r]->len;
    return CRL_OK;
}

static int resume(void *user, size_t k, const crl_policy_copy_state *st, const void *weights, size_t nbytes, bool done,
                  crl_error *err)
{
    (void)user;
    int r = (int)k + 1;
    if (r >= M.size)
        return crl_error_set(err, CRL_E_INVALID, "mpi: no collector rank %d", r);
    if (!done) {
        if (st->actions_len > INT_MAX)
            return crl_error_set(err, CRL_E_UNSUPPORTED, "mpi: %zu action bytes to replay are more than one MPI "
                                 "message takes", st->actions_len);
        g_byte_array_set_size(M.acts[r], 0);
        g_byte_array_append(M.acts[r], st->actions, (guint)st->actions_len);
        int64_t hdr[4] = { (int64_t)st->actions_len, 0, 0, 0 };
        int rc = send_timed(hdr, 4, MPI_INT64_T, r, TAG_REPLAY, err);
        return rc ? rc : send_timed(M.acts[r]->data, (int)M.acts[r]->len, MPI_BYTE, r, TAG_ACTIONS, err);
    }
    if (nbytes + sizeof st->rng > INT_MAX)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "mpi: %zu weight bytes are more than one MPI message takes",
                             nbytes);
    /* what the rank holds now: the learner's view of it continues from here */
    g_byte_array_set_size(M.weights, 0);
    g_byte_array_append(M.weights, weights, (guint)nbytes);
    M.version = st->version;
    M.explore = st->explore_frames;
    M.rng[r] = st->rng;
    M.has_weights[r] = true;
    GByteArray *msg = g_byte_array_new();
    g_byte_array_append(msg, (const guint8 *)&st->rng, sizeof st->rng);
    g_byte_array_append(msg, weights, (guint)nbytes);
    int64_t hdr[4] = { st->version, st->explore_frames, (int64_t)nbytes, 0 };
    int rc = send_timed(hdr, 4, MPI_INT64_T, r, TAG_RESTORE, err);
    if (!rc)
        rc = send_timed(msg->data, (int)msg->len, MPI_BYTE, r, TAG_STATE, err);
    g_byte_array_free(msg, TRUE);
    return rc;
}

crl_trainer *crl__mpi_trainer(crl_cli_ctx *ctx, crl_error *err)
{
    M.outstanding = g_new0(bool, (gsize)M.size);
    M.has_weights = g_new0(bool, (gsize)M.size);
    M.weights = g_byte_array_new();
    M.acts = g_new0(GByteArray *, (gsize)M.size);
    for (int i = 0; i < M.size; i++)
        M.acts[i] = g_byte_array_new();
    M.rng = g_new0(crl_rng, (gsize)M.size);
    crl_trainer_remote r = { sizeof r, &remote_collector, publish, NULL, copy_state, resume };
    return crl_trainer_from_config_remote(ctx->host, ctx->cfg, &r, err);
}

void crl__mpi_summary(FILE *f)
{
    if (!M.started || M.rank != 0)
        return;
    fprintf(f, "  mpi:              %d collector rank%s; %lld batches, %.3f ms and %.0f bytes each to receive; "
            "%lld weight syncs, %.3f ms and %.0f bytes each to send\n", M.size - 1, M.size == 2 ? "" : "s",
            (long long)M.batches, M.batches ? 1e3 * M.recv_s / (double)M.batches : 0.0,
            M.batches ? (double)M.batch_bytes / (double)M.batches : 0.0, (long long)M.syncs,
            M.syncs ? 1e3 * M.sync_s / (double)M.syncs : 0.0, M.syncs ? (double)M.sync_bytes / (double)M.syncs : 0.0);
}

int crl__mpi_end(int status)
{
    if (!M.started)
        return status;
    if (M.rank == 0 && M.outstanding) {
        /* answers still on their way are taken (and dropped) before STOP, so no rank blocks sending them */
        GByteArray *buf = g_byte_array_new();
        for (int r = 1; r < M.size && !M.abort; r++)
            while (M.outstanding[r] && !M.abort) {
                int src, tag;
                crl_error e;
                crl_error_clear(&e);
                if (next_message(&src, &tag, buf, &e))
                    fprintf(stderr, "crl run: %s\n", e.message);
            }
        g_byte_array_free(buf, TRUE);
    }
    if (M.rank == 0 && M.abort) {
        fprintf(stderr, "crl run: ending every rank of the job (MPI_Abort)\n");
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, status ? status : CRL_EXIT_RUNTIME);
    }
    if (M.rank == 0 && M.agreed)
        for (int r = 1; r < M.size; r++) {
            int64_t hdr[4] = { 0 };
            MPI_Send(hdr, 4, MPI_INT64_T, r, TAG_STOP, MPI_COMM_WORLD);
        }
    MPI_Finalize();
    if (M.weights)
        g_byte_array_free(M.weights, TRUE);
    g_free(M.outstanding);
    g_free(M.has_weights);
    for (int i = 0; M.acts && i < M.size; i++)
        g_byte_array_free(M.acts[i], TRUE);
    g_free(M.acts);
    g_free(M.rng);
    M.started = false;
    return status;
}

#endif
