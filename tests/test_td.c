/* Check suite: crl_td (TensorDict) keys, nesting, handles, operations and TorchRL repr. */
#include <check.h>
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <crl/crl.h>

/* For crl__td_stamp / crl__td_layout (static inline, read the struct). */
#include "td-private.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static crl_tensor *mk(crl_dtype dt, int ndim, const int64_t *shape)
{
    crl_error err;
    crl_tensor *t = crl_tensor_new(dt, ndim, shape, &err);
    ck_assert_msg(t != NULL, "crl_tensor_new: %s", err.message);
    return t;
}

static crl_td *mktd(int ndim, const int64_t *shape)
{
    crl_error err;
    crl_td *td = crl_td_new(ndim, shape, &err);
    ck_assert_msg(td != NULL, "crl_td_new: %s", err.message);
    return td;
}

/* Set a new tensor (filled with base, base+1, ...) and drop our reference. */
static crl_tensor *put(crl_td *td, const char *key, crl_dtype dt, int ndim, const int64_t *shape,
                       double base)
{
    crl_tensor *t = mk(dt, ndim, shape);
    for (int64_t i = 0; i < crl_tensor_numel(t); i++)
        crl_tensor_flat_set(t, i, base + (double)i);
    crl_error err;
    ck_assert_msg(crl_td_set(td, key, t, &err) == CRL_OK, "set %s: %s", key, err.message);
    crl_tensor_unref(t);
    return t;
}

static void assert_msg_has(const crl_error *err, const char *needle)
{
    ck_assert_msg(strstr(err->message, needle) != NULL, "message '%s' lacks '%s'", err->message,
                  needle);
}

/* ---- TorchRL layouts, copied from the seed (003, env.step and rollout) --- */

static const char *const STEP_REPR =
    "TensorDict(\n"
    "    fields={\n"
    "        action: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.float32, is_shared=False),\n"
    "        done: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.bool, is_shared=False),\n"
    "        next: TensorDict(\n"
    "            fields={\n"
    "                done: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.bool, is_shared=False),\n"
    "                observation: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, is_shared=False),\n"
    "                reward: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.float32, is_shared=False),\n"
    "                terminated: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.bool, is_shared=False),\n"
    "                truncated: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.bool, is_shared=False)},\n"
    "            batch_size=torch.Size([]),\n"
    "            device=cpu,\n"
    "            is_shared=False),\n"
    "        observation: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, is_shared=False),\n"
    "        terminated: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.bool, is_shared=False),\n"
    "        truncated: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.bool, is_shared=False)},\n"
    "    batch_size=torch.Size([]),\n"
    "    device=cpu,\n"
    "    is_shared=False)";

static const char *const BRIEF_REPR =
    "TensorDict(\n"
    "    fields={\n"
    "        action: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.float32, is_shared=False),\n"
    "        next: TensorDict(\n"
    "            fields={\n"
    "                done: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.bool, is_shared=False),\n"
    "                reward: Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.float32, is_shared=False)},\n"
    "            batch_size=torch.Size([]),\n"
    "            device=cpu,\n"
    "            is_shared=False)},\n"
    "    batch_size=torch.Size([]),\n"
    "    device=cpu,\n"
    "    is_shared=False)";

static const char *const ROLLOUT_REPR =
    "TensorDict(\n"
    "    fields={\n"
    "        action: Tensor(shape=torch.Size([3, 20, 1]), device=cpu, dtype=torch.float32, is_shared=False),\n"
    "        done: Tensor(shape=torch.Size([3, 20, 1]), device=cpu, dtype=torch.bool, is_shared=False),\n"
    "        next: TensorDict(\n"
    "            fields={\n"
    "                done: Tensor(shape=torch.Size([3, 20, 1]), device=cpu, dtype=torch.bool, is_shared=False),\n"
    "                observation: Tensor(shape=torch.Size([3, 20, 3]), device=cpu, dtype=torch.float32, is_shared=False),\n"
    "                reward: Tensor(shape=torch.Size([3, 20, 1]), device=cpu, dtype=torch.float32, is_shared=False),\n"
    "                terminated: Tensor(shape=torch.Size([3, 20, 1]), device=cpu, dtype=torch.bool, is_shared=False),\n"
    "                truncated: Tensor(shape=torch.Size([3, 20, 1]), device=cpu, dtype=torch.bool, is_shared=False)},\n"
    "            batch_size=torch.Size([3, 20]),\n"
    "            device=cpu,\n"
    "            is_shared=False),\n"
    "        observation: Tensor(shape=torch.Size([3, 20, 3]), device=cpu, dtype=torch.float32, is_shared=False),\n"
    "        terminated: Tensor(shape=torch.Size([3, 20, 1]), device=cpu, dtype=torch.bool, is_shared=False),\n"
    "        truncated: Tensor(shape=torch.Size([3, 20, 1]), device=cpu, dtype=torch.bool, is_shared=False)},\n"
    "    batch_size=torch.Size([3, 20]),\n"
    "    device=cpu,\n"
    "    is_shared=False)";

/* The step layout: keys set in a scrambled order on purpose. */
static crl_td *step_td(int bn, const int64_t *batch)
{
    crl_td *td = mktd(bn, batch);
    int64_t s1[CRL_MAX_DIMS], s3[CRL_MAX_DIMS];
    for (int i = 0; i < bn; i++)
        s1[i] = s3[i] = batch[i];
    s1[bn] = 1;
    s3[bn] = 3;
    put(td, "next.truncated", CRL_BOOL, bn + 1, s1, 0);
    put(td, "observation", CRL_F32, bn + 1, s3, 0);
    put(td, "next.reward", CRL_F32, bn + 1, s1, 10);
    put(td, "done", CRL_BOOL, bn + 1, s1, 0);
    put(td, "action", CRL_F32, bn + 1, s1, 100);
    put(td, "next.observation", CRL_F32, bn + 1, s3, 1000);
    put(td, "terminated", CRL_BOOL, bn + 1, s1, 0);
    put(td, "next.done", CRL_BOOL, bn + 1, s1, 0);
    put(td, "truncated", CRL_BOOL, bn + 1, s1, 0);
    put(td, "next.terminated", CRL_BOOL, bn + 1, s1, 0);
    return td;
}

/* ---- construction ------------------------------------------------------ */

START_TEST(new_and_batch_shape)
{
    crl_td *td = mktd(2, SHAPE(3, 20));
    ck_assert_int_eq(crl_td_batch_ndim(td), 2);
    ck_assert_int_eq(crl_td_batch_shape(td)[0], 3);
    ck_assert_int_eq(crl_td_batch_shape(td)[1], 20);
    ck_assert_int_eq(crl_td_device(td).type, CRL_DEVICE_CPU);
    ck_assert_uint_eq(crl_td_len(td), 0);
    ck_assert_ptr_eq(crl_td_ref(td), td);
    crl_td_unref(td);
    crl_td_unref(td);
    crl_td_unref(NULL);
    ck_assert_ptr_null(crl_td_ref(NULL));

    crl_error err;
    ck_assert_ptr_null(crl_td_new(9, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1), &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_td_new(-1, NULL, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_td_new(1, NULL, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_td_new(2, SHAPE(2, -1), &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    assert_msg_has(&err, "dim 1");
    crl_td *s = crl_td_new(0, NULL, &err);
    ck_assert_int_eq(crl_td_batch_ndim(s), 0);
    crl_td_unref(s);
}
END_TEST

START_TEST(set_get_nested)
{
    crl_td *td = mktd(1, SHAPE(4));
    crl_error err;
    crl_tensor *r = put(td, "next.reward", CRL_F32, 2, SHAPE(4, 1), 0);
    ck_assert(crl_td_has(td, "next"));
    ck_assert(crl_td_has(td, "next.reward"));
    ck_assert(!crl_td_has(td, "next.done"));
    ck_assert(!crl_td_has(td, "reward"));
    ck_assert_ptr_eq(crl_td_get(td, "next.reward"), r);
    ck_assert_ptr_null(crl_td_get(td, "next")); /* a TensorDict, not a tensor */
    crl_td *next = crl_td_get_td(td, "next");
    ck_assert_ptr_nonnull(next);
    ck_assert_ptr_null(crl_td_get_td(td, "next.reward"));
    /* The intermediate took the parent's batch shape. */
    ck_assert_int_eq(crl_td_batch_ndim(next), 1);
    ck_assert_int_eq(crl_td_batch_shape(next)[0], 4);
    ck_assert_ptr_eq(crl_td_get(next, "reward"), r);
    ck_assert_ptr_null(crl_td_get(td, "next.reward.x"));
    ck_assert_ptr_null(crl_td_get(NULL, "a"));
    ck_assert_ptr_null(crl_td_get(td, NULL));

    /* Replace keeps one entry and shares the new tensor. */
    crl_tensor *r2 = mk(CRL_F32, 2, SHAPE(4, 1));
    ck_assert_int_eq(crl_td_set(td, "next.reward", r2, &err), CRL_OK);
    ck_assert_ptr_eq(crl_td_get(td, "next.reward"), r2);
    ck_assert_uint_eq(crl_td_len(next), 1);
    crl_tensor_unref(r2);

    /* Shape errors name the key and both shapes. */
    crl_tensor *bad = mk(CRL_F32, 2, SHAPE(3, 1));
    ck_assert_int_eq(crl_td_set(td, "next.obs", bad, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "'next.obs'");
    assert_msg_has(&err, "[4]");
    assert_msg_has(&err, "[3, 1]");
    ck_assert(!crl_td_has(td, "next.obs"));
    /* A failed dotted set creates no intermediates. */
    ck_assert_int_eq(crl_td_set(td, "fresh.sub.obs", bad, &err), CRL_E_SHAPE);
    ck_assert(!crl_td_has(td, "fresh"));
    crl_tensor *scalar = mk(CRL_F32, 0, NULL);
    ck_assert_int_eq(crl_td_set(td, "s", scalar, &err), CRL_E_SHAPE);
    crl_tensor_unref(scalar);
    crl_tensor_unref(bad);

    crl_tensor *ok = mk(CRL_I64, 1, SHAPE(4));
    ck_assert_int_eq(crl_td_set(td, "next", ok, &err), CRL_E_EXISTS);
    assert_msg_has(&err, "'next'");
    ck_assert_int_eq(crl_td_set(td, "next.reward.deeper", ok, &err), CRL_E_EXISTS);
    assert_msg_has(&err, "'next.reward'");
    const char *bad_keys[] = {"", ".a", "a.", "a..b", "."};
    for (size_t i = 0; i < G_N_ELEMENTS(bad_keys); i++) {
        ck_assert_int_eq(crl_td_set(td, bad_keys[i], ok, &err), CRL_E_INVALID);
        ck_assert(strstr(err.message, "empty") != NULL);
    }
    ck_assert_int_eq(crl_td_set(td, NULL, ok, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_td_set(td, "x", NULL, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_td_set(NULL, "x", ok, &err), CRL_E_INVALID);
    /* Deep dotted keys create each level. */
    ck_assert_int_eq(crl_td_set(td, "a.b.c.d", ok, &err), CRL_OK);
    ck_assert_ptr_eq(crl_td_get(td, "a.b.c.d"), ok);
    ck_assert_ptr_nonnull(crl_td_get_td(td, "a.b.c"));
    crl_tensor_unref(ok);
    crl_td_unref(td);
}
END_TEST

START_TEST(sorted_iteration)
{
    crl_td *td = mktd(0, NULL);
    const char *order[] = {"truncated", "a0", "Zeta", "action", "a", "next.done", "b_c"};
    for (size_t i = 0; i < G_N_ELEMENTS(order); i++)
        put(td, order[i], CRL_F32, 1, SHAPE(1), 0);
    const char *sorted[] = {"Zeta", "a", "a0", "action", "b_c", "next", "truncated"};
    ck_assert_uint_eq(crl_td_len(td), G_N_ELEMENTS(sorted));
    for (size_t i = 0; i < G_N_ELEMENTS(sorted); i++) {
        ck_assert_str_eq(crl_td_key_at(td, i), sorted[i]);
        bool is_td = strcmp(sorted[i], "next") == 0;
        ck_assert((crl_td_tensor_at(td, i) != NULL) != is_td);
        ck_assert((crl_td_td_at(td, i) != NULL) == is_td);
    }
    ck_assert_ptr_null(crl_td_key_at(td, 7));
    ck_assert_ptr_null(crl_td_tensor_at(td, 7));
    ck_assert_ptr_null(crl_td_td_at(td, 7));
    ck_assert_uint_eq(crl_td_len(NULL), 0);
    /* Lookups on a td big enough for the binary-search path. */
    for (int i = 0; i < 40; i++) {
        char k[16];
        g_snprintf(k, sizeof k, "k%02d", 39 - i);
        put(td, k, CRL_U8, 0, NULL, i);
    }
    crl_td_key *h = crl_td_key_new("k07", NULL);
    ck_assert(crl_tensor_get_f64(crl_td_get_k(td, h), NULL) == 32);
    ck_assert(crl_tensor_get_f64(crl_td_get(td, "k07"), NULL) == 32);
    for (size_t i = 1; i < crl_td_len(td); i++)
        ck_assert_int_lt(strcmp(crl_td_key_at(td, i - 1), crl_td_key_at(td, i)), 0);
    crl_td_key_free(h);
    crl_td_unref(td);
}
END_TEST

START_TEST(del_entries)
{
    crl_td *td = step_td(0, NULL);
    crl_error err;
    ck_assert_int_eq(crl_td_del(td, "next.reward", &err), CRL_OK);
    ck_assert(!crl_td_has(td, "next.reward"));
    ck_assert_uint_eq(crl_td_len(crl_td_get_td(td, "next")), 4);
    ck_assert_int_eq(crl_td_del(td, "next.reward", &err), CRL_E_NOT_FOUND);
    assert_msg_has(&err, "'next.reward'");
    assert_msg_has(&err, "action, done, next, next.done, next.observation");
    ck_assert_int_eq(crl_td_del(td, "nope.x", &err), CRL_E_NOT_FOUND);
    ck_assert_int_eq(crl_td_del(td, "action.x", &err), CRL_E_NOT_FOUND);
    ck_assert_int_eq(crl_td_del(td, "next", &err), CRL_OK);
    ck_assert(!crl_td_has(td, "next.done"));
    ck_assert_uint_eq(crl_td_len(td), 5);
    ck_assert_int_eq(crl_td_del(td, "a..b", &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_td_del(NULL, "a", &err), CRL_E_INVALID);
    crl_td *empty = mktd(0, NULL);
    ck_assert_int_eq(crl_td_del(empty, "x", &err), CRL_E_NOT_FOUND);
    assert_msg_has(&err, "(none)");
    crl_td_unref(empty);
    crl_td_unref(td);
}
END_TEST

START_TEST(set_td_rules)
{
    crl_td *td = mktd(1, SHAPE(2));
    crl_td *sub = mktd(2, SHAPE(2, 5));
    crl_error err;
    put(sub, "pixels", CRL_U8, 3, SHAPE(2, 5, 3), 0);
    ck_assert_int_eq(crl_td_set_td(td, "obs.cam", sub, &err), CRL_OK);
    ck_assert_ptr_eq(crl_td_get_td(td, "obs.cam"), sub);
    ck_assert_ptr_nonnull(crl_td_get(td, "obs.cam.pixels"));
    ck_assert_int_eq(crl_td_batch_ndim(crl_td_get_td(td, "obs")), 1);

    crl_td *wrong = mktd(1, SHAPE(3));
    ck_assert_int_eq(crl_td_set_td(td, "w", wrong, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "'w'");
    assert_msg_has(&err, "[2]");
    assert_msg_has(&err, "[3]");
    crl_td *shorter = mktd(0, NULL);
    ck_assert_int_eq(crl_td_set_td(td, "w", shorter, &err), CRL_E_SHAPE);
    /* Cycles are refused. */
    ck_assert_int_eq(crl_td_set_td(td, "self", td, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_td_set_td(sub, "parent", td, &err), CRL_E_INVALID);
    assert_msg_has(&err, "itself");
    ck_assert_int_eq(crl_td_set_td(td, "obs.cam.again", sub, &err), CRL_E_INVALID);
    /* Tensor vs TensorDict slots. */
    put(td, "t", CRL_F32, 1, SHAPE(2), 0);
    crl_td *other = mktd(1, SHAPE(2));
    ck_assert_int_eq(crl_td_set_td(td, "t", other, &err), CRL_E_EXISTS);
    assert_msg_has(&err, "'t'");
    ck_assert_int_eq(crl_td_set_td(td, "obs.cam", other, &err), CRL_OK); /* td replaces td */
    ck_assert_ptr_eq(crl_td_get_td(td, "obs.cam"), other);
    ck_assert_int_eq(crl_td_set_td(td, "x", NULL, &err), CRL_E_INVALID);
    crl_td_unref(other);
    crl_td_unref(shorter);
    crl_td_unref(wrong);
    crl_td_unref(sub);
    crl_td_unref(td);
}
END_TEST

/* ---- key handles ------------------------------------------------------- */

START_TEST(key_handles)
{
    crl_error err;
    crl_td_key *k = crl_td_key_new("next.observation", &err);
    ck_assert_ptr_nonnull(k);
    ck_assert_str_eq(crl_td_key_str(k), "next.observation");
    ck_assert_ptr_null(crl_td_key_new("", &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_td_key_new("next..obs", &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    assert_msg_has(&err, "next..obs");
    ck_assert_ptr_null(crl_td_key_new(NULL, &err));
    ck_assert_ptr_null(crl_td_key_str(NULL));
    crl_td_key_free(NULL);

    crl_td *td = mktd(1, SHAPE(2));
    ck_assert_ptr_null(crl_td_get_k(td, k));
    crl_tensor *obs = mk(CRL_F32, 2, SHAPE(2, 3));
    /* set_k creates the path when missing. */
    ck_assert_int_eq(crl_td_set_k(td, k, obs, &err), CRL_OK);
    ck_assert_ptr_eq(crl_td_get_k(td, k), obs);
    ck_assert_ptr_eq(crl_td_get(td, "next.observation"), obs);
    ck_assert_int_eq(crl_td_batch_shape(crl_td_get_td(td, "next"))[0], 2);
    crl_td_key *nk = crl_td_key_new("next", NULL);
    ck_assert_ptr_null(crl_td_get_k(td, nk)); /* names a TensorDict */
    ck_assert_int_eq(crl_td_set_k(td, nk, obs, &err), CRL_E_EXISTS);
    crl_td_key *deep = crl_td_key_new("next.observation.x", NULL);
    ck_assert_ptr_null(crl_td_get_k(td, deep));
    ck_assert_int_eq(crl_td_set_k(td, deep, obs, &err), CRL_E_EXISTS);
    crl_tensor *wrong = mk(CRL_F32, 1, SHAPE(5));
    ck_assert_int_eq(crl_td_set_k(td, k, wrong, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "'next.observation'");
    assert_msg_has(&err, "[5]");
    ck_assert_ptr_eq(crl_td_get_k(td, k), obs); /* unchanged after the error */
    ck_assert_int_eq(crl_td_set_k(td, NULL, obs, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_td_set_k(td, k, NULL, &err), CRL_E_INVALID);
    ck_assert_ptr_null(crl_td_get_k(NULL, k));
    ck_assert_ptr_null(crl_td_get_k(td, NULL));
    /* Handles made from equal strings are interchangeable. */
    crl_td_key *k2 = crl_td_key_new("next.observation", NULL);
    ck_assert_ptr_eq(crl_td_get_k(td, k2), obs);
    crl_td_key_free(k2);
    /* One handle on tds of different layouts (and after deletions) still
     * finds the right entry every time. */
    crl_td *t1 = mktd(0, NULL), *t2 = mktd(0, NULL);
    crl_tensor *x1 = put(t1, "x", CRL_F32, 0, NULL, 1);
    put(t1, "a", CRL_F32, 0, NULL, 0);
    put(t1, "b", CRL_F32, 0, NULL, 0);
    crl_tensor *x2 = put(t2, "x", CRL_F32, 0, NULL, 2);
    put(t2, "y", CRL_F32, 0, NULL, 0);
    crl_td_key *kx = crl_td_key_new("x", NULL);
    for (int i = 0; i < 4; i++) {
        ck_assert_ptr_eq(crl_td_get_k(t1, kx), x1);
        ck_assert_ptr_eq(crl_td_get_k(t2, kx), x2);
    }
    crl_td_del(t1, "a", NULL);
    crl_td_del(t1, "b", NULL);
    ck_assert_ptr_eq(crl_td_get_k(t1, kx), x1);
    crl_td_del(t1, "x", NULL);
    ck_assert_ptr_null(crl_td_get_k(t1, kx));
    ck_assert_ptr_eq(crl_td_get_k(t2, kx), x2);
    crl_td_key_free(kx);
    crl_td_unref(t1);
    crl_td_unref(t2);
    crl_tensor_unref(wrong);
    crl_td_key_free(deep);
    crl_td_key_free(nk);
    crl_tensor_unref(obs);
    crl_td_key_free(k);
    crl_td_unref(td);
}
END_TEST

START_TEST(set_k_replaces_in_place)
{
    crl_td *td = step_td(1, SHAPE(4));
    crl_error err;
    crl_td_key *kr = crl_td_key_new("next.reward", &err);
    crl_td_key *ka = crl_td_key_new("action", &err);
    crl_tensor *a = mk(CRL_F32, 2, SHAPE(4, 1));
    crl_tensor *b = mk(CRL_F32, 2, SHAPE(4, 1));
    crl_td *next = crl_td_get_td(td, "next");
    size_t len = crl_td_len(td), nlen = crl_td_len(next);
    size_t ri = 0;
    while (strcmp(crl_td_key_at(next, ri), "reward") != 0)
        ri++;
    for (int i = 0; i < 100000; i++) {
        crl_tensor *t = (i & 1) ? b : a;
        ck_assert_int_eq(crl_td_set_k(td, kr, t, &err), CRL_OK);
        ck_assert_int_eq(crl_td_set_k(td, ka, t, &err), CRL_OK);
        if (crl_td_get_k(td, kr) != t || crl_td_get_k(td, ka) != t)
            ck_abort_msg("iteration %d: get_k returned another tensor", i);
    }
    /* The same entries were reused: no growth, same slots, same sub-td. */
    ck_assert_uint_eq(crl_td_len(td), len);
    ck_assert_uint_eq(crl_td_len(next), nlen);
    ck_assert_ptr_eq(crl_td_get_td(td, "next"), next);
    ck_assert_str_eq(crl_td_key_at(next, ri), "reward");
    ck_assert_ptr_eq(crl_td_tensor_at(next, ri), b);
    ck_assert_ptr_eq(crl_td_get(td, "action"), b);
    /* The td holds its own references: dropping ours keeps b alive. */
    crl_tensor_unref(a);
    crl_tensor_unref(b);
    crl_tensor_fill(crl_td_get_k(td, kr), 2.5);
    ck_assert(crl_tensor_flat_get(crl_td_get(td, "action"), 3) == 2.5);
    crl_td_key_free(kr);
    crl_td_key_free(ka);
    crl_td_unref(td);
}
END_TEST

START_TEST(leaf_keys_order)
{
    crl_td *td = step_td(0, NULL);
    crl_td *empty_sub = mktd(0, NULL);
    crl_td_set_td(td, "info", empty_sub, NULL);
    crl_td_unref(empty_sub);
    crl_error err;
    char **keys = crl_td_leaf_keys(td, &err);
    const char *want[] = {"action", "done", "next.done", "next.observation", "next.reward",
                          "next.terminated", "next.truncated", "observation", "terminated",
                          "truncated"};
    size_t n = 0;
    while (keys[n])
        n++;
    ck_assert_uint_eq(n, G_N_ELEMENTS(want));
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(keys[i], want[i]);
    crl_free(keys);
    crl_td *e = mktd(0, NULL);
    keys = crl_td_leaf_keys(e, &err);
    ck_assert_ptr_null(keys[0]);
    crl_free(keys);
    crl_td_unref(e);
    ck_assert_ptr_null(crl_td_leaf_keys(NULL, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    crl_td_unref(td);
}
END_TEST

/* ---- repr -------------------------------------------------------------- */

START_TEST(repr_matches_torchrl)
{
    crl_td *td = step_td(0, NULL);
    char *r = crl_td_repr(td);
    ck_assert_str_eq(r, STEP_REPR);
    crl_free(r);
    crl_td_unref(td);

    td = mktd(0, NULL);
    put(td, "next.reward", CRL_F32, 1, SHAPE(1), 0);
    put(td, "action", CRL_F32, 1, SHAPE(1), 0);
    put(td, "next.done", CRL_BOOL, 1, SHAPE(1), 0);
    r = crl_td_repr(td);
    ck_assert_str_eq(r, BRIEF_REPR);
    crl_free(r);
    crl_td_unref(td);

    td = step_td(2, SHAPE(3, 20));
    r = crl_td_repr(td);
    ck_assert_str_eq(r, ROLLOUT_REPR);
    crl_free(r);
    crl_td_unref(td);
}
END_TEST

START_TEST(repr_empty_shared_and_sorting)
{
    crl_td *td = mktd(0, NULL);
    char *r = crl_td_repr(td);
    ck_assert_str_eq(r, "TensorDict(\n"
                        "    fields={\n"
                        "    },\n"
                        "    batch_size=torch.Size([]),\n"
                        "    device=cpu,\n"
                        "    is_shared=False)");
    crl_free(r);
    /* A nested empty td: textwrap.indent leaves the blank line alone. */
    crl_td *sub = mktd(1, SHAPE(2));
    crl_td *outer = mktd(1, SHAPE(2));
    crl_td_set_td(outer, "info", sub, NULL);
    r = crl_td_repr(outer);
    ck_assert_str_eq(r, "TensorDict(\n"
                        "    fields={\n"
                        "        info: TensorDict(\n"
                        "            fields={\n"
                        "            },\n"
                        "            batch_size=torch.Size([2]),\n"
                        "            device=cpu,\n"
                        "            is_shared=False)},\n"
                        "    batch_size=torch.Size([2]),\n"
                        "    device=cpu,\n"
                        "    is_shared=False)");
    crl_free(r);
    crl_td_unref(outer);
    crl_td_unref(sub);

    /* Shared leaves print is_shared=True, and so does a td of only shared leaves. */
    crl_error err;
    crl_tensor *sh = crl_tensor_new_shared(CRL_F32, 1, SHAPE(2), &err);
    crl_td_set(td, "x", sh, &err);
    crl_tensor_unref(sh);
    r = crl_td_repr(td);
    ck_assert_str_eq(r, "TensorDict(\n"
                        "    fields={\n"
                        "        x: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=True)},\n"
                        "    batch_size=torch.Size([]),\n"
                        "    device=cpu,\n"
                        "    is_shared=True)");
    crl_free(r);
    /* TorchRL sorts the "key: value" strings, so "x0: ..." precedes "x: ...". */
    put(td, "x0", CRL_I64, 0, NULL, 0);
    ck_assert_str_eq(crl_td_key_at(td, 0), "x");
    r = crl_td_repr(td);
    ck_assert_str_eq(r, "TensorDict(\n"
                        "    fields={\n"
                        "        x0: Tensor(shape=torch.Size([]), device=cpu, dtype=torch.int64, is_shared=False),\n"
                        "        x: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=True)},\n"
                        "    batch_size=torch.Size([]),\n"
                        "    device=cpu,\n"
                        "    is_shared=False)");
    crl_free(r);
    r = crl_td_repr(NULL);
    ck_assert_str_eq(r, "None");
    crl_free(r);
    crl_td_unref(td);
}
END_TEST

/* ---- select / exclude / rename / update -------------------------------- */

START_TEST(select_exclude)
{
    crl_td *td = step_td(1, SHAPE(2));
    crl_error err;
    const char *keys[] = {"action", "next.reward", NULL};
    crl_td *s = crl_td_select(td, keys, true, &err);
    ck_assert_msg(s != NULL, "%s", err.message);
    ck_assert_uint_eq(crl_td_len(s), 2);
    ck_assert_ptr_eq(crl_td_get(s, "action"), crl_td_get(td, "action")); /* shared */
    ck_assert_ptr_eq(crl_td_get(s, "next.reward"), crl_td_get(td, "next.reward"));
    ck_assert_uint_eq(crl_td_len(crl_td_get_td(s, "next")), 1);
    ck_assert_ptr_ne(crl_td_get_td(s, "next"), crl_td_get_td(td, "next"));
    ck_assert_int_eq(crl_td_batch_shape(s)[0], 2);
    crl_td_unref(s);

    const char *whole[] = {"next", NULL};
    s = crl_td_select(td, whole, true, &err);
    ck_assert_uint_eq(crl_td_len(crl_td_get_td(s, "next")), 5);
    /* The nested td is a new structure: deleting from it leaves td alone. */
    ck_assert_int_eq(crl_td_del(s, "next.done", &err), CRL_OK);
    ck_assert(crl_td_has(td, "next.done"));
    crl_td_unref(s);

    const char *missing[] = {"action", "next.nope", NULL};
    ck_assert_ptr_null(crl_td_select(td, missing, true, &err));
    ck_assert_int_eq(err.code, CRL_E_NOT_FOUND);
    assert_msg_has(&err, "'next.nope'");
    s = crl_td_select(td, missing, false, &err);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(crl_td_len(s), 1);
    ck_assert(!crl_td_has(s, "next"));
    crl_td_unref(s);
    const char *badk[] = {"a..b", NULL};
    ck_assert_ptr_null(crl_td_select(td, badk, false, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_td_select(td, NULL, false, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);

    const char *ex[] = {"next.reward", "observation", "not.there", NULL};
    crl_td *e = crl_td_exclude(td, ex, &err);
    ck_assert_ptr_nonnull(e);
    ck_assert(!crl_td_has(e, "next.reward"));
    ck_assert(!crl_td_has(e, "observation"));
    ck_assert(crl_td_has(e, "next.done"));
    ck_assert(crl_td_has(td, "next.reward"));
    ck_assert(crl_td_has(td, "observation"));
    ck_assert_uint_eq(crl_td_len(e), crl_td_len(td) - 1);
    ck_assert_ptr_eq(crl_td_get(e, "action"), crl_td_get(td, "action"));
    crl_td_unref(e);
    ck_assert_ptr_null(crl_td_exclude(td, badk, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    crl_td_unref(td);
}
END_TEST

START_TEST(rename_entries)
{
    crl_td *td = step_td(1, SHAPE(2));
    crl_error err;
    crl_tensor *obs = crl_td_get(td, "observation");
    ck_assert_int_eq(crl_td_rename(td, "observation", "pixels", &err), CRL_OK);
    ck_assert(!crl_td_has(td, "observation"));
    ck_assert_ptr_eq(crl_td_get(td, "pixels"), obs);
    /* Across levels, and whole sub-tds. */
    ck_assert_int_eq(crl_td_rename(td, "next.reward", "stats.reward", &err), CRL_OK);
    ck_assert_ptr_nonnull(crl_td_get(td, "stats.reward"));
    ck_assert(!crl_td_has(td, "next.reward"));
    crl_td *next = crl_td_get_td(td, "next");
    ck_assert_int_eq(crl_td_rename(td, "next", "later", &err), CRL_OK);
    ck_assert_ptr_eq(crl_td_get_td(td, "later"), next);

    ck_assert_int_eq(crl_td_rename(td, "pixels", "action", &err), CRL_E_EXISTS);
    assert_msg_has(&err, "'action'");
    ck_assert_int_eq(crl_td_rename(td, "nope", "x", &err), CRL_E_NOT_FOUND);
    assert_msg_has(&err, "'nope'");
    ck_assert_int_eq(crl_td_rename(td, "later", "later.inner", &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_td_rename(td, "action", "pixels.sub", &err), CRL_E_EXISTS);
    ck_assert_int_eq(crl_td_rename(td, "action", "", &err), CRL_E_INVALID);
    ck_assert(crl_td_has(td, "action"));
    /* Into a sub-td with a longer batch shape that the tensor does not fit. */
    crl_td *deep = mktd(2, SHAPE(2, 7));
    crl_td_set_td(td, "deep", deep, &err);
    crl_td_unref(deep);
    ck_assert_int_eq(crl_td_rename(td, "action", "deep.action", &err), CRL_E_SHAPE);
    assert_msg_has(&err, "deep.action");
    ck_assert(crl_td_has(td, "action"));
    crl_td_unref(td);
}
END_TEST

START_TEST(update_shares)
{
    crl_td *dst = mktd(1, SHAPE(2));
    put(dst, "keep", CRL_F32, 1, SHAPE(2), 0);
    put(dst, "next.done", CRL_BOOL, 1, SHAPE(2), 0);
    crl_td *src = step_td(1, SHAPE(2));
    crl_error err;
    ck_assert_int_eq(crl_td_update(dst, src, &err), CRL_OK);
    ck_assert(crl_td_has(dst, "keep"));
    ck_assert_ptr_eq(crl_td_get(dst, "next.done"), crl_td_get(src, "next.done"));
    ck_assert_ptr_eq(crl_td_get(dst, "next.reward"), crl_td_get(src, "next.reward"));
    ck_assert_ptr_ne(crl_td_get_td(dst, "next"), crl_td_get_td(src, "next"));
    ck_assert_uint_eq(crl_td_len(dst), crl_td_len(src) + 1);
    ck_assert_int_eq(crl_td_update(dst, dst, &err), CRL_OK);

    crl_td *clash = mktd(1, SHAPE(2));
    put(clash, "next", CRL_F32, 1, SHAPE(2), 0);
    ck_assert_int_eq(crl_td_update(dst, clash, &err), CRL_E_EXISTS);
    assert_msg_has(&err, "'next'");
    ck_assert_int_eq(crl_td_update(clash, src, &err), CRL_E_EXISTS);
    assert_msg_has(&err, "'next'");
    crl_td *other = mktd(0, NULL);
    put(other, "a.b", CRL_F32, 1, SHAPE(3), 0);
    ck_assert_int_eq(crl_td_update(dst, other, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "'a'");
    crl_td *sub = mktd(0, NULL);
    put(sub, "z", CRL_F32, 1, SHAPE(3), 0);
    ck_assert_int_eq(crl_td_update(dst, sub, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "'z'");
    ck_assert_int_eq(crl_td_update(NULL, src, &err), CRL_E_INVALID);
    crl_td_unref(sub);
    crl_td_unref(other);
    crl_td_unref(clash);
    crl_td_unref(src);
    crl_td_unref(dst);
}
END_TEST

/* ---- clone / copy_into ------------------------------------------------- */

START_TEST(clone_and_copy_into)
{
    crl_td *td = step_td(1, SHAPE(2));
    crl_error err;
    crl_td *c = crl_td_clone(td, &err);
    ck_assert(crl_td_equal(c, td));
    ck_assert_ptr_ne(crl_td_get(c, "next.observation"), crl_td_get(td, "next.observation"));
    crl_tensor_fill(crl_td_get(c, "next.observation"), -1);
    ck_assert(!crl_td_equal(c, td));
    ck_assert(crl_tensor_flat_get(crl_td_get(td, "next.observation"), 0) == 1000);

    /* copy_into writes into the existing tensors, allocating nothing. */
    crl_tensor *before = crl_td_get(c, "next.observation");
    void *data = crl_tensor_data(before);
    ck_assert_int_eq(crl_td_copy_into(c, td, &err), CRL_OK);
    ck_assert_ptr_eq(crl_td_get(c, "next.observation"), before);
    ck_assert_ptr_eq(crl_tensor_data(before), data);
    ck_assert(crl_td_equal(c, td));

    /* Missing keys are cloned in. */
    crl_td *dst = mktd(1, SHAPE(2));
    ck_assert_int_eq(crl_td_copy_into(dst, td, &err), CRL_OK);
    ck_assert(crl_td_equal(dst, td));
    ck_assert_ptr_ne(crl_td_get(dst, "action"), crl_td_get(td, "action"));

    /* Mismatches name the key. */
    crl_td *bad = mktd(1, SHAPE(2));
    put(bad, "next.observation", CRL_F32, 2, SHAPE(2, 4), 0);
    ck_assert_int_eq(crl_td_copy_into(bad, td, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "'next.observation'");
    assert_msg_has(&err, "[2, 4]");
    assert_msg_has(&err, "[2, 3]");
    crl_td *kind = mktd(1, SHAPE(2));
    put(kind, "next", CRL_F32, 1, SHAPE(2), 0);
    ck_assert_int_eq(crl_td_copy_into(kind, td, &err), CRL_E_EXISTS);
    crl_td *narrow = mktd(1, SHAPE(5));
    ck_assert_int_eq(crl_td_copy_into(narrow, td, &err), CRL_E_SHAPE);
    ck_assert_ptr_null(crl_td_clone(NULL, &err));
    ck_assert_int_eq(crl_td_copy_into(NULL, td, &err), CRL_E_INVALID);
    crl_td_unref(narrow);
    crl_td_unref(kind);
    crl_td_unref(bad);
    crl_td_unref(dst);
    crl_td_unref(c);
    crl_td_unref(td);
}
END_TEST

/* ---- index / slice ----------------------------------------------------- */

START_TEST(index_and_slice_views)
{
    crl_td *td = step_td(2, SHAPE(3, 4));
    crl_error err;
    crl_td *row = crl_td_index(td, 0, 1, &err);
    ck_assert_msg(row != NULL, "%s", err.message);
    ck_assert_int_eq(crl_td_batch_ndim(row), 1);
    ck_assert_int_eq(crl_td_batch_shape(row)[0], 4);
    crl_tensor *o = crl_td_get(row, "next.observation");
    ck_assert_int_eq(crl_tensor_ndim(o), 2);
    ck_assert_int_eq(crl_tensor_shape(o)[0], 4);
    ck_assert_int_eq(crl_tensor_shape(o)[1], 3);
    ck_assert_int_eq(crl_td_batch_shape(crl_td_get_td(row, "next"))[0], 4);
    /* next.observation holds 1000 + flat index of a [3, 4, 3] tensor. */
    for (int64_t j = 0; j < 4; j++)
        for (int64_t k = 0; k < 3; k++)
            ck_assert(crl_tensor_get_f64(o, (int64_t[]){j, k}) == 1000 + 12 + j * 3 + k);
    /* Views: writes reach the original. */
    crl_tensor_set_f64(o, (int64_t[]){2, 1}, -5);
    ck_assert(crl_tensor_get_f64(crl_td_get(td, "next.observation"), (int64_t[]){1, 2, 1}) == -5);
    crl_td_unref(row);

    crl_td *col = crl_td_index(td, -1, -1, &err);
    ck_assert_int_eq(crl_td_batch_shape(col)[0], 3);
    crl_tensor *a = crl_td_get(col, "action");
    for (int64_t i = 0; i < 3; i++)
        ck_assert(crl_tensor_get_f64(a, (int64_t[]){i, 0}) == 100 + i * 4 + 3);
    crl_td_unref(col);

    crl_td *sl = crl_td_slice(td, 1, 1, 100, 2, &err);
    ck_assert_int_eq(crl_td_batch_shape(sl)[0], 3);
    ck_assert_int_eq(crl_td_batch_shape(sl)[1], 2);
    ck_assert_int_eq(crl_td_batch_shape(crl_td_get_td(sl, "next"))[1], 2);
    a = crl_td_get(sl, "action");
    for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 2; j++)
            ck_assert(crl_tensor_get_f64(a, (int64_t[]){i, j, 0}) == 100 + i * 4 + (1 + 2 * j));
    crl_tensor_fill(a, 7);
    ck_assert(crl_tensor_get_f64(crl_td_get(td, "action"), (int64_t[]){2, 3, 0}) == 7);
    ck_assert(crl_tensor_get_f64(crl_td_get(td, "action"), (int64_t[]){2, 2, 0}) == 100 + 10);
    crl_td_unref(sl);
    crl_td *none = crl_td_slice(td, 0, 3, 5, 1, &err);
    ck_assert_int_eq(crl_td_batch_shape(none)[0], 0);
    ck_assert_int_eq(crl_tensor_shape(crl_td_get(none, "observation"))[0], 0);
    crl_td_unref(none);

    ck_assert_ptr_null(crl_td_index(td, 0, 3, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    assert_msg_has(&err, "index 3");
    assert_msg_has(&err, "batch dim 0");
    ck_assert_ptr_null(crl_td_index(td, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    assert_msg_has(&err, "batch dim 2");
    ck_assert_ptr_null(crl_td_slice(td, 0, 0, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    crl_td *scalar = mktd(0, NULL);
    ck_assert_ptr_null(crl_td_index(scalar, 0, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    ck_assert_ptr_null(crl_td_index(NULL, 0, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    crl_td_unref(scalar);
    crl_td_unref(td);
}
END_TEST

/* reshape: [3, 4] -> [12] -> [2, 6] (TensorDict.reshape), nested entries too; views of contiguous
 * tensors; a strided slice is copied; a count that differs is refused. */
START_TEST(reshape_batch)
{
    crl_td *td = step_td(2, SHAPE(3, 4));
    crl_error err;
    crl_td *flat = crl_td_reshape(td, 1, SHAPE(12), &err);
    ck_assert_msg(flat != NULL, "%s", err.message);
    ck_assert_int_eq(crl_td_batch_shape(flat)[0], 12);
    crl_tensor *o = crl_td_get(flat, "next.observation");
    ck_assert_int_eq(crl_tensor_ndim(o), 2);
    ck_assert_int_eq(crl_td_batch_shape(crl_td_get_td(flat, "next"))[0], 12);
    for (int64_t r = 0; r < 12; r++)
        for (int64_t k = 0; k < 3; k++)
            ck_assert(crl_tensor_get_f64(o, (int64_t[]){r, k}) == 1000 + r * 3 + k);
    crl_td *two = crl_td_reshape(flat, 2, SHAPE(2, 6), &err);
    ck_assert_msg(two != NULL, "%s", err.message);
    ck_assert(crl_tensor_get_f64(crl_td_get(two, "next.observation"), (int64_t[]){1, 2, 1}) == 1000 + 8 * 3 + 1);
    /* a view: writes reach the original */
    crl_tensor_set_f64(crl_td_get(two, "next.observation"), (int64_t[]){0, 0, 0}, -3);
    ck_assert(crl_tensor_get_f64(crl_td_get(td, "next.observation"), (int64_t[]){0, 0, 0}) == -3);
    crl_td *sl = crl_td_slice(td, 1, 0, 4, 2, &err);
    crl_td *sf = crl_td_reshape(sl, 1, SHAPE(6), &err);
    ck_assert_msg(sf != NULL, "%s", err.message);
    ck_assert(crl_tensor_get_f64(crl_td_get(sf, "next.observation"), (int64_t[]){3, 2}) == 1000 + (1 * 4 + 2) * 3 + 2);
    ck_assert_ptr_null(crl_td_reshape(td, 2, SHAPE(5, 2), &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, "batch shape [3, 4] cannot become [5, 2] (12 elements)");
    ck_assert_ptr_null(crl_td_reshape(NULL, 1, SHAPE(1), &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    crl_td_unref(sf);
    crl_td_unref(sl);
    crl_td_unref(two);
    crl_td_unref(flat);
    crl_td_unref(td);
}
END_TEST

/* ---- stack / cat / equal ----------------------------------------------- */

START_TEST(stack_tds)
{
    crl_td *a = step_td(1, SHAPE(2));
    crl_td *b = step_td(1, SHAPE(2));
    crl_tensor_fill(crl_td_get(b, "next.observation"), -1);
    crl_td *tds[] = {a, b, a};
    crl_error err;
    crl_td *s = crl_td_stack(tds, 3, 0, &err);
    ck_assert_msg(s != NULL, "%s", err.message);
    ck_assert_int_eq(crl_td_batch_ndim(s), 2);
    ck_assert_int_eq(crl_td_batch_shape(s)[0], 3);
    ck_assert_int_eq(crl_td_batch_shape(s)[1], 2);
    ck_assert_int_eq(crl_td_batch_shape(crl_td_get_td(s, "next"))[0], 3);
    crl_tensor *o = crl_td_get(s, "next.observation");
    ck_assert_int_eq(crl_tensor_shape(o)[0], 3);
    for (int64_t t = 0; t < 3; t++)
        for (int64_t i = 0; i < 2; i++)
            for (int64_t k = 0; k < 3; k++)
                ck_assert(crl_tensor_get_f64(o, (int64_t[]){t, i, k}) ==
                          (t == 1 ? -1 : 1000 + i * 3 + k));
    ck_assert(crl_tensor_is_contiguous(o));
    crl_td *back = crl_td_index(s, 0, 2, &err);
    ck_assert(crl_td_equal(back, a));
    crl_td_unref(back);
    crl_td_unref(s);

    /* New trailing batch dim. */
    s = crl_td_stack(tds, 3, -1, &err);
    ck_assert_int_eq(crl_td_batch_shape(s)[0], 2);
    ck_assert_int_eq(crl_td_batch_shape(s)[1], 3);
    o = crl_td_get(s, "next.observation");
    for (int64_t i = 0; i < 2; i++)
        for (int64_t t = 0; t < 3; t++)
            ck_assert(crl_tensor_get_f64(o, (int64_t[]){i, t, 2}) == (t == 1 ? -1 : 1000 + i * 3 + 2));
    crl_td_unref(s);

    /* Mismatches. */
    crl_td *c = step_td(1, SHAPE(2));
    crl_td_del(c, "next.reward", NULL);
    crl_td *bad1[] = {a, c};
    ck_assert_ptr_null(crl_td_stack(bad1, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_NOT_FOUND);
    assert_msg_has(&err, "'next.reward'");
    crl_td *bad1r[] = {c, a};
    ck_assert_ptr_null(crl_td_stack(bad1r, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_NOT_FOUND);
    assert_msg_has(&err, "'next.reward'");
    put(c, "next.reward", CRL_F32, 2, SHAPE(2, 2), 0);
    ck_assert_ptr_null(crl_td_stack(bad1, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, "'next.reward'");
    assert_msg_has(&err, "[2, 1]");
    assert_msg_has(&err, "[2, 2]");
    crl_td_del(c, "next.reward", NULL);
    put(c, "next.reward", CRL_F64, 2, SHAPE(2, 1), 0);
    ck_assert_ptr_null(crl_td_stack(bad1, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_DTYPE);
    assert_msg_has(&err, "'next.reward'");
    crl_td *d = step_td(1, SHAPE(5));
    crl_td *bad2[] = {a, d};
    ck_assert_ptr_null(crl_td_stack(bad2, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    ck_assert_ptr_null(crl_td_stack(tds, 3, 2, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    ck_assert_ptr_null(crl_td_stack(tds, 0, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    crl_td *withnull[] = {a, NULL};
    ck_assert_ptr_null(crl_td_stack(withnull, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    /* No room for another dim, in a tensor or a nested batch shape. */
    crl_td *full = mktd(1, SHAPE(1));
    crl_td *sub8 = mktd(8, SHAPE(1, 1, 1, 1, 1, 1, 1, 1));
    crl_td_set_td(full, "deep", sub8, NULL);
    crl_td *fulls[] = {full, full};
    ck_assert_ptr_null(crl_td_stack(fulls, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, "'deep'");
    crl_td_del(full, "deep", NULL);
    put(full, "t8", CRL_U8, 8, SHAPE(1, 1, 1, 1, 1, 1, 1, 1), 0);
    ck_assert_ptr_null(crl_td_stack(fulls, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, "'t8'");
    crl_td_unref(sub8);
    crl_td_unref(full);
    crl_td_unref(d);
    crl_td_unref(c);
    crl_td_unref(a);
    crl_td_unref(b);
}
END_TEST

START_TEST(cat_tds)
{
    crl_td *a = step_td(2, SHAPE(2, 3));
    crl_td *b = step_td(2, SHAPE(1, 3));
    crl_tensor_fill(crl_td_get(b, "action"), -9);
    crl_td *tds[] = {a, b};
    crl_error err;
    crl_td *c = crl_td_cat(tds, 2, 0, &err);
    ck_assert_msg(c != NULL, "%s", err.message);
    ck_assert_int_eq(crl_td_batch_shape(c)[0], 3);
    ck_assert_int_eq(crl_td_batch_shape(c)[1], 3);
    ck_assert_int_eq(crl_td_batch_shape(crl_td_get_td(c, "next"))[0], 3);
    crl_tensor *act = crl_td_get(c, "action");
    for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 3; j++)
            ck_assert(crl_tensor_get_f64(act, (int64_t[]){i, j, 0}) == (i < 2 ? 100 + i * 3 + j : -9));
    crl_tensor *obs = crl_td_get(c, "next.observation");
    ck_assert(crl_tensor_get_f64(obs, (int64_t[]){2, 1, 2}) == 1000 + 1 * 3 + 2);
    ck_assert(crl_tensor_get_f64(obs, (int64_t[]){1, 2, 0}) == 1000 + 5 * 3);
    crl_td_unref(c);

    /* Along the last batch dim. */
    crl_td *x = step_td(2, SHAPE(2, 1));
    crl_td *y = step_td(2, SHAPE(2, 2));
    crl_td *xy[] = {x, y};
    c = crl_td_cat(xy, 2, -1, &err);
    ck_assert_msg(c != NULL, "%s", err.message);
    ck_assert_int_eq(crl_td_batch_shape(c)[1], 3);
    act = crl_td_get(c, "action");
    const double want[2][3] = {{100, 100, 101}, {101, 102, 103}};
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 3; j++)
            ck_assert(crl_tensor_get_f64(act, (int64_t[]){i, j, 0}) == want[i][j]);
    crl_td_unref(c);

    ck_assert_ptr_null(crl_td_cat(xy, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, "TensorDict 1");
    ck_assert_ptr_null(crl_td_cat(tds, 2, 2, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    crl_td *e = step_td(2, SHAPE(1, 3));
    crl_td_del(e, "observation", NULL);
    put(e, "observation", CRL_F32, 3, SHAPE(1, 3, 4), 0);
    crl_td *ae[] = {a, e};
    ck_assert_ptr_null(crl_td_cat(ae, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, "'observation'");
    crl_td_del(e, "observation", NULL);
    crl_td_set_td(e, "observation", crl_td_get_td(e, "next"), NULL);
    ck_assert_ptr_null(crl_td_cat(ae, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    assert_msg_has(&err, "'observation'");
    crl_td *scalar = mktd(0, NULL);
    crl_td *ss[] = {scalar, scalar};
    ck_assert_ptr_null(crl_td_cat(ss, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    crl_td_unref(scalar);
    crl_td_unref(e);
    crl_td_unref(x);
    crl_td_unref(y);
    crl_td_unref(a);
    crl_td_unref(b);
}
END_TEST

START_TEST(equal_tds)
{
    crl_td *a = step_td(1, SHAPE(2));
    crl_td *b = step_td(1, SHAPE(2));
    ck_assert(crl_td_equal(a, b));
    ck_assert(crl_td_equal(a, a));
    crl_tensor_flat_set(crl_td_get(b, "next.reward"), 1, 0.5);
    ck_assert(!crl_td_equal(a, b));
    crl_td_unref(b);
    b = step_td(1, SHAPE(2));
    crl_td_del(b, "done", NULL);
    ck_assert(!crl_td_equal(a, b));
    put(b, "done2", CRL_BOOL, 2, SHAPE(2, 1), 0);
    ck_assert(!crl_td_equal(a, b));
    crl_td *c = step_td(1, SHAPE(3));
    ck_assert(!crl_td_equal(a, c));
    ck_assert(!crl_td_equal(a, NULL));
    crl_td *e1 = mktd(0, NULL), *e2 = mktd(0, NULL), *e3 = mktd(1, SHAPE(0));
    ck_assert(crl_td_equal(e1, e2));
    ck_assert(!crl_td_equal(e1, e3));
    crl_td_unref(e1);
    crl_td_unref(e2);
    crl_td_unref(e3);
    crl_td_unref(c);
    crl_td_unref(b);
    crl_td_unref(a);
}
END_TEST


/* ---- structural stamps ----------------------------------------------------- */

START_TEST(stamps_follow_structure)
{
    crl_error err;
    crl_td *td = mktd(1, SHAPE(2));
    crl_td *other = mktd(1, SHAPE(2));
    ck_assert(crl__td_stamp(td) != 0);
    ck_assert(crl__td_stamp(td) != crl__td_stamp(other));

    /* insert */
    uint64_t s0 = crl__td_stamp(td), l0 = crl__td_layout(td);
    crl_tensor *a = put(td, "a", CRL_F32, 1, SHAPE(2), 0);
    ck_assert(crl__td_stamp(td) != s0);
    ck_assert(crl__td_layout(td) != l0);

    /* storing the pointer already there changes nothing, by any setter */
    uint64_t s1 = crl__td_stamp(td), l1 = crl__td_layout(td);
    ck_assert_int_eq(crl_td_set(td, "a", a, &err), CRL_OK);
    crl_td_key *ka = crl_td_key_new("a", &err);
    ck_assert_int_eq(crl_td_set_k(td, ka, a, &err), CRL_OK);
    crl_td *same = mktd(1, SHAPE(2));
    ck_assert_int_eq(crl_td_set(same, "a", a, &err), CRL_OK);
    ck_assert_int_eq(crl_td_update(td, same, &err), CRL_OK);
    ck_assert_int_eq(crl_td_copy_into(td, same, &err), CRL_OK); /* values only */
    ck_assert_uint_eq(crl__td_stamp(td), s1);
    ck_assert_uint_eq(crl__td_layout(td), l1);

    /* another tensor at the key: the stamp moves, the layout stays */
    crl_tensor *b = mk(CRL_F32, 1, SHAPE(2));
    ck_assert_int_eq(crl_td_set_k(td, ka, b, &err), CRL_OK);
    uint64_t s2 = crl__td_stamp(td);
    ck_assert(s2 != s1);
    ck_assert_uint_eq(crl__td_layout(td), l1);
    ck_assert_int_eq(crl_td_set(td, "a", a, &err), CRL_OK);
    uint64_t s3 = crl__td_stamp(td);
    ck_assert(s3 != s2 && s3 != s1); /* back to a: still a new stamp */
    ck_assert_uint_eq(crl__td_layout(td), l1);
    ck_assert_int_eq(crl_td_update(td, same, &err), CRL_OK); /* a again: nothing */
    ck_assert_uint_eq(crl__td_stamp(td), s3);
    ck_assert_int_eq(crl_td_set(same, "a", b, &err), CRL_OK);
    ck_assert_int_eq(crl_td_update(td, same, &err), CRL_OK); /* b via update */
    ck_assert(crl__td_stamp(td) != s3);
    ck_assert_uint_eq(crl__td_layout(td), l1);

    /* nested: each td has its own stamp */
    put(td, "n.x", CRL_F32, 1, SHAPE(2), 0);
    crl_td *n = crl_td_get_td(td, "n");
    uint64_t rs = crl__td_stamp(td), ns = crl__td_stamp(n);
    ck_assert_int_eq(crl_td_set(td, "n.x", b, &err), CRL_OK);
    ck_assert_uint_eq(crl__td_stamp(td), rs);
    ck_assert(crl__td_stamp(n) != ns);

    /* sub-td: same pointer nothing, another one moves stamp and layout */
    ck_assert_int_eq(crl_td_set_td(td, "n", n, &err), CRL_OK);
    ck_assert_uint_eq(crl__td_stamp(td), rs);
    uint64_t rl = crl__td_layout(td);
    ck_assert_int_eq(crl_td_set_td(td, "n", other, &err), CRL_OK);
    ck_assert(crl__td_stamp(td) != rs);
    ck_assert(crl__td_layout(td) != rl);

    /* delete and rename */
    rs = crl__td_stamp(td);
    rl = crl__td_layout(td);
    ck_assert_int_eq(crl_td_rename(td, "a", "c", &err), CRL_OK);
    ck_assert(crl__td_stamp(td) != rs && crl__td_layout(td) != rl);
    rs = crl__td_stamp(td);
    rl = crl__td_layout(td);
    ck_assert_int_eq(crl_td_del(td, "c", &err), CRL_OK);
    ck_assert(crl__td_stamp(td) != rs && crl__td_layout(td) != rl);
    /* a failed change changes nothing */
    rs = crl__td_stamp(td);
    ck_assert_int_eq(crl_td_del(td, "c", &err), CRL_E_NOT_FOUND);
    ck_assert_int_eq(crl_td_set(td, "n", b, &err), CRL_E_EXISTS);
    ck_assert_uint_eq(crl__td_stamp(td), rs);
    /* reading and writing values is not structural */
    crl_tensor_fill(b, 3.0);
    ck_assert_ptr_nonnull(crl_td_get(td, "n.x") ? NULL : crl_td_get_td(td, "n"));
    ck_assert_uint_eq(crl__td_stamp(td), rs);

    crl_td_key_free(ka);
    crl_tensor_unref(b);
    crl_td_unref(same);
    crl_td_unref(other);
    crl_td_unref(td);
}
END_TEST

/* A td made where a freed one lived (malloc hands freed blocks straight
 * back) never takes a stamp seen before, so a (pointer, stamp) pair never
 * names two tds. */
START_TEST(stamps_never_reused)
{
    GHashTable *seen = g_hash_table_new(g_int64_hash, g_int64_equal);
    gint64 *keys = g_new(gint64, 4000);
    for (int i = 0; i < 2000; i++) {
        crl_td *td = mktd(0, NULL);
        keys[2 * i] = (gint64)crl__td_stamp(td);
        ck_assert_msg(!g_hash_table_contains(seen, &keys[2 * i]), "stamp %" G_GINT64_FORMAT " handed out twice",
                      keys[2 * i]);
        g_hash_table_add(seen, &keys[2 * i]);
        put(td, "x", CRL_U8, 0, NULL, 1);
        keys[2 * i + 1] = (gint64)crl__td_stamp(td);
        ck_assert(!g_hash_table_contains(seen, &keys[2 * i + 1]));
        g_hash_table_add(seen, &keys[2 * i + 1]);
        crl_td_unref(td);
    }
    g_hash_table_unref(seen);
    g_free(keys);
}
END_TEST

#define STAMP_THREADS 4
#define STAMP_PER_THREAD 5000

static gpointer make_stamps(gpointer out)
{
    uint64_t *o = out;
    for (int i = 0; i < STAMP_PER_THREAD; i++) {
        crl_td *td = mktd(0, NULL);
        o[i] = crl__td_stamp(td);
        crl_td_unref(td);
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Threads take stamps from one counter: no two tds share one. */
START_TEST(stamps_unique_across_threads)
{
    uint64_t *all = g_new0(uint64_t, STAMP_THREADS * STAMP_PER_THREAD);
    GThread *th[STAMP_THREADS];
    for (int t = 0; t < STAMP_THREADS; t++)
        th[t] = g_thread_new("stamps", make_stamps, all + t * STAMP_PER_THREAD);
    for (int t = 0; t < STAMP_THREADS; t++)
        g_thread_join(th[t]);
    qsort(all, STAMP_THREADS * STAMP_PER_THREAD, sizeof *all, cmp_u64);
    for (int i = 0; i < STAMP_THREADS * STAMP_PER_THREAD; i++) {
        ck_assert(all[i] != 0);
        if (i)
            ck_assert_msg(all[i] != all[i - 1], "stamp %" G_GUINT64_FORMAT " handed out twice", all[i]);
    }
    g_free(all);
}
END_TEST

static Suite *td_suite(void)
{
    Suite *s = suite_create("td");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, new_and_batch_shape);
    tcase_add_test(tc, set_get_nested);
    tcase_add_test(tc, sorted_iteration);
    tcase_add_test(tc, del_entries);
    tcase_add_test(tc, set_td_rules);
    tcase_add_test(tc, key_handles);
    tcase_add_test(tc, set_k_replaces_in_place);
    tcase_add_test(tc, leaf_keys_order);
    tcase_add_test(tc, repr_matches_torchrl);
    tcase_add_test(tc, repr_empty_shared_and_sorting);
    tcase_add_test(tc, select_exclude);
    tcase_add_test(tc, rename_entries);
    tcase_add_test(tc, update_shares);
    tcase_add_test(tc, clone_and_copy_into);
    tcase_add_test(tc, index_and_slice_views);
    tcase_add_test(tc, stack_tds);
    tcase_add_test(tc, cat_tds);
    tcase_add_test(tc, equal_tds);
    tcase_add_test(tc, reshape_batch);
    tcase_add_test(tc, stamps_follow_structure);
    tcase_add_test(tc, stamps_never_reused);
    tcase_add_test(tc, stamps_unique_across_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(td_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
