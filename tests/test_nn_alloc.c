/* Check suite: the steady state of training and acting allocates nothing.  The test program replaces malloc
 * (glibc allows it; every call still goes to glibc's allocator) to count calls made by libcrl, glib and
 * OpenBLAS during a few iterations after a warm-up.  Skipped (77) under valgrind and the sanitizers, which
 * replace malloc themselves, and off glibc. */
#include <stdlib.h>
#include "nn-test.h"

#if defined(__GLIBC__) && !defined(NN_ALLOC_SKIP)
#include <crl/actor.h>
#include <crl/value.h>

#include <malloc.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static volatile int counting;
static volatile long allocs;

void *malloc(size_t n)
{
    if (counting)
        allocs++;
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t s)
{
    if (counting)
        allocs++;
    return __libc_calloc(n, s);
}

void *realloc(void *p, size_t n)
{
    if (counting)
        allocs++;
    return __libc_realloc(p, n);
}

void *memalign(size_t a, size_t n)
{
    if (counting)
        allocs++;
    return __libc_memalign(a, n);
}

void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }

int posix_memalign(void **out, size_t a, size_t n)
{
    void *p = memalign(a, n);
    if (!p)
        return 12;   /* ENOMEM */
    *out = p;
    return 0;
}

void free(void *p)
{
    __libc_free(p);
}

static const char *const OBS[] = { "observation", NULL };

static crl_td *with_obs(int64_t B, crl_tensor *obs)
{
    crl_error err;
    crl_td *td = crl_td_new(1, &B, &err);
    ck_assert_int_eq(crl_td_set(td, "observation", obs, &err), CRL_OK);
    return td;
}

/* Every training and acting path a loss or collector runs per step. */
START_TEST(test_steady_state)
{
    enum { B = 32 };
    crl_rng rng;
    crl_rng_init(&rng, 1, 0);
    crl_error err;
    int64_t b = B;
    crl_mlp *q = crl_mlp_new("q", 4, 3, SHAPE(64, 64), 2, CRL_ACT_RELU, false, &rng, &err);
    crl_mlp *qt = crl_mlp_clone(q, "q_target", &err);
    crl_mlp *pi = crl_mlp_new("pi", 4, 4, SHAPE(64, 64), 2, CRL_ACT_TANH, false, &rng, &err);
    crl_mlp *mu = crl_mlp_new("mu", 4, 2, SHAPE(64), 1, CRL_ACT_ELU, false, &rng, &err);
    crl_optim *o = crl_optim_new(CRL_OPTIM_ADAM, 1e-3, &err);
    ck_assert_int_eq(crl_optim_add_mlp(o, q, &err), CRL_OK);
    ck_assert_int_eq(crl_optim_add_mlp(o, pi, &err), CRL_OK);
    crl_spec *cat = crl_spec_categorical(3, CRL_I64, 1, &b, &err);
    crl_spec *box = crl_spec_bounded(CRL_F32, 2, SHAPE(B, 2), -1, 1, &err);
    crl_qvalue_actor *qa = crl_qvalue_actor_new(q, OBS, cat, &err);
    ck_assert_int_eq(crl_qvalue_actor_set_egreedy(qa, 1, 0.1, 100, &err), CRL_OK);
    crl_prob_actor *pa = crl_prob_actor_new(pi, OBS, CRL_DIST_TANH_NORMAL, box, &err);
    crl_prob_actor *ca = crl_prob_actor_new(q, OBS, CRL_DIST_CATEGORICAL, cat, &err);
    crl_det_actor *da = crl_det_actor_new(mu, OBS, box, &err);
    ck_assert_int_eq(crl_det_actor_set_ou(da, 0.15, 0, 0.2, 0.01, 1, 0.1, 100, &err), CRL_OK);
    crl_tdmodule *qt_mod = crl_tdmodule_new(qt, OBS, "action_value", &err);
    crl_tensor *obs = t_rows(B, 4, NULL, &rng), *gq = t_new(CRL_F32, 2, SHAPE(B, 3));
    crl_tensor *gl = t_new(CRL_F32, 1, SHAPE(B)), *ga = t_new(CRL_F32, 2, SHAPE(B, 2));
    crl_tensor_fill(gq, 0.01);
    crl_tensor_fill(gl, 0.1);
    crl_tensor_fill(ga, 0.1);
    crl_td *tds[5];
    for (int k = 0; k < 5; k++)
        tds[k] = with_obs(B, obs);
    float r[2 * B], v[2 * B], nv[2 * B], adv[2 * B], tgt[2 * B];
    bool done[2 * B] = { false }, term[2 * B] = { false };
    for (int i = 0; i < 2 * B; i++)
        r[i] = v[i] = nv[i] = 0.5f;
    long seen = 0;
    for (int it = 0; it < 8; it++) {
        counting = it >= 3;   /* after a warm-up that sizes every cache */
        crl_optim_zero_grad(o);
        crl_tensor *gin = NULL;
        int rc = !crl_mlp_forward(q, obs, &err) || crl_mlp_backward(q, gq, &gin, &err) ||
                 crl_tdmodule_infer(qt_mod, tds[0], &err) ||
                 crl_qvalue_actor_act(qa, tds[1], CRL_EXPLORE_RANDOM, &rng, &err) ||
                 crl_prob_actor_forward(pa, tds[2], CRL_EXPLORE_RANDOM, &rng, &err) ||
                 crl_prob_actor_backward(pa, ga, gl, gl, NULL, &err) ||
                 crl_prob_actor_act(pa, tds[2], CRL_EXPLORE_RANDOM, &rng, &err) ||
                 crl_prob_actor_forward(ca, tds[3], CRL_EXPLORE_RANDOM, &rng, &err) ||
                 crl_prob_actor_backward(ca, NULL, gl, gl, NULL, &err) ||
                 crl_det_actor_act(da, tds[4], CRL_EXPLORE_RANDOM, &rng, &err) ||
                 crl_det_actor_forward(da, tds[4], &err) || crl_det_actor_backward(da, ga, NULL, &err) ||
                 crl_value_estimate(CRL_VALUE_GAE, 0.99, 0.95, 2, B, r, v, nv, done, term, adv, tgt, &err);
        crl_optim_clip_grad_norm(o, 1.0);
        rc = rc || crl_optim_step(o, &err) ||
             crl_params_soft_update(crl_mlp_params_get(qt), crl_mlp_params_get(q), 0.005, &err);
        crl_qvalue_actor_step(qa, B);
        crl_det_actor_step(da, B);
        counting = 0;
        ck_assert_msg(rc == 0, "%s", err.message);
        seen = allocs;
    }
    ck_assert_msg(seen == 0, "%ld allocations in 5 steady-state steps", seen);
    for (int k = 0; k < 5; k++)
        crl_td_unref(tds[k]);
    UNREF_ALL(obs, gq, gl, ga);
    crl_tdmodule_free(qt_mod);
    crl_det_actor_free(da);
    crl_prob_actor_free(ca);
    crl_prob_actor_free(pa);
    crl_qvalue_actor_free(qa);
    crl_spec_unref(cat);
    crl_spec_unref(box);
    crl_optim_free(o);
    crl_mlp_unref(q);
    crl_mlp_unref(qt);
    crl_mlp_unref(pi);
    crl_mlp_unref(mu);
}
END_TEST

int main(void)
{
    if (getenv("CRL_TEST_VALGRIND"))
        return 77;
    return RUN_TESTS("nn_alloc", test_steady_state);
}
#else
int main(void) { return 77; }
#endif
