/* Check suite for the replay sampling core: 16-way sum/min tree and the uniform, without-replacement and prioritized samplers. */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "sampler-private.h"

/* Upper 0.1% points of the chi-square distribution (scipy.stats.chi2.ppf(0.999, df)). */
#define CHI2_999_DF99 148.2304
#define CHI2_999_DF15 37.6973
#define CHI2_999_DF4 18.4668

static double chi_square(const double *observed, const double *expected, size_t bins)
{
    double x = 0.0;
    for (size_t b = 0; b < bins; b++)
        x += (observed[b] - expected[b]) * (observed[b] - expected[b]) / expected[b];
    return x;
}

/* ---- sum tree ----------------------------------------------------------- */

START_TEST(test_tree_depth_and_capacity)
{
    static const struct { size_t cap; int depth; } cases[] = {
        {1, 1}, {2, 1}, {16, 1}, {17, 2}, {256, 2}, {257, 3}, {4096, 3}, {4097, 4}, {1000000, 5},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        crl_error err;
        crl__sumtree *t = crl__sumtree_new(cases[c].cap, &err);
        ck_assert_ptr_nonnull(t);
        ck_assert_uint_eq(crl__sumtree_capacity(t), cases[c].cap);
        ck_assert_int_eq(crl__sumtree_depth(t), cases[c].depth);
        ck_assert(crl__sumtree_total(t) == 0.0);
        ck_assert(isinf(crl__sumtree_min(t)));
        /* the last leaf is addressable and the one past it is not */
        ck_assert_int_eq(crl__sumtree_set(t, cases[c].cap - 1, 2.5, &err), CRL_OK);
        ck_assert(crl__sumtree_total(t) == 2.5);
        ck_assert(crl__sumtree_min(t) == 2.5);
        size_t leaf = 99;
        ck_assert_int_eq(crl__sumtree_find_prefix(t, 2.4, &leaf, &err), CRL_OK);
        ck_assert_uint_eq(leaf, cases[c].cap - 1);
        ck_assert_int_eq(crl__sumtree_set(t, cases[c].cap, 1.0, &err), CRL_E_RANGE);
        crl__sumtree_free(t);
    }
}
END_TEST

/* Random sets, batch sets and clears; after each round the root equals the
 * leaves' sum and min (reference sums in long double). */
START_TEST(test_tree_invariants_random_updates)
{
    static const size_t caps[] = {1, 7, 16, 17, 255, 256, 257, 5000};
    crl_rng r;
    crl_rng_init(&r, 1234, 0);
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        size_t cap = caps[c];
        crl_error err;
        crl__sumtree *t = crl__sumtree_new(cap, &err);
        ck_assert_ptr_nonnull(t);
        double *ref = calloc(cap, sizeof *ref);
        bool *set = calloc(cap, sizeof *set);
        for (int round = 0; round < 300; round++) {
            int op = (int)crl_rng_below(&r, 10);
            if (op < 6) {
                size_t i = crl_rng_below(&r, cap);
                double p = crl_rng_uniform(&r) * 100.0;
                ck_assert_int_eq(crl__sumtree_set(t, i, p, &err), CRL_OK);
                ref[i] = p;
                set[i] = true;
            } else if (op < 9) {
                int64_t idx[8];
                double p[8];
                for (int k = 0; k < 8; k++) {
                    idx[k] = (int64_t)crl_rng_below(&r, cap);
                    p[k] = crl_rng_uniform(&r) * 1e-3;
                }
                ck_assert_int_eq(crl__sumtree_set_batch(t, idx, p, 8, &err), CRL_OK);
                for (int k = 0; k < 8; k++) {
                    ref[idx[k]] = p[k];
                    set[idx[k]] = true;
                }
            } else {
                size_t i = crl_rng_below(&r, cap);
                ck_assert_int_eq(crl__sumtree_clear_leaf(t, i, &err), CRL_OK);
                ref[i] = 0.0;
                set[i] = false;
            }
            long double sum = 0.0L;
            double mn = INFINITY;
            for (size_t i = 0; i < cap; i++) {
                sum += ref[i];
                if (set[i] && ref[i] < mn)
                    mn = ref[i];
                double got;
                if (i % 97 == 0 || i == cap - 1) {
                    ck_assert_int_eq(crl__sumtree_get(t, i, &got, &err), CRL_OK);
                    ck_assert(got == ref[i]);
                    ck_assert(crl__sumtree_is_set(t, i) == set[i]);
                }
            }
            double total = crl__sumtree_total(t);
            ck_assert_msg(fabsl((long double)total - sum) <= 1e-9L * sum + 1e-300L,
                          "cap %zu round %d: total %.17g vs leaves %.17Lg", cap, round, total, sum);
            if (isinf(mn))
                ck_assert(isinf(crl__sumtree_min(t)));
            else
                ck_assert_msg(fabs(crl__sumtree_min(t) - mn) <= 1e-9 * mn, "cap %zu: min %.17g vs %.17g",
                              cap, crl__sumtree_min(t), mn);
        }
        crl__sumtree_clear(t);
        ck_assert(crl__sumtree_total(t) == 0.0);
        ck_assert(isinf(crl__sumtree_min(t)));
        free(ref);
        free(set);
        crl__sumtree_free(t);
    }
}
END_TEST

/* Index where the running sum of leaves first exceeds u. */
static size_t linear_prefix(const double *p, size_t n, double u)
{
    double acc = 0.0;
    for (size_t i = 0; i < n; i++) {
        acc += p[i];
        if (u < acc)
            return i;
    }
    return n;
}

/* Integer priorities make every partial sum exact, so the tree must agree
 * with a linear scan exactly, zero leaves included (never chosen). */
START_TEST(test_find_prefix_matches_linear_scan)
{
    const size_t cap = 3000;
    crl_rng r;
    crl_rng_init(&r, 42, 1);
    crl_error err;
    crl__sumtree *t = crl__sumtree_new(cap, &err);
    double *p = calloc(cap, sizeof *p);
    for (size_t i = 0; i < cap; i++) {
        p[i] = (i % 5 == 3) ? 0.0 : (double)crl_rng_below(&r, 1000);
        ck_assert_int_eq(crl__sumtree_set(t, i, p[i], &err), CRL_OK);
    }
    double total = crl__sumtree_total(t);
    for (int k = 0; k < 10000; k++) {
        double u = crl_rng_uniform(&r) * total;
        if (k % 10 == 0)
            u = floor(u);   /* exactly on a boundary half the time */
        size_t got;
        ck_assert_int_eq(crl__sumtree_find_prefix(t, u, &got, &err), CRL_OK);
        size_t want = linear_prefix(p, cap, u);
        ck_assert_msg(got == want, "u = %.17g: tree %zu, linear %zu", u, got, want);
        ck_assert(p[got] > 0.0);
    }
    /* every exact boundary: u equal to a running sum picks the next positive leaf */
    double cum = 0.0;
    for (size_t i = 0; i < cap; i++) {
        cum += p[i];
        if (cum >= total)
            break;
        size_t at;
        ck_assert_int_eq(crl__sumtree_find_prefix(t, cum, &at, &err), CRL_OK);
        ck_assert_msg(at == linear_prefix(p, cap, cum) && at > i, "boundary after leaf %zu: got %zu", i, at);
    }
    /* the very top of the range lands on the last positive leaf */
    size_t last = cap - 1;
    while (p[last] == 0.0)
        last--;
    size_t got;
    ck_assert_int_eq(crl__sumtree_find_prefix(t, nextafter(total, 0.0), &got, &err), CRL_OK);
    ck_assert_uint_eq(got, last);
    ck_assert_int_eq(crl__sumtree_find_prefix(t, 0.0, &got, &err), CRL_OK);
    ck_assert_uint_eq(got, linear_prefix(p, cap, 0.0));
    free(p);
    crl__sumtree_free(t);
}
END_TEST

/* Real-valued priorities: the chosen leaf brackets u up to rounding. */
START_TEST(test_find_prefix_real_priorities)
{
    const size_t cap = 1000;
    crl_rng r;
    crl_rng_init(&r, 43, 1);
    crl_error err;
    crl__sumtree *t = crl__sumtree_new(cap, &err);
    double *p = calloc(cap, sizeof *p);
    double *cum = calloc(cap + 1, sizeof *cum);
    for (size_t i = 0; i < cap; i++) {
        p[i] = crl_rng_uniform(&r) * 3.0 + 1e-6;
        ck_assert_int_eq(crl__sumtree_set(t, i, p[i], &err), CRL_OK);
        cum[i + 1] = cum[i] + p[i];
    }
    double total = crl__sumtree_total(t), tol = 1e-12 * total;
    for (int k = 0; k < 10000; k++) {
        double u = crl_rng_uniform(&r) * total;
        size_t got;
        ck_assert_int_eq(crl__sumtree_find_prefix(t, u, &got, &err), CRL_OK);
        ck_assert_msg(cum[got] - tol <= u && u < cum[got + 1] + tol, "u = %.17g: leaf %zu [%.17g, %.17g)",
                      u, got, cum[got], cum[got + 1]);
    }
    free(p);
    free(cum);
    crl__sumtree_free(t);
}
END_TEST

START_TEST(test_tree_errors)
{
    crl_error err;
    crl_error_clear(&err);
    ck_assert_ptr_null(crl__sumtree_new(0, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "capacity"));

    crl__sumtree *t = crl__sumtree_new(20, &err);
    size_t leaf;
    /* empty tree: no prefix search, no sampling */
    ck_assert_int_eq(crl__sumtree_find_prefix(t, 0.0, &leaf, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "total is 0"));
    crl_rng r;
    crl_rng_init(&r, 1, 0);
    int64_t out[4];
    ck_assert_int_eq(crl__sumtree_sample(t, &r, 4, out, &err), CRL_E_INVALID);

    ck_assert_int_eq(crl__sumtree_set(t, 3, 2.0, &err), CRL_OK);
    ck_assert_int_eq(crl__sumtree_set(t, 20, 1.0, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "index 20"));
    ck_assert_int_eq(crl__sumtree_set(t, 1, -1.0, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "index 1"));
    ck_assert_int_eq(crl__sumtree_set(t, 1, NAN, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl__sumtree_set(t, 1, INFINITY, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl__sumtree_clear_leaf(t, 21, &err), CRL_E_RANGE);
    double v = -7.0;
    ck_assert_int_eq(crl__sumtree_get(t, 20, &v, &err), CRL_E_RANGE);
    ck_assert(v == -7.0);
    ck_assert(!crl__sumtree_is_set(t, 20));
    ck_assert(crl__sumtree_total(t) == 2.0);

    /* batch set is all-or-nothing */
    int64_t idx[3] = {0, 5, -1};
    double p[3] = {1.0, 1.0, 1.0};
    ck_assert_int_eq(crl__sumtree_set_batch(t, idx, p, 3, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "position 2"));
    idx[2] = 7;
    p[1] = NAN;
    ck_assert_int_eq(crl__sumtree_set_batch(t, idx, p, 3, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "position 1"));
    ck_assert_int_eq(crl__sumtree_set_batch(t, NULL, p, 3, &err), CRL_E_INVALID);
    ck_assert(crl__sumtree_total(t) == 2.0);
    ck_assert(crl__sumtree_get(t, 0, &v, &err) == CRL_OK && v == 0.0);

    /* prefix out of [0, total) */
    ck_assert_int_eq(crl__sumtree_find_prefix(t, -0.5, &leaf, &err), CRL_E_RANGE);
    ck_assert_int_eq(crl__sumtree_find_prefix(t, 2.0, &leaf, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "outside"));
    ck_assert_int_eq(crl__sumtree_find_prefix(t, NAN, &leaf, &err), CRL_E_RANGE);
    ck_assert_int_eq(crl__sumtree_find_prefix(t, 1.999, &leaf, &err), CRL_OK);
    ck_assert_uint_eq(leaf, 3);
    /* a tree of only zero priorities is empty for sampling */
    ck_assert_int_eq(crl__sumtree_set(t, 3, 0.0, &err), CRL_OK);
    ck_assert(crl__sumtree_min(t) == 0.0);
    ck_assert_int_eq(crl__sumtree_sample(t, &r, 4, out, &err), CRL_E_INVALID);
    crl__sumtree_free(t);
    crl__sumtree_free(NULL);
}
END_TEST

/* ---- uniform ------------------------------------------------------------ */

#define BINS 100
#define DRAWS 100000

START_TEST(test_uniform_chi_square)
{
    crl_rng r;
    crl_rng_init(&r, 2024, 7);
    int64_t *out = malloc(DRAWS * sizeof *out);
    crl_error err;
    ck_assert_int_eq(crl__sampler_uniform(&r, BINS, DRAWS, out, &err), CRL_OK);
    double obs[BINS] = {0}, exp[BINS];
    for (size_t k = 0; k < DRAWS; k++) {
        ck_assert(out[k] >= 0 && out[k] < BINS);
        obs[out[k]] += 1.0;
    }
    for (int b = 0; b < BINS; b++)
        exp[b] = (double)DRAWS / BINS;
    double x = chi_square(obs, exp, BINS);
    ck_assert_msg(x < CHI2_999_DF99, "uniform chi-square %g >= %g", x, CHI2_999_DF99);

    /* the test has power: a modulo-biased sampler (byte % 100 favours 0..55) fails it */
    memset(obs, 0, sizeof obs);
    for (size_t k = 0; k < DRAWS; k++)
        obs[(crl_rng_u32(&r) & 0xff) % BINS] += 1.0;
    double xb = chi_square(obs, exp, BINS);
    ck_assert_msg(xb > CHI2_999_DF99, "biased sampler passed: chi-square %g", xb);

    /* same stream, same draws */
    int64_t a[16], b2[16];
    crl_rng_init(&r, 5, 5);
    crl__sampler_uniform(&r, 1000, 16, a, &err);
    crl_rng_init(&r, 5, 5);
    crl__sampler_uniform(&r, 1000, 16, b2, &err);
    ck_assert_mem_eq(a, b2, sizeof a);

    ck_assert_int_eq(crl__sampler_uniform(&r, 0, 4, a, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "empty"));
    free(out);
}
END_TEST

/* ---- without replacement ------------------------------------------------ */

/* Draw one epoch of `len` in batches; check sizes, ran_out only at the end,
 * and return how many times each index appeared in counts. */
static size_t run_epoch(crl__sampler_norepl *s, crl_rng *r, size_t len, size_t batch, int *counts,
                        int64_t *first_batch)
{
    int64_t out[64];
    size_t drawn = 0, batches = 0;
    bool ran_out = false;
    memset(counts, 0, len * sizeof *counts);
    while (!ran_out) {
        size_t n = 0;
        crl_error err;
        ck_assert_int_eq(crl__sampler_norepl_sample(s, r, len, batch, out, &n, &ran_out, &err), CRL_OK);
        ck_assert(n >= 1 && n <= batch);
        if (n < batch)
            ck_assert(ran_out);
        if (batches == 0 && first_batch)
            memcpy(first_batch, out, n * sizeof *out);
        for (size_t k = 0; k < n; k++) {
            ck_assert(out[k] >= 0 && (size_t)out[k] < len);
            counts[out[k]]++;
        }
        drawn += n;
        batches++;
        ck_assert(batches <= len);
    }
    ck_assert_uint_eq(crl__sampler_norepl_remaining(s), len);   /* a fresh epoch is ready */
    return drawn;
}

START_TEST(test_norepl_epochs)
{
    crl_rng r;
    crl_rng_init(&r, 99, 0);
    crl_error err;
    int counts[200];
    int64_t first1[64], first2[64];
    /* no drop_last: a short last batch, every index exactly once */
    crl__sampler_norepl *s = crl__sampler_norepl_new(200, false, true, &err);
    ck_assert_uint_eq(crl__sampler_norepl_remaining(s), 0);
    for (int epoch = 0; epoch < 3; epoch++) {
        ck_assert_uint_eq(run_epoch(s, &r, 103, 10, counts, epoch == 0 ? first1 : first2), 103);
        for (int i = 0; i < 103; i++)
            ck_assert_int_eq(counts[i], 1);
    }
    ck_assert(memcmp(first1, first2, 10 * sizeof *first1) != 0);   /* reshuffled */
    crl__sampler_norepl_free(s);

    /* drop_last with len divisible by the batch: every index exactly once */
    s = crl__sampler_norepl_new(200, true, true, &err);
    for (int epoch = 0; epoch < 2; epoch++) {
        ck_assert_uint_eq(run_epoch(s, &r, 100, 10, counts, NULL), 100);
        for (int i = 0; i < 100; i++)
            ck_assert_int_eq(counts[i], 1);
    }
    /* drop_last otherwise: 10 full batches, no repeat, the 3 left over dropped */
    ck_assert_uint_eq(run_epoch(s, &r, 103, 10, counts, NULL), 100);
    int missing = 0;
    for (int i = 0; i < 103; i++) {
        ck_assert_int_le(counts[i], 1);
        missing += counts[i] == 0;
    }
    ck_assert_int_eq(missing, 3);
    crl__sampler_norepl_free(s);

    /* no shuffle: arange order; a new length starts a new epoch */
    s = crl__sampler_norepl_new(50, false, false, &err);
    int64_t out[8];
    size_t n;
    bool ran_out;
    ck_assert_int_eq(crl__sampler_norepl_sample(s, &r, 20, 8, out, &n, &ran_out, &err), CRL_OK);
    for (int k = 0; k < 8; k++)
        ck_assert_int_eq(out[k], k);
    ck_assert(!ran_out);
    ck_assert_int_eq(crl__sampler_norepl_sample(s, &r, 30, 8, out, &n, &ran_out, &err), CRL_OK);
    ck_assert_int_eq(out[0], 0);
    ck_assert_uint_eq(crl__sampler_norepl_remaining(s), 22);
    crl__sampler_norepl_free(s);

    /* shuffles are uniform: the position of item 0 over 20000 epochs of 5
     * (a Sattolo-style off-by-one never leaves it in place) */
    s = crl__sampler_norepl_new(5, false, true, &err);
    double pos[5] = {0}, exp[5] = {4000, 4000, 4000, 4000, 4000};
    for (int e = 0; e < 20000; e++) {
        ck_assert_int_eq(crl__sampler_norepl_sample(s, &r, 5, 5, out, &n, &ran_out, &err), CRL_OK);
        ck_assert(ran_out);
        for (int k = 0; k < 5; k++)
            if (out[k] == 0)
                pos[k] += 1.0;
    }
    ck_assert_msg(chi_square(pos, exp, 5) < CHI2_999_DF4, "shuffle positions chi-square %g",
                  chi_square(pos, exp, 5));
    crl__sampler_norepl_free(s);
}
END_TEST

START_TEST(test_norepl_errors)
{
    crl_error err;
    crl_rng r;
    crl_rng_init(&r, 1, 1);
    ck_assert_ptr_null(crl__sampler_norepl_new(0, false, true, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    crl__sampler_norepl *s = crl__sampler_norepl_new(10, true, true, &err);
    int64_t out[16];
    size_t n = 77;
    ck_assert_int_eq(crl__sampler_norepl_sample(s, &r, 0, 4, out, &n, NULL, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "empty"));
    ck_assert_int_eq(crl__sampler_norepl_sample(s, &r, 11, 4, out, &n, NULL, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "11"));
    ck_assert_int_eq(crl__sampler_norepl_sample(s, &r, 5, 0, out, &n, NULL, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl__sampler_norepl_sample(s, &r, 5, 6, out, &n, NULL, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "drop_last"));
    ck_assert_uint_eq(n, 77);
    crl__sampler_norepl_free(s);
    /* without drop_last a batch larger than the storage is one short epoch */
    s = crl__sampler_norepl_new(10, false, true, &err);
    bool ran_out = false;
    ck_assert_int_eq(crl__sampler_norepl_sample(s, &r, 5, 16, out, &n, &ran_out, &err), CRL_OK);
    ck_assert_uint_eq(n, 5);
    ck_assert(ran_out);
    crl__sampler_norepl_free(s);
    crl__sampler_norepl_free(NULL);
}
END_TEST

/* ---- prioritized -------------------------------------------------------- */

START_TEST(test_prio_frequencies)
{
    const size_t N = 16;
    const double alpha = 0.7, eps = 0.01;
    crl_error err;
    crl__sampler_prio *s = crl__sampler_prio_new(N, alpha, 0.4, eps, &err);
    ck_assert_ptr_nonnull(s);
    int64_t idx[16];
    double pr[16];
    for (size_t i = 0; i < N; i++) {
        idx[i] = (int64_t)i;
        pr[i] = (double)(i + 1);
    }
    ck_assert_int_eq(crl__sampler_prio_add(s, idx, N, &err), CRL_OK);
    ck_assert_int_eq(crl__sampler_prio_update(s, idx, pr, N, &err), CRL_OK);
    crl_rng r;
    crl_rng_init(&r, 77, 3);
    int64_t *out = malloc(DRAWS * sizeof *out);
    ck_assert_int_eq(crl__sampler_prio_sample(s, &r, DRAWS, out, NULL, &err), CRL_OK);
    double obs[16] = {0}, exp[16], z = 0.0;
    for (size_t i = 0; i < N; i++)
        z += pow(pr[i] + eps, alpha);
    for (size_t i = 0; i < N; i++)
        exp[i] = DRAWS * pow(pr[i] + eps, alpha) / z;
    for (size_t k = 0; k < DRAWS; k++)
        obs[out[k]] += 1.0;
    double x = chi_square(obs, exp, N);
    ck_assert_msg(x < CHI2_999_DF15, "prioritized chi-square %g >= %g", x, CHI2_999_DF15);
    /* and it tells p^alpha from plain p */
    for (size_t i = 0; i < N; i++)
        exp[i] = DRAWS * (pr[i] + eps) / (136.0 + N * eps);
    ck_assert_msg(chi_square(obs, exp, N) > CHI2_999_DF15, "frequencies also fit p^1");
    free(out);
    crl__sampler_prio_free(s);
}
END_TEST

START_TEST(test_prio_weights_exact)
{
    const size_t N = 50;
    const double alpha = 0.6, beta = 0.45, eps = 1e-6;
    crl_error err;
    crl__sampler_prio *s = crl__sampler_prio_new(N, alpha, beta, eps, &err);
    crl_rng r;
    crl_rng_init(&r, 5150, 0);
    int64_t idx[50];
    double raw[50];
    for (size_t i = 0; i < N; i++) {
        idx[i] = (int64_t)i;
        raw[i] = crl_rng_uniform(&r) * 10.0;
    }
    raw[17] = 0.0;   /* only eps keeps it drawable */
    ck_assert_int_eq(crl__sampler_prio_add(s, idx, N, &err), CRL_OK);
    ck_assert_int_eq(crl__sampler_prio_update(s, idx, raw, N, &err), CRL_OK);
    /* independent formula: w_i = (N P(i))^-beta / max_j (N P(j))^-beta */
    double total = 0.0;
    for (size_t i = 0; i < N; i++)
        total += pow(raw[i] + eps, alpha);
    double wmax = 0.0;
    for (size_t j = 0; j < N; j++) {
        double w = pow((double)N * pow(raw[j] + eps, alpha) / total, -beta);
        wmax = w > wmax ? w : wmax;
    }
    int64_t out[1000];
    double w[1000];
    ck_assert_int_eq(crl__sampler_prio_sample(s, &r, 1000, out, w, &err), CRL_OK);
    for (size_t k = 0; k < 1000; k++) {
        double want = pow((double)N * pow(raw[out[k]] + eps, alpha) / total, -beta) / wmax;
        ck_assert_msg(fabs(w[k] - want) <= 1e-12 * want, "item %" PRId64 ": weight %.17g, formula %.17g",
                      out[k], w[k], want);
        ck_assert(w[k] > 0.0 && w[k] <= 1.0 + 1e-15);
    }
    /* the tree holds (p + eps)^alpha */
    double leaf;
    crl__sumtree_get(crl__sampler_prio_tree(s), 3, &leaf, &err);
    ck_assert(leaf == pow(raw[3] + eps, alpha));
    /* beta = 0: every weight is 1 */
    ck_assert_int_eq(crl__sampler_prio_set_beta(s, 0.0, &err), CRL_OK);
    ck_assert_int_eq(crl__sampler_prio_sample(s, &r, 100, out, w, &err), CRL_OK);
    for (int k = 0; k < 100; k++)
        ck_assert(w[k] == 1.0);
    ck_assert_int_eq(crl__sampler_prio_set_beta(s, -1.0, &err), CRL_E_INVALID);
    crl__sampler_prio_free(s);
}
END_TEST

START_TEST(test_prio_new_items_get_max_priority)
{
    const double alpha = 0.5, eps = 0.1;
    crl_error err;
    crl__sampler_prio *s = crl__sampler_prio_new(10, alpha, 1.0, eps, &err);
    const crl__sumtree *t = crl__sampler_prio_tree(s);
    crl_rng r;
    crl_rng_init(&r, 3, 3);
    int64_t out[4];
    ck_assert_int_eq(crl__sampler_prio_sample(s, &r, 4, out, NULL, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "no item"));
    int64_t i0[2] = {0, 1};
    ck_assert_int_eq(crl__sampler_prio_add(s, i0, 2, &err), CRL_OK);
    double v;
    crl__sumtree_get(t, 1, &v, &err);
    ck_assert(v == pow(1.0 + eps, alpha));   /* TorchRL's initial max priority is 1 */
    double p[2] = {5.0, 0.25};
    ck_assert_int_eq(crl__sampler_prio_update(s, i0, p, 2, &err), CRL_OK);
    ck_assert(crl__sampler_prio_max_priority(s) == 5.0);
    int64_t i2 = 2;
    ck_assert_int_eq(crl__sampler_prio_add(s, &i2, 1, &err), CRL_OK);
    crl__sumtree_get(t, 2, &v, &err);
    ck_assert(v == pow(5.0 + eps, alpha));
    /* a lower update does not lower the max */
    double low = 0.5;
    ck_assert_int_eq(crl__sampler_prio_update(s, &i2, &low, 1, &err), CRL_OK);
    ck_assert(crl__sampler_prio_max_priority(s) == 5.0);
    /* removed items are never drawn */
    ck_assert_int_eq(crl__sampler_prio_remove(s, 0, &err), CRL_OK);
    int64_t many[500];
    ck_assert_int_eq(crl__sampler_prio_sample(s, &r, 500, many, NULL, &err), CRL_OK);
    for (int k = 0; k < 500; k++)
        ck_assert(many[k] == 1 || many[k] == 2);
    ck_assert_int_eq(crl__sampler_prio_remove(s, 10, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "prioritized sampler"));
    crl__sampler_prio_free(s);
}
END_TEST

START_TEST(test_prio_errors)
{
    crl_error err;
    ck_assert_ptr_null(crl__sampler_prio_new(10, 0.0, 0.4, 1e-8, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "alpha"));
    ck_assert_ptr_null(crl__sampler_prio_new(10, 0.6, -0.1, 1e-8, &err));
    ck_assert_ptr_nonnull(strstr(err.message, "beta"));
    ck_assert_ptr_null(crl__sampler_prio_new(10, 0.6, 0.4, NAN, &err));
    ck_assert_ptr_nonnull(strstr(err.message, "eps"));
    ck_assert_ptr_null(crl__sampler_prio_new(0, 0.6, 0.4, 1e-8, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "prioritized sampler: sum tree"));

    crl__sampler_prio *s = crl__sampler_prio_new(8, 0.6, 0.4, 1e-8, &err);
    int64_t idx[3] = {0, 1, 8};
    ck_assert_int_eq(crl__sampler_prio_add(s, idx, 3, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "index 8"));
    ck_assert(crl__sumtree_total(crl__sampler_prio_tree(s)) == 0.0);   /* nothing added */
    idx[2] = 2;
    ck_assert_int_eq(crl__sampler_prio_add(s, idx, 3, &err), CRL_OK);
    double before = crl__sumtree_total(crl__sampler_prio_tree(s));
    double p[3] = {2.0, -1.0, 3.0};
    ck_assert_int_eq(crl__sampler_prio_update(s, idx, p, 3, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "position 1"));
    p[1] = INFINITY;
    ck_assert_int_eq(crl__sampler_prio_update(s, idx, p, 3, &err), CRL_E_INVALID);
    p[1] = 1.0;
    idx[0] = -1;
    ck_assert_int_eq(crl__sampler_prio_update(s, idx, p, 3, &err), CRL_E_RANGE);
    ck_assert(crl__sumtree_total(crl__sampler_prio_tree(s)) == before);
    ck_assert(crl__sampler_prio_max_priority(s) == 1.0);
    crl__sampler_prio_free(s);

    /* eps = 0 and a zero priority: min is 0, weights undefined -> error */
    s = crl__sampler_prio_new(4, 1.0, 0.4, 0.0, &err);
    int64_t i0 = 0, i1 = 1;
    double zero = 0.0;
    crl__sampler_prio_add(s, &i0, 1, &err);
    crl__sampler_prio_add(s, &i1, 1, &err);
    ck_assert_int_eq(crl__sampler_prio_update(s, &i1, &zero, 1, &err), CRL_OK);
    crl_rng r;
    crl_rng_init(&r, 1, 1);
    int64_t out[2];
    double w[2];
    ck_assert_int_eq(crl__sampler_prio_sample(s, &r, 2, out, w, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "priority 0"));
    crl__sampler_prio_free(s);
    crl__sampler_prio_free(NULL);
}
END_TEST

static Suite *sampler_suite(void)
{
    Suite *s = suite_create("sampler");
    TCase *tc = tcase_create("sumtree");
    tcase_add_test(tc, test_tree_depth_and_capacity);
    tcase_add_test(tc, test_tree_invariants_random_updates);
    tcase_add_test(tc, test_find_prefix_matches_linear_scan);
    tcase_add_test(tc, test_find_prefix_real_priorities);
    tcase_add_test(tc, test_tree_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("samplers");
    tcase_add_test(tc, test_uniform_chi_square);
    tcase_add_test(tc, test_norepl_epochs);
    tcase_add_test(tc, test_norepl_errors);
    tcase_add_test(tc, test_prio_frequencies);
    tcase_add_test(tc, test_prio_weights_exact);
    tcase_add_test(tc, test_prio_new_items_get_max_priority);
    tcase_add_test(tc, test_prio_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sampler_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
