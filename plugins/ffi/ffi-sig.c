/* The C signature language (plugins/ffi/README.md): parsing into prepared libffi calls, conversions, loading
 * the described library. */
#define _GNU_SOURCE
#include "ffi-sig.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const ctype_info ffi_ctypes[T_COUNT] = {
    [T_INT8] = { "int8", 1, false, true },    [T_INT16] = { "int16", 2, false, true },
    [T_INT32] = { "int32", 4, false, true },  [T_INT64] = { "int64", 8, false, true },
    [T_UINT8] = { "uint8", 1, false, false }, [T_UINT16] = { "uint16", 2, false, false },
    [T_UINT32] = { "uint32", 4, false, false }, [T_UINT64] = { "uint64", 8, false, false },
    [T_FLOAT] = { "float", 4, true, true },   [T_DOUBLE] = { "double", 8, true, true },
    [T_BOOL] = { "bool", 1, false, false },
};

static const char *const word_names[A_CONST] = { "handle", "seed", "index", "count", "seeds", "mask", "rgb" };

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

/* The C type each special word is passed as. */
static ffi_type *word_type(argkind k)
{
    switch (k) {
    case A_SEED: return &ffi_type_uint64;
    case A_INDEX: case A_COUNT: return &ffi_type_sint64;
    default: return &ffi_type_pointer; /* handle, seeds, mask, rgb, buffers */
    }
}

static int parse_ctype(const char *s, size_t len, ctype *out)
{
    for (int t = 0; t < T_COUNT; t++)
        if (strlen(ffi_ctypes[t].name) == len && !strncmp(s, ffi_ctypes[t].name, len)) {
            *out = (ctype)t;
            return 1;
        }
    return 0;
}

static double ffi_load_double(ctype t, const void *p)
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

static void ffi_store_double(ctype t, void *p, double v)
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

/* A crl tensor element as a double, and back (integers truncated, bool as 0/1). */
static double ffi_load_crl(crl_dtype dt, const void *p)
{
    switch (dt) {
    case CRL_BOOL: case CRL_U8: return *(const uint8_t *)p;
    case CRL_I8: return *(const int8_t *)p;
    case CRL_I16: return *(const int16_t *)p;
    case CRL_I32: return *(const int32_t *)p;
    case CRL_I64: return (double)*(const int64_t *)p;
    case CRL_F16: return crl_half_to_float(*(const uint16_t *)p);
    case CRL_F32: return *(const float *)p;
    default: return *(const double *)p;
    }
}

static void ffi_store_crl(crl_dtype dt, void *p, double v)
{
    switch (dt) {
    case CRL_BOOL: *(uint8_t *)p = v != 0.0; break;
    case CRL_U8: *(uint8_t *)p = (uint8_t)v; break;
    case CRL_I8: *(int8_t *)p = (int8_t)v; break;
    case CRL_I16: *(int16_t *)p = (int16_t)v; break;
    case CRL_I32: *(int32_t *)p = (int32_t)v; break;
    case CRL_I64: *(int64_t *)p = (int64_t)v; break;
    case CRL_F16: *(uint16_t *)p = crl_float_to_half((float)v); break;
    case CRL_F32: *(float *)p = (float)v; break;
    default: *(double *)p = v; break;
    }
}

bool ffi_same_repr(crl_dtype dt, ctype t)
{
    switch (dt) {
    case CRL_BOOL: return t == T_BOOL || t == T_UINT8;
    case CRL_U8: return t == T_UINT8;
    case CRL_I8: return t == T_INT8;
    case CRL_I16: return t == T_INT16;
    case CRL_I32: return t == T_INT32;
    case CRL_I64: return t == T_INT64;
    case CRL_F32: return t == T_FLOAT;
    case CRL_F64: return t == T_DOUBLE;
    default: return false;
    }
}

/* The common pairs (float32 buffers for double simulators, bool flags) have loops of their own: the
 * generic path converts element by element through double. */
void ffi_to_c(crl_dtype dt, const void *src, ctype t, void *dst, int64_t n)
{
    if (dt == CRL_F32 && t == T_DOUBLE) {
        const float *s = src;
        double *d = dst;
        for (int64_t m = 0; m < n; m++)
            d[m] = s[m];
        return;
    }
    const size_t ss = crl_dtype_size(dt), ds = ffi_ctypes[t].size;
    for (int64_t m = 0; m < n; m++)
        ffi_store_double(t, (char *)dst + (size_t)m * ds, ffi_load_crl(dt, (const char *)src + (size_t)m * ss));
}

int64_t ffi_from_c(ctype t, const void *src, crl_dtype dt, void *dst, int64_t n, bool check_nan)
{
    check_nan = check_nan && ffi_ctypes[t].is_float;
    if (t == T_DOUBLE && dt == CRL_F32) {
        const double *s = src;
        float *d = dst;
        for (int64_t m = 0; m < n; m++) {
            if (check_nan && isnan(s[m]))
                return m;
            d[m] = (float)s[m];
        }
        return -1;
    }
    if (t == T_FLOAT && dt == CRL_F32 && src == dst) {
        const float *s = src;
        for (int64_t m = 0; check_nan && m < n; m++)
            if (isnan(s[m]))
                return m;
        return -1;
    }
    if ((t == T_UINT8 || t == T_BOOL) && dt == CRL_BOOL) {
        const uint8_t *s = src;
        uint8_t *d = dst;
        for (int64_t m = 0; m < n; m++)
            d[m] = s[m] != 0;
        return -1;
    }
    const size_t ss = ffi_ctypes[t].size, ds = crl_dtype_size(dt);
    for (int64_t m = 0; m < n; m++) {
        double v = ffi_load_double(t, (const char *)src + (size_t)m * ss);
        if (check_nan && isnan(v))
            return m;
        ffi_store_crl(dt, (char *)dst + (size_t)m * ds, v);
    }
    return -1;
}

int ffi_sig_error(const crl_opts *opts, const char *key, crl_error *err, const char *fmt, ...)
{
    char what[768];
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

static int parse_const(const crl_opts *opts, const char *key, const char *text, const char *v, arg *a,
                       crl_error *err)
{
    a->kind = A_CONST;
    v = skip_ws(v);
    char num[64];
    size_t vl = strlen(v);
    while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        vl--;
    snprintf(num, sizeof num, "%.*s", (int)(vl < 63 ? vl : 63), v);
    if (ffi_ctypes[a->type].is_float) {
        double d;
        if (!crl_parse_double(num, &d))
            return ffi_sig_error(opts, key, err, "constant '%s' is not a %s", text, ffi_ctypes[a->type].name);
        ffi_store_double(a->type, &a->value, d);
        return CRL_OK;
    }
    int64_t i;
    if (!crl_parse_int(num, &i))
        return ffi_sig_error(opts, key, err, "constant '%s' is not an integer of type %s", text,
                             ffi_ctypes[a->type].name);
    if (a->type == T_UINT64 || a->type == T_INT64)
        a->value.i64 = i;
    else
        ffi_store_double(a->type, &a->value, (double)i);
    return CRL_OK;
}

/* [SIZE, ...] after a leaf: must equal the leaf's shape in the rules. */
static int parse_shape(const crl_opts *opts, const char *key, const char *text, const ffi_sig_rules *rules, int l,
                       const char **pp, arg *a, crl_error *err)
{
    const char *p = *pp;
    int64_t *dims = a->dims;
    int nd = 0;
    p++;
    while (1) {
        char *end;
        errno = 0;
        long long v = strtoll(skip_ws(p), &end, 10);
        if (end == skip_ws(p) || errno || v <= 0 || nd == FFI_MAX_DIMS)
            return ffi_sig_error(opts, key, err, "argument '%s': the shape does not parse (positive sizes, at most 4)",
                                 text);
        dims[nd++] = v;
        p = skip_ws(end);
        if (*p == ']')
            break;
        if (*p != ',' && *p != 'x')
            return ffi_sig_error(opts, key, err, "argument '%s': the shape does not parse", text);
        p++;
    }
    *pp = skip_ws(p + 1);
    a->ndims = nd;
    const int64_t *want = rules->shape[l];
    if (want[0] < 0)
        return CRL_OK;
    bool same = want[0] == nd;
    for (int k = 0; same && k < nd; k++)
        same = want[k + 1] == dims[k];
    if (same)
        return CRL_OK;
    char spec[96] = "", got[96] = "";
    for (int k = 0; k < want[0]; k++)
        snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%s%lld", k ? "," : "", (long long)want[k + 1]);
    for (int k = 0; k < nd; k++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? "," : "", (long long)dims[k]);
    return ffi_sig_error(opts, key, err, "argument '%s' has shape [%s] but the %s spec's per-env shape is [%s]", text,
                         got, rules->leaves[l], spec);
}

/* One argument: a special word | TYPE=VALUE | [const] TYPE *LEAF[DIMS]. */
static int parse_arg(const crl_opts *opts, const char *key, const char *text, const ffi_sig_rules *rules, arg *a,
                     crl_error *err)
{
    memset(a, 0, sizeof *a);
    const char *p = skip_ws(text);
    size_t n = ident_len(p);
    const char *rest = skip_ws(p + n);
    for (int w = 0; w < A_CONST; w++) {
        if (strlen(word_names[w]) != n || strncmp(p, word_names[w], n) || *rest)
            continue;
        if (rules->word_only_in[w])
            return ffi_sig_error(opts, key, err, "'%s' is an argument of %s only (got it in %s)", word_names[w],
                                 rules->word_only_in[w], key);
        a->kind = (argkind)w;
        return CRL_OK;
    }
    if (n == 5 && !strncmp(p, "const", 5)) {
        a->is_const = true;
        p = rest;
        n = ident_len(p);
        rest = skip_ws(p + n);
    }
    if (!parse_ctype(p, n, &a->type)) {
        char words[96] = "";
        for (int w = 0; w < A_CONST; w++)
            if (!rules->word_only_in[w])
                snprintf(words + strlen(words), sizeof words - strlen(words), "%s, ", word_names[w]);
        return ffi_sig_error(opts, key, err,
                             "argument '%s' does not parse: expected %sTYPE=VALUE or [const] TYPE *LEAF (types: "
                             "int8..int64, uint8..uint64, float, double, bool)", text, words);
    }
    if (*rest == '=') {
        if (a->is_const)
            return ffi_sig_error(opts, key, err, "argument '%s': a constant is not const-qualified", text);
        return parse_const(opts, key, text, rest + 1, a, err);
    }
    if (*rest != '*')
        return ffi_sig_error(opts, key, err, "argument '%s' does not parse: a type is followed by =VALUE or *LEAF",
                             text);
    a->kind = A_BUFFER;
    p = skip_ws(rest + 1);
    n = ident_len(p);
    int l = -1;
    for (int k = 0; rules->leaves[k]; k++)
        if (strlen(rules->leaves[k]) == n && !strncmp(p, rules->leaves[k], n))
            l = k;
    if (l < 0) {
        char word[64];
        snprintf(word, sizeof word, "%.*s", (int)(n < 63 ? n : 63), p);
        const char *near = crl_did_you_mean(word, rules->leaves);
        char hint[96] = "";
        if (near)
            snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
        return ffi_sig_error(opts, key, err, "argument '%s' names no spec leaf: use %s%s", text, rules->leaf_list,
                             hint);
    }
    a->leaf = l;
    p = skip_ws(p + n);
    if (*p == '[') {
        int rc = parse_shape(opts, key, text, rules, l, &p, a, err);
        if (rc)
            return rc;
    }
    if (*p)
        return ffi_sig_error(opts, key, err, "argument '%s' does not parse: unexpected text after the leaf", text);
    return CRL_OK;
}

/* The text between '(' and ')', split on commas outside [...]. */
static int parse_args(const crl_opts *opts, const char *key, const char *sig, const char *a, const char *close,
                      const ffi_sig_rules *rules, fn *f, crl_error *err)
{
    const char *first = skip_ws(a);
    if (first == close || (close - first >= 4 && !strncmp(first, "void", 4) && skip_ws(first + 4) == close))
        return CRL_OK;
    int depth = 0;
    const char *start = a;
    for (const char *q = a; q <= close; q++) {
        if (*q == '[')
            depth++;
        else if (*q == ']')
            depth--;
        if ((*q != ',' || depth != 0) && q != close)
            continue;
        if (f->nargs == FFI_MAX_ARGS)
            return ffi_sig_error(opts, key, err, "'%s': more than %d arguments", sig, FFI_MAX_ARGS);
        char text[160];
        start = skip_ws(start);
        size_t len = q > start ? (size_t)(q - start) : 0;
        while (len && (start[len - 1] == ' ' || start[len - 1] == '\t'))
            len--;
        snprintf(text, sizeof text, "%.*s", (int)(len < 159 ? len : 159), start);
        if (!*text)
            return ffi_sig_error(opts, key, err, "'%s' does not parse: an empty argument", sig);
        int rc = parse_arg(opts, key, text, rules, &f->args[f->nargs], err);
        if (rc)
            return rc;
        f->nargs++;
        start = q + 1;
    }
    return CRL_OK;
}

/* RET SYMBOL(ARG, ...) [ok=VALUE]; RET is void, handle or a scalar type. */
int ffi_sig_parse(const crl_opts *opts, const char *key, const char *sig, const ffi_sig_rules *rules, fn *f,
                  crl_error *err)
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
        return ffi_sig_error(opts, key, err, "'%s' does not parse: it starts with the return type (void, handle, "
                             "int8..int64, uint8..uint64, float, double, bool)", sig);
    if ((f->ret == R_HANDLE) != rules->returns_handle)
        return ffi_sig_error(opts, key, err, "'%s': %s", sig,
                             f->ret == R_HANDLE ? "only make returns a handle" : "make returns handle");
    p = skip_ws(p + n);
    n = ident_len(p);
    if (!n || n >= sizeof f->symbol)
        return ffi_sig_error(opts, key, err, "'%s' does not parse: the function name follows the return type", sig);
    memcpy(f->symbol, p, n);
    p = skip_ws(p + n);
    if (*p != '(')
        return ffi_sig_error(opts, key, err, "'%s' does not parse: '(' expected after the function name", sig);
    const char *close = strchr(p, ')');
    if (!close)
        return ffi_sig_error(opts, key, err, "'%s' does not parse: ')' missing", sig);
    int rc = parse_args(opts, key, sig, p + 1, close, rules, f, err);
    if (rc)
        return rc;
    p = skip_ws(close + 1);
    if (!strncmp(p, "ok", 2) && *skip_ws(p + 2) == '=') {
        if (f->ret != R_SCALAR)
            return ffi_sig_error(opts, key, err, "'%s': ok= needs a scalar return type", sig);
        f->has_ok = true;
        if (!crl_parse_double(skip_ws(skip_ws(p + 2) + 1), &f->ok))
            return ffi_sig_error(opts, key, err, "'%s': the value after ok= does not parse", sig);
        p = "";
    }
    if (*p)
        return ffi_sig_error(opts, key, err, "'%s' does not parse: unexpected text after ')' (only ok=VALUE may "
                             "follow)", sig);
    for (int k = 0; k < f->nargs; k++) {
        arg *x = &f->args[k];
        f->atypes[k] = x->kind == A_CONST ? ffi_of(x->type) : word_type(x->kind);
        f->avalues[k] = &x->value;
    }
    ffi_type *rt = f->ret == R_VOID ? &ffi_type_void : f->ret == R_HANDLE ? &ffi_type_pointer : ffi_of(f->rtype);
    if (ffi_prep_cif(&f->cif, FFI_DEFAULT_ABI, (unsigned)f->nargs, rt, f->atypes) != FFI_OK)
        return ffi_sig_error(opts, key, err, "'%s': libffi cannot prepare this signature", sig);
    return CRL_OK;
}

double ffi_sig_ret_double(const fn *f, const ffi_retval *r)
{
    if (ffi_ctypes[f->rtype].is_float)
        return f->rtype == T_FLOAT ? r->f : r->d;
    if (ffi_ctypes[f->rtype].size == 8)
        return f->rtype == T_UINT64 ? (double)r->u64 : (double)r->i64;
    return ffi_ctypes[f->rtype].is_signed ? (double)r->s : (double)r->a;
}

/* The plugin host's rules, as a description error on `key`. */
static int check_code(const crl_opts *opts, const char *key, const char *path, char **resolved, crl_error *err)
{
    crl_error local;
    crl_error_clear(&local);
    char what[300];
    snprintf(what, sizeof what, "the library %s", path);
    if (!crl_file_check_code(path, what, resolved, &local))
        return CRL_OK;
    return ffi_sig_error(opts, key, err, "%s", local.message);
}

/* A soname in one of LD_LIBRARY_PATH's directories: the file the dynamic linker would take first. */
static char *find_in_ld_library_path(const char *name)
{
    const char *llp = getenv("LD_LIBRARY_PATH");
    if (!llp || !*llp)
        return NULL;
    char *copy = strdup(llp), *save = NULL;
    char *found = NULL;
    for (char *dir = copy ? strtok_r(copy, ":;", &save) : NULL; dir && !found; dir = strtok_r(NULL, ":;", &save)) {
        size_t len = strlen(dir) + strlen(name) + 2;
        char *cand = malloc(len);
        if (!cand)
            break;
        snprintf(cand, len, "%s/%s", dir, name);
        struct stat st;
        if (stat(cand, &st) == 0)
            found = cand;
        else
            free(cand);
    }
    free(copy);
    return found;
}

int ffi_sig_open(const crl_opts *opts, const char *key, const char *lib_name, void **lib, crl_error *err)
{
    *lib = NULL;
    char *resolved = NULL;
    char *in_llp = strchr(lib_name, '/') ? NULL : find_in_ld_library_path(lib_name);
    const bool checked = strchr(lib_name, '/') || in_llp;
    if (checked) {
        int rc = check_code(opts, key, in_llp ? in_llp : lib_name, &resolved, err);
        free(in_llp);
        if (rc)
            return rc;
    }
    dlerror();
    void *h = dlopen(resolved ? resolved : lib_name, RTLD_NOW | RTLD_LOCAL);
    crl_free(resolved);
    if (!h) {
        const char *why = dlerror();
        return ffi_sig_error(opts, key, err, "cannot load %s: %s", lib_name, why ? why : "dlopen failed");
    }
    if (!checked) {
        /* Found by the dynamic linker's cache or default directories: check where it came from. */
        struct link_map *map = NULL;
        int rc = CRL_OK;
        if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name || !*map->l_name)
            rc = ffi_sig_error(opts, key, err, "cannot tell which file %s was loaded from: give the library as a "
                               "path", lib_name);
        else
            rc = check_code(opts, key, map->l_name, NULL, err);
        if (rc) {
            dlclose(h);
            return rc;
        }
    }
    *lib = h;
    return CRL_OK;
}

int ffi_sig_bind(const crl_opts *opts, void *lib, const char *lib_name, fn *f, crl_error *err)
{
    dlerror();
    void *sym = dlsym(lib, f->symbol);
    if (!sym)
        return ffi_sig_error(opts, f->key, err, "the library has no function '%s' (%s)", f->symbol, lib_name);
    memcpy(&f->addr, &sym, sizeof sym);
    return CRL_OK;
}
