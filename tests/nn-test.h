/* Helpers shared by the nn suites: tensors from arrays, message checks, a float64 reference MLP. */
#ifndef CRL_NN_TEST_H
#define CRL_NN_TEST_H

#include <check.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <crl/crl.h>
#include <crl/nn.h>

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static inline crl_tensor *t_new(crl_dtype dt, int ndim, const int64_t *shape)
{
    crl_error err;
    crl_tensor *t = crl_tensor_new(dt, ndim, shape, &err);
    ck_assert_msg(t != NULL, "crl_tensor_new: %s", err.message);
    return t;
}

/* A float32 [rows, cols] tensor filled from vals (or by rng in [-1, 1)). */
static inline crl_tensor *t_rows(int64_t rows, int64_t cols, const double *vals, crl_rng *rng)
{
    crl_tensor *t = t_new(CRL_F32, 2, SHAPE(rows, cols));
    for (int64_t i = 0; i < rows * cols; i++)
        crl_tensor_flat_set(t, i, vals ? vals[i] : crl_rng_range(rng, -1, 1));
    return t;
}

/* Drop the references of n tensors. */
static inline void unref_all(crl_tensor *const *ts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        crl_tensor_unref(ts[i]);
}
#define RUN_TESTS(name, ...) run_tests(name, (const TTest *const[]){__VA_ARGS__}, \
                                         sizeof((const TTest *const[]){__VA_ARGS__}) / sizeof(const TTest *))
#define UNREF_ALL(...) unref_all((crl_tensor *const[]){__VA_ARGS__}, \
                                 sizeof((crl_tensor *const[]){__VA_ARGS__}) / sizeof(crl_tensor *))

/* One test case holding every test, run; the exit status main returns. */
static inline int run_tests(const char *name, const TTest *const *tests, size_t n)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    /* Learning smoke runs take seconds, but several times that on a loaded
     * 2-core machine (make -j2 check runs two suites at once). */
    tcase_set_timeout(tc, 600);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

static inline void assert_msg_has(const crl_error *err, const char *needle)
{
    ck_assert_msg(strstr(err->message, needle) != NULL, "message '%s' lacks '%s'", err->message, needle);
}

static inline void assert_close(double got, double want, double atol, double rtol, const char *what)
{
    ck_assert_msg(fabs(got - want) <= atol + rtol * fabs(want), "%s: got %.9g, want %.9g", what, got, want);
}

/* The same network in float64, written the obvious way: layer sizes
 * dims[0..n_layers], parameters in crl's flat layout. */
static inline double ref_act(crl_activation a, double x)
{
    switch (a) {
    case CRL_ACT_TANH: return tanh(x);
    case CRL_ACT_RELU: return x > 0 ? x : 0;
    case CRL_ACT_ELU: return x > 0 ? x : expm1(x);
    case CRL_ACT_LEAKY_RELU: return x > 0 ? x : 0.01 * x;
    default: return x;
    }
}

static inline void ref_mlp(const int64_t *dims, int n_layers, crl_activation act, bool activate_last,
                           const double *P, const double *x, int64_t B, double *y)
{
    int64_t maxw = 0;
    for (int l = 0; l <= n_layers; l++)
        maxw = dims[l] > maxw ? dims[l] : maxw;
    double *a = calloc((size_t)(B * maxw), sizeof *a), *b = calloc((size_t)(B * maxw), sizeof *b);
    memcpy(a, x, (size_t)(B * dims[0]) * sizeof *a);
    size_t off = 0;
    for (int l = 0; l < n_layers; l++) {
        int64_t in = dims[l], out = dims[l + 1];
        const double *W = P + off, *bias = P + off + in * out;
        off += (size_t)(in * out + out);
        for (int64_t r = 0; r < B; r++)
            for (int64_t o = 0; o < out; o++) {
                double s = bias[o];
                for (int64_t i = 0; i < in; i++)
                    s += W[o * in + i] * a[r * in + i];
                b[r * out + o] = (l < n_layers - 1 || activate_last) ? ref_act(act, s) : s;
            }
        double *t = a;
        a = b;
        b = t;
    }
    memcpy(y, a, (size_t)(B * dims[n_layers]) * sizeof *y);
    free(a);
    free(b);
}

#endif
