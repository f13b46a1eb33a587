/* Check suite: conv encoders (Conv2d with stride and padding, MaxPool2d, the flatten into the head), dueling
 * heads and the Nature-DQN stack (crl_convnet_new): outputs against a float64 reference written the obvious
 * way, gradients of every parameter and of the input against central finite differences of that reference
 * (float64, so the check does not depend on the BLAS kernel's float32 rounding), state-dict names and shapes,
 * clones, checkpoints and the shape errors. */
#include <glib.h>
#include <stdlib.h>
#include <unistd.h>

#include "nn-test.h"

/* ---- the float64 reference ------------------------------------------------------------------------ */

typedef struct ref_net {
    int64_t c, h, w;
    const crl_conv_layer *layers;
    int n_layers;
    crl_activation conv_act, act;
    const int64_t *cells;
    int n_cells;
    int64_t out;
    bool dueling;
} ref_net;

/* y[B, out] of the network with flat parameters P (crl's layout) on x[B, c*h*w]. */
static void ref_forward(const ref_net *n, const double *P, const double *x, int64_t B, double *y)
{
    size_t off = 0;
    for (int64_t r = 0; r < B; r++) {
        int64_t c = n->c, h = n->h, w = n->w;
        double *a = malloc(sizeof *a * (size_t)(c * h * w));
        memcpy(a, x + r * c * h * w, sizeof *a * (size_t)(c * h * w));
        off = 0;
        for (int i = 0; i < n->n_layers; i++) {
            const crl_conv_layer *L = &n->layers[i];
            int64_t k = L->kernel_size, s = L->stride, p = L->padding;
            int64_t ho = (h + 2 * p - k) / s + 1, wo = (w + 2 * p - k) / s + 1;
            int64_t co = L->kind == CRL_CONV2D ? L->out_channels : c;
            double *b = calloc((size_t)(co * ho * wo), sizeof *b);
            const double *W = P + off, *bias = P + off + co * c * k * k;
            for (int64_t o = 0; o < co; o++)
                for (int64_t oy = 0; oy < ho; oy++)
                    for (int64_t ox = 0; ox < wo; ox++) {
                        double acc = L->kind == CRL_CONV2D ? bias[o] : -INFINITY;
                        for (int64_t ci = 0; ci < (L->kind == CRL_CONV2D ? c : 1); ci++)
                            for (int64_t ki = 0; ki < k; ki++)
                                for (int64_t kj = 0; kj < k; kj++) {
                                    int64_t iy = oy * s - p + ki, ix = ox * s - p + kj;
                                    if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                                        continue;
                                    if (L->kind == CRL_CONV2D)
                                        acc += W[((o * c + ci) * k + ki) * k + kj] * a[(ci * h + iy) * w + ix];
                                    else if (a[(o * h + iy) * w + ix] > acc)
                                        acc = a[(o * h + iy) * w + ix];
                                }
                        b[(o * ho + oy) * wo + ox] = L->kind == CRL_CONV2D ? ref_act(n->conv_act, acc) : acc;
                    }
            if (L->kind == CRL_CONV2D)
                off += (size_t)(co * c * k * k + co);
            free(a);
            a = b;
            c = co;
            h = ho;
            w = wo;
        }
        /* the head, one row */
        int64_t in = c * h * w;
        for (int l = 0; l <= n->n_cells; l++) {
            int64_t out = l < n->n_cells ? n->cells[l] : n->out + (n->dueling ? 1 : 0);
            double *b = calloc((size_t)out, sizeof *b);
            const double *W = P + off, *bias = P + off + out * in;
            for (int64_t o = 0; o < out; o++) {
                double acc = bias[o];
                for (int64_t i = 0; i < in; i++)
                    acc += W[o * in + i] * a[i];
                b[o] = l < n->n_cells ? ref_act(n->act, acc) : acc;
            }
            off += (size_t)(out * in + out);
            free(a);
            a = b;
            in = out;
        }
        if (n->dueling) {
            double mean = 0;
            for (int64_t j = 0; j < n->out; j++)
                mean += a[1 + j] / (double)n->out;
            for (int64_t j = 0; j < n->out; j++)
                y[r * n->out + j] = a[0] + a[1 + j] - mean;
        } else {
            memcpy(y + r * n->out, a, sizeof *a * (size_t)n->out);
        }
        free(a);
    }
}

/* sum(gy * y): the loss whose gradient the checks compare. */
static double ref_loss(const ref_net *n, const double *P, const double *x, int64_t B, const double *gy)
{
    double *y = malloc(sizeof *y * (size_t)(B * n->out)), s = 0;
    ref_forward(n, P, x, B, y);
    for (int64_t i = 0; i < B * n->out; i++)
        s += gy[i] * y[i];
    free(y);
    return s;
}

static crl_mlp *build(const ref_net *n, crl_rng *rng)
{
    crl_error err;
    crl_mlp *m = crl_convnet_new("net", n->n_layers ? 3 : 1,
                                 n->n_layers ? SHAPE(n->c, n->h, n->w) : SHAPE(n->c * n->h * n->w), n->layers,
                                 n->n_layers, n->conv_act, n->cells, n->n_cells, n->act, n->out, n->dueling, rng, &err);
    ck_assert_msg(m != NULL, "%s", err.message);
    return m;
}

/* Forward against the reference, then every parameter's and input's gradient against central differences
 * of the float64 reference (step 1e-6, far below any pool's gap between candidates for random inputs). */
static void check_grads(const ref_net *n, int64_t B, uint64_t seed)
{
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    crl_error err;
    crl_mlp *m = build(n, &rng);
    int64_t in = crl_mlp_in_features(m);
    ck_assert_int_eq(in, n->c * n->h * n->w);
    ck_assert_int_eq(crl_mlp_out_features(m), n->out);
    crl_tensor *x = t_rows(B, in, NULL, &rng), *gy = t_rows(B, n->out, NULL, &rng);
    crl_tensor *p = crl_mlp_params_get(m);
    int64_t np = crl_tensor_numel(p);
    double *P = malloc(sizeof *P * (size_t)np), *X = malloc(sizeof *X * (size_t)(B * in));
    double *GY = malloc(sizeof *GY * (size_t)(B * n->out)), *Y = malloc(sizeof *Y * (size_t)(B * n->out));
    for (int64_t i = 0; i < np; i++)
        P[i] = crl_tensor_flat_get(p, i);
    for (int64_t i = 0; i < B * in; i++)
        X[i] = crl_tensor_flat_get(x, i);
    for (int64_t i = 0; i < B * n->out; i++)
        GY[i] = crl_tensor_flat_get(gy, i);

    crl_tensor *y = crl_mlp_forward(m, x, &err);
    ck_assert_msg(y != NULL, "%s", err.message);
    ref_forward(n, P, X, B, Y);
    for (int64_t i = 0; i < B * n->out; i++)
        assert_close(crl_tensor_flat_get(y, i), Y[i], 1e-4, 1e-4, "forward");
    crl_tensor *out = t_new(CRL_F32, 2, SHAPE(B, n->out));
    ck_assert_int_eq(crl_mlp_infer(m, x, out, &err), CRL_OK);
    for (int64_t i = 0; i < B * n->out; i++)
        assert_close(crl_tensor_flat_get(out, i), Y[i], 1e-4, 1e-4, "infer");

    crl_mlp_zero_grad(m);
    crl_tensor *gin = NULL;
    ck_assert_msg(crl_mlp_backward(m, gy, &gin, &err) == CRL_OK, "%s", err.message);
    crl_tensor *g = crl_mlp_grads_get(m);
    const double h = 1e-6;
    for (int64_t i = 0; i < np; i++) {
        double keep = P[i];
        P[i] = keep + h;
        double up = ref_loss(n, P, X, B, GY);
        P[i] = keep - h;
        double down = ref_loss(n, P, X, B, GY);
        P[i] = keep;
        char what[64];
        snprintf(what, sizeof what, "d/dparam[%" PRId64 "]", i);
        assert_close(crl_tensor_flat_get(g, i), (up - down) / (2 * h), 2e-3, 2e-3, what);
    }
    for (int64_t i = 0; i < B * in; i++) {
        double keep = X[i];
        X[i] = keep + h;
        double up = ref_loss(n, P, X, B, GY);
        X[i] = keep - h;
        double down = ref_loss(n, P, X, B, GY);
        X[i] = keep;
        char what[64];
        snprintf(what, sizeof what, "d/dx[%" PRId64 "]", i);
        assert_close(crl_tensor_flat_get(gin, i), (up - down) / (2 * h), 2e-3, 2e-3, what);
    }
    /* a second backward without grad_in accumulates the same parameter gradients again */
    double g0 = crl_tensor_flat_get(g, 0);
    ck_assert_int_eq(crl_mlp_backward(m, gy, NULL, &err), CRL_OK);
    assert_close(crl_tensor_flat_get(g, 0), 2 * g0, 1e-5, 1e-4, "accumulated gradient");
    free(P);
    free(X);
    free(GY);
    free(Y);
    UNREF_ALL(x, gy, out);
    crl_mlp_unref(m);
}

#define CONV(c, k, s, p) { CRL_CONV2D, c, k, s, p }
#define POOL(k, s, p) { CRL_MAXPOOL2D, 0, k, s, p }

/* Conv2d: stride 1 with padding 1, stride 2 without, the flatten into the head. */
START_TEST(conv_gradients)
{
    static const crl_conv_layer layers[] = { CONV(3, 3, 1, 1), CONV(4, 2, 2, 0) };
    ref_net n = { 2, 5, 5, layers, 2, CRL_ACT_TANH, CRL_ACT_TANH, SHAPE(5), 1, 3, false };
    check_grads(&n, 3, 1);
    /* no hidden layer, ELU in the encoder, one row */
    ref_net n2 = { 1, 6, 7, layers, 1, CRL_ACT_ELU, CRL_ACT_TANH, NULL, 0, 2, false };
    check_grads(&n2, 1, 2);
}
END_TEST

/* MaxPool2d after a conv, with and without padding, and a pool first (its input gradient scattered). */
START_TEST(pool_gradients)
{
    static const crl_conv_layer a[] = { CONV(3, 3, 1, 0), POOL(2, 2, 0) };
    ref_net n = { 2, 6, 6, a, 2, CRL_ACT_TANH, CRL_ACT_TANH, SHAPE(4), 1, 2, false };
    check_grads(&n, 2, 3);
    static const crl_conv_layer b[] = { POOL(3, 2, 1), CONV(2, 2, 1, 0) };
    ref_net n2 = { 2, 5, 5, b, 2, CRL_ACT_TANH, CRL_ACT_TANH, NULL, 0, 3, false };
    check_grads(&n2, 2, 4);
}
END_TEST

/* Dueling: on an MLP and after a conv encoder; its outputs' mean over actions is the value. */
START_TEST(dueling_gradients)
{
    ref_net n = { 6, 1, 1, NULL, 0, CRL_ACT_TANH, CRL_ACT_TANH, SHAPE(5), 1, 4, true };
    check_grads(&n, 3, 5);
    static const crl_conv_layer a[] = { CONV(2, 3, 2, 1) };
    ref_net n2 = { 1, 5, 5, a, 1, CRL_ACT_TANH, CRL_ACT_TANH, SHAPE(3), 1, 3, true };
    check_grads(&n2, 2, 6);

    crl_rng rng;
    crl_rng_init(&rng, 7, 0);
    crl_error err;
    crl_mlp *m = build(&n, &rng);
    crl_tensor *x = t_rows(2, 6, NULL, &rng);
    crl_tensor *q = crl_mlp_forward(m, x, &err);
    crl_td *sd = crl_mlp_state_dict(m, &err);
    crl_tensor *vw = crl_td_get(sd, "value.weight"), *vb = crl_td_get(sd, "value.bias");
    crl_tensor *aw = crl_td_get(sd, "advantage.weight"), *ab = crl_td_get(sd, "advantage.bias");
    ck_assert(vw && vb && aw && ab && crl_td_get(sd, "0.weight"));
    ck_assert_int_eq(crl_tensor_shape(vw)[0], 1);
    ck_assert_int_eq(crl_tensor_shape(aw)[0], 4);
    ck_assert_int_eq(crl_tensor_shape(aw)[1], 5);
    /* the state dict views the parameters: zero the advantages and every Q equals the value */
    crl_tensor_fill(aw, 0);
    crl_tensor_fill(ab, 0);
    q = crl_mlp_forward(m, x, &err);
    for (int r = 0; r < 2; r++)
        for (int j = 1; j < 4; j++)
            ck_assert_float_eq(crl_tensor_flat_get(q, r * 4 + j), crl_tensor_flat_get(q, r * 4));
    crl_td_unref(sd);
    crl_tensor_unref(x);
    crl_mlp_unref(m);
}
END_TEST

/* The Nature-DQN stack: [4, 84, 84] -> 32x8x8/4 -> 64x4x4/2 -> 64x3x3/1 -> 3136 -> 512 -> n, PyTorch's
 * parameter count and state dict names and shapes; forward and infer agree. */
START_TEST(nature_dqn_stack)
{
    static const crl_conv_layer nature[] = { CONV(32, 8, 4, 0), CONV(64, 4, 2, 0), CONV(64, 3, 1, 0) };
    crl_rng rng;
    crl_rng_init(&rng, 8, 0);
    crl_error err;
    crl_mlp *m = crl_convnet_new("q", 3, SHAPE(4, 84, 84), nature, 3, CRL_ACT_RELU, SHAPE(512), 1, CRL_ACT_RELU, 6,
                                 false, &rng, &err);
    ck_assert_msg(m != NULL, "%s", err.message);
    ck_assert_int_eq(crl_mlp_in_features(m), 4 * 84 * 84);
    int64_t shape[CRL_MAX_DIMS];
    ck_assert_int_eq(crl_mlp_in_shape(m, shape), 3);
    ck_assert(shape[0] == 4 && shape[1] == 84 && shape[2] == 84);
    int64_t want = (32 * 4 * 64 + 32) + (64 * 32 * 16 + 64) + (64 * 64 * 9 + 64) + (3136 * 512 + 512) + (512 * 6 + 6);
    ck_assert_int_eq(crl_tensor_numel(crl_mlp_params_get(m)), want);
    crl_td *sd = crl_mlp_state_dict(m, &err);
    static const struct { const char *key; int ndim; int64_t s[4]; } keys[] = {
        { "0.0.weight", 4, { 32, 4, 8, 8 } }, { "0.0.bias", 1, { 32 } }, { "0.2.weight", 4, { 64, 32, 4, 4 } },
        { "0.4.weight", 4, { 64, 64, 3, 3 } }, { "0.4.bias", 1, { 64 } }, { "1.0.weight", 2, { 512, 3136 } },
        { "1.2.weight", 2, { 6, 512 } }, { "1.2.bias", 1, { 6 } },
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        crl_tensor *t = crl_td_get(sd, keys[i].key);
        ck_assert_msg(t != NULL, "no '%s' in the state dict", keys[i].key);
        ck_assert_int_eq(crl_tensor_ndim(t), keys[i].ndim);
        for (int d = 0; d < keys[i].ndim; d++)
            ck_assert_int_eq(crl_tensor_shape(t)[d], keys[i].s[d]);
    }
    crl_td_unref(sd);
    crl_tensor *x = t_rows(2, 4 * 84 * 84, NULL, &rng), *out = t_new(CRL_F32, 2, SHAPE(2, 6));
    crl_tensor *y = crl_mlp_forward(m, x, &err);
    ck_assert_msg(y != NULL, "%s", err.message);
    ck_assert_int_eq(crl_mlp_infer(m, x, out, &err), CRL_OK);
    for (int i = 0; i < 12; i++)
        assert_close(crl_tensor_flat_get(out, i), crl_tensor_flat_get(y, i), 1e-5, 1e-5, "infer");
    UNREF_ALL(x, out);
    crl_mlp_unref(m);
}
END_TEST

/* A clone (a target network) computes what its source does; a checkpoint brings the parameters back into a
 * network of the same architecture and refuses another one, changing nothing. */
START_TEST(clone_and_checkpoint)
{
    static const crl_conv_layer a[] = { CONV(3, 3, 2, 1), POOL(2, 1, 0) };
    ref_net n = { 2, 7, 7, a, 2, CRL_ACT_RELU, CRL_ACT_RELU, SHAPE(8), 1, 3, true };
    crl_rng rng;
    crl_rng_init(&rng, 9, 0);
    crl_error err;
    crl_mlp *m = build(&n, &rng), *other = build(&n, &rng);
    crl_mlp *c = crl_mlp_clone(m, "target", &err);
    ck_assert_msg(c != NULL, "%s", err.message);
    crl_tensor *x = t_rows(3, 98, NULL, &rng), *o1 = t_new(CRL_F32, 2, SHAPE(3, 3)), *o2 = t_new(CRL_F32, 2, SHAPE(3, 3));
    ck_assert_int_eq(crl_mlp_infer(m, x, o1, &err), CRL_OK);
    ck_assert_int_eq(crl_mlp_infer(c, x, o2, &err), CRL_OK);
    for (int i = 0; i < 9; i++)
        ck_assert_float_eq(crl_tensor_flat_get(o1, i), crl_tensor_flat_get(o2, i));

    char dir[] = "/tmp/crl-nn-conv-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char *path = g_strdup_printf("%s/net.ckpt", dir);
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test", 1, &err);
    ck_assert_msg(w != NULL, "%s", err.message);
    ck_assert_int_eq(crl_mlp_save(m, w, "q", &err), CRL_OK);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &err), CRL_OK);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "crl.test", 1, &err);
    ck_assert_msg(r != NULL, "%s", err.message);
    ck_assert_int_eq(crl_mlp_load(other, r, "q", &err), CRL_OK);
    ck_assert_int_eq(crl_mlp_infer(other, x, o2, &err), CRL_OK);
    for (int i = 0; i < 9; i++)
        ck_assert_float_eq(crl_tensor_flat_get(o1, i), crl_tensor_flat_get(o2, i));
    /* another architecture: one more channel in the conv */
    static const crl_conv_layer b[] = { CONV(4, 3, 2, 1), POOL(2, 1, 0) };
    ref_net n2 = n;
    n2.layers = b;
    crl_mlp *wrong = build(&n2, &rng);
    float before = (float)crl_tensor_flat_get(crl_mlp_params_get(wrong), 0);
    ck_assert_int_eq(crl_mlp_load(wrong, r, "q", &err), CRL_E_CORRUPT);
    assert_msg_has(&err, "section 'q/0.0.");
    ck_assert_float_eq(crl_tensor_flat_get(crl_mlp_params_get(wrong), 0), before);
    crl_ckpt_reader_free(r);
    unlink(path);
    rmdir(dir);
    g_free(path);
    UNREF_ALL(x, o1, o2);
    crl_mlp_unref(wrong);
    crl_mlp_unref(c);
    crl_mlp_unref(other);
    crl_mlp_unref(m);
}
END_TEST

/* A TensorDict module reads [B, C, H, W] observations of a conv network; a key of another shape is refused
 * naming both. */
START_TEST(tdmodule_images)
{
    static const crl_conv_layer a[] = { CONV(2, 3, 1, 0) };
    crl_rng rng;
    crl_rng_init(&rng, 10, 0);
    crl_error err;
    crl_mlp *m = crl_convnet_new("q", 3, SHAPE(1, 4, 4), a, 1, CRL_ACT_RELU, NULL, 0, CRL_ACT_RELU, 2, false, &rng,
                                 &err);
    ck_assert_msg(m != NULL, "%s", err.message);
    crl_tdmodule *mod = crl_tdmodule_new(m, (const char *const[]){ "pixels", NULL }, "action_value", &err);
    int64_t B = 3;
    crl_td *td = crl_td_new(1, &B, &err);
    crl_tensor *img = t_new(CRL_F32, 4, SHAPE(3, 1, 4, 4));
    for (int i = 0; i < 48; i++)
        crl_tensor_flat_set(img, i, crl_rng_range(&rng, -1, 1));
    ck_assert_int_eq(crl_td_set(td, "pixels", img, &err), CRL_OK);
    ck_assert_msg(crl_tdmodule_forward(mod, td, &err) == CRL_OK, "%s", err.message);
    crl_tensor *q = crl_td_get(td, "action_value");
    ck_assert_int_eq(crl_tensor_shape(q)[1], 2);
    crl_tensor *flat = crl_tensor_view(img, 2, SHAPE(3, 16), &err), *o = t_new(CRL_F32, 2, SHAPE(3, 2));
    ck_assert_int_eq(crl_mlp_infer(m, flat, o, &err), CRL_OK);
    for (int i = 0; i < 6; i++)
        ck_assert_float_eq(crl_tensor_flat_get(o, i), crl_tensor_flat_get(q, i));
    crl_tensor *bad = t_new(CRL_F32, 4, SHAPE(3, 1, 2, 8));
    ck_assert_int_eq(crl_td_set(td, "pixels", bad, &err), CRL_OK);
    ck_assert_int_eq(crl_tdmodule_forward(mod, td, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "[3, 1, 2, 8]");
    assert_msg_has(&err, "[1, 4, 4]");
    UNREF_ALL(img, flat, o, bad);
    crl_td_unref(td);
    crl_tdmodule_free(mod);
    crl_mlp_unref(m);
}
END_TEST

/* normalize_images: a network fed pixel values 0..255 computes bit for bit what it computes on the floats
 * ToTensorImage gives for them ((float)v / 255.0f), forward, infer and every gradient; its input gradient is
 * the scaled copy's divided by 255; clones keep the setting; a uint8 key feeds the TensorDict module. */
START_TEST(normalize_images)
{
    static const crl_conv_layer a[] = { CONV(3, 3, 2, 1), POOL(2, 1, 0) };
    ref_net n = { 2, 7, 7, a, 2, CRL_ACT_RELU, CRL_ACT_RELU, SHAPE(8), 1, 3, false };
    crl_rng rng;
    crl_rng_init(&rng, 12, 0);
    crl_error err;
    crl_mlp *m = build(&n, &rng);
    ck_assert(!crl_mlp_normalize_images(m));
    ck_assert_int_eq(crl_mlp_set_normalize_images(m, true, &err), CRL_OK);
    ck_assert(crl_mlp_normalize_images(m));
    crl_mlp *plain = crl_mlp_clone(m, "plain", &err);
    ck_assert_msg(plain != NULL, "%s", err.message);
    ck_assert(crl_mlp_normalize_images(plain));
    ck_assert_int_eq(crl_mlp_set_normalize_images(plain, false, &err), CRL_OK);
    ck_assert(!crl_mlp_normalize_images(plain));
    int64_t B = 3, F = 98;
    crl_tensor *raw = t_new(CRL_F32, 2, SHAPE(B, F)), *scaled = t_new(CRL_F32, 2, SHAPE(B, F));
    crl_tensor *u8 = t_new(CRL_U8, 4, SHAPE(B, 2, 7, 7));
    for (int64_t i = 0; i < B * F; i++) {
        uint8_t v = (uint8_t)crl_rng_below(&rng, 256);
        ((float *)crl_tensor_data(raw))[i] = (float)v;
        ((float *)crl_tensor_data(scaled))[i] = (float)v / 255.0f;
        ((uint8_t *)crl_tensor_data(u8))[i] = v;
    }
    crl_tensor *o1 = t_new(CRL_F32, 2, SHAPE(B, 3)), *o2 = t_new(CRL_F32, 2, SHAPE(B, 3));
    ck_assert_int_eq(crl_mlp_infer(m, raw, o1, &err), CRL_OK);
    ck_assert_int_eq(crl_mlp_infer(plain, scaled, o2, &err), CRL_OK);
    ck_assert_mem_eq(crl_tensor_data(o1), crl_tensor_data(o2), crl_tensor_nbytes(o1));
    crl_tensor *y1 = crl_mlp_forward(m, raw, &err), *y2 = crl_mlp_forward(plain, scaled, &err);
    ck_assert(y1 && y2);
    ck_assert_mem_eq(crl_tensor_data(y1), crl_tensor_data(y2), crl_tensor_nbytes(y1));
    ck_assert_mem_eq(crl_tensor_data(y1), crl_tensor_data(o1), crl_tensor_nbytes(o1));
    crl_tensor *gy = t_rows(B, 3, NULL, &rng), *g1 = NULL, *g2 = NULL;
    crl_mlp_zero_grad(m);
    crl_mlp_zero_grad(plain);
    ck_assert_int_eq(crl_mlp_backward(m, gy, &g1, &err), CRL_OK);
    ck_assert_int_eq(crl_mlp_backward(plain, gy, &g2, &err), CRL_OK);
    ck_assert_mem_eq(crl_tensor_data(crl_mlp_grads_get(m)), crl_tensor_data(crl_mlp_grads_get(plain)),
                     crl_tensor_nbytes(crl_mlp_grads_get(m)));
    for (int64_t i = 0; i < B * F; i++) {
        float want = ((const float *)crl_tensor_data(g2))[i] / 255.0f;
        ck_assert_float_eq(((const float *)crl_tensor_data(g1))[i], want);
    }
    /* uint8 frames [B, C, H, W] through the TensorDict module */
    crl_tdmodule *mod = crl_tdmodule_new(m, (const char *const[]){ "pixels", NULL }, "action_value", &err);
    ck_assert_msg(mod != NULL, "%s", err.message);
    crl_td *td = crl_td_new(1, &B, &err);
    ck_assert_int_eq(crl_td_set(td, "pixels", u8, &err), CRL_OK);
    ck_assert_msg(crl_tdmodule_forward(mod, td, &err) == CRL_OK, "%s", err.message);
    ck_assert_mem_eq(crl_tensor_data(crl_td_get(td, "action_value")), crl_tensor_data(o1), crl_tensor_nbytes(o1));
    crl_td_unref(td);
    crl_tdmodule_free(mod);
    /* an MLP reads features, not frames; NULL is refused, also with err NULL */
    crl_mlp *mlp = crl_mlp_new("mlp", 4, 2, SHAPE(8), 1, CRL_ACT_RELU, false, &rng, &err);
    ck_assert_msg(mlp != NULL, "%s", err.message);
    ck_assert_int_eq(crl_mlp_set_normalize_images(mlp, true, &err), CRL_E_INVALID);
    assert_msg_has(&err, "conv encoder");
    ck_assert(!crl_mlp_normalize_images(mlp));
    ck_assert_int_eq(crl_mlp_set_normalize_images(mlp, false, &err), CRL_OK);
    ck_assert_int_eq(crl_mlp_set_normalize_images(NULL, true, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_mlp_set_normalize_images(NULL, true, NULL), CRL_E_INVALID);
    ck_assert(!crl_mlp_normalize_images(NULL));
    UNREF_ALL(raw, scaled, u8, o1, o2, gy);
    crl_mlp_unref(mlp);
    crl_mlp_unref(plain);
    crl_mlp_unref(m);
}
END_TEST

/* Layers that do not fit their input, bad kinds and sizes: CRL_E_INVALID naming the layer. */
START_TEST(bad_layers)
{
    crl_rng rng;
    crl_rng_init(&rng, 11, 0);
    crl_error err;
    static const crl_conv_layer nature[] = { CONV(32, 8, 4, 0), CONV(64, 4, 2, 0), CONV(64, 3, 1, 0) };
    ck_assert_ptr_null(crl_convnet_new("q", 3, SHAPE(4, 32, 32), nature, 3, CRL_ACT_RELU, NULL, 0, CRL_ACT_RELU, 2,
                                       false, &rng, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    assert_msg_has(&err, "conv layer 3: a 3x3 kernel (padding 0) does not fit its 2x2 input");
    static const crl_conv_layer zero[] = { CONV(0, 3, 1, 0) };
    ck_assert_ptr_null(crl_convnet_new("q", 3, SHAPE(1, 8, 8), zero, 1, CRL_ACT_RELU, NULL, 0, CRL_ACT_RELU, 2, false,
                                       &rng, &err));
    assert_msg_has(&err, "conv layer 1");
    static const crl_conv_layer kind[] = { { 7, 1, 1, 1, 0 } };
    ck_assert_ptr_null(crl_convnet_new("q", 3, SHAPE(1, 8, 8), kind, 1, CRL_ACT_RELU, NULL, 0, CRL_ACT_RELU, 2, false,
                                       &rng, &err));
    assert_msg_has(&err, "kind 7");
    static const crl_conv_layer pool[] = { POOL(2, 2, 2) };
    ck_assert_ptr_null(crl_convnet_new("q", 3, SHAPE(1, 8, 8), pool, 1, CRL_ACT_RELU, NULL, 0, CRL_ACT_RELU, 2, false,
                                       &rng, &err));
    assert_msg_has(&err, "padding at most half the kernel");
    /* an encoder needs [C, H, W] */
    ck_assert_ptr_null(crl_convnet_new("q", 1, SHAPE(64), nature, 1, CRL_ACT_RELU, NULL, 0, CRL_ACT_RELU, 2, false,
                                       &rng, &err));
    assert_msg_has(&err, "[C, H, W]");
    ck_assert_ptr_null(crl_convnet_new("q", 3, SHAPE(1, 8, 8), nature, 1, CRL_ACT_RELU, NULL, 0, CRL_ACT_RELU, 2, false,
                                       NULL, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
}
END_TEST

/* A pool takes an index in the state dict as in nn.Sequential (Conv2d, activation, MaxPool2d, Conv2d, ...) and
 * adds no entry: the names and the parameter count are those of the convs and the head alone. */
START_TEST(pool_state_dict_names)
{
    static const crl_conv_layer a[] = { CONV(3, 3, 1, 1), POOL(2, 2, 0), CONV(4, 2, 1, 0), POOL(3, 1, 1) };
    ref_net n = { 2, 9, 9, a, 4, CRL_ACT_RELU, CRL_ACT_RELU, SHAPE(5), 1, 2, false };
    crl_rng rng;
    crl_rng_init(&rng, 12, 0);
    crl_error err;
    crl_mlp *m = build(&n, &rng);
    crl_td *sd = crl_mlp_state_dict(m, &err);
    ck_assert_msg(sd != NULL, "%s", err.message);
    static const char *const keys[] = { "0.0.weight", "0.0.bias", "0.3.weight", "0.3.bias", "1.0.weight",
                                        "1.0.bias", "1.2.weight", "1.2.bias" };
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++)
        ck_assert_msg(crl_td_get(sd, keys[i]) != NULL, "no %s", keys[i]);
    /* the activation (0.1) and the pools (0.2, 0.5) hold nothing */
    for (const char *const *k = (const char *const[]){ "0.1.weight", "0.2.weight", "0.5.weight", NULL }; *k; k++)
        ck_assert_msg(crl_td_get(sd, *k) == NULL, "%s", *k);
    /* 9x9 -> conv 9x9 -> pool 4x4 -> conv 3x3 -> pool (3, stride 1, padding 1) 3x3: the head reads 4*3*3 */
    ck_assert_int_eq(crl_tensor_shape(crl_td_get(sd, "1.0.weight"))[1], 36);
    ck_assert_int_eq(crl_tensor_numel(crl_mlp_params_get(m)), 3 * 2 * 9 + 3 + 4 * 3 * 4 + 4 + 36 * 5 + 5 + 5 * 2 + 2);
    crl_td_unref(sd);
    crl_mlp_unref(m);
}
END_TEST

/* out_features 0 gives the conv stack alone (a recurrent network's encoder, TorchRL's ConvNet): its output
 * is the flattened feature maps, the state dict holds the convs only, infer equals forward, clones copy it,
 * and backward's input gradient matches central differences (float32 convs over values in [0, 1]). */
START_TEST(conv_stack_alone)
{
    static const crl_conv_layer a[] = { CONV(2, 2, 1, 0), POOL(2, 1, 0), CONV(3, 2, 1, 1) };
    crl_rng rng;
    crl_rng_init(&rng, 13, 0);
    crl_error err = { 0 };
    crl_mlp *m = crl_convnet_new("enc", 3, SHAPE(1, 5, 5), a, 3, CRL_ACT_TANH, NULL, 0, CRL_ACT_TANH, 0, false, &rng,
                                 &err);
    ck_assert_msg(m != NULL, "%s", err.message);
    /* 5x5 -> conv 4x4 -> pool 3x3 -> conv (padding 1) 4x4, 3 channels */
    ck_assert_int_eq(crl_mlp_out_features(m), 3 * 4 * 4);
    ck_assert_int_eq(crl_mlp_num_layers(m), 0);
    ck_assert_int_eq(crl_tensor_numel(crl_mlp_params_get(m)), 2 * 4 + 2 + 3 * 2 * 4 + 3);
    crl_td *sd = crl_mlp_state_dict(m, &err);
    ck_assert_msg(sd != NULL, "%s", err.message);
    ck_assert_int_eq(crl_td_len(sd), 1);   /* "0" (the ConvNet) and no head "1" */
    ck_assert_ptr_null(crl_td_get(sd, "1.0.weight"));
    for (const char *const *k = (const char *const[]){ "0.0.weight", "0.0.bias", "0.3.weight", "0.3.bias", NULL }; *k;
         k++)
        ck_assert_msg(crl_td_get(sd, *k) != NULL, "no %s", *k);
    crl_td_unref(sd);
    /* a head needs out_features; the stack alone no head and no dueling */
    ck_assert_ptr_null(crl_convnet_new("enc", 3, SHAPE(1, 5, 5), a, 3, CRL_ACT_TANH, SHAPE(4), 1, CRL_ACT_TANH, 0,
                                       false, &rng, &err));
    ck_assert_ptr_null(crl_convnet_new("enc", 3, SHAPE(1, 5, 5), a, 3, CRL_ACT_TANH, NULL, 0, CRL_ACT_TANH, 0, true,
                                       &rng, &err));
    enum { B = 2 };
    crl_tensor *x = t_new(CRL_F32, 2, SHAPE(B, 25)), *y = t_new(CRL_F32, 2, SHAPE(B, 48)),
               *gy = t_new(CRL_F32, 2, SHAPE(B, 48));
    for (int64_t i = 0; i < B * 25; i++)
        crl_tensor_flat_set(x, i, crl_rng_range(&rng, 0, 1));
    for (int64_t i = 0; i < B * 48; i++)
        crl_tensor_flat_set(gy, i, crl_rng_range(&rng, -1, 1));
    crl_mlp *c = crl_mlp_clone(m, "enc2", &err);
    ck_assert_msg(c != NULL, "%s", err.message);
    ck_assert_int_eq(crl_mlp_infer(c, x, y, &err), CRL_OK);
    const crl_tensor *f = crl_mlp_forward(m, x, &err);
    ck_assert_ptr_nonnull(f);
    for (int64_t i = 0; i < B * 48; i++)
        ck_assert(crl_tensor_flat_get(f, i) == crl_tensor_flat_get(y, i));
    crl_tensor *gx = NULL;
    ck_assert_int_eq(crl_mlp_backward(m, gy, &gx, &err), CRL_OK);
    double *an = g_new(double, B * 25);
    for (int64_t i = 0; i < B * 25; i++)
        an[i] = crl_tensor_flat_get(gx, i);
    /* sum(gy * y) is smooth in x but where a step of 1e-3 flips a pool's argmax (an input near a tie, rare
     * for random values): at most two of the 50 entries may disagree for that reason */
    int agree = 0;
    for (int64_t i = 0; i < B * 25; i++) {
        float *xv = crl_tensor_data(x), keep = xv[i];
        double l[2];
        for (int s = 0; s < 2; s++) {
            xv[i] = keep + (s ? -1e-3f : 1e-3f);
            ck_assert_int_eq(crl_mlp_infer(c, x, y, &err), CRL_OK);
            l[s] = 0;
            for (int64_t j = 0; j < B * 48; j++)
                l[s] += crl_tensor_flat_get(gy, j) * crl_tensor_flat_get(y, j);
        }
        xv[i] = keep;
        double fd = (l[0] - l[1]) / 2e-3;
        agree += fabs(fd - an[i]) <= 2e-3 + 1e-2 * fabs(fd);
    }
    ck_assert_int_ge(agree, B * 25 - 2);
    g_free(an);
    UNREF_ALL(x, y, gy);
    crl_mlp_unref(c);
    crl_mlp_unref(m);
}
END_TEST

int main(void)
{
    return RUN_TESTS("nn_conv", conv_gradients, pool_gradients, dueling_gradients, nature_dqn_stack,
                     clone_and_checkpoint, tdmodule_images, normalize_images, bad_layers, pool_state_dict_names,
                     conv_stack_alone);
}
