/* Check suite: crl_tensor storage, views, operations, half floats and repr. */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <crl/crl.h>

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static crl_tensor *mk(crl_dtype dt, int ndim, const int64_t *shape)
{
    crl_error err;
    crl_tensor *t = crl_tensor_new(dt, ndim, shape, &err);
    ck_assert_msg(t != NULL, "crl_tensor_new: %s", err.message);
    return t;
}

/* Fill with 0, 1, 2, ... in flat order. */
static void iota(crl_tensor *t)
{
    for (int64_t i = 0; i < crl_tensor_numel(t); i++)
        crl_tensor_flat_set(t, i, (double)i);
}

static void assert_msg_has(const crl_error *err, const char *needle)
{
    ck_assert_msg(strstr(err->message, needle) != NULL, "message '%s' lacks '%s'", err->message,
                  needle);
}

/* ---- dtypes ------------------------------------------------------------ */

START_TEST(dtype_sizes_and_names)
{
    const size_t sizes[] = {1, 1, 1, 2, 4, 8, 2, 4, 8};
    const char *names[] = {"bool", "uint8", "int8", "int16", "int32",
                           "int64", "float16", "float32", "float64"};
    for (int d = 0; d < CRL_DTYPE_COUNT; d++) {
        ck_assert_uint_eq(crl_dtype_size((crl_dtype)d), sizes[d]);
        ck_assert_str_eq(crl_dtype_name((crl_dtype)d), names[d]);
        crl_dtype back = CRL_DTYPE_COUNT;
        ck_assert(crl_dtype_from_name(names[d], &back));
        ck_assert_int_eq(back, d);
    }
    ck_assert_uint_eq(crl_dtype_size(CRL_DTYPE_COUNT), 0);
    ck_assert_uint_eq(crl_dtype_size((crl_dtype)-1), 0);
    ck_assert_ptr_null(crl_dtype_name(CRL_DTYPE_COUNT));
    ck_assert(crl_dtype_is_float(CRL_F16));
    ck_assert(crl_dtype_is_float(CRL_F32));
    ck_assert(crl_dtype_is_float(CRL_F64));
    ck_assert(!crl_dtype_is_float(CRL_I64));
    ck_assert(!crl_dtype_is_float(CRL_BOOL));
}
END_TEST

START_TEST(dtype_aliases)
{
    struct { const char *name; crl_dtype dt; } cases[] = {
        {"torch.float32", CRL_F32}, {"f32", CRL_F32},  {"float", CRL_F32},
        {"double", CRL_F64},        {"long", CRL_I64}, {"int", CRL_I32},
        {"half", CRL_F16},          {"torch.bool", CRL_BOOL}, {"u8", CRL_U8},
        {"torch.int16", CRL_I16},   {"i8", CRL_I8},    {"Float64", CRL_F64},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        crl_dtype dt = CRL_DTYPE_COUNT;
        ck_assert_msg(crl_dtype_from_name(cases[i].name, &dt), "%s", cases[i].name);
        ck_assert_int_eq(dt, cases[i].dt);
    }
    crl_dtype keep = CRL_I16;
    ck_assert(!crl_dtype_from_name("float128", &keep));
    ck_assert(!crl_dtype_from_name("", &keep));
    ck_assert(!crl_dtype_from_name(NULL, &keep));
    ck_assert(!crl_dtype_from_name("torch.", &keep));
    ck_assert_int_eq(keep, CRL_I16);
}
END_TEST

/* ---- construction ------------------------------------------------------ */

START_TEST(new_heap_layout)
{
    crl_tensor *t = mk(CRL_F32, 3, SHAPE(2, 3, 4));
    ck_assert_int_eq(crl_tensor_ndim(t), 3);
    ck_assert_int_eq(crl_tensor_dtype(t), CRL_F32);
    const int64_t *sh = crl_tensor_shape(t), *st = crl_tensor_strides(t);
    ck_assert_int_eq(sh[0], 2);
    ck_assert_int_eq(sh[1], 3);
    ck_assert_int_eq(sh[2], 4);
    ck_assert_int_eq(st[0], 12);
    ck_assert_int_eq(st[1], 4);
    ck_assert_int_eq(st[2], 1);
    ck_assert_int_eq(crl_tensor_numel(t), 24);
    ck_assert_uint_eq(crl_tensor_nbytes(t), 96);
    ck_assert(crl_tensor_is_contiguous(t));
    ck_assert_int_eq(crl_tensor_storage_kind(t), CRL_STORAGE_HEAP);
    ck_assert(!crl_tensor_is_shared(t));
    crl_device dev = crl_tensor_device(t);
    ck_assert_int_eq(dev.type, CRL_DEVICE_CPU);
    ck_assert_int_eq(dev.index, 0);
    ck_assert_ptr_nonnull(crl_tensor_data(t));
    const float *f = crl_tensor_data(t);
    for (int i = 0; i < 24; i++)
        ck_assert(f[i] == 0.0f);
    crl_tensor_unref(t);
}
END_TEST

START_TEST(new_scalar_and_empty)
{
    crl_tensor *s = mk(CRL_I64, 0, NULL);
    ck_assert_int_eq(crl_tensor_ndim(s), 0);
    ck_assert_int_eq(crl_tensor_numel(s), 1);
    ck_assert_uint_eq(crl_tensor_nbytes(s), 8);
    crl_tensor_set_f64(s, NULL, 42);
    ck_assert(crl_tensor_get_f64(s, NULL) == 42);
    crl_tensor_unref(s);

    crl_tensor *e = mk(CRL_F32, 2, SHAPE(0, 5));
    ck_assert_int_eq(crl_tensor_numel(e), 0);
    ck_assert_uint_eq(crl_tensor_nbytes(e), 0);
    ck_assert(crl_tensor_is_contiguous(e));
    crl_tensor_fill(e, 3); /* no elements: nothing to touch */
    crl_tensor_unref(e);
}
END_TEST

START_TEST(new_rejects_bad_arguments)
{
    crl_error err;
    crl_error_clear(&err);
    ck_assert_ptr_null(crl_tensor_new(CRL_DTYPE_COUNT, 1, SHAPE(2), &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    assert_msg_has(&err, "dtype 9");
    ck_assert_ptr_null(crl_tensor_new(CRL_F32, 9, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1), &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    assert_msg_has(&err, "ndim 9");
    ck_assert_ptr_null(crl_tensor_new(CRL_F32, -1, NULL, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_tensor_new(CRL_F32, 2, SHAPE(2, -3), &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    assert_msg_has(&err, "dim 1");
    assert_msg_has(&err, "[2, -3]");
    ck_assert_ptr_null(crl_tensor_new(CRL_F32, 2, NULL, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_tensor_new(CRL_F64, 3, SHAPE(INT64_C(1) << 40, INT64_C(1) << 40, 4), &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    /* NULL err is allowed. */
    ck_assert_ptr_null(crl_tensor_new(CRL_F32, 1, SHAPE(-1), NULL));
}
END_TEST

START_TEST(refcount_and_null_safety)
{
    crl_tensor *t = mk(CRL_F32, 1, SHAPE(4));
    ck_assert_ptr_eq(crl_tensor_ref(t), t);
    crl_tensor_unref(t);
    /* A view keeps the storage alive after the parent goes. */
    crl_tensor *v = crl_tensor_slice(t, 0, 1, 3, 1, NULL);
    crl_tensor_flat_set(t, 2, 7);
    crl_tensor_unref(t);
    ck_assert(crl_tensor_flat_get(v, 1) == 7);
    crl_tensor_unref(v);
    ck_assert_ptr_null(crl_tensor_ref(NULL));
    crl_tensor_unref(NULL);
    ck_assert_int_eq(crl_tensor_ndim(NULL), 0);
    ck_assert_int_eq(crl_tensor_numel(NULL), 0);
    ck_assert_ptr_null(crl_tensor_data(NULL));
    ck_assert_ptr_null(crl_tensor_shape(NULL));
    ck_assert(!crl_tensor_is_shared(NULL));
    ck_assert(!crl_tensor_same_shape(NULL, NULL));
    ck_assert(isnan(crl_tensor_flat_get(NULL, 0)));
    crl_tensor_fill(NULL, 1);
}
END_TEST

static int released;
static void on_release(void *user)
{
    released += *(int *)user;
}

START_TEST(wrap_external)
{
    float buf[6] = {0, 1, 2, 3, 4, 5};
    int inc = 1;
    released = 0;
    crl_error err;
    crl_tensor *t = crl_tensor_wrap(buf, CRL_F32, 2, SHAPE(2, 3), NULL, on_release, &inc, &err);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(crl_tensor_data(t), buf);
    ck_assert_int_eq(crl_tensor_storage_kind(t), CRL_STORAGE_EXTERNAL);
    ck_assert(!crl_tensor_is_shared(t));
    ck_assert(crl_tensor_get_f64(t, SHAPE(1, 2)) == 5);
    crl_tensor *v = crl_tensor_index(t, 0, 1, &err);
    crl_tensor_unref(t);
    ck_assert_int_eq(released, 0); /* the view still uses buf */
    crl_tensor_flat_set(v, 0, 30);
    ck_assert(buf[3] == 30);
    crl_tensor_unref(v);
    ck_assert_int_eq(released, 1);

    /* Explicit (transposed) strides. */
    crl_tensor *tt = crl_tensor_wrap(buf, CRL_F32, 2, SHAPE(3, 2), SHAPE(1, 3), NULL, NULL, &err);
    ck_assert_ptr_nonnull(tt);
    ck_assert(!crl_tensor_is_contiguous(tt));
    ck_assert(crl_tensor_get_f64(tt, SHAPE(2, 1)) == 5);
    ck_assert(crl_tensor_get_f64(tt, SHAPE(0, 1)) == 30);
    crl_tensor_unref(tt);
    ck_assert_int_eq(released, 1);

    ck_assert_ptr_null(crl_tensor_wrap(NULL, CRL_F32, 1, SHAPE(3), NULL, NULL, NULL, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_tensor_wrap(buf, CRL_F32, 1, SHAPE(3), SHAPE(-1), NULL, NULL, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    assert_msg_has(&err, "dim 0");
    /* An empty tensor may wrap NULL. */
    crl_tensor *e = crl_tensor_wrap(NULL, CRL_F32, 1, SHAPE(0), NULL, NULL, NULL, &err);
    ck_assert_ptr_nonnull(e);
    crl_tensor_unref(e);
}
END_TEST

START_TEST(shared_visible_across_fork)
{
    crl_error err;
    crl_tensor *t = crl_tensor_new_shared(CRL_I32, 1, SHAPE(4), &err);
    ck_assert_msg(t != NULL, "%s", err.message);
    ck_assert_int_eq(crl_tensor_storage_kind(t), CRL_STORAGE_SHARED);
    ck_assert(crl_tensor_is_shared(t));
    ck_assert(crl_tensor_flat_get(t, 3) == 0);
    crl_tensor *heap = mk(CRL_I32, 1, SHAPE(4));
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        crl_tensor_flat_set(t, 2, 1234);
        crl_tensor_flat_set(heap, 2, 1234);
        crl_tensor_unref(heap);
        crl_tensor_unref(t);
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert(crl_tensor_flat_get(t, 2) == 1234);
    ck_assert(crl_tensor_flat_get(heap, 2) == 0); /* a heap tensor is private */
    /* Views of shared storage are shared too. */
    crl_tensor *v = crl_tensor_slice(t, 0, 1, 3, 1, &err);
    ck_assert(crl_tensor_is_shared(v));
    ck_assert(crl_tensor_flat_get(v, 1) == 1234);
    crl_tensor_unref(v);
    crl_tensor_unref(heap);
    crl_tensor_unref(t);

    ck_assert_ptr_null(crl_tensor_new_shared(CRL_F32, 1, SHAPE(-2), &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    crl_tensor *e = crl_tensor_new_shared(CRL_F32, 1, SHAPE(0), &err);
    ck_assert_ptr_nonnull(e);
    crl_tensor_unref(e);
}
END_TEST

static char *tmpdir_new(void)
{
    char *d = g_strdup("/tmp/crl-test-tensor-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d));
    return d;
}

START_TEST(mmap_round_trip)
{
    char *dir = tmpdir_new();
    char *path = g_build_filename(dir, "t.bin", NULL);
    crl_error err;
    crl_tensor *t = crl_tensor_new_mmap(path, true, CRL_F64, 2, SHAPE(3, 4), &err);
    ck_assert_msg(t != NULL, "%s", err.message);
    ck_assert_int_eq(crl_tensor_storage_kind(t), CRL_STORAGE_MMAP);
    ck_assert(crl_tensor_is_shared(t));
    ck_assert(crl_tensor_flat_get(t, 11) == 0);
    iota(t);
    crl_tensor_flat_set(t, 5, -2.5);
    crl_tensor_unref(t);

    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, 3 * 4 * 8);

    crl_tensor *r = crl_tensor_new_mmap(path, false, CRL_F64, 2, SHAPE(3, 4), &err);
    ck_assert_msg(r != NULL, "%s", err.message);
    for (int64_t i = 0; i < 12; i++)
        ck_assert(crl_tensor_flat_get(r, i) == (i == 5 ? -2.5 : (double)i));
    crl_tensor_unref(r);

    /* The same bytes with another (compatible-size) shape reopen fine. */
    r = crl_tensor_new_mmap(path, false, CRL_F64, 1, SHAPE(12), &err);
    ck_assert_ptr_nonnull(r);
    ck_assert(crl_tensor_flat_get(r, 11) == 11);
    crl_tensor_unref(r);

    /* Wrong size: names the path and both sizes. */
    ck_assert_ptr_null(crl_tensor_new_mmap(path, false, CRL_F64, 2, SHAPE(3, 5), &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, path);
    assert_msg_has(&err, "96 bytes");
    assert_msg_has(&err, "120 bytes");
    assert_msg_has(&err, "[3, 5]");
    ck_assert_ptr_null(crl_tensor_new_mmap(path, false, CRL_F32, 2, SHAPE(3, 4), &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);

    /* Missing file without create. */
    char *missing = g_build_filename(dir, "nope.bin", NULL);
    ck_assert_ptr_null(crl_tensor_new_mmap(missing, false, CRL_F32, 1, SHAPE(2), &err));
    ck_assert_int_eq(err.code, CRL_E_NOT_FOUND);
    assert_msg_has(&err, missing);
    /* Uncreatable path. */
    char *bad = g_build_filename(dir, "no-such-dir", "x.bin", NULL);
    ck_assert_ptr_null(crl_tensor_new_mmap(bad, true, CRL_F32, 1, SHAPE(2), &err));
    ck_assert_int_eq(err.code, CRL_E_IO);
    assert_msg_has(&err, bad);
    ck_assert_ptr_null(crl_tensor_new_mmap("", true, CRL_F32, 1, SHAPE(2), &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_tensor_new_mmap(path, true, CRL_F32, 1, SHAPE(-2), &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    assert_msg_has(&err, path);

    /* create truncates an existing file to the new size. */
    t = crl_tensor_new_mmap(path, true, CRL_U8, 1, SHAPE(5), &err);
    ck_assert_ptr_nonnull(t);
    ck_assert(crl_tensor_flat_get(t, 0) == 0);
    crl_tensor_unref(t);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, 5);

    /* Zero-byte tensors map nothing but still work. */
    char *empty = g_build_filename(dir, "empty.bin", NULL);
    t = crl_tensor_new_mmap(empty, true, CRL_F32, 1, SHAPE(0), &err);
    ck_assert_ptr_nonnull(t);
    crl_tensor_unref(t);
    t = crl_tensor_new_mmap(empty, false, CRL_F32, 1, SHAPE(0), &err);
    ck_assert_ptr_nonnull(t);
    crl_tensor_unref(t);

    unlink(empty);
    unlink(path);
    rmdir(dir);
    g_free(empty);
    g_free(bad);
    g_free(missing);
    g_free(path);
    g_free(dir);
}
END_TEST

START_TEST(mmap_allocation_failure)
{
    char *dir = tmpdir_new();
    char *path = g_build_filename(dir, "huge.bin", NULL);
    /* Only on ext4, which refuses files over its 16 TiB limit before
     * allocating anything; elsewhere a huge request could fill the disk
     * (or RAM, on tmpfs) for a moment, or make glibc write zeros. */
    struct statfs sf;
    ck_assert_int_eq(statfs(dir, &sf), 0);
    if (sf.f_type == 0xEF53) {
        crl_error err;
        /* 2^58 float32 = 1 EiB. */
        crl_tensor *t = crl_tensor_new_mmap(path, true, CRL_F32, 2,
                                            SHAPE(INT64_C(1) << 30, INT64_C(1) << 28), &err);
        ck_assert_ptr_null(t);
        ck_assert_int_eq(err.code, CRL_E_IO);
        assert_msg_has(&err, path);
        assert_msg_has(&err, "1152921504606846976 bytes");
        ck_assert_int_ne(access(path, F_OK), 0); /* no half-made file left behind */
    }
    rmdir(dir);
    g_free(path);
    g_free(dir);
}
END_TEST

/* ---- views ------------------------------------------------------------- */

START_TEST(index_views_share_storage)
{
    crl_tensor *t = mk(CRL_F32, 2, SHAPE(3, 4));
    iota(t);
    crl_error err;
    crl_tensor *row = crl_tensor_index(t, 0, 1, &err);
    ck_assert_int_eq(crl_tensor_ndim(row), 1);
    ck_assert_int_eq(crl_tensor_shape(row)[0], 4);
    ck_assert(crl_tensor_flat_get(row, 0) == 4);
    crl_tensor *col = crl_tensor_index(t, -1, -1, &err);
    ck_assert_int_eq(crl_tensor_shape(col)[0], 3);
    ck_assert_int_eq(crl_tensor_strides(col)[0], 4);
    ck_assert(!crl_tensor_is_contiguous(col));
    ck_assert(crl_tensor_flat_get(col, 2) == 11);
    /* Writes through a view land in the parent. */
    crl_tensor_flat_set(col, 1, 100);
    ck_assert(crl_tensor_get_f64(t, SHAPE(1, 3)) == 100);
    ck_assert(crl_tensor_flat_get(row, 3) == 100);
    ck_assert_ptr_eq((char *)crl_tensor_data(row), (char *)crl_tensor_data(t) + 4 * sizeof(float));
    crl_tensor *scalar = crl_tensor_index(row, 0, 2, &err);
    ck_assert_int_eq(crl_tensor_ndim(scalar), 0);
    ck_assert(crl_tensor_get_f64(scalar, NULL) == 6);
    crl_tensor_unref(scalar);

    ck_assert_ptr_null(crl_tensor_index(t, 0, 3, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    assert_msg_has(&err, "index 3");
    assert_msg_has(&err, "dim 0");
    assert_msg_has(&err, "size 3");
    ck_assert_ptr_null(crl_tensor_index(t, 0, -4, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    ck_assert_ptr_null(crl_tensor_index(t, 2, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    assert_msg_has(&err, "dim 2");
    ck_assert_ptr_null(crl_tensor_index(NULL, 0, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    crl_tensor_unref(row);
    crl_tensor_unref(col);
    crl_tensor_unref(t);
}
END_TEST

START_TEST(slice_python_semantics)
{
    crl_tensor *t = mk(CRL_I64, 1, SHAPE(10));
    iota(t);
    crl_error err;
    struct { int64_t start, stop, step; int64_t len, first; } cases[] = {
        {2, 8, 3, 2, 2},   {-3, 100, 1, 3, 7}, {0, -1, 2, 5, 0}, {-100, 3, 1, 3, 0},
        {5, 2, 1, 0, -1},  {10, 20, 1, 0, -1}, {0, 10, 4, 3, 0}, {INT64_MIN, INT64_MAX, 5, 2, 0},
    };
    for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
        crl_tensor *s = crl_tensor_slice(t, 0, cases[c].start, cases[c].stop, cases[c].step, &err);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(crl_tensor_shape(s)[0], cases[c].len);
        for (int64_t i = 0; i < cases[c].len; i++)
            ck_assert(crl_tensor_flat_get(s, i) == (double)(cases[c].first + i * cases[c].step));
        crl_tensor_unref(s);
    }
    ck_assert_ptr_null(crl_tensor_slice(t, 0, 0, 5, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    assert_msg_has(&err, "step 0");
    ck_assert_ptr_null(crl_tensor_slice(t, 0, 0, 5, -1, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_tensor_slice(t, 1, 0, 5, 1, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);

    /* 2-D slice along the last dim: strided, shares storage. */
    crl_tensor *m = mk(CRL_F32, 2, SHAPE(3, 4));
    iota(m);
    crl_tensor *s = crl_tensor_slice(m, 1, 1, 4, 2, &err);
    ck_assert_int_eq(crl_tensor_shape(s)[0], 3);
    ck_assert_int_eq(crl_tensor_shape(s)[1], 2);
    ck_assert_int_eq(crl_tensor_strides(s)[1], 2);
    const double expect[] = {1, 3, 5, 7, 9, 11};
    for (int i = 0; i < 6; i++)
        ck_assert(crl_tensor_flat_get(s, i) == expect[i]);
    crl_tensor_fill(s, -1);
    ck_assert(crl_tensor_flat_get(m, 0) == 0);
    ck_assert(crl_tensor_flat_get(m, 1) == -1);
    ck_assert(crl_tensor_flat_get(m, 2) == 2);
    ck_assert(crl_tensor_flat_get(m, 11) == -1);
    crl_tensor_unref(s);
    crl_tensor_unref(m);
    crl_tensor_unref(t);
}
END_TEST

START_TEST(view_and_reshape)
{
    crl_tensor *t = mk(CRL_F32, 2, SHAPE(2, 6));
    iota(t);
    crl_error err;
    crl_tensor *v = crl_tensor_view(t, 3, SHAPE(3, -1, 2), &err);
    ck_assert_msg(v != NULL, "%s", err.message);
    ck_assert_int_eq(crl_tensor_shape(v)[1], 2);
    ck_assert_ptr_eq(crl_tensor_data(v), crl_tensor_data(t));
    ck_assert(crl_tensor_get_f64(v, SHAPE(2, 1, 1)) == 11);
    crl_tensor_unref(v);

    ck_assert_ptr_null(crl_tensor_view(t, 2, SHAPE(5, 2), &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, "[5, 2]");
    assert_msg_has(&err, "[2, 6]");
    ck_assert_ptr_null(crl_tensor_view(t, 2, SHAPE(-1, -1), &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_tensor_view(t, 2, SHAPE(-1, 5), &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    ck_assert_ptr_null(crl_tensor_view(t, 2, SHAPE(-2, 6), &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);

    /* A transpose cannot be flattened as a view; reshape copies. */
    crl_tensor *tr = crl_tensor_permute(t, (const int[]){1, 0}, &err);
    ck_assert_ptr_nonnull(tr);
    ck_assert_ptr_null(crl_tensor_view(tr, 1, SHAPE(12), &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, "reshape");
    crl_tensor *r = crl_tensor_reshape(tr, 1, SHAPE(12), &err);
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_ne(crl_tensor_data(r), crl_tensor_data(t));
    const double expect[] = {0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11};
    for (int i = 0; i < 12; i++)
        ck_assert(crl_tensor_flat_get(r, i) == expect[i]);
    crl_tensor_unref(r);
    /* Splitting a dim of the transpose is still a view. */
    crl_tensor *sv = crl_tensor_view(tr, 3, SHAPE(3, 2, 2), &err);
    ck_assert_msg(sv != NULL, "%s", err.message);
    ck_assert_ptr_eq(crl_tensor_data(sv), crl_tensor_data(t));
    ck_assert(crl_tensor_get_f64(sv, SHAPE(2, 1, 1)) == 11);
    ck_assert(crl_tensor_get_f64(sv, SHAPE(1, 0, 1)) == 8);
    crl_tensor_unref(sv);
    /* reshape of a contiguous tensor is a view. */
    r = crl_tensor_reshape(t, 2, SHAPE(4, 3), &err);
    ck_assert_ptr_eq(crl_tensor_data(r), crl_tensor_data(t));
    crl_tensor_unref(r);
    ck_assert_ptr_null(crl_tensor_reshape(t, 1, SHAPE(13), &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    /* To and from a scalar. */
    crl_tensor *one = mk(CRL_F32, 2, SHAPE(1, 1));
    crl_tensor *sc = crl_tensor_view(one, 0, NULL, &err);
    ck_assert_ptr_nonnull(sc);
    ck_assert_int_eq(crl_tensor_ndim(sc), 0);
    crl_tensor *back = crl_tensor_view(sc, 3, SHAPE(1, -1, 1), &err);
    ck_assert_ptr_nonnull(back);
    ck_assert_int_eq(crl_tensor_numel(back), 1);
    crl_tensor_unref(back);
    crl_tensor_unref(sc);
    crl_tensor_unref(one);
    crl_tensor_unref(tr);
    crl_tensor_unref(t);
}
END_TEST

START_TEST(permute_expand_squeeze)
{
    crl_tensor *t = mk(CRL_I32, 3, SHAPE(2, 3, 4));
    iota(t);
    crl_error err;
    crl_tensor *p = crl_tensor_permute(t, (const int[]){2, 0, -2}, &err);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(crl_tensor_shape(p)[0], 4);
    ck_assert_int_eq(crl_tensor_shape(p)[1], 2);
    ck_assert_int_eq(crl_tensor_shape(p)[2], 3);
    ck_assert(crl_tensor_get_f64(p, SHAPE(3, 1, 2)) == 1 * 12 + 2 * 4 + 3);
    crl_tensor_unref(p);
    ck_assert_ptr_null(crl_tensor_permute(t, (const int[]){0, 0, 1}, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    assert_msg_has(&err, "dim 0");
    ck_assert_ptr_null(crl_tensor_permute(t, (const int[]){0, 1, 3}, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    ck_assert_ptr_null(crl_tensor_permute(t, NULL, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);

    crl_tensor *col = mk(CRL_F32, 2, SHAPE(3, 1));
    iota(col);
    crl_tensor *e = crl_tensor_expand(col, 3, SHAPE(2, -1, 4), &err);
    ck_assert_msg(e != NULL, "%s", err.message);
    ck_assert_int_eq(crl_tensor_shape(e)[0], 2);
    ck_assert_int_eq(crl_tensor_shape(e)[1], 3);
    ck_assert_int_eq(crl_tensor_shape(e)[2], 4);
    ck_assert_int_eq(crl_tensor_strides(e)[0], 0);
    ck_assert_int_eq(crl_tensor_strides(e)[2], 0);
    for (int64_t i = 0; i < 24; i++)
        ck_assert(crl_tensor_flat_get(e, i) == (double)((i / 4) % 3));
    crl_tensor_unref(e);
    ck_assert_ptr_null(crl_tensor_expand(col, 2, SHAPE(4, 4), &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, "[4, 4]");
    assert_msg_has(&err, "[3, 1]");
    ck_assert_ptr_null(crl_tensor_expand(col, 1, SHAPE(3), &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    ck_assert_ptr_null(crl_tensor_expand(col, 3, SHAPE(-1, 3, 1), &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);

    crl_tensor *u = crl_tensor_unsqueeze(col, -1, &err);
    ck_assert_int_eq(crl_tensor_ndim(u), 3);
    ck_assert_int_eq(crl_tensor_shape(u)[2], 1);
    crl_tensor *u0 = crl_tensor_unsqueeze(col, 0, &err);
    ck_assert_int_eq(crl_tensor_shape(u0)[0], 1);
    ck_assert_int_eq(crl_tensor_shape(u0)[1], 3);
    ck_assert_ptr_null(crl_tensor_unsqueeze(col, 3, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    crl_tensor *sq = crl_tensor_squeeze(col, 1, &err);
    ck_assert_int_eq(crl_tensor_ndim(sq), 1);
    ck_assert_int_eq(crl_tensor_shape(sq)[0], 3);
    ck_assert(crl_tensor_flat_get(sq, 2) == 2);
    ck_assert_ptr_null(crl_tensor_squeeze(col, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    assert_msg_has(&err, "size 3");
    ck_assert_ptr_null(crl_tensor_squeeze(col, 5, &err));
    ck_assert_int_eq(err.code, CRL_E_RANGE);
    crl_tensor *big = mk(CRL_U8, 8, SHAPE(1, 1, 1, 1, 1, 1, 1, 1));
    ck_assert_ptr_null(crl_tensor_unsqueeze(big, 0, &err));
    ck_assert_int_eq(err.code, CRL_E_SHAPE);
    crl_tensor_unref(big);
    crl_tensor_unref(sq);
    crl_tensor_unref(u0);
    crl_tensor_unref(u);
    crl_tensor_unref(col);
    crl_tensor_unref(t);
}
END_TEST

/* ---- operations -------------------------------------------------------- */

START_TEST(clone_contiguous_cast)
{
    crl_tensor *t = mk(CRL_F32, 2, SHAPE(2, 3));
    iota(t);
    crl_error err;
    crl_tensor *c = crl_tensor_clone(t, &err);
    ck_assert(crl_tensor_equal(c, t));
    ck_assert_ptr_ne(crl_tensor_data(c), crl_tensor_data(t));
    crl_tensor_flat_set(c, 0, 9);
    ck_assert(crl_tensor_flat_get(t, 0) == 0);
    crl_tensor_unref(c);

    crl_tensor *same = crl_tensor_contiguous(t, &err);
    ck_assert_ptr_eq(same, t);
    crl_tensor_unref(same);
    crl_tensor *tr = crl_tensor_permute(t, (const int[]){1, 0}, &err);
    crl_tensor *ct = crl_tensor_contiguous(tr, &err);
    ck_assert_ptr_ne(ct, tr);
    ck_assert(crl_tensor_is_contiguous(ct));
    ck_assert(crl_tensor_equal(ct, tr));
    ck_assert(crl_tensor_get_f64(ct, SHAPE(2, 1)) == 5);
    crl_tensor_unref(ct);
    crl_tensor_unref(tr);

    crl_tensor *f = mk(CRL_F64, 1, SHAPE(7));
    const double vals[] = {-1.7, 1.7, 0.0, 300.5, NAN, -0.0, 1e30};
    for (int i = 0; i < 7; i++)
        crl_tensor_flat_set(f, i, vals[i]);
    crl_tensor *i32 = crl_tensor_cast(f, CRL_I32, &err);
    ck_assert_int_eq(crl_tensor_dtype(i32), CRL_I32);
    const double want_i[] = {-1, 1, 0, 300, 0, 0};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(crl_tensor_flat_get(i32, i) == want_i[i], "i32[%d] = %g", i,
                      crl_tensor_flat_get(i32, i));
    crl_tensor *b = crl_tensor_cast(f, CRL_BOOL, &err);
    const double want_b[] = {1, 1, 0, 1, 1, 0, 1};
    for (int i = 0; i < 7; i++)
        ck_assert(crl_tensor_flat_get(b, i) == want_b[i]);
    crl_tensor *u8 = crl_tensor_cast(f, CRL_U8, &err);
    ck_assert(crl_tensor_flat_get(u8, 0) == 255); /* -1 wraps as in C */
    ck_assert(crl_tensor_flat_get(u8, 3) == 44);  /* 300 mod 256 */
    crl_tensor *h = crl_tensor_cast(f, CRL_F16, &err);
    ck_assert_uint_eq(((uint16_t *)crl_tensor_data(h))[6], 0x7c00); /* 1e30 overflows to inf */
    ck_assert(fabs(crl_tensor_flat_get(h, 1) - 1.7) < 1e-3);
    ck_assert(isnan(crl_tensor_flat_get(h, 4)));
    crl_tensor *back = crl_tensor_cast(h, CRL_F32, &err);
    ck_assert(crl_tensor_flat_get(back, 0) == (double)crl_half_to_float(crl_float_to_half(-1.7f)));
    ck_assert_ptr_null(crl_tensor_cast(f, CRL_DTYPE_COUNT, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_tensor_cast(NULL, CRL_F32, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_ptr_null(crl_tensor_clone(NULL, &err));
    ck_assert_ptr_null(crl_tensor_contiguous(NULL, &err));
    crl_tensor_unref(back);
    crl_tensor_unref(h);
    crl_tensor_unref(u8);
    crl_tensor_unref(b);
    crl_tensor_unref(i32);
    crl_tensor_unref(f);
    crl_tensor_unref(t);
}
END_TEST

START_TEST(copy_broadcast_and_cast)
{
    crl_error err;
    crl_tensor *dst = mk(CRL_F64, 2, SHAPE(2, 3));
    crl_tensor *row = mk(CRL_I32, 1, SHAPE(3));
    iota(row);
    ck_assert_int_eq(crl_tensor_copy(dst, row, &err), CRL_OK);
    for (int64_t i = 0; i < 6; i++)
        ck_assert(crl_tensor_flat_get(dst, i) == (double)(i % 3));
    crl_tensor *colm = mk(CRL_F32, 2, SHAPE(2, 1));
    crl_tensor_flat_set(colm, 0, 1.5);
    crl_tensor_flat_set(colm, 1, -2.5);
    ck_assert_int_eq(crl_tensor_copy(dst, colm, &err), CRL_OK);
    for (int64_t i = 0; i < 6; i++)
        ck_assert(crl_tensor_flat_get(dst, i) == (i < 3 ? 1.5 : -2.5));
    crl_tensor *sc = mk(CRL_U8, 0, NULL);
    crl_tensor_set_f64(sc, NULL, 7);
    ck_assert_int_eq(crl_tensor_copy(dst, sc, &err), CRL_OK);
    for (int64_t i = 0; i < 6; i++)
        ck_assert(crl_tensor_flat_get(dst, i) == 7);

    /* The brief's example message. */
    crl_tensor *small = mk(CRL_F32, 1, SHAPE(3));
    ck_assert_int_eq(crl_tensor_copy(small, dst, &err), CRL_E_SHAPE);
    assert_msg_has(&err, "expected shape [3]");
    assert_msg_has(&err, "but got [2, 3]");
    crl_tensor *four = mk(CRL_F32, 1, SHAPE(4));
    ck_assert_int_eq(crl_tensor_copy(dst, four, &err), CRL_E_SHAPE);
    ck_assert_int_eq(crl_tensor_copy(NULL, four, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_tensor_copy(four, NULL, &err), CRL_E_INVALID);

    /* int64 values above 2^53 survive strided int->int copies exactly. */
    crl_tensor *big = mk(CRL_I64, 2, SHAPE(2, 2));
    int64_t *bp = crl_tensor_data(big);
    bp[0] = (INT64_C(1) << 53) + 1;
    bp[1] = INT64_MIN;
    bp[2] = INT64_MAX;
    bp[3] = -3;
    crl_tensor *bt = crl_tensor_permute(big, (const int[]){1, 0}, &err);
    crl_tensor *out = mk(CRL_I64, 2, SHAPE(2, 2));
    ck_assert_int_eq(crl_tensor_copy(out, bt, &err), CRL_OK);
    const int64_t *op = crl_tensor_data(out);
    ck_assert_int_eq(op[0], (INT64_C(1) << 53) + 1);
    ck_assert_int_eq(op[1], INT64_MAX);
    ck_assert_int_eq(op[2], INT64_MIN);
    ck_assert_int_eq(op[3], -3);
    crl_tensor *i16 = mk(CRL_I16, 2, SHAPE(2, 2));
    ck_assert_int_eq(crl_tensor_copy(i16, bt, &err), CRL_OK);
    ck_assert_int_eq(((int16_t *)crl_tensor_data(i16))[3], -3);
    ck_assert_int_eq(((int16_t *)crl_tensor_data(i16))[0], 1); /* (2^53 + 1) mod 2^16 */

    /* f16 destination through the strided path. */
    crl_tensor *h = mk(CRL_F16, 2, SHAPE(2, 3));
    crl_tensor *hv = crl_tensor_permute(h, (const int[]){1, 0}, &err);
    crl_tensor *src = mk(CRL_F32, 2, SHAPE(3, 2));
    iota(src);
    ck_assert_int_eq(crl_tensor_copy(hv, src, &err), CRL_OK);
    const uint16_t *hp = crl_tensor_data(h);
    ck_assert_uint_eq(hp[0], 0x0000);
    ck_assert_uint_eq(hp[1], 0x4000); /* h[0][1] = src[1][0] = 2 */
    ck_assert_uint_eq(hp[3], 0x3c00); /* h[1][0] = src[0][1] = 1 */
    ck_assert_uint_eq(hp[5], 0x4500); /* 5 */

    /* Contiguous same-dtype copy is a plain byte copy. */
    crl_tensor *a = mk(CRL_F32, 1, SHAPE(3));
    crl_tensor *b = mk(CRL_F32, 1, SHAPE(3));
    ((float *)crl_tensor_data(a))[1] = NAN;
    ck_assert_int_eq(crl_tensor_copy(b, a, &err), CRL_OK);
    ck_assert(memcmp(crl_tensor_data(a), crl_tensor_data(b), 12) == 0);

    crl_tensor *objs[] = {dst, row, colm, sc, small, four, big, bt, out, i16, h, hv, src, a, b};
    for (size_t i = 0; i < G_N_ELEMENTS(objs); i++)
        crl_tensor_unref(objs[i]);
}
END_TEST

START_TEST(fill_get_set)
{
    crl_tensor *t = mk(CRL_F16, 2, SHAPE(2, 2));
    crl_tensor_fill(t, 0.5);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(((uint16_t *)crl_tensor_data(t))[i], 0x3800);
    crl_tensor_set_f64(t, SHAPE(1, -1), 65504);
    ck_assert(crl_tensor_get_f64(t, SHAPE(1, 1)) == 65504);
    ck_assert_uint_eq(((uint16_t *)crl_tensor_data(t))[3], 0x7bff);
    ck_assert(isnan(crl_tensor_get_f64(t, SHAPE(2, 0))));
    ck_assert(isnan(crl_tensor_get_f64(t, NULL)));
    crl_tensor_set_f64(t, SHAPE(5, 5), 1); /* ignored */
    ck_assert(isnan(crl_tensor_flat_get(t, 4)));
    ck_assert(isnan(crl_tensor_flat_get(t, -1)));

    crl_tensor *b = mk(CRL_BOOL, 1, SHAPE(3));
    crl_tensor_fill(b, 0.25);
    ck_assert(crl_tensor_flat_get(b, 2) == 1);
    crl_tensor *i = mk(CRL_I64, 2, SHAPE(3, 3));
    crl_error err;
    crl_tensor *diag_skip = crl_tensor_slice(i, 1, 0, 3, 2, &err);
    crl_tensor_fill(diag_skip, -7.9);
    const double want[] = {-7, 0, -7, -7, 0, -7, -7, 0, -7};
    for (int k = 0; k < 9; k++)
        ck_assert(crl_tensor_flat_get(i, k) == want[k]);
    crl_tensor_flat_set(diag_skip, 3, 42);
    ck_assert(crl_tensor_get_f64(i, SHAPE(1, 2)) == 42);
    crl_tensor *d = mk(CRL_F64, 1, SHAPE(4));
    crl_tensor_fill(d, -1.25);
    ck_assert(crl_tensor_flat_get(d, 3) == -1.25);
    crl_tensor_unref(d);
    crl_tensor_unref(diag_skip);
    crl_tensor_unref(i);
    crl_tensor_unref(b);
    crl_tensor_unref(t);
}
END_TEST

START_TEST(equal_semantics)
{
    crl_error err;
    crl_tensor *a = mk(CRL_F32, 2, SHAPE(2, 2));
    crl_tensor *b = mk(CRL_F32, 2, SHAPE(2, 2));
    iota(a);
    iota(b);
    ck_assert(crl_tensor_equal(a, b));
    crl_tensor_flat_set(b, 3, 3.5);
    ck_assert(!crl_tensor_equal(a, b));
    crl_tensor_flat_set(b, 3, 3);
    crl_tensor_flat_set(a, 0, -0.0);
    ck_assert(crl_tensor_equal(a, b)); /* -0 == 0 */
    crl_tensor_flat_set(a, 0, NAN);
    crl_tensor_flat_set(b, 0, NAN);
    ck_assert(!crl_tensor_equal(a, b)); /* NaN != NaN */
    ck_assert(!crl_tensor_equal(a, a));
    crl_tensor *i = mk(CRL_I32, 2, SHAPE(2, 2));
    crl_tensor *j = mk(CRL_I64, 2, SHAPE(2, 2));
    ck_assert(!crl_tensor_equal(i, j)); /* dtypes differ */
    crl_tensor *k = mk(CRL_I32, 1, SHAPE(4));
    ck_assert(!crl_tensor_equal(i, k)); /* shapes differ */
    ck_assert(!crl_tensor_equal(i, NULL));
    /* Non-contiguous vs contiguous with the same values. */
    iota(i);
    crl_tensor *it = crl_tensor_permute(i, (const int[]){1, 0}, &err);
    crl_tensor *itc = crl_tensor_clone(it, &err);
    ck_assert(crl_tensor_equal(it, itc));
    ck_assert(!crl_tensor_equal(i, itc));
    /* f16 compares values. */
    crl_tensor *h1 = mk(CRL_F16, 1, SHAPE(2));
    crl_tensor *h2 = mk(CRL_F16, 1, SHAPE(2));
    ((uint16_t *)crl_tensor_data(h1))[0] = 0x8000; /* -0 */
    ck_assert(crl_tensor_equal(h1, h2));
    crl_tensor_flat_set(h2, 1, 1);
    ck_assert(!crl_tensor_equal(h1, h2));
    ck_assert(crl_tensor_same_shape(h1, h2));
    ck_assert(!crl_tensor_same_shape(h1, i));
    crl_tensor *objs[] = {a, b, i, j, k, it, itc, h1, h2};
    for (size_t n = 0; n < G_N_ELEMENTS(objs); n++)
        crl_tensor_unref(objs[n]);
}
END_TEST

/* ---- half floats ------------------------------------------------------- */

START_TEST(half_known_values)
{
    ck_assert_uint_eq(crl_float_to_half(1.0f), 0x3c00);
    ck_assert_uint_eq(crl_float_to_half(-2.0f), 0xc000);
    ck_assert_uint_eq(crl_float_to_half(0.0f), 0x0000);
    ck_assert_uint_eq(crl_float_to_half(-0.0f), 0x8000);
    ck_assert_uint_eq(crl_float_to_half(65504.0f), 0x7bff);
    ck_assert_uint_eq(crl_float_to_half(65519.0f), 0x7bff); /* below the halfway point */
    ck_assert_uint_eq(crl_float_to_half(65520.0f), 0x7c00); /* halfway rounds to inf */
    ck_assert_uint_eq(crl_float_to_half(1e10f), 0x7c00);
    ck_assert_uint_eq(crl_float_to_half(-1e10f), 0xfc00);
    ck_assert_uint_eq(crl_float_to_half(INFINITY), 0x7c00);
    ck_assert_uint_eq(crl_float_to_half(-INFINITY), 0xfc00);
    uint16_t n = crl_float_to_half(NAN);
    ck_assert_uint_eq(n & 0x7c00, 0x7c00);
    ck_assert_uint_ne(n & 0x03ff, 0);
    ck_assert_uint_eq(crl_float_to_half(0x1p-14f), 0x0400);  /* smallest normal */
    ck_assert_uint_eq(crl_float_to_half(0x1p-24f), 0x0001);  /* smallest subnormal */
    ck_assert_uint_eq(crl_float_to_half(0x1p-25f), 0x0000);  /* tie to even: 0 */
    ck_assert_uint_eq(crl_float_to_half(0x1.8p-25f), 0x0001);
    ck_assert_uint_eq(crl_float_to_half(0x1.8p-24f), 0x0002); /* 1.5 ulp: tie to even 2 */
    ck_assert_uint_eq(crl_float_to_half(0x1p-26f), 0x0000);
    ck_assert_uint_eq(crl_float_to_half(0x1.ff8p-15f), 0x03ff); /* largest subnormal */
    ck_assert_uint_eq(crl_float_to_half(0x1.ffep-15f), 0x0400); /* rounds up into the normals */
    /* Rounding to nearest even at 1.0: ulp is 2^-10. */
    ck_assert_uint_eq(crl_float_to_half(1.0f + 0x1p-11f), 0x3c00);
    ck_assert_uint_eq(crl_float_to_half(1.0f + 0x1.8p-10f), 0x3c02);
    ck_assert_uint_eq(crl_float_to_half(1.0f + 0x1p-10f), 0x3c01);
    ck_assert_uint_eq(crl_float_to_half(1.0f + 0x1.2p-11f), 0x3c01);
    ck_assert_uint_eq(crl_float_to_half(0.1f), 0x2e66);
    ck_assert_uint_eq(crl_float_to_half(3.14159265f), 0x4248);

    ck_assert(crl_half_to_float(0x3c00) == 1.0f);
    ck_assert(crl_half_to_float(0xc000) == -2.0f);
    ck_assert(crl_half_to_float(0x7bff) == 65504.0f);
    ck_assert(crl_half_to_float(0x0001) == 0x1p-24f);
    ck_assert(crl_half_to_float(0x03ff) == 0x1.ff8p-15f);
    ck_assert(crl_half_to_float(0x0400) == 0x1p-14f);
    ck_assert(crl_half_to_float(0x7c00) == INFINITY);
    ck_assert(crl_half_to_float(0xfc00) == -INFINITY);
    ck_assert(isnan(crl_half_to_float(0x7e00)));
    ck_assert(isnan(crl_half_to_float(0x7c01)));
    float nz = crl_half_to_float(0x8000);
    ck_assert(nz == 0.0f && signbit(nz));
}
END_TEST

START_TEST(half_round_trips_every_value)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = crl_half_to_float((uint16_t)h);
        uint16_t back = crl_float_to_half(f);
        if (isnan(f))
            ck_assert_msg((back & 0x7c00) == 0x7c00 && (back & 0x3ff), "nan %04x", h);
        else
            ck_assert_msg(back == h, "%04x -> %a -> %04x", h, (double)f, back);
    }
}
END_TEST

/* ---- repr -------------------------------------------------------------- */

START_TEST(repr_strings)
{
    char *s = crl_shape_repr(2, SHAPE(2, 3));
    ck_assert_str_eq(s, "torch.Size([2, 3])");
    crl_free(s);
    s = crl_shape_repr(0, NULL);
    ck_assert_str_eq(s, "torch.Size([])");
    crl_free(s);
    s = crl_shape_repr(1, SHAPE(20));
    ck_assert_str_eq(s, "torch.Size([20])");
    crl_free(s);

    const char *names[] = {"torch.bool", "torch.uint8", "torch.int8", "torch.int16", "torch.int32",
                           "torch.int64", "torch.float16", "torch.float32", "torch.float64"};
    for (int d = 0; d < CRL_DTYPE_COUNT; d++) {
        crl_tensor *t = mk((crl_dtype)d, 1, SHAPE(3));
        char *r = crl_tensor_repr(t);
        char *want = g_strdup_printf(
            "Tensor(shape=torch.Size([3]), device=cpu, dtype=%s, is_shared=False)", names[d]);
        ck_assert_str_eq(r, want);
        g_free(want);
        crl_free(r);
        crl_tensor_unref(t);
    }
    crl_error err;
    crl_tensor *sh = crl_tensor_new_shared(CRL_F32, 2, SHAPE(2, 1), &err);
    char *r = crl_tensor_repr(sh);
    ck_assert_str_eq(r, "Tensor(shape=torch.Size([2, 1]), device=cpu, dtype=torch.float32, is_shared=True)");
    crl_free(r);
    crl_tensor_unref(sh);
    crl_tensor *sc = mk(CRL_I64, 0, NULL);
    r = crl_tensor_repr(sc);
    ck_assert_str_eq(r, "Tensor(shape=torch.Size([]), device=cpu, dtype=torch.int64, is_shared=False)");
    crl_free(r);
    crl_tensor_unref(sc);
}
END_TEST

static Suite *tensor_suite(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, dtype_sizes_and_names);
    tcase_add_test(tc, dtype_aliases);
    tcase_add_test(tc, new_heap_layout);
    tcase_add_test(tc, new_scalar_and_empty);
    tcase_add_test(tc, new_rejects_bad_arguments);
    tcase_add_test(tc, refcount_and_null_safety);
    tcase_add_test(tc, wrap_external);
    tcase_add_test(tc, shared_visible_across_fork);
    tcase_add_test(tc, mmap_round_trip);
    tcase_add_test(tc, mmap_allocation_failure);
    tcase_add_test(tc, index_views_share_storage);
    tcase_add_test(tc, slice_python_semantics);
    tcase_add_test(tc, view_and_reshape);
    tcase_add_test(tc, permute_expand_squeeze);
    tcase_add_test(tc, clone_contiguous_cast);
    tcase_add_test(tc, copy_broadcast_and_cast);
    tcase_add_test(tc, fill_get_set);
    tcase_add_test(tc, equal_semantics);
    tcase_add_test(tc, half_known_values);
    tcase_add_test(tc, half_round_trips_every_value);
    tcase_add_test(tc, repr_strings);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(tensor_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
