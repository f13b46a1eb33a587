/* TensorDictPrimer: extra entries (recurrent states) written on reset, carried through steps, in the specs. */
#include "config.h"
#include "action_group.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct primer {
    char *key;
    crl_dtype dt;
    int ndim;               /* the entry's own dims, after the batch dims */
    int64_t shape[CRL_MAX_DIMS];
    double value;
    bool given;             /* the entry named its own start value */
    crl_spec *spec;         /* full spec (batch dims included), once specs were transformed */
} primer;

typedef struct primers {
    primer *p;
    size_t n;
    bool random;
    crl_transform_ctx *ctx;
    crl_rng rng;            /* standalone */
} primers;

static void primers_destroy(void *v)
{
    primers *t = v;
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->p[i].key);
        crl_spec_unref(t->p[i].spec);
    }
    free(t->p);
    free(t);
}

/* "DTYPE [d0, d1, ...] [DEFAULT]" into pr. */
static int parse_primer(const crl_opts *o, const char *okey, const char *text, double dflt, primer *pr,
                        crl_error *err)
{
    const char *s = text;
    char dname[32];
    size_t n = 0;
    while (isspace((unsigned char)*s))
        s++;
    while (*s && !isspace((unsigned char)*s) && *s != '[' && n + 1 < sizeof dname)
        dname[n++] = *s++;
    dname[n] = '\0';
#define BAD(why)                                                                                                    \
    crl_error_set(err, CRL_E_CONFIG, "[%s] %s = '%s': %s; write DTYPE [DIMS] [DEFAULT], e.g. 'float32 [4] 0' or "  \
                  "'int64 [] 1'", crl_opts_section(o), okey, text, why)
    if (!crl_dtype_from_name(dname, &pr->dt))
        return BAD("the first word must be a dtype (bool, uint8, int8, int16, int32, int64, float16, float32, "
                   "float64)");
    while (isspace((unsigned char)*s))
        s++;
    if (*s != '[')
        return BAD("the dtype must be followed by a shape in brackets");
    s++;
    pr->ndim = 0;
    for (;;) {
        while (isspace((unsigned char)*s))
            s++;
        if (*s == ']') {
            s++;
            break;
        }
        char *end = NULL;
        errno = 0;
        long long d = strtoll(s, &end, 10);
        if (end == s || errno || d < 1)
            return BAD("the shape holds positive integer dims separated by commas");
        if (pr->ndim == CRL_MAX_DIMS - 1)
            return BAD("too many dims");
        pr->shape[pr->ndim++] = d;
        s = end;
        while (isspace((unsigned char)*s))
            s++;
        if (*s == ',')
            s++;
        else if (*s != ']')
            return BAD("the shape holds positive integer dims separated by commas");
    }
    while (isspace((unsigned char)*s))
        s++;
    pr->value = dflt;
    pr->given = *s != '\0';
    if (*s) {
        char *end = NULL;
        pr->value = strtod(s, &end);
        while (end && isspace((unsigned char)*end))
            end++;
        if (end == s || (end && *end) || !isfinite(pr->value))
            return BAD("the default after the shape must be one finite number");
    }
#undef BAD
    return CRL_OK;
}

static int primers_create(const crl_opts *o, void **out, crl_error *err)
{
    size_t n = crl_opts_prefixed_count(o, "primers.");
    if (n == 0)
        return crl_error_set(err, CRL_E_CONFIG, "[%s] TensorDictPrimer needs at least one primers.KEY = DTYPE [DIMS] "
                             "[DEFAULT] entry, e.g. primers.hidden = float32 [8] 0", crl_opts_section(o));
    primers *t = calloc(1, sizeof *t);
    if (t)
        t->p = calloc(n, sizeof *t->p);
    if (!t || !t->p) {
        free(t);
        return crl_error_set(err, CRL_E_NOMEM, "TensorDictPrimer: out of memory");
    }
    double dflt = 0;
    int rc = crl_opts_double(o, "default_value", &dflt, err);
    if (!rc)
        rc = crl_opts_bool(o, "random", &t->random, err);
    if (!rc && t->random && crl_opts_is_set(o, "default_value"))
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] random = true and default_value (%s) exclude each other; "
                           "drop one", crl_opts_origin(o, "random"), crl_opts_section(o),
                           crl_opts_origin(o, "default_value"));
    for (size_t i = 0; i < n && !rc; i++) {
        const char *okey = crl_opts_prefixed_key(o, "primers.", i);
        t->n = i + 1;
        rc = parse_primer(o, okey, crl_opts_prefixed_value(o, "primers.", i), dflt, &t->p[i], err);
        if (!rc && !(t->p[i].key = tf_strdup(okey + strlen("primers."))))
            rc = crl_error_set(err, CRL_E_NOMEM, "TensorDictPrimer: out of memory");
        if (!rc && t->random && t->p[i].given)
            rc = crl_error_set(err, CRL_E_CONFIG, "[%s] %s gives a start value, but random = true draws it; drop "
                               "one", crl_opts_section(o), okey);
        if (!rc && !*t->p[i].key)
            rc = crl_error_set(err, CRL_E_CONFIG, "[%s] %s: the primer needs a key after 'primers.'",
                               crl_opts_section(o), okey);
    }
    if (rc) {
        primers_destroy(t);
        return rc;
    }
    crl_rng_init(&t->rng, 0, 0);
    *out = t;
    return CRL_OK;
}

/* The full spec of p for a batch shape. */
static crl_spec *primer_spec(const primer *p, int bnd, const int64_t *bsh, crl_error *err)
{
    int64_t sh[2 * CRL_MAX_DIMS];
    if (bnd + p->ndim > CRL_MAX_DIMS) {
        crl_error_set(err, CRL_E_SHAPE, "TensorDictPrimer: '%s' has too many dims with the batch", p->key);
        return NULL;
    }
    memcpy(sh, bsh, sizeof(int64_t) * (size_t)bnd);
    memcpy(sh + bnd, p->shape, sizeof(int64_t) * (size_t)p->ndim);
    return crl_spec_unbounded(p->dt, bnd + p->ndim, sh, err);
}

static int primers_specs(void *v, crl_transform_specs *s, crl_error *err)
{
    primers *t = v;
    for (size_t i = 0; i < t->n; i++) {
        primer *p = &t->p[i];
        if (tf_specs_owner(s, p->key, NULL))
            return crl_error_set(err, CRL_E_EXISTS, "TensorDictPrimer: the env already has a key '%s'; give the "
                                 "primer another name", p->key);
        crl_error e;
        crl_error_clear(&e);
        crl_spec *sp = primer_spec(p, s->batch_ndim, s->batch_shape, &e);
        if (!sp)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        crl_spec_unref(p->spec);
        p->spec = crl_spec_ref(sp);
        int rc = crl_spec_composite_set(s->observation, p->key, sp, err);
        crl_spec_unref(sp);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

static int primers_bind(void *v, crl_transform_ctx *ctx, crl_error *err)
{
    (void)err;
    ((primers *)v)->ctx = ctx;
    return CRL_OK;
}

/* Restart env rows (mask NULL: all) of x to the primer's start values. */
static int fill_rows(primers *t, const primer *p, crl_tensor *x, const bool *mask, int64_t num, crl_error *err)
{
    if (!t->random) {
        int64_t r = tfa_row_elems(x, num);
        for (int64_t i = 0; i < num; i++)
            if (!mask || mask[i])
                for (int64_t j = 0; j < r; j++)
                    crl_tensor_flat_set(x, i * r + j, p->value);
        return CRL_OK;
    }
    crl_rng *rng = t->ctx ? crl_transform_ctx_rng(t->ctx) : &t->rng;
    crl_error e;
    crl_error_clear(&e);
    crl_spec *sp = primer_spec(p, crl_tensor_ndim(x) - p->ndim, crl_tensor_shape(x), &e);
    crl_tensor *tmp = sp ? crl_spec_rand(sp, rng, &e) : NULL;
    crl_spec_unref(sp);
    if (!tmp)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    for (int64_t i = 0; i < num; i++)
        if (!mask || mask[i])
            tfa_row_copy(x, tmp, i, num);
    crl_tensor_unref(tmp);
    return CRL_OK;
}

/* The primer's tensor in td (a new one when absent or of another layout) and whether it is new. */
static crl_tensor *primer_tensor(const primer *p, crl_td *td, bool *fresh, crl_error *err)
{
    int bnd = crl_td_batch_ndim(td);
    int64_t sh[2 * CRL_MAX_DIMS];
    memcpy(sh, crl_td_batch_shape(td), sizeof(int64_t) * (size_t)bnd);
    memcpy(sh + bnd, p->shape, sizeof(int64_t) * (size_t)p->ndim);
    crl_tensor *old = crl_td_get(td, p->key);
    crl_tensor *x = crl_transform_output(td, p->key, p->dt, bnd + p->ndim, sh, err);
    *fresh = x != old;
    return x;
}

static int64_t td_num(const crl_td *td)
{
    int64_t n = 1;
    for (int d = 0; d < crl_td_batch_ndim(td); d++)
        n *= crl_td_batch_shape(td)[d];
    return n;
}

static int primers_reset(void *v, crl_transform_ctx *ctx, crl_td *td, const bool *mask, crl_error *err)
{
    (void)ctx;
    primers *t = v;
    int64_t num = td_num(td);
    for (size_t i = 0; i < t->n; i++) {
        bool fresh = false;
        crl_error e;
        crl_error_clear(&e);
        crl_tensor *x = primer_tensor(&t->p[i], td, &fresh, &e);
        if (!x)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        int rc = fill_rows(t, &t->p[i], x, fresh ? NULL : mask, num, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

static int primers_step(void *v, crl_transform_ctx *ctx, crl_td *td, crl_td *next, crl_error *err)
{
    primers *t = v;
    int64_t num = td_num(next);
    const bool *restarted = crl_transform_ctx_step_resets(ctx);
    int rc;
    crl_error e;   /* for the calls that return NULL on failure */
    crl_error_clear(&e);
    for (size_t i = 0; i < t->n; i++) {
        primer *p = &t->p[i];
        if (!crl_td_has(next, p->key)) {
            /* Carried from the step input, as TorchRL does when the policy did not write next's value. */
            crl_tensor *src = crl_td_get(td, p->key);
            bool fresh = false;
            crl_tensor *x = primer_tensor(p, next, &fresh, &e);
            if (!x)
                return crl_error_pass(err, &e, CRL_E_NOMEM);
            if (src && crl_tensor_same_shape(src, x)) {
                if ((rc = crl_tensor_copy(x, src, err)))
                    return rc;
            } else if ((rc = fill_rows(t, p, x, NULL, num, err))) {
                return rc;
            }
        }
        if (restarted) {
            bool fresh = false;
            crl_tensor *x = primer_tensor(p, next, &fresh, &e);
            if (!x)
                return crl_error_pass(err, &e, CRL_E_NOMEM);
            if ((rc = fill_rows(t, p, x, fresh ? NULL : restarted, num, err)))
                return rc;
        }
    }
    return CRL_OK;
}

static int primers_call(void *v, crl_td *td, crl_error *err)
{
    primers *t = v;
    for (size_t i = 0; i < t->n; i++) {
        if (crl_td_has(td, t->p[i].key))
            continue;
        bool fresh = false;
        crl_error e;
        crl_error_clear(&e);
        crl_tensor *x = primer_tensor(&t->p[i], td, &fresh, &e);
        if (!x)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        int rc = fill_rows(t, &t->p[i], x, NULL, td_num(td), err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

static const crl_transform_ops primers_ops = {
    .struct_size = sizeof(crl_transform_ops),
    .create = primers_create,
    .transform_specs = primers_specs,
    .bind = primers_bind,
    .call = primers_call,
    .reset = primers_reset,
    .step = primers_step,
    .destroy = primers_destroy,
};

static const crl_option primers_options[] = {
    { "primers.", CRL_OPT_STRING, CRL_OPT_PREFIX, NULL, 0, 0, NULL,
      "primers.KEY = DTYPE [DIMS] [DEFAULT]: an entry written on reset (e.g. float32 [8] 0)" },
    { "default_value", CRL_OPT_DOUBLE, 0, "0", 0, 0, NULL, "the start value of primers that give none" },
    { "random", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, "start from a random draw of the entry's spec instead" },
    CRL_OPTIONS_END
};

int tfa_register_primer(crl_host *host, crl_error *err)
{
    return tf_register(host, "TensorDictPrimer", "extra entries written on reset and carried through steps",
                       primers_options, &primers_ops, err);
}
