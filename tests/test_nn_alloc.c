/* Check suite: the steady state of training and acting allocates nothing in crl's own code.
 *
 * What it covers: every heap call (malloc family and free) made on a crl code path during a few iterations
 * after a warm-up, whether libcrl calls malloc itself or through GLib or libc.  What it does not: allocations made inside a BLAS call.
 * Those belong to the BLAS build and the kernel it picks for the CPU (OpenBLAS 0.3.21's SkylakeX and
 * Cooperlake small-matrix sgemm kernels malloc 1 KiB per call; Haswell's do not), so counting them would
 * make the result depend on the machine.  The test program replaces malloc (tests/alloc-count.h) and wraps
 * cblas_sgemm, the one BLAS entry libcrl imports: an
 * allocation while a BLAS call is in progress is tallied apart and reported, never counted against crl.
 * A BLAS entry libcrl starts importing must be wrapped here too: the test fails if libcrl imports one it
 * does not know (see test_blas_wrapped).
 *
 * Skipped (77) under valgrind and the sanitizers, which replace malloc themselves, and off glibc. */
#define _GNU_SOURCE
#include <stdlib.h>
#include "nn-test.h"

#include "alloc-count.h"
#include "host-fixture.h"

#if ALLOC_COUNT
#include <crl/actor.h>
#include <crl/rnn.h>
#include <crl/value.h>
#include <crl/trainer.h>

#include <cblas.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_long blas_calls;   /* BLAS calls that went through the wrapper while counting */

/* The executable's definition comes first in symbol lookup, so libcrl's calls land here; the real one is the
 * next definition (the BLAS library's).  Linked with --export-dynamic-symbol (core/nn.am). */
typedef void sgemm_fn(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE,
                      const blasint, const blasint, const blasint, const float, const float *, const blasint,
                      const float *, const blasint, const float, float *, const blasint);

void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                 const blasint m, const blasint n, const blasint k, const float alpha, const float *a,
                 const blasint lda, const float *b, const blasint ldb, const float beta, float *c,
                 const blasint ldc)
{
    /* No ck_assert here: Check's passing asserts write to its pipe and allocate. */
    static sgemm_fn *real;
    if (!real)
        real = (sgemm_fn *)dlsym(RTLD_NEXT, "cblas_sgemm");
    if (!real)
        return;   /* test_steady_state fails: the products were not computed, so no blas_calls */
    if (atomic_load(&alloc_counting))
        atomic_fetch_add(&blas_calls, 1);
    atomic_fetch_add(&alloc_blas_active, 1);
    real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    atomic_fetch_sub(&alloc_blas_active, 1);
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
    long seen = 0, in_blas = 0;
    for (int it = 0; it < 8; it++) {
        if (it >= 3)   /* after a warm-up that sizes every cache */
            alloc_count_start();
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
        long n = alloc_count_stop();
        ck_assert_msg(rc == 0, "%s", err.message);
        if (it >= 3) {
            seen += n;
            in_blas += atomic_load(&alloc_blas_calls);
        }
    }
    ck_assert_msg(seen == 0, "%ld heap calls by crl in 5 steady-state steps (%ld more inside BLAS calls, "
                  "not counted)", seen, in_blas);
    /* The exclusion above only means something if libcrl's matrix products went through the wrapper. */
    ck_assert_msg(atomic_load(&blas_calls) > 0, "libcrl's cblas_sgemm calls bypassed the test's wrapper");
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

/* The same for conv networks: a Nature-style encoder with a max-pool and a dueling head, trained (forward,
 * backward to the input, Adam) and acting through a TensorDict module on [B, C, H, W] images. */
START_TEST(test_conv_steady_state)
{
    enum { B = 8 };
    crl_rng rng;
    crl_rng_init(&rng, 2, 0);
    crl_error err;
    static const crl_conv_layer enc[] = { { CRL_CONV2D, 8, 5, 2, 1 }, { CRL_MAXPOOL2D, 0, 2, 2, 0 },
                                          { CRL_CONV2D, 8, 3, 1, 1 } };
    crl_mlp *q = crl_convnet_new("q", 3, SHAPE(2, 20, 20), enc, 3, CRL_ACT_RELU, SHAPE(32), 1, CRL_ACT_RELU, 3, true,
                                 &rng, &err);
    ck_assert_msg(q != NULL, "%s", err.message);
    crl_mlp *qt = crl_mlp_clone(q, "q_target", &err);
    crl_optim *o = crl_optim_new(CRL_OPTIM_ADAM, 1e-3, &err);
    ck_assert_int_eq(crl_optim_add_mlp(o, q, &err), CRL_OK);
    const char *const keys[] = { "pixels", NULL };
    crl_tdmodule *mod = crl_tdmodule_new(qt, keys, "action_value", &err);
    crl_tensor *x = t_rows(B, 800, NULL, &rng), *gq = t_new(CRL_F32, 2, SHAPE(B, 3)), *out = t_new(CRL_F32, 2, SHAPE(B, 3));
    crl_tensor *img = t_new(CRL_F32, 4, SHAPE(B, 2, 20, 20));
    crl_tensor_fill(gq, 0.01);
    crl_tensor_fill(img, 0.5);
    int64_t b = B;
    crl_td *td = crl_td_new(1, &b, &err);
    ck_assert_int_eq(crl_td_set(td, "pixels", img, &err), CRL_OK);
    long seen = 0, in_blas = 0;
    for (int it = 0; it < 8; it++) {
        if (it >= 3)
            alloc_count_start();
        crl_optim_zero_grad(o);
        crl_tensor *gin = NULL;
        int rc = !crl_mlp_forward(q, x, &err) || crl_mlp_backward(q, gq, &gin, &err) ||
                 crl_mlp_infer(q, x, out, &err) || crl_tdmodule_infer(mod, td, &err) || crl_optim_step(o, &err) ||
                 crl_params_soft_update(crl_mlp_params_get(qt), crl_mlp_params_get(q), 0.01, &err);
        long n = alloc_count_stop();
        ck_assert_msg(rc == 0, "%s", err.message);
        if (it >= 3) {
            seen += n;
            in_blas += atomic_load(&alloc_blas_calls);
        }
    }
    ck_assert_msg(seen == 0, "%ld heap calls by crl in 5 steady-state conv steps (%ld more inside BLAS calls, "
                  "not counted)", seen, in_blas);
    crl_td_unref(td);
    UNREF_ALL(x, gq, out, img);
    crl_tdmodule_free(mod);
    crl_optim_free(o);
    crl_mlp_unref(q);
    crl_mlp_unref(qt);
}
END_TEST

/* LSTM and GRU: training through time over [B, T] slices, acting one step at a time through the TensorDict
 * module (reading and writing the recurrent state, resets on is_init), and the optimizer step.  Like an
 * MLP's, a network's infer buffers follow the last infer's size: acting uses one size per network. */
START_TEST(test_steady_state_rnn)
{
    enum { B = 8, T = 5, F = 4, H = 16 };
    crl_rng rng;
    crl_rng_init(&rng, 2, 0);
    crl_error err;
    crl_rnn *l = crl_rnn_new("lstm", CRL_RNN_LSTM, F, H, &rng, &err), *g = crl_rnn_new("gru", CRL_RNN_GRU, F, H, &rng, &err);
    ck_assert(l && g);
    crl_optim *o = crl_optim_new(CRL_OPTIM_ADAM, 1e-3, &err);
    ck_assert_int_eq(crl_optim_add_rnn(o, l, &err), CRL_OK);
    ck_assert_int_eq(crl_optim_add_rnn(o, g, &err), CRL_OK);
    crl_rnn_module *ml = crl_rnn_module_new(l, "observation", "features", &err);
    crl_rnn_module *sq = crl_rnn_module_new(l, "observation", "features", &err);
    ck_assert(ml && sq);
    crl_rnn_module_set_recurrent_mode(sq, true);
    crl_tensor *x = t_new(CRL_F32, 3, SHAPE(B, T, F)), *h0 = t_new(CRL_F32, 2, SHAPE(B, H));
    crl_tensor *init = t_new(CRL_BOOL, 2, SHAPE(B, T)), *gy = t_new(CRL_F32, 3, SHAPE(B, T, H));
    crl_tensor *y = t_new(CRL_F32, 3, SHAPE(B, T, H)), *gout = t_new(CRL_F32, 3, SHAPE(B, T, H));
    crl_tensor_fill(x, 0.3);
    crl_tensor_fill(h0, 0.1);
    crl_tensor_fill(gy, 0.01);
    crl_tensor_fill(gout, 0.01);
    crl_tensor_flat_set(init, 2, 1);
    int64_t b = B;
    crl_td *step = crl_td_new(1, &b, &err), *seq = crl_td_new(2, SHAPE(B, T), &err);
    crl_tensor *obs1 = t_new(CRL_F32, 2, SHAPE(B, F)), *init1 = t_new(CRL_BOOL, 2, SHAPE(B, 1));
    crl_tensor_fill(obs1, 0.2);
    ck_assert_int_eq(crl_td_set(step, "observation", obs1, &err), CRL_OK);
    ck_assert_int_eq(crl_td_set(step, "is_init", init1, &err), CRL_OK);
    ck_assert_int_eq(crl_td_set(seq, "observation", x, &err), CRL_OK);
    long seen = 0;
    for (int it = 0; it < 8; it++) {
        if (it >= 3)
            alloc_count_start();
        crl_optim_zero_grad(o);
        crl_tensor *gin = NULL, *gh = NULL, *gc = NULL;
        int rc = !crl_rnn_forward(l, x, h0, h0, init, &err) ||
                 crl_rnn_backward(l, gy, h0, h0, &gin, &gh, &gc, &err) ||
                 !crl_rnn_forward(g, x, h0, NULL, init, &err) ||
                 crl_rnn_backward(g, gy, NULL, NULL, &gin, &gh, NULL, &err) ||
                 crl_rnn_infer(g, x, NULL, NULL, init, y, NULL, NULL, &err) ||
                 crl_rnn_module_infer(ml, step, &err) ||
                 crl_rnn_module_forward(sq, seq, &err) || crl_rnn_module_backward(sq, gout, &gin, &err);
        crl_optim_clip_grad_norm(o, 1.0);
        rc = rc || crl_optim_step(o, &err);
        long n = alloc_count_stop();
        ck_assert_msg(rc == 0, "%s", err.message);
        if (it >= 3)
            seen += n;
    }
    ck_assert_msg(seen == 0, "%ld heap calls by crl in 5 steady-state recurrent steps", seen);
    crl_td_unref(step);
    crl_td_unref(seq);
    UNREF_ALL(x, h0, init, gy, y, gout, obs1, init1);
    crl_rnn_module_free(ml);
    crl_rnn_module_free(sq);
    crl_optim_free(o);
    crl_rnn_unref(l);
    crl_rnn_unref(g);
}
END_TEST

/* Recurrent DQN's update (the losses plugin, [net.q] type = lstm): the LSTM and its target over [B, T] slices
 * from the stored states, the next-step values, BPTT, td_error and the loss written in place, the target
 * update.  (Acting, like the MLP DQN's, writes fresh output entries into the collector's TensorDict.) */
START_TEST(test_steady_state_drqn_loss)
{
    enum { B = 4, T = 6, F = 3, H = 8 };
    crl_test_host h;
    crl_test_host_open(&h, "losses", "[loss]\ntype = dqn\nnum_cells = 16\ndouble_dqn = true\ntau = 0.01\n"
                                     "[net.q]\ntype = lstm\nhidden_size = 8\n");
    crl_error err = { 0 };
    crl_spec *obs = crl_spec_composite_of(1, "observation", crl_spec_unbounded(CRL_F32, 2, SHAPE(1, F), &err), &err);
    crl_spec *act = crl_spec_composite_of(1, "action", crl_spec_categorical(2, CRL_I64, 1, SHAPE(1), &err), &err);
    crl_spec *ii = crl_spec_categorical(2, CRL_BOOL, 2, SHAPE(1, 1), &err);
    crl_spec *hs = crl_spec_unbounded(CRL_F32, 3, SHAPE(1, 1, H), &err);
    ck_assert_int_eq(crl_spec_composite_set(obs, "is_init", ii, &err), CRL_OK);
    ck_assert_int_eq(crl_spec_composite_set(obs, "recurrent_state_h", hs, &err), CRL_OK);
    ck_assert_int_eq(crl_spec_composite_set(obs, "recurrent_state_c", hs, &err), CRL_OK);
    const crl_loss_ops *ops;
    void *st;
    ck_assert_msg(crl_loss_from_config(h.host, h.cfg, "loss", obs, act, 3, &ops, &st, &err) == CRL_OK, "%s",
                  err.message);
    crl_td *b = crl_td_new(2, SHAPE(B, T), &err), *losses = crl_td_new(0, NULL, &err);
    crl_tensor *ts[] = { t_new(CRL_F32, 3, SHAPE(B, T, F)), t_new(CRL_F32, 3, SHAPE(B, T, F)),
                         t_new(CRL_F32, 3, SHAPE(B, T, 1)), t_new(CRL_I64, 2, SHAPE(B, T)),
                         t_new(CRL_BOOL, 3, SHAPE(B, T, 1)), t_new(CRL_BOOL, 3, SHAPE(B, T, 1)),
                         t_new(CRL_F32, 4, SHAPE(B, T, 1, H)), t_new(CRL_F32, 4, SHAPE(B, T, 1, H)) };
    static const char *const keys[] = { "observation", "next.observation", "next.reward", "action", "is_init",
                                        "next.terminated", "recurrent_state_h", "recurrent_state_c" };
    crl_rng rng;
    crl_rng_init(&rng, 4, 0);
    for (size_t k = 0; k < G_N_ELEMENTS(ts); k++) {
        for (int64_t i = 0; i < crl_tensor_numel(ts[k]); i++)
            crl_tensor_flat_set(ts[k], i, k == 3 ? (double)crl_rng_below(&rng, 2) : k == 4 ? (i % 5 == 0)
                                : k == 5 ? (i % 7 == 6) : crl_rng_range(&rng, -1, 1));
        ck_assert_int_eq(crl_td_set(b, keys[k], ts[k], &err), CRL_OK);
        crl_tensor_unref(ts[k]);
    }
    long seen = 0;
    for (int it = 0; it < 8; it++) {
        if (it >= 3)
            alloc_count_start();
        int rc = ops->forward(st, b, losses, &err) || ops->update(st, &err);
        long n = alloc_count_stop();
        ck_assert_msg(rc == 0, "%s", err.message);
        if (it >= 3)
            seen += n;
    }
    ck_assert_msg(seen == 0, "%ld heap calls by crl in 5 steady-state recurrent DQN updates", seen);
    ck_assert_ptr_nonnull(crl_td_get(b, "td_error"));
    crl_td_unref(b);
    crl_td_unref(losses);
    ops->destroy(st);
    crl_spec_unref(ii);
    crl_spec_unref(hs);
    crl_spec_unref(obs);
    crl_spec_unref(act);
    crl_test_host_close(&h);
}
END_TEST

/* The counter is live: an allocation crl makes while counting is counted, and one made while a BLAS call is
 * in progress is tallied apart.  (A steady-state path that allocates fails test_steady_state: checked by
 * adding a malloc to crl__linear_forward.) */
START_TEST(test_counter_sees_crl)
{
    crl_error err;
    alloc_count_start();
    crl_tensor *t = crl_tensor_new(CRL_F32, 1, SHAPE(1000), &err);
    atomic_fetch_add(&alloc_blas_active, 1);
    void *volatile inside = malloc(64);
    atomic_fetch_sub(&alloc_blas_active, 1);
    long n = alloc_count_stop();
    ck_assert_ptr_nonnull(t);
    ck_assert_msg(n >= 1, "crl_tensor_new's allocation was not counted");
    ck_assert_int_eq(atomic_load(&alloc_blas_calls), 1);
    free(inside);
    crl_tensor_unref(t);
}
END_TEST

/* Every BLAS entry libcrl imports is one this program wraps: read libcrl's dynamic symbol table from its file
 * and look for undefined cblas_* and Fortran BLAS (s/d gemm_, gemv_, ...) references. */
START_TEST(test_blas_wrapped)
{
    Dl_info info;
    ck_assert_msg(dladdr((void *)crl_tensor_new, &info) && info.dli_fname, "dladdr(crl_tensor_new) failed");
    int fd = open(info.dli_fname, O_RDONLY | O_CLOEXEC);
    ck_assert_msg(fd >= 0, "cannot open %s", info.dli_fname);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    const unsigned char *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    ck_assert_msg(f != MAP_FAILED, "cannot map %s", info.dli_fname);
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)f;
    ck_assert_msg(memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_shoff + (size_t)eh->e_shnum *
                  sizeof(ElfW(Shdr)) <= (size_t)st.st_size, "%s: not an ELF file with section headers",
                  info.dli_fname);
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(f + eh->e_shoff);
    int found = 0, imports = 0;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        found = 1;
        const ElfW(Sym) *sym = (const ElfW(Sym) *)(f + sh[i].sh_offset);
        const char *names = (const char *)(f + sh[sh[i].sh_link].sh_offset);
        for (size_t j = 0; j < sh[i].sh_size / sizeof *sym; j++) {
            const char *name = names + sym[j].st_name;
            if (sym[j].st_shndx != SHN_UNDEF)
                continue;
            size_t len = strlen(name);
            bool fortran = len >= 5 && len <= 7 && strchr("sdcz", name[0]) && name[len - 1] == '_';
            if (strncmp(name, "cblas_", 6) == 0 || fortran) {
                ck_assert_msg(strcmp(name, "cblas_sgemm") == 0, "libcrl imports the BLAS entry %s, which "
                              "tests/test_nn_alloc.c does not wrap: wrap it as cblas_sgemm is", name);
                imports++;
            }
        }
    }
    munmap((void *)f, (size_t)st.st_size);
    ck_assert_msg(found, "%s has no dynamic symbol table", info.dli_fname);
    ck_assert_msg(imports == 1, "libcrl imports %d BLAS entries, expected cblas_sgemm alone: update this test to what libcrl uses", imports);
}
END_TEST

int main(void)
{
    if (getenv("CRL_TEST_VALGRIND") || !alloc_count_works())
        return 77;
    return RUN_TESTS("nn_alloc", test_steady_state, test_conv_steady_state, test_steady_state_rnn, test_steady_state_drqn_loss,
                     test_counter_sees_crl, test_blas_wrapped);
}
#else
int main(void) { return 77; }
#endif
