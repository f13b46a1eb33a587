/* The ffi plugin: env/ffi, any C simulator library as an env, described in INI and called through libffi.
 *
 * The description language is in plugins/ffi/README.md.  Everything is parsed, looked up (dlsym) and
 * prepared (ffi_prep_cif) in make, so a bad description fails there with the key's FILE:LINE and
 * `crl config check` exits 2; reset and step only fill argument slots and call. */
#include "config.h"

#include <crl/crl.h>
#include <crl/env_backend.h>

#include <dlfcn.h>
#include <errno.h>
#include <ffi.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#define FFI_MAX_ARGS 16
#define FFI_MAX_DIMS 4

static const crl_option ffi_options[] = {
    { "library", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "required: the simulator library, a path (checked like a plugin path) or a soname" },
    { "make", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "C signature of the function that creates one simulator, e.g. handle sm_make()" },
    { "seeding", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "C signature of the function called with each env's seed on a seeded reset, e.g. void sm_seed(handle, seed)" },
    { "reset", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "required: C signature of the reset function, e.g. void sm_reset(handle, double *observation)" },
    { "step", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "required: C signature of the step function, e.g. int32 sm_step(handle, const double *action, "
      "double *observation, double *reward, uint8 *terminated) ok=0" },
    { "free", CRL_OPT_STRING, 0, NULL, 0, 0, NULL, "C signature of the function that frees a handle" },
    { "render", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "C signature of the function that draws env i into an rgb uint8 [render_height, render_width, 3] frame, "
      "e.g. void sm_render(handle, rgb, int32=64, int32=128)" },
    { "render_height", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 4096, NULL, "rows of the frame render draws" },
    { "render_width", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 4096, NULL, "columns of the frame render draws" },
    { "observation_shape", CRL_OPT_LIST, 0, NULL, 0, 0, NULL, "required: per-env observation shape, e.g. 2" },
    { "observation_low", CRL_OPT_DOUBLE, 0, NULL, 0, 0, NULL, "observation lower bound (unset: unbounded)" },
    { "observation_high", CRL_OPT_DOUBLE, 0, NULL, 0, 0, NULL, "observation upper bound (unset: unbounded)" },
    { "action_shape", CRL_OPT_LIST, 0, "1", 0, 0, NULL, "per-env action shape (floating actions)" },
    { "action_low", CRL_OPT_DOUBLE, 0, "-1", 0, 0, NULL, "floating action lower bound" },
    { "action_high", CRL_OPT_DOUBLE, 0, "1", 0, 0, NULL, "floating action upper bound" },
    { "action_n", CRL_OPT_INT, CRL_OPT_RANGE, "2", 1, 1e9, NULL,
      "number of categories of an integer action (action is then a Categorical scalar)" },
    { "calls", CRL_OPT_ENUM, 0, "per_env", 0, 0, "per_env|batch",
      "per_env = each function is called once per env; batch = once for all envs, with pointers to whole buffers "
      "(count, mask and seeds arguments)" },
    { "check_nan", CRL_OPT_BOOL, 0, "true", 0, 0, NULL,
      "report a NaN written into a floating output as an error naming the function and env" },
    CRL_OPTIONS_END
};

/* ---- the type language ---------------------------------------------------- */

typedef enum ctype { T_INT8, T_INT16, T_INT32, T_INT64, T_UINT8, T_UINT16, T_UINT32, T_UINT64, T_FLOAT, T_DOUBLE,
                     T_BOOL, T_COUNT } ctype;

static const struct {
    const char *name;
    size_t size;
    bool is_float, is_signed;
} ctypes[T_COUNT] = {
    [T_INT8] = { "int8", 1, false, true },    [T_INT16] = { "int16", 2, false, true },
    [T_INT32] = { "int32", 4, false, true },  [T_INT64] = { "int64", 8, false, true },
    [T_UINT8] = { "uint8", 1, false, false }, [T_UINT16] = { "uint16", 2, false, false },
    [T_UINT32] = { "uint32", 4, false, false }, [T_UINT64] = { "uint64", 8, false, false },
    [T_FLOAT] = { "float", 4, true, true },   [T_DOUBLE] = { "double", 8, true, true },
    [T_BOOL] = { "bool", 1, false, false },
};

static ffi_type *ffi_of(ctype t)
{
    switch (t) {
    case T_INT8: return &ffi_type_sint8;
    case T_INT16: return &ffi_type_sint16;
    case T_INT32: return &ffi_type_sint32;
    case T_INT64: return &ffi_type_sint64;
    case T_UINT8: case T_BOOL: return &ffi_type_uint8;
    case T_UINT16: return &ffi_type_uint16;
    case T_UINT32: return &ffi_type_uint32;
    case T_UINT64: return &ffi_type_uint64;
    case T_FLOAT: return &ffi_type_float;
    default: return &ffi_type_double;
    }
}

static int parse_ctype(const char *s, size_t len, ctype *out)
{
    for (int t = 0; t < T_COUNT; t++)
        if (strlen(ctypes[t].name) == len && !strncmp(s, ctypes[t].name, len)) {
            *out = (ctype)t;
            return 1;
        }
    return 0;
}

static double load_as_double(ctype t, const void *p)
{
    switch (t) {
    case T_INT8: return *(const int8_t *)p;
    case T_INT16: return *(const int16_t *)p;
    case T_INT32: return *(const int32_t *)p;
    case T_INT64: return (double)*(const int64_t *)p;
    case T_UINT8: case T_BOOL: return *(const uint8_t *)p;
    case T_UINT16: return *(const uint16_t *)p;
    case T_UINT32: return *(const uint32_t *)p;
    case T_UINT64: return (double)*(const uint64_t *)p;
    case T_FLOAT: return *(const float *)p;
    default: return *(const double *)p;
    }
}

static void store_double(ctype t, void *p, double v)
{
    switch (t) {
    case T_INT8: *(int8_t *)p = (int8_t)v; break;
    case T_INT16: *(int16_t *)p = (int16_t)v; break;
    case T_INT32: *(int32_t *)p = (int32_t)v; break;
    case T_INT64: *(int64_t *)p = (int64_t)v; break;
    case T_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case T_BOOL: *(uint8_t *)p = v != 0.0; break;
    case T_UINT16: *(uint16_t *)p = (uint16_t)v; break;
    case T_UINT32: *(uint32_t *)p = (uint32_t)v; break;
    case T_UINT64: *(uint64_t *)p = (uint64_t)v; break;
    case T_FLOAT: *(float *)p = (float)v; break;
    default: *(double *)p = v; break;
    }
}

/* The spec leaves a pointer argument can be bound to. */
typedef enum leaf { L_OBSERVATION, L_ACTION, L_REWARD, L_TERMINATED, L_TRUNCATED, L_COUNT } leaf;
static const char *const leaf_names[] = { "observation", "action", "reward", "terminated", "truncated", NULL };

typedef enum argkind { A_HANDLE, A_SEED, A_INDEX, A_CONST, A_BUFFER, A_COUNT, A_SEEDS, A_MASK, A_RGB } argkind;

typedef union slot {
    int64_t i64;
    uint64_t u64;
    int32_t i32;
    uint32_t u32;
    int16_t i16;
    uint16_t u16;
    int8_t i8;
    uint8_t u8;
    float f;
    double d;
    void *p;
} slot;

typedef struct arg {
    argkind kind;
    ctype type;     /* A_CONST, A_BUFFER element type */
    bool is_const;  /* A_BUFFER declared const: the library only reads it */
    leaf leaf;      /* A_BUFFER */
    slot value;     /* A_CONST; the pointer or scalar passed, refreshed per call */
    void *staging;  /* A_BUFFER whose C type differs from the crl dtype: one env's elements */
} arg;

typedef enum rkind { R_VOID, R_HANDLE, R_SCALAR } rkind;

typedef struct fn {
    const char *key;    /* the option: "step" */
    char symbol[128];
    rkind ret;
    ctype rtype;
    bool has_ok;        /* "ok=V": any other return value is an error */
    double ok;
    int nargs;
    arg args[FFI_MAX_ARGS];
    ffi_type *atypes[FFI_MAX_ARGS];
    void *avalues[FFI_MAX_ARGS];
    ffi_cif cif;
    void (*addr)(void);
} fn;

enum { F_MAKE, F_SEED, F_RESET, F_STEP, F_FREE, F_RENDER, F_COUNT };
static const char *const fn_keys[F_COUNT] = { "make", "seeding", "reset", "step", "free", "render" };

typedef struct ffi_env {
    char id[128];
    int64_t num;
    void *lib;
    fn fns[F_COUNT];
    bool have[F_COUNT];
    void **handles;            /* one per env; batch: handles[0] only */
    bool batch;                /* calls = batch: one call for all envs, pointers to whole buffers */
    int64_t ncalls, span;      /* calls per operation and envs per call: (num, 1) or (1, num) */
    uint8_t *all;              /* num ones: the mask of a reset of every env */
    const uint8_t *mask;       /* the current reset's mask (batch) */
    const uint64_t *seeds;     /* the current reset's seeds */
    uint8_t *rgb;              /* the frame the current render call fills */
    int64_t render_h, render_w;
    bool check_nan;
    /* crl-side leaves */
    crl_dtype dt[L_COUNT];
    int64_t per_env[L_COUNT];  /* elements per env */
    void *buf[L_COUNT];
    bool bound;
} ffi_env;

/* A description error: CRL_E_CONFIG with the key's FILE:LINE, so `crl config check` reports it. */
__attribute__((format(printf, 4, 5))) static int cfg_error(const crl_opts *opts, const char *key, crl_error *err,
                                                           const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: %s", crl_opts_origin(opts, key), crl_opts_section(opts),
                         key, what);
}

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static size_t ident_len(const char *p)
{
    size_t n = 0;
    while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') || (p[n] >= '0' && p[n] <= '9') ||
           p[n] == '_')
        n++;
    return n;
}

/* The crl dtype a leaf is stored in: floats as float32 (what losses and networks take), integer actions
 * as int64 (Categorical), flags as bool. */
static crl_dtype leaf_dtype(leaf l, ctype t)
{
    if (l == L_TERMINATED || l == L_TRUNCATED)
        return CRL_BOOL;
    if (l == L_ACTION && !ctypes[t].is_float)
        return CRL_I64;
    return CRL_F32;
}

static bool same_repr(crl_dtype dt, ctype t)
{
    return (dt == CRL_F32 && t == T_FLOAT) || (dt == CRL_I64 && t == T_INT64) ||
           (dt == CRL_BOOL && (t == T_BOOL || t == T_UINT8));
}

/* One argument: handle | seed | index | TYPE=VALUE | [const] TYPE *LEAF[DIMS]. */
static int parse_arg(const crl_opts *opts, const char *key, const char *text, arg *a, int64_t shape[L_COUNT][FFI_MAX_DIMS + 1],
                     crl_error *err)
{
    memset(a, 0, sizeof *a);
    const char *p = skip_ws(text);
    size_t n = ident_len(p);
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)(n < 63 ? n : 63), p);
    const char *rest = skip_ws(p + n);
    if (!strcmp(word, "handle") && !*rest) {
        a->kind = A_HANDLE;
        return CRL_OK;
    }
    if (!strcmp(word, "seed") && !*rest) {
        if (strcmp(key, "seeding"))
            return cfg_error(opts, key, err, "'seed' is an argument of the seeding function only (got it in %s%s)", key, "");
        a->kind = A_SEED;
        return CRL_OK;
    }
    if (!strcmp(word, "index") && !*rest) {
        a->kind = A_INDEX;
        return CRL_OK;
    }
    if (!strcmp(word, "count") && !*rest) {
        a->kind = A_COUNT;
        return CRL_OK;
    }
    if (!strcmp(word, "seeds") && !*rest) {
        if (strcmp(key, "seeding"))
            return cfg_error(opts, key, err, "'seeds' is an argument of the seeding function only (got it in %s)", key);
        a->kind = A_SEEDS;
        return CRL_OK;
    }
    if (!strcmp(word, "mask") && !*rest) {
        if (strcmp(key, "reset") && strcmp(key, "seeding"))
            return cfg_error(opts, key, err, "'mask' is an argument of the reset and seeding functions only (got it "
                             "in %s)", key);
        a->kind = A_MASK;
        return CRL_OK;
    }
    if (!strcmp(word, "rgb") && !*rest) {
        if (strcmp(key, "render"))
            return cfg_error(opts, key, err, "'rgb' is an argument of the render function only (got it in %s)", key);
        a->kind = A_RGB;
        return CRL_OK;
    }
    if (!strcmp(word, "const")) {
        a->is_const = true;
        p = rest;
        n = ident_len(p);
        rest = skip_ws(p + n);
    }
    if (!parse_ctype(p, n, &a->type))
        return cfg_error(opts, key, err,
                         "argument '%s' does not parse: expected handle, seed, index, TYPE=VALUE or TYPE *LEAF%s "
                         "(types: int8..int64, uint8..uint64, float, double, bool)", text, "");
    if (*rest == '=') {
        if (a->is_const)
            return cfg_error(opts, key, err, "argument '%s': a constant is not const-qualified%s", text, "");
        a->kind = A_CONST;
        const char *v = skip_ws(rest + 1);
        char num[64];
        size_t vl = strlen(v);
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        snprintf(num, sizeof num, "%.*s", (int)(vl < 63 ? vl : 63), v);
        double d;
        int64_t i;
        if (ctypes[a->type].is_float) {
            if (!crl_parse_double(num, &d))
                return cfg_error(opts, key, err, "constant '%s' is not a %s", text, ctypes[a->type].name);
            store_double(a->type, &a->value, d);
        } else {
            if (!crl_parse_int(num, &i))
                return cfg_error(opts, key, err, "constant '%s' is not an integer of type %s", text, ctypes[a->type].name);
            if (a->type == T_UINT64 || a->type == T_INT64)
                a->value.i64 = i;
            else
                store_double(a->type, &a->value, (double)i);
        }
        return CRL_OK;
    }
    if (*rest != '*')
        return cfg_error(opts, key, err, "argument '%s' does not parse: a type is followed by =VALUE or *LEAF%s", text, "");
    a->kind = A_BUFFER;
    p = skip_ws(rest + 1);
    n = ident_len(p);
    int l = -1;
    for (int k = 0; k < L_COUNT; k++)
        if (strlen(leaf_names[k]) == n && !strncmp(p, leaf_names[k], n))
            l = k;
    if (l < 0) {
        snprintf(word, sizeof word, "%.*s", (int)(n < 63 ? n : 63), p);
        const char *near = crl_did_you_mean(word, leaf_names);
        char hint[96] = "";
        if (near)
            snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
        return cfg_error(opts, key, err, "argument '%s' names no spec leaf: use observation, action, reward, "
                         "terminated or truncated%s", text, hint);
    }
    a->leaf = (leaf)l;
    if ((l == L_TERMINATED || l == L_TRUNCATED) && ctypes[a->type].is_float)
        return cfg_error(opts, key, err, "argument '%s': a flag is an integer or bool buffer%s", text, "");
    if (l == L_ACTION && !a->is_const)
        return cfg_error(opts, key, err, "argument '%s': the action is read only: declare it const%s", text, "");
    p = skip_ws(p + n);
    if (*p == '[') {
        /* An explicit shape must equal the spec's per-env shape (reward and flags: [1]). */
        int64_t dims[FFI_MAX_DIMS];
        int nd = 0;
        p++;
        while (1) {
            char *end;
            errno = 0;
            long long v = strtoll(skip_ws(p), &end, 10);
            if (end == skip_ws(p) || errno || v <= 0 || nd == FFI_MAX_DIMS)
                return cfg_error(opts, key, err, "argument '%s': the shape does not parse (positive sizes, at most 4)%s",
                                 text, "");
            dims[nd++] = v;
            p = skip_ws(end);
            if (*p == ']')
                break;
            if (*p != ',' && *p != 'x')
                return cfg_error(opts, key, err, "argument '%s': the shape does not parse%s", text, "");
            p++;
        }
        p = skip_ws(p + 1);
        bool same = shape[l][0] == nd;
        for (int k = 0; same && k < nd; k++)
            same = shape[l][k + 1] == dims[k];
        if (!same) {
            char spec[64] = "", got[64] = "";
            for (int k = 0; k < shape[l][0]; k++)
                snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%s%lld", k ? "," : "",
                         (long long)shape[l][k + 1]);
            for (int k = 0; k < nd; k++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? "," : "", (long long)dims[k]);
            char msg[160];
            snprintf(msg, sizeof msg, "[%s] but the %s spec's per-env shape is [%s]", got, leaf_names[l], spec);
            return cfg_error(opts, key, err, "argument '%s' has shape %s", text, msg);
        }
    }
    if (*p)
        return cfg_error(opts, key, err, "argument '%s' does not parse: unexpected text after the leaf%s", text, "");
    return CRL_OK;
}

/* RET SYMBOL(ARG, ...) [ok=VALUE]; RET is void, handle or a scalar type. */
static int parse_fn(const crl_opts *opts, const char *key, const char *sig, fn *f,
                    int64_t shape[L_COUNT][FFI_MAX_DIMS + 1], crl_error *err)
{
    memset(f, 0, sizeof *f);
    f->key = key;
    const char *p = skip_ws(sig);
    size_t n = ident_len(p);
    if (n == 4 && !strncmp(p, "void", 4))
        f->ret = R_VOID;
    else if (n == 6 && !strncmp(p, "handle", 6))
        f->ret = R_HANDLE;
    else if (parse_ctype(p, n, &f->rtype))
        f->ret = R_SCALAR;
    else
        return cfg_error(opts, key, err, "'%s' does not parse: it starts with the return type (void, handle, int8..int64, "
                         "uint8..uint64, float, double, bool)%s", sig, "");
    if ((f->ret == R_HANDLE) != !strcmp(key, "make"))
        return cfg_error(opts, key, err, "'%s': %s", sig,
                         f->ret == R_HANDLE ? "only make returns a handle" : "make returns handle");
    p = skip_ws(p + n);
    n = ident_len(p);
    if (!n || n >= sizeof f->symbol)
        return cfg_error(opts, key, err, "'%s' does not parse: the function name follows the return type%s", sig, "");
    memcpy(f->symbol, p, n);
    p = skip_ws(p + n);
    if (*p != '(')
        return cfg_error(opts, key, err, "'%s' does not parse: '(' expected after the function name%s", sig, "");
    const char *close = strchr(p, ')');
    if (!close)
        return cfg_error(opts, key, err, "'%s' does not parse: ')' missing%s", sig, "");
    /* Arguments split on commas outside [...]. */
    const char *a = p + 1;
    if (*skip_ws(a) != ')' && !(close - a == 4 + (skip_ws(a) - a) && !strncmp(skip_ws(a), "void", 4))) {
        int depth = 0;
        const char *start = a;
        for (const char *q = a; q <= close; q++) {
            if (*q == '[')
                depth++;
            else if (*q == ']')
                depth--;
            if ((*q == ',' && depth == 0) || q == close) {
                if (f->nargs == FFI_MAX_ARGS)
                    return cfg_error(opts, key, err, "'%s': more than 16 arguments%s", sig, "");
                char text[160];
                start = skip_ws(start);
                size_t len = q > start ? (size_t)(q - start) : 0;
                while (len && (start[len - 1] == ' ' || start[len - 1] == '\t'))
                    len--;
                snprintf(text, sizeof text, "%.*s", (int)(len < 159 ? len : 159), start);
                if (!*skip_ws(text))
                    return cfg_error(opts, key, err, "'%s' does not parse: an empty argument%s", sig, "");
                int rc = parse_arg(opts, key, skip_ws(text), &f->args[f->nargs], shape, err);
                if (rc)
                    return rc;
                f->nargs++;
                start = q + 1;
            }
        }
    }
    p = skip_ws(close + 1);
    if (!strncmp(p, "ok", 2) && *skip_ws(p + 2) == '=') {
        if (f->ret != R_SCALAR)
            return cfg_error(opts, key, err, "'%s': ok= needs a scalar return type%s", sig, "");
        f->has_ok = true;
        if (!crl_parse_double(skip_ws(skip_ws(p + 2) + 1), &f->ok))
            return cfg_error(opts, key, err, "'%s': the value after ok= does not parse%s", sig, "");
        p = "";
    }
    if (*p)
        return cfg_error(opts, key, err, "'%s' does not parse: unexpected text after ')' (only ok=VALUE may follow)%s",
                         sig, "");
    for (int k = 0; k < f->nargs; k++) {
        arg *x = &f->args[k];
        f->atypes[k] = x->kind == A_HANDLE || x->kind == A_BUFFER ? &ffi_type_pointer
                       : x->kind == A_SEED                        ? &ffi_type_uint64
                       : x->kind == A_INDEX || x->kind == A_COUNT  ? &ffi_type_sint64
                       : x->kind == A_SEEDS || x->kind == A_MASK || x->kind == A_RGB ? &ffi_type_pointer
                                                                  : ffi_of(x->type);
        f->avalues[k] = &x->value;
    }
    ffi_type *rt = f->ret == R_VOID ? &ffi_type_void : f->ret == R_HANDLE ? &ffi_type_pointer : ffi_of(f->rtype);
    if (ffi_prep_cif(&f->cif, FFI_DEFAULT_ABI, (unsigned)f->nargs, rt, f->atypes) != FFI_OK)
        return cfg_error(opts, key, err, "'%s': libffi cannot prepare this signature%s", sig, "");
    return CRL_OK;
}

/* ---- the library's path ---------------------------------------------------- */

/* The rules plugins are loaded by (core/secure_path.c): every directory and the file itself owned by root
 * or us, not writable by others (a sticky directory excepted) nor by a group other than root's. */
static int check_library_path(const crl_opts *opts, const char *path, crl_error *err)
{
    char *real = realpath(path, NULL);
    if (!real)
        return cfg_error(opts, "library", err, "cannot resolve %s: %s", path, strerror(errno));
    uid_t me = geteuid();
    struct stat st;
    int rc = CRL_OK;
    size_t len = strlen(real);
    /* "/", then each prefix ending before a '/', then the whole path (realpath: absolute, no symlinks). */
    for (size_t end = 0; end <= len && !rc; end++) {
        if (end != 0 && end < len && real[end] != '/')
            continue;
        if (end == 1 && len > 1)
            continue; /* the '/' after the root: the root was checked at end 0 */
        char saved = real[end ? end : 1];
        real[end ? end : 1] = '\0';
        const char *part = real;
        if (stat(part, &st) != 0)
            rc = cfg_error(opts, "library", err, "cannot stat %s: %s", part, strerror(errno));
        else if (st.st_uid != me && st.st_uid != 0)
            rc = cfg_error(opts, "library", err, "%s is owned by another user; chown it to you or root (%s)", part,
                           "the library runs inside crl");
        else if ((st.st_mode & S_IWOTH) && !(S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX)))
            rc = cfg_error(opts, "library", err, "%s is world-writable: anyone could replace the library; run "
                           "chmod o-w %s", part, part);
        else if ((st.st_mode & S_IWGRP) && st.st_gid != 0)
            rc = cfg_error(opts, "library", err, "%s is group-writable: run chmod g-w %s", part, part);
        else if (end == len && !S_ISREG(st.st_mode))
            rc = cfg_error(opts, "library", err, "%s is not a regular file", part);
        real[end ? end : 1] = saved;
    }
    free(real);
    return rc;
}

/* ---- the backend ------------------------------------------------------------ */

static const char *const *ffi_list(void)
{
    return NULL; /* any id: the description names the env */
}

static void ffi_close(void *env)
{
    ffi_env *e = env;
    if (!e)
        return;
    for (int64_t i = 0; e->handles && i < e->ncalls; i++) {
        if (e->have[F_FREE] && e->handles[i]) {
            fn *f = &e->fns[F_FREE];
            for (int k = 0; k < f->nargs; k++)
                if (f->args[k].kind == A_HANDLE)
                    f->args[k].value.p = e->handles[i];
                else if (f->args[k].kind == A_INDEX)
                    f->args[k].value.i64 = i;
                else if (f->args[k].kind == A_COUNT)
                    f->args[k].value.i64 = e->span;
            ffi_arg rv;
            ffi_call(&f->cif, f->addr, &rv, f->avalues);
        }
    }
    for (int j = 0; j < F_COUNT; j++)
        for (int k = 0; k < e->fns[j].nargs; k++)
            free(e->fns[j].args[k].staging);
    free(e->handles);
    free(e->all);
    if (e->lib)
        dlclose(e->lib);
    free(e);
}

typedef union retval {
    ffi_arg a;
    ffi_sarg s;
    double d;
    float f;
    void *p;
    int64_t i64;
    uint64_t u64;
} retval;

static double ret_as_double(const fn *f, const retval *r)
{
    if (ctypes[f->rtype].is_float)
        return f->rtype == T_FLOAT ? r->f : r->d;
    if (ctypes[f->rtype].size == 8)
        return f->rtype == T_UINT64 ? (double)r->u64 : (double)r->i64;
    return ctypes[f->rtype].is_signed ? (double)r->s : (double)r->a;
}

/* Call f for env i: point every argument at env i's data, stage converted inputs, call, convert outputs,
 * then check the return code and NaNs. */
static int call_one(ffi_env *e, fn *f, int64_t i, uint64_t seed, void **made, crl_error *err)
{
    /* render is per env also with calls = batch: env i of the instance's one handle */
    const bool per_env = f == &e->fns[F_RENDER];
    const bool whole = e->batch && !per_env;
    const int64_t span = per_env ? 1 : e->span; /* envs i .. i + span - 1 */
    for (int k = 0; k < f->nargs; k++) {
        arg *a = &f->args[k];
        switch (a->kind) {
        case A_HANDLE: a->value.p = e->handles[e->batch ? 0 : i]; break;
        case A_RGB: a->value.p = e->rgb; break;
        case A_SEED: a->value.u64 = seed; break;
        case A_INDEX: a->value.i64 = i; break;
        case A_COUNT: a->value.i64 = span; break;
        case A_SEEDS: a->value.p = (void *)(uintptr_t)(e->seeds + i); break;
        case A_MASK: a->value.p = (void *)(uintptr_t)(e->mask + i); break;
        case A_CONST: break;
        case A_BUFFER: {
            int64_t cnt = e->per_env[a->leaf] * span;
            char *base = (char *)e->buf[a->leaf] + (size_t)(i * e->per_env[a->leaf]) * crl_dtype_size(e->dt[a->leaf]);
            if (a->staging) {
                for (int64_t m = 0; m < cnt; m++) {
                    double v = e->dt[a->leaf] == CRL_F32   ? ((float *)base)[m]
                               : e->dt[a->leaf] == CRL_I64 ? (double)((int64_t *)base)[m]
                                                           : ((uint8_t *)base)[m];
                    store_double(a->type, (char *)a->staging + (size_t)m * ctypes[a->type].size, v);
                }
                a->value.p = a->staging;
            } else {
                a->value.p = base;
            }
            break;
        }
        }
    }
    retval rv;
    memset(&rv, 0, sizeof rv);
    ffi_call(&f->cif, f->addr, &rv, f->avalues);
    if (f->ret == R_HANDLE) {
        if (!rv.p)
            return crl_error_set(err, CRL_E_RUNTIME, "ffi: %s: %s returned a NULL handle for %s %lld", e->id, f->symbol,
                                 whole ? "the batch of envs 0 to" : "env", (long long)(whole ? e->num - 1 : i));
        *made = rv.p;
    }
    if (f->has_ok) {
        double got = ret_as_double(f, &rv);
        if (got != f->ok)
            return crl_error_set(err, CRL_E_RUNTIME, "ffi: %s: %s returned %g for %s %lld (declared ok=%g): the "
                                 "library reported an error", e->id, f->symbol, got, whole ? "the batch of envs 0 to"
                                 : "env", (long long)(whole ? e->num - 1 : i), f->ok);
    }
    for (int k = 0; k < f->nargs; k++) {
        arg *a = &f->args[k];
        if (a->kind != A_BUFFER || a->is_const)
            continue;
        int64_t cnt = e->per_env[a->leaf] * span;
        char *base = (char *)e->buf[a->leaf] + (size_t)(i * e->per_env[a->leaf]) * crl_dtype_size(e->dt[a->leaf]);
        for (int64_t m = 0; m < cnt; m++) {
            const void *src = a->staging ? (char *)a->staging + (size_t)m * ctypes[a->type].size
                                         : base + (size_t)m * crl_dtype_size(e->dt[a->leaf]);
            double v = load_as_double(a->type, src);
            if (e->check_nan && ctypes[a->type].is_float && isnan(v))
                return crl_error_set(err, CRL_E_RUNTIME, "ffi: %s: %s wrote NaN into %s[%lld] of env %lld", e->id,
                                     f->symbol, leaf_names[a->leaf], (long long)(m % e->per_env[a->leaf]),
                                     (long long)(i + m / e->per_env[a->leaf]));
            if (e->dt[a->leaf] == CRL_BOOL)
                ((uint8_t *)base)[m] = v != 0.0;
            else if (a->staging)
                ((float *)base)[m] = (float)v;
        }
    }
    return CRL_OK;
}

static int shape_of(const crl_opts *opts, const char *key, int64_t out[FFI_MAX_DIMS + 1], int64_t *count,
                    crl_error *err)
{
    size_t n;
    const char *const *items;
    int rc = crl_opts_list(opts, key, &n, &items, err);
    if (rc)
        return rc;
    if (n != 1)
        return cfg_error(opts, key, err, "a per-env shape of one positive size is required (a vector leaf)%s%s", "",
                         "");
    out[0] = (int64_t)n;
    *count = 1;
    for (size_t k = 0; k < n; k++) {
        if (!crl_parse_int(items[k], &out[k + 1]) || out[k + 1] <= 0 || out[k + 1] > (1 << 24))
            return cfg_error(opts, key, err, "'%s' is not a positive size%s", items[k], "");
        *count *= out[k + 1];
    }
    return CRL_OK;
}

static int ffi_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                    crl_error *err)
{
    *env = NULL;
    if (num <= 0)
        return crl_error_set(err, CRL_E_INVALID, "ffi: %s: num must be positive", id);
    ffi_env *e = calloc(1, sizeof *e);
    if (!e)
        return crl_error_set(err, CRL_E_NOMEM, "ffi: out of memory");
    snprintf(e->id, sizeof e->id, "%s", id);
    e->num = num;
    int rc = crl_opts_bool(opts, "check_nan", &e->check_nan, err);
    const char *calls = "per_env";
    if (!rc)
        rc = crl_opts_string(opts, "calls", &calls, err);
    e->batch = !rc && !strcmp(calls, "batch");
    e->ncalls = e->batch ? 1 : num;
    e->span = e->batch ? num : 1;
    e->all = rc ? NULL : malloc((size_t)num);
    if (!rc && !e->all)
        rc = crl_error_set(err, CRL_E_NOMEM, "ffi: out of memory");
    if (!rc)
        memset(e->all, 1, (size_t)num);
    int64_t shape[L_COUNT][FFI_MAX_DIMS + 1] = { { 0 } };
    int64_t count = 0;
    if (!rc)
        rc = shape_of(opts, "observation_shape", shape[L_OBSERVATION], &e->per_env[L_OBSERVATION], err);
    if (!rc && !crl_opts_is_set(opts, "observation_shape"))
        rc = cfg_error(opts, "observation_shape", err, "required: the per-env observation shape%s%s", "", "");
    if (!rc)
        rc = shape_of(opts, "action_shape", shape[L_ACTION], &count, err);
    e->per_env[L_ACTION] = count;
    for (int l = L_REWARD; l < L_COUNT; l++) {
        shape[l][0] = 1;
        shape[l][1] = 1;
        e->per_env[l] = 1;
    }
    const char *lib = NULL;
    if (!rc)
        rc = crl_opts_string(opts, "library", &lib, err);
    if (!rc && !crl_opts_is_set(opts, "library"))
        rc = cfg_error(opts, "library", err, "required: the simulator library (a path or a soname)%s%s", "", "");
    for (int j = 0; j < F_COUNT && !rc; j++) {
        if (!crl_opts_is_set(opts, fn_keys[j])) {
            if (j == F_RESET || j == F_STEP)
                rc = cfg_error(opts, fn_keys[j], err, "required: the C signature of the %s function%s", fn_keys[j], "");
            continue;
        }
        const char *sig;
        rc = crl_opts_string(opts, fn_keys[j], &sig, err);
        if (!rc)
            rc = parse_fn(opts, fn_keys[j], sig, &e->fns[j], shape, err);
        e->have[j] = !rc;
    }
    /* Every leaf has one C type, the same in every function; reset and step write what they must. */
    ctype seen[L_COUNT];
    bool has[L_COUNT] = { false }, in_reset[L_COUNT] = { false }, in_step[L_COUNT] = { false };
    for (int j = 0; j < F_COUNT && !rc; j++) {
        for (int k = 0; k < e->fns[j].nargs && !rc; k++) {
            arg *a = &e->fns[j].args[k];
            if (a->kind == A_HANDLE && !e->have[F_MAKE])
                rc = cfg_error(opts, fn_keys[j], err, "an argument is the handle, but no make function creates one%s%s",
                               "", "");
            if (a->kind != A_BUFFER || rc)
                continue;
            if (j != F_RESET && j != F_STEP)
                rc = cfg_error(opts, fn_keys[j], err, "the %s function takes no spec buffer (%s)", fn_keys[j],
                               leaf_names[a->leaf]);
            else if (has[a->leaf] && seen[a->leaf] != a->type)
                rc = cfg_error(opts, fn_keys[j], err, "%s is %s here but another function declares it differently",
                               leaf_names[a->leaf], ctypes[a->type].name);
            else if (j == F_RESET && a->leaf != L_OBSERVATION)
                rc = cfg_error(opts, "reset", err, "reset writes the observation only, not %s%s", leaf_names[a->leaf], "");
            has[a->leaf] = true;
            seen[a->leaf] = a->type;
            (j == F_RESET ? in_reset : in_step)[a->leaf] = true;
        }
    }
    if (e->batch && !rc) {
        for (int j = 0; j < F_COUNT && !rc; j++) {
            bool has_mask = false, has_seeds = false;
            for (int k = 0; k < e->fns[j].nargs; k++) {
                argkind kind = e->fns[j].args[k].kind;
                has_mask |= kind == A_MASK;
                has_seeds |= kind == A_SEEDS;
                if (kind == A_SEED || (kind == A_INDEX && j != F_RENDER))
                    rc = cfg_error(opts, fn_keys[j], err, "with calls = batch one call serves every env: use %s, not %s",
                                   kind == A_SEED ? "seeds (a const uint64 array)" : "count", kind == A_SEED ? "seed"
                                   : "index");
            }
            if (!rc && e->have[j] && (j == F_RESET || j == F_SEED) && !has_mask)
                rc = cfg_error(opts, fn_keys[j], err, "with calls = batch, %s takes the mask (the envs to %s)",
                               fn_keys[j], j == F_RESET ? "reset" : "seed");
            if (!rc && e->have[j] && j == F_SEED && !has_seeds)
                rc = cfg_error(opts, "seeding", err, "with calls = batch, seeding takes seeds (one per env)%s", "");
        }
    }
    if (!rc)
        rc = crl_opts_int(opts, "render_height", &e->render_h, err);
    if (!rc)
        rc = crl_opts_int(opts, "render_width", &e->render_w, err);
    if (!rc && e->have[F_RENDER] && (!e->render_h || !e->render_w))
        rc = cfg_error(opts, "render", err, "render needs the frame's size: set render_height and render_width%s%s",
                       "", "");
    if (!rc && !e->have[F_RENDER] && (e->render_h || e->render_w))
        rc = cfg_error(opts, e->render_h ? "render_height" : "render_width", err, "a frame size without a render "
                       "function: set render (e.g. void sim_render(handle, rgb)) or remove the size%s%s", "", "");
    if (!rc && e->have[F_RENDER]) {
        bool has_rgb = false;
        for (int k = 0; k < e->fns[F_RENDER].nargs; k++)
            has_rgb |= e->fns[F_RENDER].args[k].kind == A_RGB;
        if (!has_rgb)
            rc = cfg_error(opts, "render", err, "render must take rgb (the uint8 [render_height, render_width, 3] "
                           "frame it fills)%s%s", "", "");
    }
    if (!rc && !in_reset[L_OBSERVATION])
        rc = cfg_error(opts, "reset", err, "reset must write the observation: add an argument such as double "
                       "*observation%s%s", "", "");
    /* terminated is optional: a plant without a notion of failure never terminates. */
    for (int l = 0; l < L_TERMINATED && !rc; l++)
        if (!in_step[l])
            rc = cfg_error(opts, "step", err, "step must take the %s buffer (e.g. %s)", leaf_names[l],
                           l == L_ACTION ? "const double *action" : l == L_OBSERVATION ? "double *observation"
                           : "double *reward");
    if (!rc && has[L_ACTION] && !ctypes[seen[L_ACTION]].is_float && (shape[L_ACTION][0] != 1 || shape[L_ACTION][1] != 1))
        rc = cfg_error(opts, "action_shape", err, "an integer action is one category per env: action_shape must be 1%s%s",
                       "", "");
    for (int l = 0; l < L_COUNT && !rc; l++)
        if (has[l])
            e->dt[l] = leaf_dtype((leaf)l, seen[l]);
    /* Staging for C types the crl buffer does not hold as is. */
    for (int j = 0; j < F_COUNT && !rc; j++)
        for (int k = 0; k < e->fns[j].nargs && !rc; k++) {
            arg *a = &e->fns[j].args[k];
            if (a->kind == A_BUFFER && !same_repr(e->dt[a->leaf], a->type)) {
                a->staging = calloc((size_t)(e->per_env[a->leaf] * e->span), ctypes[a->type].size);
                if (!a->staging)
                    rc = crl_error_set(err, CRL_E_NOMEM, "ffi: out of memory");
            }
        }
    if (!rc && strchr(lib, '/'))
        rc = check_library_path(opts, lib, err);
    if (!rc) {
        dlerror();
        e->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (!e->lib)
            rc = cfg_error(opts, "library", err, "cannot load %s: %s", lib, dlerror());
    }
    for (int j = 0; j < F_COUNT && !rc; j++) {
        if (!e->have[j])
            continue;
        dlerror();
        void *sym = dlsym(e->lib, e->fns[j].symbol);
        if (!sym)
            rc = cfg_error(opts, fn_keys[j], err, "the library has no function '%s' (%s)", e->fns[j].symbol, lib);
        memcpy(&e->fns[j].addr, &sym, sizeof sym);
    }
    /* Specs. */
    crl_spec *obs = NULL, *act = NULL, *rew = NULL, *done = NULL;
    if (!rc) {
        int64_t full[FFI_MAX_DIMS + 1];
        full[0] = num;
        for (int k = 0; k < shape[L_OBSERVATION][0]; k++)
            full[k + 1] = shape[L_OBSERVATION][k + 1];
        double lo = -INFINITY, hi = INFINITY;
        if (crl_opts_is_set(opts, "observation_low"))
            crl_opts_double(opts, "observation_low", &lo, NULL);
        if (crl_opts_is_set(opts, "observation_high"))
            crl_opts_double(opts, "observation_high", &hi, NULL);
        int nd = 1 + (int)shape[L_OBSERVATION][0];
        obs = crl_spec_composite_of(num, "observation",
                                    isinf(lo) && isinf(hi) ? crl_spec_unbounded(CRL_F32, nd, full, err)
                                                           : crl_spec_bounded(CRL_F32, nd, full, lo, hi, err), err);
        if (e->dt[L_ACTION] == CRL_I64) {
            int64_t n;
            crl_opts_int(opts, "action_n", &n, NULL);
            act = crl_spec_composite_of(num, "action", crl_spec_categorical(n, CRL_I64, 1, &num, err), err);
        } else {
            full[0] = num;
            for (int k = 0; k < shape[L_ACTION][0]; k++)
                full[k + 1] = shape[L_ACTION][k + 1];
            double alo = -1, ahi = 1;
            crl_opts_double(opts, "action_low", &alo, NULL);
            crl_opts_double(opts, "action_high", &ahi, NULL);
            if (!(alo < ahi)) {
                rc = cfg_error(opts, "action_high", err, "action_low must be below action_high%s%s", "", "");
            } else {
                act = crl_spec_composite_of(num, "action",
                                            crl_spec_bounded(CRL_F32, 1 + (int)shape[L_ACTION][0], full, alo, ahi, err),
                                            err);
            }
        }
        int64_t rs[2] = { num, 1 };
        rew = crl_spec_composite_of(num, "reward", crl_spec_unbounded(CRL_F32, 2, rs, err), err);
        done = crl_env_backend_done_spec(num, err);
        if (!rc && (!obs || !act || !rew || !done))
            rc = CRL_E_INVALID;
    }
    if (!rc) {
        e->handles = calloc((size_t)num, sizeof *e->handles);
        if (!e->handles)
            rc = crl_error_set(err, CRL_E_NOMEM, "ffi: out of memory");
    }
    for (int64_t i = 0; i < e->ncalls && !rc && e->have[F_MAKE]; i++)
        rc = call_one(e, &e->fns[F_MAKE], i, 0, &e->handles[i], err);
    specs->observation = obs;
    specs->action = act;
    specs->reward = rew;
    specs->done = done;
    if (!rc && e->have[F_RENDER]) {
        specs->render_height = (int32_t)e->render_h;
        specs->render_width = (int32_t)e->render_w;
    }
    if (rc) {
        ffi_close(e);
        return rc;
    }
    *env = e;
    return CRL_OK;
}

static int ffi_bind(void *env, crl_td *buffers, crl_error *err)
{
    ffi_env *e = env;
    if (!e || !buffers)
        return crl_error_set(err, CRL_E_INVALID, "ffi: bind needs an env and a buffer TensorDict");
    char who[160];
    snprintf(who, sizeof who, "ffi: %s", e->id);
    int rc = CRL_OK;
    void *b[L_COUNT];
    b[L_OBSERVATION] = crl_env_backend_buffer(buffers, who, "observation", CRL_F32, e->num, e->per_env[L_OBSERVATION],
                                              &rc, err);
    b[L_ACTION] = crl_env_backend_buffer(buffers, who, "action", e->dt[L_ACTION], e->num,
                                         e->dt[L_ACTION] == CRL_I64 ? 0 : e->per_env[L_ACTION], &rc, err);
    b[L_REWARD] = crl_env_backend_buffer(buffers, who, "reward", CRL_F32, e->num, 1, &rc, err);
    b[L_TERMINATED] = crl_env_backend_buffer(buffers, who, "terminated", CRL_BOOL, e->num, 1, &rc, err);
    b[L_TRUNCATED] = crl_env_backend_buffer(buffers, who, "truncated", CRL_BOOL, e->num, 1, &rc, err);
    if (rc)
        return rc;
    memcpy(e->buf, b, sizeof b);
    e->dt[L_OBSERVATION] = CRL_F32;
    e->dt[L_REWARD] = CRL_F32;
    e->dt[L_TERMINATED] = e->dt[L_TRUNCATED] = CRL_BOOL;
    e->bound = true;
    return CRL_OK;
}

static int ffi_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    ffi_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "ffi: reset needs an env");
    if (!e->bound)
        return crl_error_set(err, CRL_E_INVALID, "ffi: %s: reset before bind", e->id);
    if (from_state)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "ffi: %s: the described library has no state spec to reset from",
                             e->id);
    /* bool is one byte holding 0 or 1 here, as the library's uint8/bool mask. */
    e->mask = mask ? (const uint8_t *)mask : e->all;
    e->seeds = seeds;
    for (int64_t c = 0; c < e->ncalls; c++) {
        if (!e->batch && mask && !mask[c])
            continue;
        int rc = CRL_OK;
        if (seeds && e->have[F_SEED])
            rc = call_one(e, &e->fns[F_SEED], c, seeds[c], NULL, err);
        if (!rc)
            rc = call_one(e, &e->fns[F_RESET], c, 0, NULL, err);
        if (rc)
            return rc;
    }
    for (int64_t i = 0; i < e->num; i++)
        if (!mask || mask[i]) {
            ((uint8_t *)e->buf[L_TERMINATED])[i] = 0;
            ((uint8_t *)e->buf[L_TRUNCATED])[i] = 0;
        }
    return CRL_OK;
}

static int ffi_step(void *env, crl_error *err)
{
    ffi_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "ffi: step needs an env");
    if (!e->bound)
        return crl_error_set(err, CRL_E_INVALID, "ffi: %s: step before bind", e->id);
    for (int64_t i = 0; i < e->ncalls; i++) {
        int rc = call_one(e, &e->fns[F_STEP], i, 0, NULL, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

static int ffi_render(void *env, int64_t i, uint8_t *rgb, crl_error *err)
{
    ffi_env *e = env;
    if (!e || !rgb)
        return crl_error_set(err, CRL_E_INVALID, "ffi: render needs an env and a frame");
    if (!e->have[F_RENDER])
        return crl_error_set(err, CRL_E_UNSUPPORTED, "ffi: %s: no render function is described: set render",
                             e->id);
    if (i < 0 || i >= e->num)
        return crl_error_set(err, CRL_E_INVALID, "ffi: %s: render of env %lld, which is not in 0..%lld", e->id,
                             (long long)i, (long long)(e->num - 1));
    e->rgb = rgb;
    int rc = call_one(e, &e->fns[F_RENDER], i, 0, NULL, err);
    e->rgb = NULL;
    return rc;
}

static const crl_env_ops ffi_ops = {
    .struct_size = sizeof(crl_env_ops),
    .list = ffi_list,
    .make = ffi_make,
    .bind = ffi_bind,
    .reset = ffi_reset,
    .step = ffi_step,
    .render = ffi_render,
    .close = ffi_close,
};

static const crl_component ffi_component = {
    sizeof(crl_component),
    CRL_KIND_ENV,
    "ffi",
    "any C simulator library as an env: functions and buffers described in INI, called through libffi",
    ffi_options,
    &ffi_ops,
};

static int ffi_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    return crl_host_register(host, &ffi_component, err);
}

CRL_PLUGIN_DEFINE(ffi, "ffi", PACKAGE_VERSION, "MIT", "C simulator libraries as envs through libffi", NULL, ffi_init,
                  NULL)
