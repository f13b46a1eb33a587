/* crl bench nn: MLP forward + backward + Adam steps/s at batch 256, the Nature-DQN conv stack's forward and
 * backward at batch 32 and an LSTM step, each next to the raw sgemm time of the same matrix products and,
 * built with oneDNN (configure --with-dnnl), next to oneDNN's primitives on the same weights. */
#include "config.h"
#include "cli-private.h"

#include <cblas.h>
#include <crl/nn.h>
#include <crl/rnn.h>
#include <glib.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 256
#define IN 32
#define OUT 8

typedef struct {
    crl_mlp *m;
    crl_optim *o;
    crl_tensor *x, *g;
    int failed;
} train_state;

static void run_train(void *p, uint64_t n)
{
    train_state *s = p;
    for (uint64_t i = 0; i < n && !s->failed; i++) {
        crl_optim_zero_grad(s->o);
        if (!crl_mlp_forward(s->m, s->x, NULL) || crl_mlp_backward(s->m, s->g, NULL, NULL) ||
            crl_optim_step(s->o, NULL))
            s->failed = 1;
    }
}

/* The matrix products one training step makes, with nothing around them:
 * per layer the forward, dW, and dX (except into the input).  The output's
 * gradient g is the same every step, as crl's: fed back from the last step's
 * dX it would shrink into denormals, which no real step multiplies. */
typedef struct {
    int layers;
    int dims[4];
    float *a[4], *w[3], *d[2], *dw[3], *g;
    double flops;
} gemm_state;

static void run_gemm(void *p, uint64_t n)
{
    gemm_state *s = p;
    for (uint64_t it = 0; it < n; it++) {
        for (int l = 0; l < s->layers; l++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, BATCH, s->dims[l + 1], s->dims[l], 1.0f, s->a[l],
                        s->dims[l], s->w[l], s->dims[l], 1.0f, s->a[l + 1], s->dims[l + 1]);
        for (int l = s->layers - 1; l >= 0; l--) {
            const float *dy = l == s->layers - 1 ? s->g : s->d[l & 1];
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->dims[l + 1], s->dims[l], BATCH, 1.0f, dy,
                        s->dims[l + 1], s->a[l], s->dims[l], 1.0f, s->dw[l], s->dims[l]);
            if (l > 0)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BATCH, s->dims[l], s->dims[l + 1], 1.0f, dy,
                            s->dims[l + 1], s->w[l], s->dims[l], 0.0f, s->d[(l + 1) & 1], s->dims[l]);
        }
    }
}

static int bench_width(int64_t h, double seconds)
{
    crl_error err;
    crl_rng rng;
    crl_rng_init(&rng, 0, 0);
    int64_t cells[2] = { h, h };
    train_state t = { 0 };
    t.m = crl_mlp_new("bench", IN, OUT, cells, 2, CRL_ACT_RELU, false, &rng, &err);
    t.o = t.m ? crl_optim_new(CRL_OPTIM_ADAM, 1e-4, &err) : NULL;
    t.x = crl_tensor_new(CRL_F32, 2, (int64_t[]){ BATCH, IN }, &err);
    t.g = crl_tensor_new(CRL_F32, 2, (int64_t[]){ BATCH, OUT }, &err);
    if (!t.o || !t.x || !t.g || crl_optim_add_mlp(t.o, t.m, &err)) {
        fprintf(stderr, "crl bench nn: %s\n", err.message);
        return CRL_EXIT_RUNTIME;
    }
    for (int64_t i = 0; i < BATCH * IN; i++)
        crl_tensor_flat_set(t.x, i, crl_rng_range(&rng, -1, 1));
    crl_tensor_fill(t.g, 1e-3);
    crl_bench_result tr = crl__bench_measure(run_train, &t, seconds, 10);
    if (t.failed) {
        fprintf(stderr, "crl bench nn: a training step failed\n");
        return CRL_EXIT_RUNTIME;
    }

    gemm_state g = { .layers = 3, .dims = { IN, (int)h, (int)h, OUT } };
    int64_t params = 0;
    for (int l = 0; l < 4; l++)
        g.a[l] = g_new0(float, (size_t)BATCH * (size_t)g.dims[l]);
    for (int l = 0; l < 3; l++) {
        g.w[l] = g_new0(float, (size_t)(g.dims[l] * g.dims[l + 1]));
        g.dw[l] = g_new0(float, (size_t)(g.dims[l] * g.dims[l + 1]));
        params += g.dims[l] * g.dims[l + 1] + g.dims[l + 1];
        g.flops += 2.0 * BATCH * g.dims[l] * g.dims[l + 1] * (l > 0 ? 3 : 2);
    }
    for (int i = 0; i < 2; i++)
        g.d[i] = g_new0(float, (size_t)BATCH * (size_t)h);
    /* The network's own numbers, so both sides multiply the same kind of values. */
    const float *P = crl_tensor_data(crl_mlp_params_get(t.m));
    for (int l = 0, off = 0; l < 3; off += g.dims[l] * g.dims[l + 1] + g.dims[l + 1], l++)
        memcpy(g.w[l], P + off, (size_t)(g.dims[l] * g.dims[l + 1]) * sizeof(float));
    memcpy(g.a[0], crl_tensor_data(t.x), (size_t)BATCH * IN * sizeof(float));
    g.g = g_new(float, (size_t)BATCH * OUT);
    for (int64_t k = 0; k < BATCH * OUT; k++)
        g.g[k] = 1e-3f;
    crl_bench_result gr = crl__bench_measure(run_gemm, &g, seconds, 10);
    printf("  MLP %d -> [%" PRId64 ", %" PRId64 "] -> %d relu, batch %d (%" PRId64 " parameters, %.1f MFLOP of sgemm per step)\n",
           IN, h, h, OUT, BATCH, params, g.flops / 1e6);
    printf("    forward + backward + Adam   %10.1f us/step  %9.0f steps/s  %6.2f GFLOP/s\n", tr.ns_per_op / 1e3,
           1e9 / tr.ns_per_op, g.flops / tr.ns_per_op);
    printf("    raw sgemm, same products     %10.1f us/step  %9.0f steps/s  %6.2f GFLOP/s\n", gr.ns_per_op / 1e3,
           1e9 / gr.ns_per_op, g.flops / gr.ns_per_op);
    printf("    crl's time over raw sgemm: %.2fx (bias, activations, copies, Adam)\n", tr.ns_per_op / gr.ns_per_op);
    for (int l = 0; l < 4; l++)
        g_free(g.a[l]);
    for (int l = 0; l < 3; l++) {
        g_free(g.w[l]);
        g_free(g.dw[l]);
    }
    g_free(g.d[0]);
    g_free(g.d[1]);
    g_free(g.g);
    crl_tensor_unref(t.x);
    crl_tensor_unref(t.g);
    crl_optim_free(t.o);
    crl_mlp_unref(t.m);
    return CRL_EXIT_OK;
}

/* ---- conv encoders: the Nature-DQN stack, crl's im2col + sgemm next to the bare sgemm of the same sizes ---- */

#define CBATCH 32

typedef struct {
    crl_mlp *m;
    crl_tensor *x, *g, *out;
    int failed;
} conv_state;

static void run_conv_train(void *p, uint64_t n)
{
    conv_state *s = p;
    for (uint64_t i = 0; i < n && !s->failed; i++)
        if (!crl_mlp_forward(s->m, s->x, NULL) || crl_mlp_backward(s->m, s->g, NULL, NULL))
            s->failed = 1;
}

static void run_conv_infer(void *p, uint64_t n)
{
    conv_state *s = p;
    for (uint64_t i = 0; i < n && !s->failed; i++)
        if (crl_mlp_infer(s->m, s->x, s->out, NULL))
            s->failed = 1;
}

/* One conv layer's products per image: Y[co, hw] = W[co, ckk] C[ckk, hw]; dW += dY C^T; dC = W^T dY. */
typedef struct {
    int n;
    int co[4], ckk[4], hw[4];
    float *w[4], *col[4], *y[4];
    int head_in, head_out;
    float *ha, *hw_, *hy;
    bool backward;
    double flops;
} conv_gemm_state;

static void run_conv_gemm(void *p, uint64_t n)
{
    conv_gemm_state *s = p;
    for (uint64_t it = 0; it < n; it++) {
        for (int l = 0; l < s->n; l++)
            for (int b = 0; b < CBATCH; b++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->co[l], s->hw[l], s->ckk[l], 1.0f, s->w[l],
                            s->ckk[l], s->col[l], s->hw[l], 1.0f, s->y[l], s->hw[l]);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, CBATCH, s->head_out, s->head_in, 1.0f, s->ha, s->head_in,
                    s->hw_, s->head_in, 1.0f, s->hy, s->head_out);
        if (!s->backward)
            continue;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->head_out, s->head_in, CBATCH, 1.0f, s->hy,
                    s->head_out, s->ha, s->head_in, 1.0f, s->hw_, s->head_in);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, CBATCH, s->head_in, s->head_out, 1.0f, s->hy,
                    s->head_out, s->hw_, s->head_in, 0.0f, s->ha, s->head_in);
        for (int l = s->n - 1; l >= 0; l--)
            for (int b = 0; b < CBATCH; b++) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->co[l], s->ckk[l], s->hw[l], 1.0f, s->y[l],
                            s->hw[l], s->col[l], s->hw[l], 1.0f, s->w[l], s->ckk[l]);
                if (l > 0)
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->ckk[l], s->hw[l], s->co[l], 1.0f, s->w[l],
                                s->ckk[l], s->y[l], s->hw[l], 0.0f, s->col[l], s->hw[l]);
            }
    }
}

static int bench_conv(double seconds)
{
    static const crl_conv_layer nature[] = { { CRL_CONV2D, 32, 8, 4, 0 }, { CRL_CONV2D, 64, 4, 2, 0 },
                                             { CRL_CONV2D, 64, 3, 1, 0 } };
    crl_error err;
    crl_rng rng;
    crl_rng_init(&rng, 0, 0);
    conv_state t = { 0 };
    t.m = crl_convnet_new("bench", 3, (int64_t[]){ 4, 84, 84 }, nature, 3, CRL_ACT_RELU, (int64_t[]){ 512 }, 1,
                          CRL_ACT_RELU, 6, false, &rng, &err);
    t.x = t.m ? crl_tensor_new(CRL_F32, 2, (int64_t[]){ CBATCH, 4 * 84 * 84 }, &err) : NULL;
    t.g = t.x ? crl_tensor_new(CRL_F32, 2, (int64_t[]){ CBATCH, 6 }, &err) : NULL;
    t.out = t.g ? crl_tensor_new(CRL_F32, 2, (int64_t[]){ CBATCH, 6 }, &err) : NULL;
    if (!t.out) {
        fprintf(stderr, "crl bench nn: %s\n", err.message);
        return CRL_EXIT_RUNTIME;
    }
    for (int64_t i = 0; i < CBATCH * 4 * 84 * 84; i++)
        crl_tensor_flat_set(t.x, i, crl_rng_range(&rng, 0, 1));
    crl_tensor_fill(t.g, 1e-3);
    crl_bench_result tr = crl__bench_measure(run_conv_train, &t, seconds, 3);
    crl_bench_result ir = crl__bench_measure(run_conv_infer, &t, seconds, 3);
    if (t.failed) {
        fprintf(stderr, "crl bench nn: a conv step failed\n");
        return CRL_EXIT_RUNTIME;
    }
    /* the same products on buffers of the same sizes */
    conv_gemm_state g = { .n = 3, .head_in = 3136, .head_out = 512 };
    int64_t c = 4, h = 84;
    double fwd = 0, bwd = 0;
    for (int l = 0; l < 3; l++) {
        int64_t ho = (h - nature[l].kernel_size) / nature[l].stride + 1;
        g.co[l] = (int)nature[l].out_channels;
        g.ckk[l] = (int)(c * nature[l].kernel_size * nature[l].kernel_size);
        g.hw[l] = (int)(ho * ho);
        g.w[l] = g_new0(float, (size_t)g.co[l] * (size_t)g.ckk[l]);
        g.col[l] = g_new0(float, (size_t)g.ckk[l] * (size_t)g.hw[l]);
        g.y[l] = g_new0(float, (size_t)g.co[l] * (size_t)g.hw[l]);
        for (size_t i = 0; i < (size_t)g.ckk[l] * (size_t)g.hw[l]; i++)
            g.col[l][i] = 0.5f;
        fwd += 2.0 * CBATCH * g.co[l] * g.ckk[l] * g.hw[l];
        bwd += 2.0 * CBATCH * g.co[l] * g.ckk[l] * g.hw[l] * (l > 0 ? 2 : 1);
        c = nature[l].out_channels;
        h = ho;
    }
    g.ha = g_new0(float, (size_t)CBATCH * 3136);
    g.hw_ = g_new0(float, (size_t)3136 * 512);
    g.hy = g_new0(float, (size_t)CBATCH * 512);
    fwd += 2.0 * CBATCH * 3136 * 512;
    bwd += 2.0 * 2 * CBATCH * 3136 * 512;
    g.backward = false;
    crl_bench_result gi = crl__bench_measure(run_conv_gemm, &g, seconds, 3);
    g.backward = true;
    crl_bench_result gt = crl__bench_measure(run_conv_gemm, &g, seconds, 3);
    printf("  Nature-DQN stack [4, 84, 84] -> 32x8x8/4 -> 64x4x4/2 -> 64x3x3/1 -> 512 -> 6 relu, batch %d "
           "(%.0f MFLOP forward, %.0f forward + backward)\n", CBATCH, fwd / 1e6, (fwd + bwd) / 1e6);
    printf("    %-44s %12s %12s %10s %10s\n", "", "forward", "fwd + bwd", "crl/this", "crl/this");
    printf("    %-44s %9.2f ms %9.2f ms\n", "crl: im2col + one sgemm per image and layer", ir.ns_per_op / 1e6,
           tr.ns_per_op / 1e6);
    printf("    %-44s %9.2f ms %9.2f ms %9.2fx %9.2fx\n", "raw sgemm, same products", gi.ns_per_op / 1e6,
           gt.ns_per_op / 1e6, ir.ns_per_op / gi.ns_per_op, tr.ns_per_op / gt.ns_per_op);
    int rc = CRL_EXIT_OK;
#ifdef CRL_CLI_HAVE_DNNL
    crl__dnnl_conv_result dr;
    crl_error derr;
    crl_error_clear(&derr);
    if (crl__bench_dnnl_conv(t.m, t.x, t.g, seconds, &dr, &derr)) {
        fprintf(stderr, "crl bench nn: %s\n", derr.message);
        rc = CRL_EXIT_RUNTIME;
    } else {
        static const char *const label[2] = { "oneDNN primitives, plain NCHW / OIHW",
                                               "oneDNN primitives, its layouts (tag any)" };
        for (int v = 0; v < 2; v++)
            printf("    %-44s %9.2f ms %9.2f ms %9.2fx %9.2fx\n", label[v], dr.fwd_ns[v] / 1e6, dr.train_ns[v] / 1e6,
                   ir.ns_per_op / dr.fwd_ns[v], tr.ns_per_op / dr.train_ns[v]);
        printf("    same computation: max |crl - oneDNN| %.1e on outputs up to %.2g, %.1e on parameter gradients up "
               "to %.2g\n", dr.out_diff, dr.out_max, dr.grad_diff, dr.grad_max);
    }
#else
    printf("    (oneDNN's primitives: configure --with-dnnl, Debian libdnnl-dev)\n");
#endif
    for (int l = 0; l < 3; l++) {
        g_free(g.w[l]);
        g_free(g.col[l]);
        g_free(g.y[l]);
    }
    g_free(g.ha);
    g_free(g.hw_);
    g_free(g.hy);
    crl_tensor_unref(t.x);
    crl_tensor_unref(t.g);
    crl_tensor_unref(t.out);
    crl_mlp_unref(t.m);
    return rc;
}

/* ---- an LSTM as the masked-CartPole PPO example runs it: 2 features, hidden 64; acting steps 8 envs at once,
 * training reads 16 slices of 16 steps (minibatch_size 256 / sequence_length 16) ---- */

#define LSTM_IN 2
#define LSTM_H 64
#define LSTM_ENVS 8
#define LSTM_SEQS 16
#define LSTM_T 16

typedef struct lstm_state {
    crl_rnn *r;
    crl_tensor *xa, *h0, *c0, *ya, *ha, *ca, *xs, *gs;
    int failed;
} lstm_state;

static void run_lstm_act(void *p, uint64_t n)
{
    lstm_state *s = p;
    for (uint64_t i = 0; i < n && !s->failed; i++)
        if (crl_rnn_infer(s->r, s->xa, s->h0, s->c0, NULL, s->ya, s->ha, s->ca, NULL))
            s->failed = 1;
}

static void run_lstm_seq(void *p, uint64_t n)
{
    lstm_state *s = p;
    for (uint64_t i = 0; i < n && !s->failed; i++)
        if (!crl_rnn_forward(s->r, s->xs, NULL, NULL, NULL, NULL))
            s->failed = 1;
}

static void run_lstm_train(void *p, uint64_t n)
{
    lstm_state *s = p;
    for (uint64_t i = 0; i < n && !s->failed; i++)
        if (!crl_rnn_forward(s->r, s->xs, NULL, NULL, NULL, NULL) ||
            crl_rnn_backward(s->r, s->gs, NULL, NULL, NULL, NULL, NULL, NULL))
            s->failed = 1;
}

static int bench_lstm(double seconds)
{
    crl_error err;
    crl_error_clear(&err);
    crl_rng rng;
    crl_rng_init(&rng, 0, 0);
    lstm_state s = { 0 };
    s.r = crl_rnn_new("bench", CRL_RNN_LSTM, LSTM_IN, LSTM_H, &rng, &err);
    crl_tensor **ts[] = { &s.xa, &s.h0, &s.c0, &s.ya, &s.ha, &s.ca, &s.xs, &s.gs };
    const int64_t shapes[][3] = { { LSTM_ENVS, 1, LSTM_IN }, { LSTM_ENVS, LSTM_H },    { LSTM_ENVS, LSTM_H },
                                  { LSTM_ENVS, 1, LSTM_H },  { LSTM_ENVS, LSTM_H },    { LSTM_ENVS, LSTM_H },
                                  { LSTM_SEQS, LSTM_T, LSTM_IN }, { LSTM_SEQS, LSTM_T, LSTM_H } };
    const int nd[] = { 3, 2, 2, 3, 2, 2, 3, 3 };
    for (size_t i = 0; s.r && i < G_N_ELEMENTS(ts); i++) {
        if (!(*ts[i] = crl_tensor_new(CRL_F32, nd[i], shapes[i], &err)))
            break;
        for (int64_t k = 0; k < crl_tensor_numel(*ts[i]); k++)
            crl_tensor_flat_set(*ts[i], k, ts[i] == &s.gs ? 1e-3 : crl_rng_range(&rng, -1, 1));
    }
    int rc = CRL_EXIT_OK;
    if (!s.gs) {
        fprintf(stderr, "crl bench nn: %s\n", err.message);
        rc = CRL_EXIT_RUNTIME;
    }
    crl_bench_result act = { 0 }, seq = { 0 }, train = { 0 };
    if (!rc) {
        act = crl__bench_measure(run_lstm_act, &s, seconds, 10);
        seq = crl__bench_measure(run_lstm_seq, &s, seconds, 10);
        train = crl__bench_measure(run_lstm_train, &s, seconds, 10);
        if (s.failed) {
            fprintf(stderr, "crl bench nn: an LSTM step failed\n");
            rc = CRL_EXIT_RUNTIME;
        }
    }
    if (!rc) {
        printf("  LSTM %d -> %d (cartpole-masked-lstm-ppo.ini): an acting step of %d envs, a training minibatch of "
               "%d slices x %d steps\n", LSTM_IN, LSTM_H, LSTM_ENVS, LSTM_SEQS, LSTM_T);
        printf("    %-44s %12s %12s %12s %10s %10s %10s\n", "", "act step", "train fwd", "fwd + bptt", "crl/this",
               "crl/this", "crl/this");
        printf("    %-44s %9.1f us %9.1f us %9.1f us\n", "crl (gates as one sgemm per step)", act.ns_per_op / 1e3,
               seq.ns_per_op / 1e3, train.ns_per_op / 1e3);
#ifdef CRL_CLI_HAVE_DNNL
        crl__dnnl_lstm_result dr;
        if (crl__bench_dnnl_lstm(s.r, s.xa, s.h0, s.c0, s.xs, s.gs, seconds, &dr, &err)) {
            fprintf(stderr, "crl bench nn: %s\n", err.message);
            rc = CRL_EXIT_RUNTIME;
        } else {
            printf("    %-44s %9.1f us %9.1f us %9.1f us %9.2fx %9.2fx %9.2fx\n", "oneDNN lstm_forward, lstm_backward",
                   dr.act_ns / 1e3, dr.seq_ns / 1e3, dr.train_ns / 1e3, act.ns_per_op / dr.act_ns,
                   seq.ns_per_op / dr.seq_ns, train.ns_per_op / dr.train_ns);
            printf("    same computation: max |crl - oneDNN| %.1e on outputs and final states up to %.2g, %.1e on "
                   "parameter gradients up to %.2g\n", dr.diff, dr.max, dr.grad_diff, dr.grad_max);
        }
#endif
    }
    for (size_t i = 0; i < G_N_ELEMENTS(ts); i++)
        crl_tensor_unref(*ts[i]);
    crl_rnn_unref(s.r);
    return rc;
}

int crl__bench_nn(double seconds)
{
    /* as crl run trains: one OpenBLAS thread (and one oneDNN thread, to compare like with like) */
    crl__blas_single_thread();
    printf("crl bench nn (%.2f s per measurement; CBLAS sgemm, float32; OpenBLAS on one thread, as crl run)\n",
           seconds);
#ifdef CRL_CLI_HAVE_DNNL
    bool one = crl__dnnl_single_thread();
    char what[160];
    crl__dnnl_describe(what, sizeof what);
    printf("  against %s%s\n", what, one ? "" : " (could not be set to one)");
#endif
    int rc = bench_width(64, seconds);
    if (rc == CRL_EXIT_OK)
        rc = bench_width(256, seconds);
    if (rc == CRL_EXIT_OK)
        rc = bench_conv(seconds);
    if (rc == CRL_EXIT_OK)
        rc = bench_lstm(seconds);
    return rc;
}
