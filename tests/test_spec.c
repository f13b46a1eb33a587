/* Check suite for crl_spec: constructors, Composite keys, is_in/check, project, rand, expand, clone, printing. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <crl/spec.h>

#define SHP(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* ndim and shape arguments from one list: DIMS(2, 3) -> 2, {2, 3} */
#define DIMS(...) NDIM(__VA_ARGS__), SHP(__VA_ARGS__)

static const crl_dtype all_dtypes[] = {CRL_BOOL, CRL_U8, CRL_I8, CRL_I16, CRL_I32,
                                       CRL_I64, CRL_F16, CRL_F32, CRL_F64};
static const crl_dtype int_dtypes[] = {CRL_U8, CRL_I8, CRL_I16, CRL_I32, CRL_I64};
#define N_ALL (sizeof all_dtypes / sizeof all_dtypes[0])
#define N_INT (sizeof int_dtypes / sizeof int_dtypes[0])

/* A tensor filled from vals (flat row-major). */
static crl_tensor *tens(crl_dtype dt, int ndim, const int64_t *shape, const double *vals)
{
    crl_error err;
    crl_tensor *t = crl_tensor_new(dt, ndim, shape, &err);
    ck_assert_msg(t != NULL, "crl_tensor_new: %s", err.message);
    if (vals)
        for (int64_t i = 0; i < crl_tensor_numel(t); i++)
            crl_tensor_flat_set(t, i, vals[i]);
    return t;
}
#define VALS(...) ((const double[]){__VA_ARGS__})

static crl_spec *must(crl_spec *s, const crl_error *err)
{
    ck_assert_msg(s != NULL, "spec constructor failed: %s", err->message);
    return s;
}

/* The call returned NULL with `code` and a message containing every
 * non-NULL needle. */
static void expect_fail(const void *ret, const crl_error *err, int code, const char *n1,
                        const char *n2)
{
    ck_assert_ptr_null(ret);
    ck_assert_msg(err->code == code, "expected %s, got %s: %s", crl_status_name(code),
                  crl_status_name(err->code), err->message);
    if (n1)
        ck_assert_msg(strstr(err->message, n1), "'%s' not in: %s", n1, err->message);
    if (n2)
        ck_assert_msg(strstr(err->message, n2), "'%s' not in: %s", n2, err->message);
}

static void expect_rc(int rc, const crl_error *err, int code, const char *n1, const char *n2)
{
    ck_assert_msg(rc == code, "expected %s, got %s: %s", crl_status_name(code),
                  crl_status_name(rc), err->message);
    ck_assert_int_eq(err->code, code);
    if (n1)
        ck_assert_msg(strstr(err->message, n1), "'%s' not in: %s", n1, err->message);
    if (n2)
        ck_assert_msg(strstr(err->message, n2), "'%s' not in: %s", n2, err->message);
}

/* ---- constructors ------------------------------------------------------- */

START_TEST(test_construct_and_accessors)
{
    crl_error err;
    crl_spec *u = must(crl_spec_unbounded(CRL_F32, DIMS(2, 3), &err), &err);
    ck_assert_int_eq(crl_spec_get_kind(u), CRL_SPEC_UNBOUNDED);
    ck_assert_int_eq(crl_spec_dtype(u), CRL_F32);
    ck_assert_int_eq(crl_spec_ndim(u), 2);
    ck_assert_int_eq(crl_spec_shape(u)[0], 2);
    ck_assert_int_eq(crl_spec_shape(u)[1], 3);
    ck_assert_int_eq(crl_spec_device(u).type, CRL_DEVICE_CPU);
    ck_assert_int_eq(crl_spec_n(u), 0);
    ck_assert_ptr_null(crl_spec_low(u));
    ck_assert_ptr_null(crl_spec_nvec(u));
    crl_spec_unref(u);

    crl_spec *scalar = must(crl_spec_unbounded(CRL_I64, 0, NULL, &err), &err);
    ck_assert_int_eq(crl_spec_ndim(scalar), 0);
    crl_spec_unref(scalar);

    crl_spec *b = must(crl_spec_bounded(CRL_F32, DIMS(3), -2.0, 2.0, &err), &err);
    ck_assert_int_eq(crl_spec_get_kind(b), CRL_SPEC_BOUNDED);
    const crl_tensor *lo = crl_spec_low(b), *hi = crl_spec_high(b);
    ck_assert_int_eq(crl_tensor_dtype(lo), CRL_F64);
    ck_assert_int_eq(crl_tensor_ndim(hi), 1);
    ck_assert_int_eq(crl_tensor_shape(hi)[0], 3);
    for (int i = 0; i < 3; i++) {
        ck_assert(crl_tensor_flat_get(lo, i) == -2.0);
        ck_assert(crl_tensor_flat_get(hi, i) == 2.0);
    }
    crl_spec_unref(b);

    crl_tensor *lt = tens(CRL_F64, DIMS(3), VALS(-1, 0, 5));
    crl_tensor *ht = tens(CRL_F32, DIMS(3), VALS(1, 0, 6));
    crl_spec *bt = must(crl_spec_bounded_t(CRL_F32, lt, ht, &err), &err);
    ck_assert(crl_tensor_flat_get(crl_spec_low(bt), 2) == 5.0);
    ck_assert(crl_tensor_flat_get(crl_spec_high(bt), 0) == 1.0);
    /* bounds are copied */
    crl_tensor_flat_set(lt, 2, -100);
    ck_assert(crl_tensor_flat_get(crl_spec_low(bt), 2) == 5.0);
    crl_tensor_unref(lt);
    crl_tensor_unref(ht);
    crl_spec_unref(bt);

    crl_spec *c = must(crl_spec_categorical(4, CRL_I64, DIMS(1), &err), &err);
    ck_assert_int_eq(crl_spec_n(c), 4);
    crl_spec_unref(c);
    crl_spec *done = must(crl_spec_categorical(2, CRL_BOOL, DIMS(1), &err), &err);
    ck_assert_int_eq(crl_spec_dtype(done), CRL_BOOL);
    crl_spec_unref(done);

    crl_spec *oh = must(crl_spec_onehot(5, CRL_I64, DIMS(2, 5), &err), &err);
    ck_assert_int_eq(crl_spec_n(oh), 5);
    crl_spec_unref(oh);

    crl_spec *mc = must(crl_spec_multi_categorical(SHP(3, 4), CRL_I32, DIMS(7, 2), &err), &err);
    ck_assert_uint_eq(crl_spec_nvec_len(mc), 2);
    ck_assert_int_eq(crl_spec_nvec(mc)[1], 4);
    ck_assert_int_eq(crl_spec_n(mc), 0);
    crl_spec_unref(mc);

    crl_spec *mo = must(crl_spec_multi_onehot(SHP(2, 3), 2, CRL_U8, DIMS(5), &err), &err);
    ck_assert_uint_eq(crl_spec_nvec_len(mo), 2);
    crl_spec_unref(mo);

    crl_spec *bin = must(crl_spec_binary(4, CRL_F32, DIMS(2, 4), &err), &err);
    ck_assert_int_eq(crl_spec_n(bin), 4);
    crl_spec_unref(bin);

    crl_spec *comp = must(crl_spec_composite(DIMS(4), &err), &err);
    ck_assert_int_eq(crl_spec_get_kind(comp), CRL_SPEC_COMPOSITE);
    ck_assert_int_eq(crl_spec_dtype(comp), CRL_DTYPE_COUNT);
    ck_assert_uint_eq(crl_spec_composite_len(comp), 0);
    ck_assert_ptr_null(crl_spec_composite_key_at(comp, 0));
    ck_assert_ptr_null(crl_spec_composite_at(comp, 0));
    crl_spec_unref(comp);
}
END_TEST

START_TEST(test_construct_failures_shape_dtype)
{
    crl_error err;
    expect_fail(crl_spec_unbounded((crl_dtype)99, DIMS(1), &err), &err, CRL_E_INVALID,
                "crl_spec_unbounded", "dtype 99");
    expect_fail(crl_spec_unbounded(CRL_F32, -1, NULL, &err), &err, CRL_E_INVALID, "ndim -1",
                NULL);
    expect_fail(crl_spec_unbounded(CRL_F32, CRL_MAX_DIMS + 1, SHP(1, 1, 1, 1, 1, 1, 1, 1, 1),
                                   &err),
                &err, CRL_E_INVALID, "ndim 9", NULL);
    expect_fail(crl_spec_unbounded(CRL_F32, 2, NULL, &err), &err, CRL_E_INVALID,
                "shape is NULL", NULL);
    expect_fail(crl_spec_unbounded(CRL_F32, DIMS(2, -3), &err), &err, CRL_E_INVALID,
                "shape[1] = -3", NULL);
    expect_fail(crl_spec_composite(DIMS(-1), &err), &err, CRL_E_INVALID, "crl_spec_composite",
                "shape[0] = -1");
    expect_fail(crl_spec_bounded(CRL_DTYPE_COUNT, DIMS(1), 0, 1, &err), &err, CRL_E_INVALID,
                "crl_spec_bounded", "dtype 9");
    /* err may be NULL */
    ck_assert_ptr_null(crl_spec_unbounded(CRL_F32, -1, NULL, NULL));
    ck_assert_ptr_null(crl_spec_categorical(0, CRL_I64, DIMS(1), NULL));
}
END_TEST

START_TEST(test_construct_failures_bounded)
{
    crl_error err;
    expect_fail(crl_spec_bounded(CRL_F32, DIMS(1), 3.0, 1.0, &err), &err, CRL_E_INVALID,
                "low = 3 is greater than high = 1", NULL);
    expect_fail(crl_spec_bounded(CRL_F32, DIMS(1), NAN, 1.0, &err), &err, CRL_E_INVALID,
                "low is NaN", NULL);
    expect_fail(crl_spec_bounded(CRL_F32, DIMS(1), 0.0, NAN, &err), &err, CRL_E_INVALID,
                "high is NaN", NULL);
    expect_fail(crl_spec_bounded(CRL_F64, DIMS(1), INFINITY, INFINITY, &err), &err,
                CRL_E_INVALID, "low = inf", NULL);
    expect_fail(crl_spec_bounded(CRL_F64, DIMS(1), -INFINITY, -INFINITY, &err), &err,
                CRL_E_INVALID, "high = -inf", NULL);
    expect_fail(crl_spec_bounded(CRL_I32, DIMS(1), 0.2, 0.8, &err), &err, CRL_E_INVALID,
                "no int32 value", NULL);
    expect_fail(crl_spec_bounded(CRL_U8, DIMS(1), -5, -1, &err), &err, CRL_E_INVALID,
                "no uint8 value", NULL);

    crl_tensor *a = tens(CRL_F32, DIMS(3), VALS(0, 0, 0));
    crl_tensor *b = tens(CRL_F32, DIMS(2), VALS(1, 1));
    crl_tensor *c = tens(CRL_F32, DIMS(3), VALS(1, -1, 1));
    crl_tensor *d = tens(CRL_F32, DIMS(2, 2), VALS(0, 0, 0, NAN));
    crl_tensor *e = tens(CRL_F32, DIMS(2, 2), VALS(1, 1, 1, 1));
    expect_fail(crl_spec_bounded_t(CRL_F32, NULL, b, &err), &err, CRL_E_INVALID, "low", "NULL");
    expect_fail(crl_spec_bounded_t(CRL_F32, a, NULL, &err), &err, CRL_E_INVALID, "high",
                "NULL");
    expect_fail(crl_spec_bounded_t(CRL_F32, a, b, &err), &err, CRL_E_INVALID,
                "high has shape [2] but low has shape [3]", NULL);
    expect_fail(crl_spec_bounded_t(CRL_F32, a, c, &err), &err, CRL_E_INVALID,
                "low[1] = 0 is greater than high[1] = -1", NULL);
    expect_fail(crl_spec_bounded_t(CRL_F32, d, e, &err), &err, CRL_E_INVALID,
                "low[1, 1] is NaN", NULL);
    expect_fail(crl_spec_bounded_t((crl_dtype)-1, a, c, &err), &err, CRL_E_INVALID, "dtype -1",
                NULL);
    crl_tensor_unref(a);
    crl_tensor_unref(b);
    crl_tensor_unref(c);
    crl_tensor_unref(d);
    crl_tensor_unref(e);
}
END_TEST

START_TEST(test_construct_failures_discrete)
{
    crl_error err;
    expect_fail(crl_spec_categorical(0, CRL_I64, DIMS(1), &err), &err, CRL_E_INVALID,
                "crl_spec_categorical", "n = 0 must be > 0");
    expect_fail(crl_spec_categorical(-3, CRL_I64, DIMS(1), &err), &err, CRL_E_INVALID,
                "n = -3", NULL);
    expect_fail(crl_spec_categorical(4, CRL_F32, DIMS(1), &err), &err, CRL_E_INVALID,
                "float32 is not an integer dtype", NULL);
    expect_fail(crl_spec_categorical(3, CRL_BOOL, DIMS(1), &err), &err, CRL_E_INVALID,
                "n = 3 categories do not fit dtype bool", NULL);
    expect_fail(crl_spec_categorical(257, CRL_U8, DIMS(1), &err), &err, CRL_E_INVALID,
                "do not fit dtype uint8", NULL);
    expect_fail(crl_spec_categorical(4, CRL_I64, 1, NULL, &err), &err, CRL_E_INVALID,
                "shape is NULL", NULL);

    expect_fail(crl_spec_onehot(0, CRL_I64, DIMS(1), &err), &err, CRL_E_INVALID,
                "crl_spec_onehot", "n = 0");
    expect_fail(crl_spec_onehot(4, CRL_I64, 0, NULL, &err), &err, CRL_E_INVALID,
                "shape has no dims", NULL);
    expect_fail(crl_spec_onehot(4, CRL_I64, DIMS(2, 3), &err), &err, CRL_E_INVALID,
                "shape[1] = 3 must equal 4", NULL);

    expect_fail(crl_spec_multi_categorical(NULL, CRL_I64, DIMS(2), &err), &err, CRL_E_INVALID,
                "nvec is NULL", NULL);
    expect_fail(crl_spec_multi_categorical(SHP(3, 0), CRL_I64, DIMS(2), &err), &err,
                CRL_E_INVALID, "nvec[1] = 0 must be > 0", NULL);
    expect_fail(crl_spec_multi_categorical(SHP(3), CRL_I64, DIMS(4, 0), &err), &err,
                CRL_E_INVALID, "shape[1] = 0", NULL);
    expect_fail(crl_spec_multi_categorical(SHP(3, 3), CRL_F64, DIMS(2), &err), &err,
                CRL_E_INVALID, "float64 is not an integer dtype", NULL);
    expect_fail(crl_spec_multi_categorical(SHP(3, 300), CRL_I8, DIMS(2), &err), &err,
                CRL_E_INVALID, "nvec[1] = 300", "int8");
    expect_fail(crl_spec_multi_categorical(SHP(3), CRL_I64, 0, NULL, &err), &err,
                CRL_E_INVALID, "shape has no dims", NULL);

    expect_fail(crl_spec_multi_onehot(SHP(2), 0, CRL_I64, DIMS(2), &err), &err, CRL_E_INVALID,
                "k = 0", NULL);
    expect_fail(crl_spec_multi_onehot(NULL, 2, CRL_I64, DIMS(2), &err), &err, CRL_E_INVALID,
                "nvec is NULL", NULL);
    expect_fail(crl_spec_multi_onehot(SHP(2, -1), 2, CRL_I64, DIMS(1), &err), &err,
                CRL_E_INVALID, "nvec[1] = -1", NULL);
    expect_fail(crl_spec_multi_onehot(SHP(2, 3), 2, CRL_I64, DIMS(4, 6), &err), &err,
                CRL_E_INVALID, "shape[1] = 6 must equal 5", "sum(nvec)");

    expect_fail(crl_spec_binary(0, CRL_I64, DIMS(1), &err), &err, CRL_E_INVALID,
                "crl_spec_binary", "n = 0");
    expect_fail(crl_spec_binary(3, CRL_I64, DIMS(4), &err), &err, CRL_E_INVALID,
                "shape[0] = 4 must equal 3", NULL);
    expect_fail(crl_spec_binary(3, CRL_I64, 0, NULL, &err), &err, CRL_E_INVALID,
                "shape has no dims", NULL);
}
END_TEST

START_TEST(test_bounds_rounded_to_dtype)
{
    crl_error err;
    crl_spec *f = must(crl_spec_bounded(CRL_F32, DIMS(1), 0.1, 1e300, &err), &err);
    ck_assert(crl_tensor_flat_get(crl_spec_low(f), 0) == (double)0.1f);
    ck_assert(crl_tensor_flat_get(crl_spec_high(f), 0) == (double)FLT_MAX);
    crl_spec_unref(f);
    crl_spec *inf = must(crl_spec_bounded(CRL_F32, DIMS(1), 0, INFINITY, &err), &err);
    ck_assert(isinf(crl_tensor_flat_get(crl_spec_high(inf), 0)));
    crl_spec_unref(inf);
    crl_spec *i = must(crl_spec_bounded(CRL_I32, DIMS(1), -0.5, 2.5, &err), &err);
    ck_assert(crl_tensor_flat_get(crl_spec_low(i), 0) == 0.0);
    ck_assert(crl_tensor_flat_get(crl_spec_high(i), 0) == 2.0);
    crl_spec_unref(i);
    crl_spec *u8 = must(crl_spec_bounded(CRL_U8, DIMS(1), -10, 300, &err), &err);
    ck_assert(crl_tensor_flat_get(crl_spec_low(u8), 0) == 0.0);
    ck_assert(crl_tensor_flat_get(crl_spec_high(u8), 0) == 255.0);
    crl_spec_unref(u8);
    crl_spec *h = must(crl_spec_bounded(CRL_F16, DIMS(1), -1e6, 0.1, &err), &err);
    ck_assert(crl_tensor_flat_get(crl_spec_low(h), 0) == -65504.0);
    ck_assert(crl_tensor_flat_get(crl_spec_high(h), 0) == (double)crl_half_to_float(crl_float_to_half(0.1f)));
    crl_spec_unref(h);
}
END_TEST

/* ---- Composite ----------------------------------------------------------- */

START_TEST(test_composite_nested_keys)
{
    crl_error err;
    crl_spec *comp = must(crl_spec_composite(DIMS(4), &err), &err);
    crl_spec *obs = must(crl_spec_bounded(CRL_F32, DIMS(4, 3), -1, 1, &err), &err);
    crl_spec *rew = must(crl_spec_unbounded(CRL_F32, DIMS(4, 1), &err), &err);
    crl_spec *done = must(crl_spec_categorical(2, CRL_BOOL, DIMS(4, 1), &err), &err);
    ck_assert_int_eq(crl_spec_composite_set(comp, "observation", obs, &err), CRL_OK);
    ck_assert_int_eq(crl_spec_composite_set(comp, "next.reward", rew, &err), CRL_OK);
    ck_assert_int_eq(crl_spec_composite_set(comp, "next.done", done, &err), CRL_OK);
    ck_assert_int_eq(crl_spec_composite_set(comp, "next.deep.er.x", rew, &err), CRL_OK);
    /* the composite holds its own references */
    crl_spec_unref(obs);
    crl_spec_unref(done);

    ck_assert_uint_eq(crl_spec_composite_len(comp), 2);
    ck_assert_str_eq(crl_spec_composite_key_at(comp, 0), "next");
    ck_assert_str_eq(crl_spec_composite_key_at(comp, 1), "observation");
    crl_spec *next = crl_spec_composite_get(comp, "next");
    ck_assert_ptr_nonnull(next);
    ck_assert_int_eq(crl_spec_get_kind(next), CRL_SPEC_COMPOSITE);
    /* intermediate Composites take the parent's batch shape */
    ck_assert_int_eq(crl_spec_ndim(next), 1);
    ck_assert_int_eq(crl_spec_shape(next)[0], 4);
    ck_assert_uint_eq(crl_spec_composite_len(next), 3);
    ck_assert_str_eq(crl_spec_composite_key_at(next, 0), "deep");
    ck_assert_str_eq(crl_spec_composite_key_at(next, 1), "done");
    ck_assert_str_eq(crl_spec_composite_key_at(next, 2), "reward");
    ck_assert_ptr_eq(crl_spec_composite_get(comp, "next.reward"), rew);
    ck_assert_ptr_eq(crl_spec_composite_get(comp, "next.deep.er.x"), rew);
    ck_assert_ptr_eq(crl_spec_composite_at(next, 2), rew);
    ck_assert_ptr_null(crl_spec_composite_get(comp, "next.nothing"));
    ck_assert_ptr_null(crl_spec_composite_get(comp, "observation.x"));
    ck_assert_ptr_null(crl_spec_composite_get(comp, "nex"));
    ck_assert_ptr_null(crl_spec_composite_get(comp, "next."));
    ck_assert_ptr_null(crl_spec_composite_get(obs, "x"));

    /* replace */
    crl_spec *rew2 = must(crl_spec_unbounded(CRL_F64, DIMS(4, 1), &err), &err);
    ck_assert_int_eq(crl_spec_composite_set(comp, "next.reward", rew2, &err), CRL_OK);
    ck_assert_ptr_eq(crl_spec_composite_get(comp, "next.reward"), rew2);
    crl_spec_unref(rew2);

    /* delete */
    ck_assert_int_eq(crl_spec_composite_del(comp, "next.deep.er.x", &err), CRL_OK);
    ck_assert_ptr_null(crl_spec_composite_get(comp, "next.deep.er.x"));
    ck_assert_ptr_nonnull(crl_spec_composite_get(comp, "next.deep.er"));
    expect_rc(crl_spec_composite_del(comp, "next.reward.x", &err), &err, CRL_E_NOT_FOUND,
              "key 'next.reward.x' is not in the Composite", "present: next, observation");
    expect_rc(crl_spec_composite_del(comp, "missing", &err), &err, CRL_E_NOT_FOUND,
              "'missing'", NULL);
    expect_rc(crl_spec_composite_del(rew, "x", &err), &err, CRL_E_INVALID, "not a Composite",
              NULL);
    ck_assert_int_eq(crl_spec_composite_del(comp, "next", &err), CRL_OK);
    ck_assert_uint_eq(crl_spec_composite_len(comp), 1);
    crl_spec_unref(rew);
    crl_spec_unref(comp);
}
END_TEST

START_TEST(test_composite_set_failures)
{
    crl_error err;
    crl_spec *comp = must(crl_spec_composite(DIMS(4), &err), &err);
    crl_spec *leaf = must(crl_spec_unbounded(CRL_F32, DIMS(4, 2), &err), &err);
    crl_spec *wrong = must(crl_spec_unbounded(CRL_F32, DIMS(3, 2), &err), &err);
    crl_spec *scalar = must(crl_spec_unbounded(CRL_F32, 0, NULL, &err), &err);
    ck_assert_int_eq(crl_spec_composite_set(comp, "a", leaf, &err), CRL_OK);

    expect_rc(crl_spec_composite_set(comp, "b", wrong, &err), &err, CRL_E_SHAPE,
              "key 'b': shape [3, 2] does not start with the Composite's shape [4]", NULL);
    expect_rc(crl_spec_composite_set(comp, "b", scalar, &err), &err, CRL_E_SHAPE, "key 'b'",
              "[4]");
    expect_rc(crl_spec_composite_set(comp, "a.b", leaf, &err), &err, CRL_E_EXISTS,
              "key 'a.b': 'a' is a Unbounded leaf", NULL);
    const char *bad[] = {"", ".a", "a.", "a..b"};
    for (size_t i = 0; i < 4; i++)
        expect_rc(crl_spec_composite_set(comp, bad[i], leaf, &err), &err, CRL_E_INVALID,
                  "empty", NULL);
    expect_rc(crl_spec_composite_set(comp, NULL, leaf, &err), &err, CRL_E_INVALID, "(null)",
              NULL);
    expect_rc(crl_spec_composite_set(comp, "c", NULL, &err), &err, CRL_E_INVALID,
              "key 'c': child is NULL", NULL);
    expect_rc(crl_spec_composite_set(leaf, "c", scalar, &err), &err, CRL_E_INVALID,
              "key 'c'", "not a Composite");
    expect_rc(crl_spec_composite_set(comp, "self", comp, &err), &err, CRL_E_INVALID,
              "key 'self'", "nested in itself");
    crl_spec *inner = must(crl_spec_composite(DIMS(4), &err), &err);
    ck_assert_int_eq(crl_spec_composite_set(comp, "inner", inner, &err), CRL_OK);
    expect_rc(crl_spec_composite_set(inner, "loop", comp, &err), &err, CRL_E_INVALID,
              "key 'loop'", NULL);
    /* a failed nested set leaves nothing behind */
    expect_rc(crl_spec_composite_set(comp, "x.y.z", wrong, &err), &err, CRL_E_SHAPE, NULL,
              NULL);
    ck_assert_ptr_null(crl_spec_composite_get(comp, "x"));
    ck_assert_uint_eq(crl_spec_composite_len(comp), 2);

    crl_spec_unref(inner);
    crl_spec_unref(leaf);
    crl_spec_unref(wrong);
    crl_spec_unref(scalar);
    crl_spec_unref(comp);
}
END_TEST

START_TEST(test_refcount)
{
    crl_error err;
    crl_spec *s = must(crl_spec_unbounded(CRL_F32, DIMS(1), &err), &err);
    ck_assert_ptr_eq(crl_spec_ref(s), s);
    crl_spec_unref(s);
    ck_assert_int_eq(crl_spec_dtype(s), CRL_F32);   /* still alive */
    crl_spec_unref(s);
    ck_assert_ptr_null(crl_spec_ref(NULL));
    crl_spec_unref(NULL);
    /* accessors read a NULL spec as an empty, dtype-less Composite */
    ck_assert_int_eq(crl_spec_get_kind(NULL), CRL_SPEC_COMPOSITE);
    ck_assert_int_eq(crl_spec_dtype(NULL), CRL_DTYPE_COUNT);
    ck_assert_int_eq(crl_spec_ndim(NULL), 0);
    ck_assert_ptr_null(crl_spec_shape(NULL));
    ck_assert_int_eq(crl_spec_n(NULL), 0);
    ck_assert_uint_eq(crl_spec_nvec_len(NULL), 0);
    ck_assert_ptr_null(crl_spec_low(NULL));
    ck_assert_uint_eq(crl_spec_composite_len(NULL), 0);
    ck_assert_ptr_null(crl_spec_composite_get(NULL, "a"));
}
END_TEST

/* ---- is_in / check -------------------------------------------------------- */

START_TEST(test_check_meta_messages)
{
    crl_error err;
    crl_spec *rew = must(crl_spec_unbounded(CRL_F32, DIMS(1), &err), &err);
    crl_tensor *f64 = tens(CRL_F64, DIMS(1), VALS(0));
    crl_tensor *two = tens(CRL_F32, DIMS(2), VALS(0, 0));
    crl_tensor *scalar = tens(CRL_F32, 0, NULL, VALS(0));
    crl_tensor *ok = tens(CRL_F32, DIMS(1), VALS(1));
    expect_rc(crl_spec_check(rew, f64, "next.reward", &err), &err, CRL_E_DTYPE,
              "key 'next.reward': expected dtype float32 but got float64", NULL);
    expect_rc(crl_spec_check(rew, two, "next.reward", &err), &err, CRL_E_SHAPE,
              "key 'next.reward': expected shape [1] but got [2]", NULL);
    expect_rc(crl_spec_check(rew, scalar, "r", &err), &err, CRL_E_SHAPE,
              "expected shape [1] but got []", NULL);
    expect_rc(crl_spec_check(rew, f64, NULL, &err), &err, CRL_E_DTYPE,
              "expected dtype float32 but got float64", NULL);
    ck_assert(strncmp(err.message, "expected", 8) == 0);
    expect_rc(crl_spec_check(rew, NULL, "r", &err), &err, CRL_E_INVALID, "key 'r'", "NULL");
    expect_rc(crl_spec_check(NULL, ok, "r", &err), &err, CRL_E_INVALID, "key 'r'", "NULL");
    ck_assert_int_eq(crl_spec_check(rew, ok, "r", &err), CRL_OK);
    ck_assert(crl_spec_is_in(rew, ok));
    ck_assert(!crl_spec_is_in(rew, f64));
    ck_assert(!crl_spec_is_in(rew, two));
    ck_assert(!crl_spec_is_in(rew, NULL));
    ck_assert(!crl_spec_is_in(NULL, ok));
    crl_spec *comp = must(crl_spec_composite(0, NULL, &err), &err);
    ck_assert(!crl_spec_is_in(comp, ok));
    expect_rc(crl_spec_check(comp, ok, "c", &err), &err, CRL_E_INVALID, "key 'c'",
              "crl_spec_check_td");
    crl_spec_unref(comp);
    crl_tensor_unref(f64);
    crl_tensor_unref(two);
    crl_tensor_unref(scalar);
    crl_tensor_unref(ok);
    crl_spec_unref(rew);
}
END_TEST

START_TEST(test_is_in_bounded_unbounded)
{
    crl_error err;
    crl_spec *act = must(crl_spec_bounded(CRL_F32, DIMS(1), -2, 2, &err), &err);
    crl_tensor *t = tens(CRL_F32, DIMS(1), VALS(3.5));
    ck_assert(!crl_spec_is_in(act, t));
    expect_rc(crl_spec_check(act, t, "action", &err), &err, CRL_E_RANGE,
              "key 'action': value 3.5 at index [0] is outside [-2, 2]", NULL);
    const double good[] = {-2, 2, 0, 1.5};
    for (int i = 0; i < 4; i++) {
        crl_tensor_flat_set(t, 0, good[i]);
        ck_assert_msg(crl_spec_is_in(act, t), "%g should be in [-2, 2]", good[i]);
    }
    crl_tensor_flat_set(t, 0, NAN);
    ck_assert(!crl_spec_is_in(act, t));
    crl_tensor_flat_set(t, 0, -2.0001);
    ck_assert(!crl_spec_is_in(act, t));
    crl_tensor_unref(t);
    crl_spec_unref(act);

    /* elementwise bounds, index in the message */
    crl_tensor *lo = tens(CRL_F64, DIMS(2, 2), VALS(0, 0, 10, 10));
    crl_tensor *hi = tens(CRL_F64, DIMS(2, 2), VALS(1, 1, 20, 20));
    crl_spec *b = must(crl_spec_bounded_t(CRL_F64, lo, hi, &err), &err);
    crl_tensor *v = tens(CRL_F64, DIMS(2, 2), VALS(0.5, 1, 15, 5));
    expect_rc(crl_spec_check(b, v, "obs", &err), &err, CRL_E_RANGE,
              "key 'obs': value 5 at index [1, 1] is outside [10, 20]", NULL);
    crl_tensor_flat_set(v, 3, 10);
    ck_assert(crl_spec_is_in(b, v));
    crl_tensor_unref(lo);
    crl_tensor_unref(hi);
    crl_tensor_unref(v);
    crl_spec_unref(b);

    /* integer Bounded */
    crl_spec *bi = must(crl_spec_bounded(CRL_I16, DIMS(3), -5, 5, &err), &err);
    crl_tensor *ti = tens(CRL_I16, DIMS(3), VALS(-5, 0, 5));
    ck_assert(crl_spec_is_in(bi, ti));
    crl_tensor_flat_set(ti, 1, 6);
    expect_rc(crl_spec_check(bi, ti, "k", &err), &err, CRL_E_RANGE,
              "value 6 at index [1] is outside [-5, 5]", NULL);
    crl_tensor_unref(ti);
    crl_spec_unref(bi);

    /* Unbounded takes any value of its dtype, NaN and inf included */
    crl_spec *u = must(crl_spec_unbounded(CRL_F32, DIMS(3), &err), &err);
    crl_tensor *tu = tens(CRL_F32, DIMS(3), VALS(NAN, INFINITY, -1e30));
    ck_assert(crl_spec_is_in(u, tu));
    crl_tensor_unref(tu);
    crl_spec_unref(u);
}
END_TEST

START_TEST(test_is_in_discrete)
{
    crl_error err;
    /* Categorical */
    crl_spec *c = must(crl_spec_categorical(4, CRL_I64, DIMS(3), &err), &err);
    crl_tensor *t = tens(CRL_I64, DIMS(3), VALS(0, 3, 2));
    ck_assert(crl_spec_is_in(c, t));
    crl_tensor_flat_set(t, 2, 4);
    ck_assert(!crl_spec_is_in(c, t));
    expect_rc(crl_spec_check(c, t, "action", &err), &err, CRL_E_RANGE,
              "key 'action': value 4 at index [2] is outside [0, 3]", "n = 4");
    crl_tensor_flat_set(t, 2, -1);
    ck_assert(!crl_spec_is_in(c, t));
    crl_tensor_unref(t);
    crl_spec_unref(c);

    crl_spec *done = must(crl_spec_categorical(2, CRL_BOOL, DIMS(1), &err), &err);
    crl_tensor *tb = tens(CRL_BOOL, DIMS(1), VALS(1));
    ck_assert(crl_spec_is_in(done, tb));
    crl_tensor *tb_wrong = tens(CRL_U8, DIMS(1), VALS(1));
    expect_rc(crl_spec_check(done, tb_wrong, "done", &err), &err, CRL_E_DTYPE,
              "key 'done': expected dtype bool but got uint8", NULL);
    crl_tensor_unref(tb);
    crl_tensor_unref(tb_wrong);
    crl_spec_unref(done);

    /* OneHot */
    crl_spec *oh = must(crl_spec_onehot(3, CRL_F32, DIMS(2, 3), &err), &err);
    crl_tensor *o = tens(CRL_F32, DIMS(2, 3), VALS(0, 1, 0, 1, 0, 0));
    ck_assert(crl_spec_is_in(oh, o));
    crl_tensor_flat_set(o, 5, 1);
    expect_rc(crl_spec_check(oh, o, "a", &err), &err, CRL_E_RANGE,
              "the row at index [1] has 2 ones; one-hot needs exactly one (n = 3)", NULL);
    crl_tensor_flat_set(o, 3, 0);
    crl_tensor_flat_set(o, 5, 0);
    expect_rc(crl_spec_check(oh, o, "a", &err), &err, CRL_E_RANGE, "[1] has 0 ones", NULL);
    crl_tensor_flat_set(o, 3, 0.5);
    expect_rc(crl_spec_check(oh, o, "a", &err), &err, CRL_E_RANGE,
              "value 0.5 at index [1, 0] is not 0 or 1", NULL);
    crl_tensor_unref(o);
    crl_spec_unref(oh);

    /* MultiOneHot: groups of 2 and 3 */
    crl_spec *mo = must(crl_spec_multi_onehot(SHP(2, 3), 2, CRL_I64, DIMS(5), &err), &err);
    crl_tensor *m = tens(CRL_I64, DIMS(5), VALS(0, 1, 0, 0, 1));
    ck_assert(crl_spec_is_in(mo, m));
    crl_tensor_flat_set(m, 4, 0);
    expect_rc(crl_spec_check(mo, m, "mo", &err), &err, CRL_E_RANGE,
              "group 1 (columns 2..4) of the row at index [] has 0 ones", NULL);
    crl_tensor_flat_set(m, 4, 1);
    crl_tensor_flat_set(m, 0, 1);
    expect_rc(crl_spec_check(mo, m, "mo", &err), &err, CRL_E_RANGE, "group 0", "2 ones");
    crl_tensor_unref(m);
    crl_spec_unref(mo);

    /* MultiCategorical */
    crl_spec *mc = must(crl_spec_multi_categorical(SHP(2, 5), CRL_I32, DIMS(2, 2), &err), &err);
    crl_tensor *x = tens(CRL_I32, DIMS(2, 2), VALS(1, 4, 0, 0));
    ck_assert(crl_spec_is_in(mc, x));
    crl_tensor_flat_set(x, 2, 2);
    expect_rc(crl_spec_check(mc, x, "mc", &err), &err, CRL_E_RANGE,
              "value 2 at index [1, 0] is outside [0, 1] (nvec[0] = 2)", NULL);
    crl_tensor_unref(x);
    crl_spec_unref(mc);

    /* Binary */
    crl_spec *bin = must(crl_spec_binary(3, CRL_F32, DIMS(3), &err), &err);
    crl_tensor *bt = tens(CRL_F32, DIMS(3), VALS(0, 1, 1));
    ck_assert(crl_spec_is_in(bin, bt));
    crl_tensor_flat_set(bt, 0, 0.5);
    expect_rc(crl_spec_check(bin, bt, "b", &err), &err, CRL_E_RANGE,
              "value 0.5 at index [0] is not 0 or 1", NULL);
    crl_tensor_flat_set(bt, 0, 2);
    ck_assert(!crl_spec_is_in(bin, bt));
    crl_tensor_unref(bt);
    crl_spec_unref(bin);
}
END_TEST

START_TEST(test_is_in_strided_view)
{
    /* a non-contiguous view goes through the strided path */
    crl_error err;
    crl_spec *b = must(crl_spec_bounded(CRL_F32, DIMS(2), 0, 1, &err), &err);
    crl_tensor *base = tens(CRL_F32, DIMS(4), VALS(0.5, 9, 0.25, 9));
    crl_tensor *view = crl_tensor_slice(base, 0, 0, 4, 2, &err);
    ck_assert_ptr_nonnull(view);
    ck_assert(!crl_tensor_is_contiguous(view));
    ck_assert(crl_spec_is_in(b, view));
    crl_tensor_flat_set(base, 2, 3);
    expect_rc(crl_spec_check(b, view, "v", &err), &err, CRL_E_RANGE,
              "value 3 at index [1] is outside [0, 1]", NULL);
    crl_tensor_unref(view);
    crl_tensor_unref(base);
    crl_spec_unref(b);
}
END_TEST

/* ---- project --------------------------------------------------------------- */

static void expect_values(const crl_tensor *t, const double *want, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(crl_tensor_flat_get(t, i) == want[i], "element %d: %g != %g", i,
                      crl_tensor_flat_get(t, i), want[i]);
}

START_TEST(test_project)
{
    crl_error err;
    crl_spec *b = must(crl_spec_bounded(CRL_F32, DIMS(4), -2, 2, &err), &err);
    crl_tensor *t = tens(CRL_F32, DIMS(4), VALS(3, -5, 0.5, NAN));
    ck_assert_int_eq(crl_spec_project(b, t, &err), CRL_OK);
    expect_values(t, VALS(2, -2, 0.5, -2), 4);
    ck_assert(crl_spec_is_in(b, t));
    crl_tensor_unref(t);

    crl_tensor *wrong = tens(CRL_F64, DIMS(4), NULL);
    expect_rc(crl_spec_project(b, wrong, &err), &err, CRL_E_DTYPE, "crl_spec_project",
              "expected dtype float32 but got float64");
    crl_tensor_unref(wrong);
    crl_tensor *wrong_shape = tens(CRL_F32, DIMS(3), NULL);
    expect_rc(crl_spec_project(b, wrong_shape, &err), &err, CRL_E_SHAPE,
              "expected shape [4] but got [3]", NULL);
    crl_tensor_unref(wrong_shape);
    crl_spec_unref(b);

    crl_spec *c = must(crl_spec_categorical(4, CRL_I32, DIMS(4), &err), &err);
    crl_tensor *ct = tens(CRL_I32, DIMS(4), VALS(-3, 2, 7, 3));
    ck_assert_int_eq(crl_spec_project(c, ct, &err), CRL_OK);
    expect_values(ct, VALS(0, 2, 3, 3), 4);
    crl_tensor_unref(ct);
    crl_spec_unref(c);

    crl_spec *mc = must(crl_spec_multi_categorical(SHP(2, 10), CRL_I64, DIMS(2, 2), &err), &err);
    crl_tensor *mt = tens(CRL_I64, DIMS(2, 2), VALS(5, 5, -1, 11));
    ck_assert_int_eq(crl_spec_project(mc, mt, &err), CRL_OK);
    expect_values(mt, VALS(1, 5, 0, 9), 4);
    crl_tensor_unref(mt);
    crl_spec_unref(mc);

    crl_spec *oh = must(crl_spec_onehot(3, CRL_F32, DIMS(3, 3), &err), &err);
    crl_tensor *ot = tens(CRL_F32, DIMS(3, 3), VALS(0.1, 0.7, 0.2, 5, 5, 1, NAN, -1, -3));
    ck_assert_int_eq(crl_spec_project(oh, ot, &err), CRL_OK);
    /* argmax, first maximum on ties, NaN ignored */
    expect_values(ot, VALS(0, 1, 0, 1, 0, 0, 0, 1, 0), 9);
    ck_assert(crl_spec_is_in(oh, ot));
    crl_tensor_unref(ot);
    crl_spec_unref(oh);

    crl_spec *mo = must(crl_spec_multi_onehot(SHP(2, 3), 2, CRL_F64, DIMS(5), &err), &err);
    crl_tensor *mot = tens(CRL_F64, DIMS(5), VALS(0.2, 0.3, 9, 1, 2));
    ck_assert_int_eq(crl_spec_project(mo, mot, &err), CRL_OK);
    expect_values(mot, VALS(0, 1, 1, 0, 0), 5);
    crl_tensor_unref(mot);
    crl_spec_unref(mo);

    crl_spec *bin = must(crl_spec_binary(4, CRL_F32, DIMS(4), &err), &err);
    crl_tensor *bt = tens(CRL_F32, DIMS(4), VALS(0.5, 0.51, -3, 7));
    ck_assert_int_eq(crl_spec_project(bin, bt, &err), CRL_OK);
    expect_values(bt, VALS(0, 1, 0, 1), 4);
    crl_tensor_unref(bt);
    crl_spec_unref(bin);

    crl_spec *u = must(crl_spec_unbounded(CRL_F32, DIMS(1), &err), &err);
    crl_tensor *ut = tens(CRL_F32, DIMS(1), VALS(1e30));
    ck_assert_int_eq(crl_spec_project(u, ut, &err), CRL_OK);
    expect_values(ut, VALS(1e30f), 1);
    crl_tensor_unref(ut);
    crl_spec_unref(u);

    crl_spec *comp = must(crl_spec_composite(0, NULL, &err), &err);
    crl_tensor *any = tens(CRL_F32, DIMS(1), NULL);
    expect_rc(crl_spec_project(comp, any, &err), &err, CRL_E_INVALID, "Composite", NULL);
    expect_rc(crl_spec_project(NULL, any, &err), &err, CRL_E_INVALID, "NULL", NULL);
    crl_tensor_unref(any);
    crl_spec_unref(comp);
}
END_TEST

/* ---- rand ------------------------------------------------------------------- */

/* Draw into a tensor until `draws` elements (or rows, for one-hot kinds)
 * have been produced; every draw must be in the spec. */
static void rand_in_domain(const crl_spec *s, int64_t per_draw, int64_t draws, crl_rng *rng)
{
    crl_error err;
    crl_tensor *t = crl_spec_zero(s, &err);
    ck_assert_msg(t != NULL, "zero: %s", err.message);
    for (int64_t done = 0; done < draws; done += per_draw) {
        ck_assert_int_eq(crl_spec_rand_into(s, rng, t, &err), CRL_OK);
        int rc = crl_spec_check(s, t, "draw", &err);
        ck_assert_msg(rc == CRL_OK, "%s dtype %s: %s", "rand", crl_dtype_name(crl_spec_dtype(s)),
                      err.message);
    }
    crl_tensor_unref(t);
}

START_TEST(test_rand_always_in_domain)
{
    crl_error err;
    crl_rng rng;
    crl_rng_init(&rng, 1234, 0);
    enum { DRAWS = 10000 };
    for (size_t i = 0; i < N_ALL; i++) {
        crl_dtype dt = all_dtypes[i];
        crl_spec *s;
        s = must(crl_spec_unbounded(dt, DIMS(100), &err), &err);
        rand_in_domain(s, 100, DRAWS, &rng);
        crl_spec_unref(s);
        double lo = dt == CRL_U8 ? 3 : dt == CRL_BOOL ? 0 : -3, hi = dt == CRL_BOOL ? 1 : 7.5;
        s = must(crl_spec_bounded(dt, DIMS(100), lo, hi, &err), &err);
        rand_in_domain(s, 100, DRAWS, &rng);
        crl_spec_unref(s);
        s = must(crl_spec_onehot(7, dt, DIMS(20, 7), &err), &err);
        rand_in_domain(s, 20, DRAWS, &rng);
        crl_spec_unref(s);
        s = must(crl_spec_multi_onehot(SHP(2, 1, 4), 3, dt, DIMS(20, 7), &err), &err);
        rand_in_domain(s, 20, DRAWS, &rng);
        crl_spec_unref(s);
        s = must(crl_spec_binary(5, dt, DIMS(20, 5), &err), &err);
        rand_in_domain(s, 100, DRAWS, &rng);
        crl_spec_unref(s);
    }
    for (size_t i = 0; i < N_INT; i++) {
        crl_dtype dt = int_dtypes[i];
        crl_spec *s = must(crl_spec_categorical(5, dt, DIMS(100), &err), &err);
        rand_in_domain(s, 100, DRAWS, &rng);
        crl_spec_unref(s);
        s = must(crl_spec_multi_categorical(SHP(2, 3, 100), dt, DIMS(30, 3), &err), &err);
        rand_in_domain(s, 90, DRAWS, &rng);
        crl_spec_unref(s);
        /* the whole range of the dtype */
        s = must(crl_spec_bounded(dt, DIMS(100), -INFINITY, INFINITY, &err), &err);
        rand_in_domain(s, 100, DRAWS, &rng);
        crl_spec_unref(s);
    }
    crl_spec *s = must(crl_spec_categorical(2, CRL_BOOL, DIMS(100), &err), &err);
    rand_in_domain(s, 100, DRAWS, &rng);
    crl_spec_unref(s);
    /* extreme float bounds: huge, half-open, fully infinite */
    const double ext[][2] = {{-DBL_MAX, DBL_MAX}, {0, INFINITY}, {-INFINITY, -5},
                             {-INFINITY, INFINITY}, {1e-300, 2e-300}, {3, 3}};
    for (size_t j = 0; j < sizeof ext / sizeof ext[0]; j++) {
        const crl_dtype fdt[] = {CRL_F16, CRL_F32, CRL_F64};
        for (int k = 0; k < 3; k++) {
            crl_spec *e = must(crl_spec_bounded(fdt[k], DIMS(100), ext[j][0], ext[j][1], &err),
                               &err);
            rand_in_domain(e, 100, 2000, &rng);
            crl_spec_unref(e);
        }
    }
}
END_TEST

START_TEST(test_rand_coverage)
{
    crl_error err;
    crl_rng rng;
    crl_rng_init(&rng, 99, 0);
    /* Bounded int: both ends reached, nothing outside */
    crl_spec *bi = must(crl_spec_bounded(CRL_I32, DIMS(1000), -3, 4, &err), &err);
    crl_tensor *t = crl_spec_rand(bi, &rng, &err);
    ck_assert_ptr_nonnull(t);
    int seen[8] = {0};
    for (int i = 0; i < 1000; i++)
        seen[(int)crl_tensor_flat_get(t, i) + 3]++;
    for (int v = 0; v < 8; v++)
        ck_assert_int_gt(seen[v], 80);
    crl_tensor_unref(t);
    crl_spec_unref(bi);

    /* Bounded float: mean near the middle, spread over the interval */
    crl_spec *bf = must(crl_spec_bounded(CRL_F64, DIMS(10000), 2, 6, &err), &err);
    t = crl_spec_rand(bf, &rng, &err);
    double sum = 0, mn = 1e9, mx = -1e9;
    for (int i = 0; i < 10000; i++) {
        double v = crl_tensor_flat_get(t, i);
        sum += v;
        mn = fmin(mn, v);
        mx = fmax(mx, v);
    }
    ck_assert_double_eq_tol(sum / 10000, 4.0, 0.05);
    ck_assert_double_lt(mn, 2.01);
    ck_assert_double_gt(mx, 5.99);
    crl_tensor_unref(t);
    crl_spec_unref(bf);

    /* Unbounded float: standard normal */
    crl_spec *un = must(crl_spec_unbounded(CRL_F32, DIMS(20000), &err), &err);
    t = crl_spec_rand(un, &rng, &err);
    double s1 = 0, s2 = 0;
    for (int i = 0; i < 20000; i++) {
        double v = crl_tensor_flat_get(t, i);
        s1 += v;
        s2 += v * v;
    }
    ck_assert_double_eq_tol(s1 / 20000, 0.0, 0.04);
    ck_assert_double_eq_tol(s2 / 20000, 1.0, 0.05);
    crl_tensor_unref(t);
    crl_spec_unref(un);

    /* Unbounded ints: 8-bit full range, wider [-100, 100] */
    struct { crl_dtype dt; double lo, hi; } ur[] = {
        {CRL_U8, 0, 255}, {CRL_I8, -128, 127}, {CRL_I32, -100, 100}, {CRL_I64, -100, 100},
        {CRL_BOOL, 0, 1}};
    for (size_t k = 0; k < sizeof ur / sizeof ur[0]; k++) {
        crl_spec *ui = must(crl_spec_unbounded(ur[k].dt, DIMS(20000), &err), &err);
        t = crl_spec_rand(ui, &rng, &err);
        double a = 1e9, b = -1e9;
        for (int i = 0; i < 20000; i++) {
            double v = crl_tensor_flat_get(t, i);
            a = fmin(a, v);
            b = fmax(b, v);
        }
        ck_assert_msg(a == ur[k].lo && b == ur[k].hi, "%s: range [%g, %g]",
                      crl_dtype_name(ur[k].dt), a, b);
        crl_tensor_unref(t);
        crl_spec_unref(ui);
    }

    /* Categorical, OneHot, Binary: every value / position appears */
    crl_spec *c = must(crl_spec_categorical(6, CRL_I64, DIMS(600), &err), &err);
    t = crl_spec_rand(c, &rng, &err);
    int cat[6] = {0};
    for (int i = 0; i < 600; i++)
        cat[(int)crl_tensor_flat_get(t, i)]++;
    for (int v = 0; v < 6; v++)
        ck_assert_int_gt(cat[v], 60);
    crl_tensor_unref(t);
    crl_spec_unref(c);

    crl_spec *oh = must(crl_spec_onehot(4, CRL_U8, DIMS(400, 4), &err), &err);
    t = crl_spec_rand(oh, &rng, &err);
    int pos[4] = {0};
    for (int r = 0; r < 400; r++)
        for (int k = 0; k < 4; k++)
            if (crl_tensor_flat_get(t, r * 4 + k) == 1)
                pos[k]++;
    for (int k = 0; k < 4; k++)
        ck_assert_int_gt(pos[k], 60);
    crl_tensor_unref(t);
    crl_spec_unref(oh);

    crl_spec *bin = must(crl_spec_binary(1000, CRL_BOOL, DIMS(1000), &err), &err);
    t = crl_spec_rand(bin, &rng, &err);
    int ones = 0;
    for (int i = 0; i < 1000; i++)
        ones += crl_tensor_flat_get(t, i) == 1;
    ck_assert_int_gt(ones, 420);
    ck_assert_int_lt(ones, 580);
    crl_tensor_unref(t);
    crl_spec_unref(bin);
}
END_TEST

START_TEST(test_rand_deterministic)
{
    crl_error err;
    crl_spec *specs[] = {
        must(crl_spec_bounded(CRL_F32, DIMS(4, 3), -1, 1, &err), &err),
        must(crl_spec_unbounded(CRL_F16, DIMS(5), &err), &err),
        must(crl_spec_onehot(3, CRL_I64, DIMS(6, 3), &err), &err),
        must(crl_spec_multi_categorical(SHP(4, 9), CRL_I16, DIMS(5, 2), &err), &err),
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        crl_rng a, b, c;
        crl_rng_init(&a, 5, 1);
        crl_rng_init(&b, 5, 1);
        crl_rng_init(&c, 5, 2);
        crl_tensor *ta = crl_spec_rand(specs[i], &a, &err);
        crl_tensor *tb = crl_spec_rand(specs[i], &b, &err);
        crl_tensor *tc = crl_spec_rand(specs[i], &c, &err);
        ck_assert(crl_tensor_equal(ta, tb));
        ck_assert(!crl_tensor_equal(ta, tc));
        /* rand_into the same state gives the same values again */
        crl_rng_init(&a, 5, 1);
        crl_tensor_fill(tb, 0);
        ck_assert_int_eq(crl_spec_rand_into(specs[i], &a, tb, &err), CRL_OK);
        ck_assert(crl_tensor_equal(ta, tb));
        crl_tensor_unref(ta);
        crl_tensor_unref(tb);
        crl_tensor_unref(tc);
        crl_spec_unref(specs[i]);
    }
}
END_TEST

START_TEST(test_rand_into_strided_and_errors)
{
    crl_error err;
    crl_rng rng;
    crl_rng_init(&rng, 8, 8);
    crl_spec *oh = must(crl_spec_onehot(3, CRL_F32, DIMS(2, 3), &err), &err);
    /* a permuted view of a [3, 2] tensor has the spec's shape [2, 3] */
    crl_tensor *base = tens(CRL_F32, DIMS(3, 2), NULL);
    crl_tensor *view = crl_tensor_permute(base, (const int[]){1, 0}, &err);
    ck_assert_ptr_nonnull(view);
    ck_assert(!crl_tensor_is_contiguous(view));
    for (int i = 0; i < 200; i++) {
        ck_assert_int_eq(crl_spec_rand_into(oh, &rng, view, &err), CRL_OK);
        ck_assert(crl_spec_is_in(oh, view));
    }
    crl_tensor *wrong_dt = tens(CRL_F64, DIMS(2, 3), NULL);
    expect_rc(crl_spec_rand_into(oh, &rng, wrong_dt, &err), &err, CRL_E_DTYPE,
              "crl_spec_rand_into", "expected dtype float32 but got float64");
    crl_tensor *wrong_shape = tens(CRL_F32, DIMS(3, 3), NULL);
    expect_rc(crl_spec_rand_into(oh, &rng, wrong_shape, &err), &err, CRL_E_SHAPE,
              "expected shape [2, 3] but got [3, 3]", NULL);
    expect_rc(crl_spec_rand_into(oh, NULL, view, &err), &err, CRL_E_INVALID, "rng is NULL",
              NULL);
    expect_rc(crl_spec_rand_into(oh, &rng, NULL, &err), &err, CRL_E_INVALID, "NULL", NULL);
    crl_spec *comp = must(crl_spec_composite(0, NULL, &err), &err);
    expect_fail(crl_spec_rand(comp, &rng, &err), &err, CRL_E_INVALID, "crl_spec_rand_td",
                NULL);
    expect_fail(crl_spec_zero(comp, &err), &err, CRL_E_INVALID, "crl_spec_zero_td", NULL);
    expect_fail(crl_spec_rand_td(oh, &rng, &err), &err, CRL_E_INVALID, "not a Composite", NULL);
    expect_fail(crl_spec_zero_td(oh, &err), &err, CRL_E_INVALID, "not a Composite", NULL);
    expect_fail(crl_spec_rand_td(comp, NULL, &err), &err, CRL_E_INVALID, "rng is NULL", NULL);
    crl_spec_unref(comp);
    crl_tensor_unref(wrong_dt);
    crl_tensor_unref(wrong_shape);
    crl_tensor_unref(view);
    crl_tensor_unref(base);
    crl_spec_unref(oh);
}
END_TEST

START_TEST(test_zero)
{
    crl_error err;
    crl_spec *b = must(crl_spec_bounded(CRL_I16, DIMS(2, 3), 1, 5, &err), &err);
    crl_tensor *z = crl_spec_zero(b, &err);
    ck_assert_ptr_nonnull(z);
    ck_assert_int_eq(crl_tensor_dtype(z), CRL_I16);
    ck_assert_int_eq(crl_tensor_ndim(z), 2);
    ck_assert_int_eq(crl_tensor_shape(z)[1], 3);
    for (int i = 0; i < 6; i++)
        ck_assert(crl_tensor_flat_get(z, i) == 0);
    crl_tensor_unref(z);
    crl_spec_unref(b);
}
END_TEST

/* ---- TensorDicts -------------------------------------------------------------- */

/* An env-like spec: observation [B,3], next.{reward [B,1], done bool [B,1]}. */
static crl_spec *env_spec(int bnd, const int64_t *batch)
{
    crl_error err;
    int64_t s3[CRL_MAX_DIMS], s1[CRL_MAX_DIMS];
    for (int i = 0; i < bnd; i++)
        s3[i] = s1[i] = batch[i];
    s3[bnd] = 3;
    s1[bnd] = 1;
    crl_spec *comp = must(crl_spec_composite(bnd, batch, &err), &err);
    crl_spec *obs = must(crl_spec_bounded(CRL_F32, bnd + 1, s3, -1, 1, &err), &err);
    crl_spec *rew = must(crl_spec_unbounded(CRL_F32, bnd + 1, s1, &err), &err);
    crl_spec *done = must(crl_spec_categorical(2, CRL_BOOL, bnd + 1, s1, &err), &err);
    ck_assert_int_eq(crl_spec_composite_set(comp, "observation", obs, &err), CRL_OK);
    ck_assert_int_eq(crl_spec_composite_set(comp, "next.reward", rew, &err), CRL_OK);
    ck_assert_int_eq(crl_spec_composite_set(comp, "next.done", done, &err), CRL_OK);
    crl_spec_unref(obs);
    crl_spec_unref(rew);
    crl_spec_unref(done);
    return comp;
}

START_TEST(test_rand_td_and_check_td)
{
    crl_error err;
    crl_rng rng;
    crl_rng_init(&rng, 3, 3);
    crl_spec *comp = env_spec(1, SHP(4));
    crl_td *td = crl_spec_rand_td(comp, &rng, &err);
    ck_assert_msg(td != NULL, "%s", err.message);
    ck_assert_int_eq(crl_td_batch_ndim(td), 1);
    ck_assert_int_eq(crl_td_batch_shape(td)[0], 4);
    ck_assert_ptr_nonnull(crl_td_get(td, "observation"));
    ck_assert_ptr_nonnull(crl_td_get(td, "next.reward"));
    ck_assert_ptr_nonnull(crl_td_get_td(td, "next"));
    ck_assert_int_eq(crl_tensor_dtype(crl_td_get(td, "next.done")), CRL_BOOL);
    ck_assert_int_eq(crl_spec_check_td(comp, td, &err), CRL_OK);

    /* deterministic */
    crl_rng r2;
    crl_rng_init(&r2, 3, 3);
    crl_td *td2 = crl_spec_rand_td(comp, &r2, &err);
    ck_assert(crl_td_equal(td, td2));
    crl_td_unref(td2);

    /* zero_td */
    crl_td *z = crl_spec_zero_td(comp, &err);
    ck_assert_ptr_nonnull(z);
    crl_tensor *zo = crl_td_get(z, "observation");
    for (int i = 0; i < 12; i++)
        ck_assert(crl_tensor_flat_get(zo, i) == 0);
    ck_assert_int_eq(crl_spec_check_td(comp, z, &err), CRL_OK);   /* 0 is in [-1, 1] */
    crl_td_unref(z);

    /* extra keys are fine */
    crl_tensor *extra = tens(CRL_I64, DIMS(4, 2), NULL);
    ck_assert_int_eq(crl_td_set(td, "some other key", extra, &err), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.extra", extra, &err), CRL_OK);
    ck_assert_int_eq(crl_spec_check_td(comp, td, &err), CRL_OK);

    /* nested wrong dtype */
    crl_tensor *r64 = tens(CRL_F64, DIMS(4, 1), NULL);
    ck_assert_int_eq(crl_td_set(td, "next.reward", r64, &err), CRL_OK);
    expect_rc(crl_spec_check_td(comp, td, &err), &err, CRL_E_DTYPE,
              "key 'next.reward': expected dtype float32 but got float64", NULL);
    /* nested missing */
    ck_assert_int_eq(crl_td_del(td, "next.reward", &err), CRL_OK);
    expect_rc(crl_spec_check_td(comp, td, &err), &err, CRL_E_NOT_FOUND,
              "key 'next.reward' is missing (present: next.done, next.extra)", NULL);
    /* out-of-domain value names the dotted key */
    crl_tensor *r32 = tens(CRL_F32, DIMS(4, 1), NULL);
    ck_assert_int_eq(crl_td_set(td, "next.reward", r32, &err), CRL_OK);
    crl_tensor_flat_set(crl_td_get(td, "observation"), 5, 1.5);
    expect_rc(crl_spec_check_td(comp, td, &err), &err, CRL_E_RANGE,
              "key 'observation': value 1.5 at index [1, 2] is outside [-1, 1]", NULL);
    /* top-level missing */
    ck_assert_int_eq(crl_td_del(td, "observation", &err), CRL_OK);
    expect_rc(crl_spec_check_td(comp, td, &err), &err, CRL_E_NOT_FOUND,
              "key 'observation' is missing (present: next, some other key)", NULL);
    /* a tensor where a nested Composite is expected, and the reverse */
    crl_td *flat = crl_td_new(DIMS(4), &err);
    crl_tensor *o = tens(CRL_F32, DIMS(4, 3), NULL);
    ck_assert_int_eq(crl_td_set(flat, "observation", o, &err), CRL_OK);
    ck_assert_int_eq(crl_td_set(flat, "next", extra, &err), CRL_OK);
    expect_rc(crl_spec_check_td(comp, flat, &err), &err, CRL_E_INVALID,
              "key 'next': expected a nested TensorDict", NULL);
    crl_td_unref(flat);
    flat = crl_spec_zero_td(comp, &err);
    ck_assert_int_eq(crl_td_del(flat, "observation", &err), CRL_OK);
    ck_assert_int_eq(crl_td_set(flat, "observation.x", o, &err), CRL_OK);
    expect_rc(crl_spec_check_td(comp, flat, &err), &err, CRL_E_INVALID,
              "key 'observation': expected a tensor but got a nested TensorDict", NULL);
    crl_td_unref(flat);
    /* empty td */
    flat = crl_td_new(DIMS(4), &err);
    expect_rc(crl_spec_check_td(comp, flat, &err), &err, CRL_E_NOT_FOUND,
              "key 'next' is missing (present: none)", NULL);
    crl_td_unref(flat);
    /* a leaf spec, NULL td */
    expect_rc(crl_spec_check_td(crl_spec_composite_get(comp, "observation"), td, &err), &err,
              CRL_E_INVALID, "not a Composite", NULL);
    expect_rc(crl_spec_check_td(comp, NULL, &err), &err, CRL_E_INVALID, "NULL", NULL);

    crl_tensor_unref(o);
    crl_tensor_unref(extra);
    crl_tensor_unref(r64);
    crl_tensor_unref(r32);
    crl_td_unref(td);
    crl_spec_unref(comp);
}
END_TEST

/* ---- expand, clone, equal ------------------------------------------------------- */

START_TEST(test_expand)
{
    crl_error err;
    crl_tensor *lo = tens(CRL_F64, DIMS(3), VALS(-1, -2, -3));
    crl_tensor *hi = tens(CRL_F64, DIMS(3), VALS(1, 2, 3));
    crl_spec *b = must(crl_spec_bounded_t(CRL_F32, lo, hi, &err), &err);
    crl_spec *e = crl_spec_expand(b, DIMS(4, 2), &err);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(crl_spec_ndim(e), 3);
    ck_assert_int_eq(crl_spec_shape(e)[0], 4);
    ck_assert_int_eq(crl_spec_shape(e)[1], 2);
    ck_assert_int_eq(crl_spec_shape(e)[2], 3);
    const crl_tensor *el = crl_spec_low(e), *eh = crl_spec_high(e);
    ck_assert_int_eq(crl_tensor_numel(el), 24);
    for (int i = 0; i < 24; i++) {
        ck_assert(crl_tensor_flat_get(el, i) == -(i % 3 + 1));
        ck_assert(crl_tensor_flat_get(eh, i) == i % 3 + 1);
    }
    ck_assert(!crl_spec_equal(b, e));
    crl_spec_unref(e);
    e = crl_spec_expand(b, 0, NULL, &err);
    ck_assert(crl_spec_equal(b, e));
    crl_spec_unref(e);

    crl_spec *mc = must(crl_spec_multi_categorical(SHP(2, 3), CRL_I64, DIMS(2), &err), &err);
    crl_spec *me = crl_spec_expand(mc, DIMS(5), &err);
    ck_assert_int_eq(crl_spec_ndim(me), 2);
    ck_assert_uint_eq(crl_spec_nvec_len(me), 2);
    ck_assert_int_eq(crl_spec_nvec(me)[1], 3);
    crl_spec_unref(me);
    crl_spec_unref(mc);

    crl_spec *comp = env_spec(0, NULL);
    crl_spec *ce = crl_spec_expand(comp, DIMS(2, 5), &err);
    ck_assert_ptr_nonnull(ce);
    ck_assert_int_eq(crl_spec_ndim(ce), 2);
    crl_spec *nx = crl_spec_composite_get(ce, "next");
    ck_assert_int_eq(crl_spec_ndim(nx), 2);
    crl_spec *rew = crl_spec_composite_get(ce, "next.reward");
    ck_assert_int_eq(crl_spec_ndim(rew), 3);
    ck_assert_int_eq(crl_spec_shape(rew)[0], 2);
    ck_assert_int_eq(crl_spec_shape(rew)[1], 5);
    ck_assert_int_eq(crl_spec_shape(rew)[2], 1);
    /* the expanded spec describes batched data */
    crl_rng rng;
    crl_rng_init(&rng, 1, 1);
    crl_td *td = crl_spec_rand_td(ce, &rng, &err);
    ck_assert_ptr_nonnull(td);
    ck_assert_int_eq(crl_td_batch_ndim(td), 2);
    ck_assert_int_eq(crl_spec_check_td(ce, td, &err), CRL_OK);
    crl_td_unref(td);
    crl_spec_unref(ce);

    expect_fail(crl_spec_expand(comp, DIMS(1, 1, 1, 1, 1, 1, 1, 1), &err), &err, CRL_E_SHAPE,
                "CRL_MAX_DIMS", NULL);
    expect_fail(crl_spec_expand(comp, DIMS(-2), &err), &err, CRL_E_INVALID, "crl_spec_expand",
                "shape[0] = -2");
    expect_fail(crl_spec_expand(NULL, DIMS(2), &err), &err, CRL_E_INVALID, "NULL", NULL);
    crl_spec_unref(comp);
    crl_tensor_unref(lo);
    crl_tensor_unref(hi);
    crl_spec_unref(b);
}
END_TEST

START_TEST(test_clone_equal)
{
    crl_error err;
    crl_spec *comp = env_spec(1, SHP(3));
    crl_spec *c = crl_spec_clone(comp, &err);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_ne(c, comp);
    ck_assert(crl_spec_equal(comp, c));
    ck_assert(crl_spec_equal(comp, comp));
    ck_assert(!crl_spec_equal(comp, NULL));
    ck_assert(crl_spec_equal(NULL, NULL));
    ck_assert_ptr_ne(crl_spec_composite_get(c, "next.reward"),
                     crl_spec_composite_get(comp, "next.reward"));
    /* the clone is independent */
    crl_spec *extra = must(crl_spec_unbounded(CRL_F32, DIMS(3), &err), &err);
    ck_assert_int_eq(crl_spec_composite_set(c, "next.extra", extra, &err), CRL_OK);
    ck_assert_ptr_null(crl_spec_composite_get(comp, "next.extra"));
    ck_assert(!crl_spec_equal(comp, c));
    ck_assert_int_eq(crl_spec_composite_del(c, "next.extra", &err), CRL_OK);
    ck_assert(crl_spec_equal(comp, c));
    /* same keys, different leaf */
    crl_spec *rew = must(crl_spec_unbounded(CRL_F64, DIMS(3, 1), &err), &err);
    ck_assert_int_eq(crl_spec_composite_set(c, "next.reward", rew, &err), CRL_OK);
    ck_assert(!crl_spec_equal(comp, c));
    crl_spec_unref(rew);
    crl_spec_unref(extra);
    crl_spec_unref(c);
    crl_spec_unref(comp);

    /* leaves differing in one attribute */
    crl_spec *b1 = must(crl_spec_bounded(CRL_F32, DIMS(2), -1, 1, &err), &err);
    crl_spec *b2 = must(crl_spec_bounded(CRL_F32, DIMS(2), -1, 2, &err), &err);
    crl_spec *b3 = must(crl_spec_bounded(CRL_F64, DIMS(2), -1, 1, &err), &err);
    crl_spec *b4 = must(crl_spec_bounded(CRL_F32, DIMS(3), -1, 1, &err), &err);
    crl_spec *b1c = crl_spec_clone(b1, &err);
    ck_assert(crl_spec_equal(b1, b1c));
    ck_assert_ptr_ne(crl_spec_low(b1), crl_spec_low(b1c));
    ck_assert(!crl_spec_equal(b1, b2));
    ck_assert(!crl_spec_equal(b1, b3));
    ck_assert(!crl_spec_equal(b1, b4));
    crl_spec *u = must(crl_spec_unbounded(CRL_F32, DIMS(2), &err), &err);
    ck_assert(!crl_spec_equal(b1, u));
    crl_spec *c4 = must(crl_spec_categorical(4, CRL_I64, DIMS(2), &err), &err);
    crl_spec *c5 = must(crl_spec_categorical(5, CRL_I64, DIMS(2), &err), &err);
    ck_assert(!crl_spec_equal(c4, c5));
    crl_spec *m1 = must(crl_spec_multi_categorical(SHP(2, 3), CRL_I64, DIMS(2), &err), &err);
    crl_spec *m2 = must(crl_spec_multi_categorical(SHP(2, 4), CRL_I64, DIMS(2), &err), &err);
    crl_spec *m1c = crl_spec_clone(m1, &err);
    ck_assert(!crl_spec_equal(m1, m2));
    ck_assert(crl_spec_equal(m1, m1c));
    expect_fail(crl_spec_clone(NULL, &err), &err, CRL_E_INVALID, "NULL", NULL);
    crl_spec *all[] = {b1, b2, b3, b4, b1c, u, c4, c5, m1, m2, m1c};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        crl_spec_unref(all[i]);
}
END_TEST

/* ---- printing --------------------------------------------------------------------- */

static void expect_repr(const crl_spec *s, const char *want)
{
    char *got = crl_spec_repr(s);
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(strcmp(got, want) == 0, "repr mismatch.\n--- got:\n%s\n--- want:\n%s", got,
                  want);
    crl_free(got);
}

START_TEST(test_repr_seed_examples)
{
    crl_error err;
    /* Pendulum's specs as printed in the seed tutorial */
    crl_spec *obs = must(crl_spec_composite(0, NULL, &err), &err);
    crl_spec *o = must(crl_spec_bounded(CRL_F32, DIMS(3), -8, 8, &err), &err);
    ck_assert_int_eq(crl_spec_composite_set(obs, "observation", o, &err), CRL_OK);
    crl_spec_unref(o);
    expect_repr(obs,
                "CompositeSpec(\n"
                "    observation: BoundedTensorSpec(\n"
                "        shape=torch.Size([3]),\n"
                "        space=ContinuousBox(\n"
                "            low=Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, contiguous=True),\n"
                "            high=Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, contiguous=True)),\n"
                "        device=cpu,\n"
                "        dtype=torch.float32,\n"
                "        domain=continuous), device=cpu, shape=torch.Size([]))");
    crl_spec_unref(obs);

    crl_spec *act = must(crl_spec_bounded(CRL_F32, DIMS(1), -2, 2, &err), &err);
    expect_repr(act,
                "BoundedTensorSpec(\n"
                "    shape=torch.Size([1]),\n"
                "    space=ContinuousBox(\n"
                "        low=Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.float32, contiguous=True),\n"
                "        high=Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.float32, contiguous=True)),\n"
                "    device=cpu,\n"
                "    dtype=torch.float32,\n"
                "    domain=continuous)");
    crl_spec_unref(act);

    /* the batched action spec from the intro seed */
    crl_spec *act4 = must(crl_spec_bounded(CRL_F32, DIMS(4, 1), -2, 2, &err), &err);
    expect_repr(act4,
                "BoundedTensorSpec(\n"
                "    shape=torch.Size([4, 1]),\n"
                "    space=ContinuousBox(\n"
                "        low=Tensor(shape=torch.Size([4, 1]), device=cpu, dtype=torch.float32, contiguous=True),\n"
                "        high=Tensor(shape=torch.Size([4, 1]), device=cpu, dtype=torch.float32, contiguous=True)),\n"
                "    device=cpu,\n"
                "    dtype=torch.float32,\n"
                "    domain=continuous)");
    crl_spec_unref(act4);

    crl_spec *rew = must(crl_spec_unbounded(CRL_F32, DIMS(1), &err), &err);
    expect_repr(rew,
                "UnboundedContinuousTensorSpec(\n"
                "    shape=torch.Size([1]),\n"
                "    space=None,\n"
                "    device=cpu,\n"
                "    dtype=torch.float32,\n"
                "    domain=continuous)");
    crl_spec_unref(rew);

    crl_spec *done = must(crl_spec_composite(0, NULL, &err), &err);
    const char *names[] = {"truncated", "done", "terminated"};   /* printed sorted */
    for (int i = 0; i < 3; i++) {
        crl_spec *d = must(crl_spec_categorical(2, CRL_BOOL, DIMS(1), &err), &err);
        ck_assert_int_eq(crl_spec_composite_set(done, names[i], d, &err), CRL_OK);
        crl_spec_unref(d);
    }
    expect_repr(done,
                "CompositeSpec(\n"
                "    done: DiscreteTensorSpec(\n"
                "        shape=torch.Size([1]),\n"
                "        space=DiscreteBox(n=2),\n"
                "        device=cpu,\n"
                "        dtype=torch.bool,\n"
                "        domain=discrete),\n"
                "    terminated: DiscreteTensorSpec(\n"
                "        shape=torch.Size([1]),\n"
                "        space=DiscreteBox(n=2),\n"
                "        device=cpu,\n"
                "        dtype=torch.bool,\n"
                "        domain=discrete),\n"
                "    truncated: DiscreteTensorSpec(\n"
                "        shape=torch.Size([1]),\n"
                "        space=DiscreteBox(n=2),\n"
                "        device=cpu,\n"
                "        dtype=torch.bool,\n"
                "        domain=discrete), device=cpu, shape=torch.Size([]))");
    crl_spec_unref(done);

    /* the pixels spec from the transforms part of the seed */
    crl_spec *pix = must(crl_spec_composite(0, NULL, &err), &err);
    crl_spec *p = must(crl_spec_unbounded(CRL_U8, DIMS(240, 320, 3), &err), &err);
    ck_assert_int_eq(crl_spec_composite_set(pix, "pixels", p, &err), CRL_OK);
    crl_spec_unref(p);
    expect_repr(pix,
                "CompositeSpec(\n"
                "    pixels: UnboundedDiscreteTensorSpec(\n"
                "        shape=torch.Size([240, 320, 3]),\n"
                "        space=ContinuousBox(\n"
                "            low=Tensor(shape=torch.Size([240, 320, 3]), device=cpu, dtype=torch.int64, contiguous=True),\n"
                "            high=Tensor(shape=torch.Size([240, 320, 3]), device=cpu, dtype=torch.int64, contiguous=True)),\n"
                "        device=cpu,\n"
                "        dtype=torch.uint8,\n"
                "        domain=continuous), device=cpu, shape=torch.Size([]))");
    crl_spec_unref(pix);
}
END_TEST

START_TEST(test_repr_other_kinds)
{
    crl_error err;
    crl_spec *oh = must(crl_spec_onehot(2, CRL_I64, DIMS(2), &err), &err);
    expect_repr(oh,
                "OneHotDiscreteTensorSpec(\n"
                "    shape=torch.Size([2]),\n"
                "    space=DiscreteBox(n=2),\n"
                "    device=cpu,\n"
                "    dtype=torch.int64,\n"
                "    domain=discrete)");
    crl_spec_unref(oh);

    crl_spec *mc = must(crl_spec_multi_categorical(SHP(3, 4), CRL_I64, DIMS(2), &err), &err);
    expect_repr(mc,
                "MultiDiscreteTensorSpec(\n"
                "    shape=torch.Size([2]),\n"
                "    space=BoxList(boxes=[DiscreteBox(n=3), DiscreteBox(n=4)]),\n"
                "    device=cpu,\n"
                "    dtype=torch.int64,\n"
                "    domain=discrete)");
    crl_spec_unref(mc);
    crl_spec *mc2 = must(crl_spec_multi_categorical(SHP(3, 4), CRL_I32, DIMS(2, 2), &err), &err);
    expect_repr(mc2,
                "MultiDiscreteTensorSpec(\n"
                "    shape=torch.Size([2, 2]),\n"
                "    space=BoxList(boxes=[BoxList(boxes=[DiscreteBox(n=3), DiscreteBox(n=4)]), "
                "BoxList(boxes=[DiscreteBox(n=3), DiscreteBox(n=4)])]),\n"
                "    device=cpu,\n"
                "    dtype=torch.int32,\n"
                "    domain=discrete)");
    crl_spec_unref(mc2);

    crl_spec *mo = must(crl_spec_multi_onehot(SHP(2, 3), 2, CRL_BOOL, DIMS(5), &err), &err);
    expect_repr(mo,
                "MultiOneHotDiscreteTensorSpec(\n"
                "    shape=torch.Size([5]),\n"
                "    space=BoxList(boxes=[DiscreteBox(n=2), DiscreteBox(n=3)]),\n"
                "    device=cpu,\n"
                "    dtype=torch.bool,\n"
                "    domain=discrete)");
    crl_spec_unref(mo);

    crl_spec *bin = must(crl_spec_binary(4, CRL_I8, DIMS(4), &err), &err);
    expect_repr(bin,
                "BinaryDiscreteTensorSpec(\n"
                "    shape=torch.Size([4]),\n"
                "    space=DiscreteBox(n=2),\n"
                "    device=cpu,\n"
                "    dtype=torch.int8,\n"
                "    domain=discrete)");
    crl_spec_unref(bin);

    crl_spec *ub = must(crl_spec_unbounded(CRL_BOOL, DIMS(1), &err), &err);
    expect_repr(ub,
                "UnboundedDiscreteTensorSpec(\n"
                "    shape=torch.Size([1]),\n"
                "    space=ContinuousBox(\n"
                "        low=Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.bool, contiguous=True),\n"
                "        high=Tensor(shape=torch.Size([1]), device=cpu, dtype=torch.bool, contiguous=True)),\n"
                "    device=cpu,\n"
                "    dtype=torch.bool,\n"
                "    domain=continuous)");
    crl_spec_unref(ub);

    /* nested Composites indent by 4 per level; an empty one prints as TorchRL does */
    crl_spec *comp = must(crl_spec_composite(DIMS(2), &err), &err);
    crl_spec *r = must(crl_spec_unbounded(CRL_F64, DIMS(2, 1), &err), &err);
    crl_spec *empty = must(crl_spec_composite(DIMS(2), &err), &err);
    ck_assert_int_eq(crl_spec_composite_set(comp, "next.reward", r, &err), CRL_OK);
    ck_assert_int_eq(crl_spec_composite_set(comp, "state", empty, &err), CRL_OK);
    crl_spec_unref(r);
    expect_repr(empty, "CompositeSpec(\n, device=cpu, shape=torch.Size([2]))");
    crl_spec_unref(empty);
    expect_repr(comp,
                "CompositeSpec(\n"
                "    next: CompositeSpec(\n"
                "        reward: UnboundedContinuousTensorSpec(\n"
                "            shape=torch.Size([2, 1]),\n"
                "            space=None,\n"
                "            device=cpu,\n"
                "            dtype=torch.float64,\n"
                "            domain=continuous), device=cpu, shape=torch.Size([2])),\n"
                "    state: CompositeSpec(\n"
                "    , device=cpu, shape=torch.Size([2])), device=cpu, shape=torch.Size([2]))");
    crl_spec_unref(comp);
    char *none = crl_spec_repr(NULL);
    ck_assert_str_eq(none, "None");
    crl_free(none);
}
END_TEST

START_TEST(composite_of_wraps_and_consumes)
{
    crl_error err;
    int64_t shape[2] = { 3, 1 };
    crl_spec *leaf = crl_spec_unbounded(CRL_F32, 2, shape, &err);
    crl_spec_ref(leaf); /* keep one to compare after the call consumed its own */
    crl_spec *c = crl_spec_composite_of(3, "reward", leaf, &err);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_eq(crl_spec_composite_get(c, "reward"), leaf);
    ck_assert_int_eq(crl_spec_ndim(c), 1);
    ck_assert_int_eq(crl_spec_shape(c)[0], 3);
    crl_spec_unref(c);
    /* A leaf whose batch dim disagrees is refused and still consumed. */
    crl_error_clear(&err);
    ck_assert_ptr_null(crl_spec_composite_of(4, "reward", leaf, &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    ck_assert_ptr_nonnull(strstr(err.message, "reward"));
    /* NULL in, NULL out, the constructor's error untouched. */
    crl_error_set(&err, CRL_E_INVALID, "from the leaf");
    ck_assert_ptr_null(crl_spec_composite_of(3, "reward", NULL, &err));
    ck_assert_str_eq(err.message, "from the leaf");
}
END_TEST

START_TEST(kind_names)
{
    ck_assert_str_eq(crl_spec_kind_name(CRL_SPEC_UNBOUNDED), "Unbounded");
    ck_assert_str_eq(crl_spec_kind_name(CRL_SPEC_MULTI_ONEHOT), "MultiOneHot");
    ck_assert_str_eq(crl_spec_kind_name(CRL_SPEC_COMPOSITE), "Composite");
    ck_assert_ptr_null(crl_spec_kind_name((crl_spec_kind)99));
}
END_TEST

/* TorchRL's update_mask on Categorical and OneHot. */
START_TEST(masks)
{
    crl_error err = {0};
    crl_rng rng;
    crl_rng_init(&rng, 7, 0);
    crl_spec *c = must(crl_spec_categorical(4, CRL_I64, DIMS(3), &err), &err);
    /* value 0 may be 1 or 3; value 1 only 0; value 2 anything */
    crl_tensor *m = tens(CRL_BOOL, DIMS(3, 4), VALS(0, 1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1));
    expect_rc(crl_spec_update_mask(c, m, &err), &err, CRL_OK, NULL, NULL);
    ck_assert_ptr_nonnull(crl_spec_mask(c));
    crl_tensor *t = tens(CRL_I64, DIMS(3), NULL);
    int seen[3][4] = {{0}};
    for (int i = 0; i < 400; i++) {
        expect_rc(crl_spec_rand_into(c, &rng, t, &err), &err, CRL_OK, NULL, NULL);
        for (int k = 0; k < 3; k++)
            seen[k][(int)crl_tensor_flat_get(t, k)]++;
        ck_assert(crl_spec_is_in(c, t));
    }
    ck_assert(seen[0][0] == 0 && seen[0][2] == 0 && seen[0][1] > 100 && seen[0][3] > 100);
    ck_assert(seen[1][0] == 400);
    for (int v = 0; v < 4; v++)
        ck_assert(seen[2][v] > 50);
    crl_tensor *bad = tens(CRL_I64, DIMS(3), VALS(1, 2, 0));
    ck_assert(!crl_spec_is_in(c, bad));
    expect_rc(crl_spec_check(c, bad, "act", &err), &err, CRL_E_RANGE, "masked", "value 2");
    crl_error_clear(&err);
    /* project: the nearest allowed value, ties to the lower one */
    expect_rc(crl_spec_project(c, bad, &err), &err, CRL_OK, NULL, NULL);
    ck_assert(crl_tensor_flat_get(bad, 0) == 1 && crl_tensor_flat_get(bad, 1) == 0 && crl_tensor_flat_get(bad, 2) == 0);
    crl_tensor *two = tens(CRL_I64, DIMS(3), VALS(2, 1, 3));
    expect_rc(crl_spec_project(c, two, &err), &err, CRL_OK, NULL, NULL);
    ck_assert(crl_tensor_flat_get(two, 0) == 1 && crl_tensor_flat_get(two, 1) == 0 && crl_tensor_flat_get(two, 2) == 3);
    /* clone and expand keep it; equal sees it */
    crl_spec *cl = must(crl_spec_clone(c, &err), &err);
    ck_assert(crl_spec_equal(c, cl));
    crl_spec *ex = must(crl_spec_expand(c, DIMS(2), &err), &err);
    ck_assert_int_eq(crl_tensor_ndim(crl_spec_mask(ex)), 3);
    ck_assert(crl_tensor_flat_get(crl_spec_mask(ex), 12 + 4) == 1 && crl_tensor_flat_get(crl_spec_mask(ex), 12 + 5) == 0);
    crl_spec *plain = must(crl_spec_categorical(4, CRL_I64, DIMS(3), &err), &err);
    ck_assert(!crl_spec_equal(c, plain));
    /* bad masks change nothing */
    crl_tensor *none = tens(CRL_BOOL, DIMS(3, 4), VALS(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1));
    expect_rc(crl_spec_update_mask(c, none, &err), &err, CRL_E_INVALID, "row 1", "allows no value");
    crl_error_clear(&err);
    crl_tensor *f = tens(CRL_F32, DIMS(3, 4), NULL);
    expect_rc(crl_spec_update_mask(c, f, &err), &err, CRL_E_DTYPE, "bool", NULL);
    crl_error_clear(&err);
    crl_tensor *sh = tens(CRL_BOOL, DIMS(3, 3), NULL);
    expect_rc(crl_spec_update_mask(c, sh, &err), &err, CRL_E_SHAPE, "[3, 4]", NULL);
    crl_error_clear(&err);
    ck_assert(crl_spec_equal(c, cl));
    crl_spec *b = must(crl_spec_bounded(CRL_F32, DIMS(2), -1, 1, &err), &err);
    expect_rc(crl_spec_update_mask(b, m, &err), &err, CRL_E_INVALID, "Bounded", NULL);
    crl_error_clear(&err);
    /* NULL removes it */
    expect_rc(crl_spec_update_mask(c, NULL, &err), &err, CRL_OK, NULL, NULL);
    ck_assert_ptr_null(crl_spec_mask(c));
    ck_assert(crl_spec_equal(c, plain));
    /* OneHot: the mask has the spec's shape */
    crl_spec *oh = must(crl_spec_onehot(3, CRL_U8, DIMS(2, 3), &err), &err);
    crl_tensor *om = tens(CRL_BOOL, DIMS(2, 3), VALS(0, 0, 1, 1, 1, 0));
    expect_rc(crl_spec_update_mask(oh, om, &err), &err, CRL_OK, NULL, NULL);
    crl_tensor *ot = tens(CRL_U8, DIMS(2, 3), NULL);
    for (int i = 0; i < 100; i++) {
        expect_rc(crl_spec_rand_into(oh, &rng, ot, &err), &err, CRL_OK, NULL, NULL);
        ck_assert(crl_tensor_flat_get(ot, 2) == 1 && crl_tensor_flat_get(ot, 5) == 0);
    }
    crl_tensor *obad = tens(CRL_U8, DIMS(2, 3), VALS(1, 0, 0, 1, 0, 0));
    expect_rc(crl_spec_check(oh, obad, "a", &err), &err, CRL_E_RANGE, "masked", NULL);
    crl_error_clear(&err);
    expect_rc(crl_spec_project(oh, obad, &err), &err, CRL_OK, NULL, NULL);
    ck_assert(crl_tensor_flat_get(obad, 2) == 1 && crl_tensor_flat_get(obad, 0) == 0);
    crl_tensor *tensors[] = {m, t, bad, two, none, f, sh, om, ot, obad};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        crl_tensor_unref(tensors[i]);
    crl_spec *specs[] = {c, cl, ex, plain, b, oh};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        crl_spec_unref(specs[i]);
}
END_TEST

static Suite *spec_suite(void)
{
    Suite *s = suite_create("spec");
    TCase *tc = tcase_create("construct");
    tcase_add_test(tc, test_construct_and_accessors);
    tcase_add_test(tc, test_construct_failures_shape_dtype);
    tcase_add_test(tc, test_construct_failures_bounded);
    tcase_add_test(tc, test_construct_failures_discrete);
    tcase_add_test(tc, test_bounds_rounded_to_dtype);
    tcase_add_test(tc, test_refcount);
    suite_add_tcase(s, tc);
    tc = tcase_create("composite");
    tcase_add_test(tc, test_composite_nested_keys);
    tcase_add_test(tc, test_composite_set_failures);
    suite_add_tcase(s, tc);
    tc = tcase_create("domain");
    tcase_add_test(tc, test_check_meta_messages);
    tcase_add_test(tc, test_is_in_bounded_unbounded);
    tcase_add_test(tc, test_is_in_discrete);
    tcase_add_test(tc, test_is_in_strided_view);
    tcase_add_test(tc, test_project);
    suite_add_tcase(s, tc);
    tc = tcase_create("rand");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_rand_always_in_domain);
    tcase_add_test(tc, test_rand_coverage);
    tcase_add_test(tc, test_rand_deterministic);
    tcase_add_test(tc, test_rand_into_strided_and_errors);
    tcase_add_test(tc, test_zero);
    suite_add_tcase(s, tc);
    tc = tcase_create("td");
    tcase_add_test(tc, test_rand_td_and_check_td);
    suite_add_tcase(s, tc);
    tc = tcase_create("expand_clone");
    tcase_add_test(tc, test_expand);
    tcase_add_test(tc, test_clone_equal);
    suite_add_tcase(s, tc);
    tc = tcase_create("repr");
    tcase_add_test(tc, test_repr_seed_examples);
    tcase_add_test(tc, test_repr_other_kinds);
    tcase_add_test(tc, composite_of_wraps_and_consumes);
    tcase_add_test(tc, kind_names);
    tcase_add_test(tc, masks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(spec_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
