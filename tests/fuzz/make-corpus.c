/* Writes the seed corpus of the checkpoint fuzz target (tests/fuzz/corpus/checkpoint): small valid files plus a few broken ones.
 *
 * Regenerate after a format change, from a build dir:
 *   cc -I$SRC/plugin-sdk/include $SRC/tests/fuzz/make-corpus.c -o make-corpus core/.libs/libcrl.so \
 *      -Wl,-rpath,$PWD/core/.libs && ./make-corpus $SRC/tests/fuzz/corpus/checkpoint */
#include <crl/checkpoint.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *outdir;

static void die(const char *what, const crl_error *err)
{
    fprintf(stderr, "make-corpus: %s: %s\n", what, err->message);
    exit(1);
}

static char *out(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", outdir, name);
    return buf;
}

static crl_tensor *ramp(crl_dtype dt, int nd, const int64_t *shape)
{
    crl_error err;
    crl_tensor *t = crl_tensor_new(dt, nd, shape, &err);
    if (!t)
        die("tensor", &err);
    for (int64_t i = 0; i < crl_tensor_numel(t); i++)
        crl_tensor_flat_set(t, i, dt == CRL_BOOL ? (double)(i & 1) : (double)i - 1);
    return t;
}

static void set(crl_td *td, const char *key, crl_tensor *t)
{
    crl_error err;
    if (crl_td_set(td, key, t, &err))
        die(key, &err);
    crl_tensor_unref(t);
}

static crl_td *small_td(void)
{
    crl_error err;
    int64_t b[1] = {2}, s[2] = {2, 2}, s1[2] = {2, 1};
    crl_td *td = crl_td_new(1, b, &err);
    set(td, "observation", ramp(CRL_F32, 2, s));
    set(td, "action", ramp(CRL_I64, 1, b));
    set(td, "next.reward", ramp(CRL_F16, 2, s1));
    set(td, "next.done", ramp(CRL_BOOL, 2, s1));
    return td;
}

static void finish(crl_ckpt_writer *w, const char *name)
{
    crl_error err;
    if (crl_ckpt_writer_close(w, &err))
        die(name, &err);
}

static crl_ckpt_writer *start(const char *name, const char *kind, uint32_t version)
{
    crl_error err;
    crl_ckpt_writer *w = crl_ckpt_writer_new(out(name), kind, version, &err);
    if (!w)
        die(name, &err);
    return w;
}

/* Copy of a file with a change: flip byte at `flip` (when >= 0), keep `keep` bytes. */
static void mutate(const char *from, const char *to, long flip, long keep)
{
    FILE *f = fopen(out(from), "rb");
    unsigned char buf[8192];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    if (flip >= 0 && (size_t)flip < n)
        buf[flip] ^= 0x5a;
    if (keep >= 0 && (size_t)keep < n)
        n = (size_t)keep;
    f = fopen(out(to), "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "make-corpus: cannot write %s\n", to);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make-corpus DIR\n");
        return 2;
    }
    outdir = argv[1];
    crl_error err;

    finish(start("empty.ckpt", "crl.fuzz", 0), "empty");

    crl_ckpt_writer *w = start("sections.ckpt", "crl.storage.tensor", 2);
    crl_ckpt_write(w, "meta", "\x01\0\0\0\x08\0\0\0", 8, &err);
    crl_ckpt_write(w, "empty", NULL, 0, &err);
    crl_ckpt_write(w, "filled", "\x01\x01\x00\x01\x00", 5, &err);
    finish(w, "sections");

    crl_td *td = small_td();
    w = start("td.ckpt", "crl.fuzz", 1);
    if (crl_ckpt_write_td(w, "data", td, &err))
        die("td", &err);
    finish(w, "td");

    /* Nested TensorDicts with their own batch shapes, an empty one, an empty tensor, a scalar batch. */
    int64_t b2[2] = {2, 3}, s3[3] = {2, 3, 0};
    crl_td *outer = crl_td_new(1, b2, &err);
    crl_td *inner = crl_td_new(2, b2, &err);
    crl_td *hollow = crl_td_new(1, b2, &err);
    set(inner, "pixels", ramp(CRL_U8, 2, b2));
    set(inner, "none", ramp(CRL_I16, 3, s3));
    crl_td_set_td(outer, "agents", inner, &err);
    crl_td_set_td(outer, "hollow", hollow, &err);
    set(outer, "step", ramp(CRL_I32, 1, b2));
    crl_td *scalar = crl_td_new(0, NULL, &err);
    set(scalar, "x.y.z", ramp(CRL_F64, 0, NULL));
    set(scalar, "i8", ramp(CRL_I8, 0, NULL));
    w = start("nested.ckpt", "crl.fuzz", 1);
    if (crl_ckpt_write_td(w, "a", outer, &err) || crl_ckpt_write_td(w, "b/scalar", scalar, &err) ||
        crl_ckpt_write(w, "note", "two TensorDicts", 15, &err))
        die("nested", &err);
    finish(w, "nested");
    crl_td_unref(inner);
    crl_td_unref(hollow);
    crl_td_unref(outer);
    crl_td_unref(scalar);
    crl_td_unref(td);

    /* Broken ones: a flipped section byte, a flipped table byte, a cut file. */
    mutate("td.ckpt", "td-flip-data.bin", 70, -1);
    mutate("nested.ckpt", "nested-cut.bin", -1, 300);
    mutate("sections.ckpt", "sections-flip-table.bin", 120, -1);
    return 0;
}
