/* crl bench nn: MLP forward + backward + Adam steps/s at batch 256, next to the raw sgemm time of the same matrix products. */
#include "config.h"
#include "cli-private.h"

#include <cblas.h>
#include <crl/nn.h>
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
 * per layer the forward, dW, and dX (except into the input). */
typedef struct {
    int layers;
    int dims[4];
    float *a[4], *w[3], *d[2], *dw[3];
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
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->dims[l + 1], s->dims[l], BATCH, 1.0f, s->d[l & 1],
                        s->dims[l + 1], s->a[l], s->dims[l], 1.0f, s->dw[l], s->dims[l]);
            if (l > 0)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BATCH, s->dims[l], s->dims[l + 1], 1.0f,
                            s->d[l & 1], s->dims[l + 1], s->w[l], s->dims[l], 0.0f, s->d[(l + 1) & 1], s->dims[l]);
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
    for (int i = 0; i < 2; i++)
        for (int64_t k = 0; k < BATCH * h; k++)
            g.d[i][k] = 1e-3f;
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
    crl_tensor_unref(t.x);
    crl_tensor_unref(t.g);
    crl_optim_free(t.o);
    crl_mlp_unref(t.m);
    return CRL_EXIT_OK;
}

int crl__bench_nn(double seconds)
{
    const char *threads = getenv("OPENBLAS_NUM_THREADS");
    printf("crl bench nn (%.2f s per measurement; CBLAS sgemm, float32; OPENBLAS_NUM_THREADS=%s)\n", seconds,
           threads ? threads : "unset: one thread per core");
    int rc = bench_width(64, seconds);
    if (rc == CRL_EXIT_OK)
        rc = bench_width(256, seconds);
    return rc;
}
