/* The env host: crl_env from config, buffers and bind, specs, seeding, reset, step, render. */
#include "env-private.h"
#include "transform-private.h"
#include "env-desc-private.h"

#include <math.h>
#include <string.h>

/* Random actions use their own stream of the env's seed, apart from every env's. */
#define ACTION_STREAM UINT64_C(0x616374696f6e)

const char *crl__env_name(const crl_env *env, char *buf, size_t n)
{
    g_snprintf(buf, n, "env backend '%s' (id '%s')", env->backend, env->id ? env->id : "?");
    return buf;
}

char *crl__env_dims(int nd, const int64_t *sh)
{
    GString *s = g_string_new("[");
    for (int i = 0; i < nd; i++)
        g_string_append_printf(s, "%s%" G_GINT64_FORMAT, i ? ", " : "", (gint64)sh[i]);
    g_string_append_c(s, ']');
    return g_string_free(s, FALSE);
}

/* ---- specs ---------------------------------------------------------------- */

crl_spec *crl__spec_drop_batch(const crl_spec *s, crl_error *err)
{
    int nd = crl_spec_ndim(s);
    if (nd < 1) {
        crl_error_set(err, CRL_E_SHAPE, "spec has no batch dim to drop");
        return NULL;
    }
    const int64_t *shape = crl_spec_shape(s) + 1;
    crl_dtype dt = crl_spec_dtype(s);
    nd--;
    switch (crl_spec_get_kind(s)) {
    case CRL_SPEC_UNBOUNDED:
        return crl_spec_unbounded(dt, nd, shape, err);
    case CRL_SPEC_BOUNDED: {
        crl_tensor *lo = crl_tensor_index((crl_tensor *)crl_spec_low(s), 0, 0, err);
        crl_tensor *hi = lo ? crl_tensor_index((crl_tensor *)crl_spec_high(s), 0, 0, err) : NULL;
        crl_spec *r = hi ? crl_spec_bounded_t(dt, lo, hi, err) : NULL;
        crl_tensor_unref(lo);
        crl_tensor_unref(hi);
        return r;
    }
    case CRL_SPEC_CATEGORICAL:
        return crl_spec_categorical(crl_spec_n(s), dt, nd, shape, err);
    case CRL_SPEC_ONEHOT:
        return crl_spec_onehot(crl_spec_n(s), dt, nd, shape, err);
    case CRL_SPEC_MULTI_CATEGORICAL:
        return crl_spec_multi_categorical(crl_spec_nvec(s), dt, nd, shape, err);
    case CRL_SPEC_MULTI_ONEHOT:
        return crl_spec_multi_onehot(crl_spec_nvec(s), crl_spec_nvec_len(s), dt, nd, shape, err);
    case CRL_SPEC_BINARY:
        return crl_spec_binary(crl_spec_n(s), dt, nd, shape, err);
    case CRL_SPEC_COMPOSITE: {
        crl_spec *c = crl_spec_composite(nd, shape, err);
        for (size_t i = 0; c && i < crl_spec_composite_len(s); i++) {
            crl_spec *child = crl__spec_drop_batch(crl_spec_composite_at(s, i), err);
            if (!child || crl_spec_composite_set(c, crl_spec_composite_key_at(s, i), child, err)) {
                crl_spec_unref(c);
                c = NULL;
            }
            crl_spec_unref(child);
        }
        return c;
    }
    }
    crl_error_set(err, CRL_E_INVALID, "spec of unknown kind");
    return NULL;
}

/* ---- strided row copies ------------------------------------------------------ */

void crl__env_block_copy(char *dst, const int64_t *dstr, const char *src, const int64_t *sstr, int ndim,
                       const int64_t *shape, size_t es)
{
    if (ndim == 0) {
        memcpy(dst, src, es);
        return;
    }
    if (ndim == 1) {
        if (dstr[0] == (int64_t)es && sstr[0] == (int64_t)es) {
            memcpy(dst, src, es * (size_t)shape[0]);
            return;
        }
        for (int64_t i = 0; i < shape[0]; i++)
            memcpy(dst + i * dstr[0], src + i * sstr[0], es);
        return;
    }
    for (int64_t i = 0; i < shape[0]; i++)
        crl__env_block_copy(dst + i * dstr[0], dstr + 1, src + i * sstr[0], sstr + 1, ndim - 1, shape + 1, es);
}

/* Byte strides of user tensor t past the batch dims, and its data at env i. */
static char *user_row(const crl_env *env, const crl_tensor *t, int64_t i, int64_t *strides, int *ndim)
{
    size_t es = crl_dtype_size(crl_tensor_dtype(t));
    const int64_t *st = crl_tensor_strides(t);
    int b = env->batch_ndim;
    *ndim = crl_tensor_ndim(t) - b;
    for (int d = 0; d < *ndim; d++)
        strides[d] = st[d + b] * (int64_t)es;
    char *p = crl_tensor_data(t);
    return b ? p + i * st[0] * (int64_t)es : p;
}

/* Contiguous byte strides of a buffer row (shape dims 1..). */
static const char *buf_row(const crl__env_leaf *l, const crl_tensor *buf, int64_t i, int64_t *strides)
{
    int nd = crl_tensor_ndim(buf) - 1;
    const int64_t *sh = crl_tensor_shape(buf) + 1;
    int64_t s = (int64_t)crl_dtype_size(crl_tensor_dtype(buf));
    for (int d = nd - 1; d >= 0; d--) {
        strides[d] = s;
        s *= sh[d];
    }
    return (const char *)crl_tensor_data(buf) + (size_t)i * l->row_bytes;
}

void crl__env_row_to_user(const crl_env *env, crl_tensor *dst, const crl__env_leaf *l, const crl_tensor *src_buf,
                          int64_t i)
{
    int64_t ds[CRL_MAX_DIMS], ss[CRL_MAX_DIMS];
    int nd;
    char *d = user_row(env, dst, i, ds, &nd);
    const char *s = buf_row(l, src_buf, i, ss);
    crl__env_block_copy(d, ds, s, ss, nd, crl_tensor_shape(src_buf) + 1, crl_dtype_size(crl_tensor_dtype(dst)));
}

static void row_from_user(const crl_env *env, crl_tensor *buf, const crl__env_leaf *l, const crl_tensor *src,
                          int64_t i)
{
    int64_t ds[CRL_MAX_DIMS], ss[CRL_MAX_DIMS];
    int nd;
    const char *s = user_row(env, src, i, ss, &nd);
    char *d = (char *)buf_row(l, buf, i, ds);
    crl__env_block_copy(d, ds, s, ss, nd, crl_tensor_shape(buf) + 1, crl_dtype_size(crl_tensor_dtype(buf)));
}

static void row_copy(const crl__env_leaf *l, crl_tensor *dst_buf, const crl_tensor *src_buf, int64_t i)
{
    memcpy((char *)crl_tensor_data(dst_buf) + (size_t)i * l->row_bytes,
           (const char *)crl_tensor_data(src_buf) + (size_t)i * l->row_bytes, l->row_bytes);
}

static inline uint8_t *flag(const crl__env_leaf *l, int64_t i)
{
    return (uint8_t *)crl_tensor_data(l->buf) + i;
}

/* ---- leaves and buffers --------------------------------------------------- */

static bool is_output_role(int role)
{
    return role != CRL__ROLE_ACTION && role != CRL__ROLE_REWARD;
}

static void leaf_clear(crl__env_leaf *l)
{
    g_free(l->key);
    crl_spec_unref(l->spec);
    crl_spec_unref(l->uspec);
    crl_td_key_free(l->k);
    crl_td_key_free(l->nk);
    crl_tensor_unref(l->buf);
    crl_tensor_unref(l->ubuf);
    crl_tensor_unref(l->snap);
    crl_tensor_unref(l->rst);
    g_free(l->acc);
    g_free(l->dom_flo);
    g_free(l->dom_fhi);
}

static int add_leaves(crl_env *env, GArray *out, const crl_spec *comp, const char *prefix, int role,
                      const char *what, crl_error *err)
{
    char nb[300];
    for (size_t i = 0; i < crl_spec_composite_len(comp); i++) {
        const char *k = crl_spec_composite_key_at(comp, i);
        crl_spec *child = crl_spec_composite_at(comp, i);
        char *full = prefix ? g_strconcat(prefix, ".", k, NULL) : g_strdup(k);
        int rc = CRL_OK;
        if (crl_spec_get_kind(child) == CRL_SPEC_COMPOSITE) {
            rc = add_leaves(env, out, child, full, role, what, err);
        } else if (crl_spec_ndim(child) < 1 || crl_spec_shape(child)[0] != env->num) {
            char *sh = crl__env_dims(crl_spec_ndim(child), crl_spec_shape(child));
            rc = crl_error_set(err, CRL_E_SHAPE,
                               "%s: %s spec key '%s' has shape %s; every leaf must start with the batch dim "
                               "[%" G_GINT64_FORMAT "]: fix the backend",
                               crl__env_name(env, nb, sizeof nb), what, full, sh, (gint64)env->num);
            crl_free(sh);
        } else {
            crl__env_leaf l = { 0 };
            l.key = full;
            full = NULL;
            l.role = role;
            l.spec = crl_spec_ref(child);
            g_array_append_val(out, l);
        }
        g_free(full);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

static int role_of_done_key(const char *key)
{
    if (!strcmp(key, "done"))
        return CRL__ROLE_DONE;
    if (!strcmp(key, "terminated"))
        return CRL__ROLE_TERMINATED;
    if (!strcmp(key, "truncated"))
        return CRL__ROLE_TRUNCATED;
    return -1;
}

/* Collect and check the leaves of every spec the backend declared. */
static int collect_leaves(crl_env *env, crl_env_specs *sp, crl_error *err)
{
    char nb[300];
    const char *names[] = { "observation", "action", "reward", "done" };
    crl_spec *req[] = { sp->observation, sp->action, sp->reward, sp->done };
    for (int i = 0; i < 4; i++) {
        if (!req[i] || crl_spec_get_kind(req[i]) != CRL_SPEC_COMPOSITE)
            return crl_error_set(err, CRL_E_PLUGIN, "%s: make gave %s %s spec; it must fill a Composite: fix the backend",
                                 crl__env_name(env, nb, sizeof nb), req[i] ? "a leaf as its" : "no", names[i]);
    }
    crl_spec *opt[] = { sp->state, sp->info };
    const char *opt_names[] = { "state", "info" };
    for (int i = 0; i < 2; i++)
        if (opt[i] && crl_spec_get_kind(opt[i]) != CRL_SPEC_COMPOSITE)
            return crl_error_set(err, CRL_E_PLUGIN, "%s: make gave a leaf as its %s spec; it must be a Composite "
                                 "(or NULL): fix the backend", crl__env_name(env, nb, sizeof nb), opt_names[i]);
    GArray *a = g_array_new(FALSE, TRUE, sizeof(crl__env_leaf));
    int rc = add_leaves(env, a, sp->observation, NULL, CRL__ROLE_OBS, "observation", err);
    if (!rc && sp->info)
        rc = add_leaves(env, a, sp->info, NULL, CRL__ROLE_INFO, "info", err);
    if (!rc)
        rc = add_leaves(env, a, sp->action, NULL, CRL__ROLE_ACTION, "action", err);
    if (!rc)
        rc = add_leaves(env, a, sp->reward, NULL, CRL__ROLE_REWARD, "reward", err);
    size_t done_start = a->len;
    if (!rc)
        rc = add_leaves(env, a, sp->done, NULL, CRL__ROLE_DONE, "done", err);
    for (size_t i = done_start; !rc && i < a->len; i++) {
        crl__env_leaf *l = &g_array_index(a, crl__env_leaf, i);
        l->role = role_of_done_key(l->key);
        const crl_spec *s = l->spec;
        if (l->role < 0)
            rc = crl_error_set(err, CRL_E_PLUGIN, "%s: done spec key '%s' is not one of done, terminated, truncated: "
                               "fix the backend", crl__env_name(env, nb, sizeof nb), l->key);
        else if (crl_spec_dtype(s) != CRL_BOOL || crl_spec_ndim(s) != 2 || crl_spec_shape(s)[1] != 1)
            rc = crl_error_set(err, CRL_E_PLUGIN, "%s: done spec key '%s' must be bool of shape [num, 1]: fix the "
                               "backend", crl__env_name(env, nb, sizeof nb), l->key);
    }
    if (!rc && sp->state)
        rc = add_leaves(env, a, sp->state, NULL, CRL__ROLE_STATE, "state", err);
    if (!rc && env->from_pixels) {
        crl__env_leaf l = { 0 };
        l.key = g_strdup("pixels");
        l.role = CRL__ROLE_PIXELS;
        int64_t shape[4] = { env->num, env->render_h, env->render_w, 3 };
        crl_error e;
        crl_error_clear(&e);
        l.spec = crl_spec_bounded(CRL_U8, 4, shape, 0, 255, &e);
        if (!l.spec)
            rc = crl_error_pass(err, &e, CRL_E_INVALID);
        g_array_append_val(a, l);
    }
    bool has[3] = { false, false, false };
    bool has_reward = false, has_action = false;
    GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
    for (size_t i = 0; !rc && i < a->len; i++) {
        crl__env_leaf *l = &g_array_index(a, crl__env_leaf, i);
        if (l->role >= CRL__ROLE_DONE && l->role <= CRL__ROLE_TRUNCATED)
            has[l->role - CRL__ROLE_DONE] = true;
        has_reward |= l->role == CRL__ROLE_REWARD;
        has_action |= l->role == CRL__ROLE_ACTION;
        const char *first = l->key;
        size_t flen = strcspn(first, ".");
        if ((flen == 4 && !strncmp(first, "next", 4)) || (flen == 6 && !strncmp(first, "_reset", 6)))
            rc = crl_error_set(err, CRL_E_PLUGIN, "%s: spec key '%s' uses a name crl reserves (next, _reset): fix "
                               "the backend", crl__env_name(env, nb, sizeof nb), l->key);
        else if (g_hash_table_contains(seen, l->key))
            rc = crl_error_set(err, l->role == CRL__ROLE_PIXELS ? CRL_E_EXISTS : CRL_E_PLUGIN,
                               "%s: key '%s' appears in two specs%s", crl__env_name(env, nb, sizeof nb), l->key,
                               l->role == CRL__ROLE_PIXELS ? "; the backend has its own \"pixels\": leave "
                                                             "from_pixels off" : ": fix the backend");
        g_hash_table_add(seen, l->key);
    }
    g_hash_table_unref(seen);
    if (!rc && (!has[0] || !has[1] || !has[2]))
        rc = crl_error_set(err, CRL_E_PLUGIN, "%s: the done spec must hold done, terminated and truncated: fix the "
                           "backend", crl__env_name(env, nb, sizeof nb));
    if (!rc && !has_reward)
        rc = crl_error_set(err, CRL_E_PLUGIN, "%s: the reward spec has no leaf: fix the backend",
                           crl__env_name(env, nb, sizeof nb));
    if (!rc && !has_action)
        rc = crl_error_set(err, CRL_E_PLUGIN, "%s: the action spec has no leaf: fix the backend",
                           crl__env_name(env, nb, sizeof nb));
    env->nleaves = a->len;
    env->leaves = (crl__env_leaf *)(void *)g_array_free(a, FALSE);
    return rc;
}

/* How action_in_domain tests an action leaf.  DOM_SPEC asks
 * crl_spec_is_in; the others are its exact equivalents for one spec kind
 * and dtype on the contiguous buffer. */
enum {
    DOM_SPEC = 0,
    DOM_ALWAYS,      /* Unbounded */
    DOM_CAT_I64,     /* Categorical int64, 0 <= n <= 2^53: 0 <= v < n as integers */
    DOM_CAT_I64_D,   /* Categorical int64, other n: compare as doubles */
    DOM_CAT_I32,
    DOM_BOX_F64,     /* Bounded float64: low <= v <= high */
    DOM_BOX_F32,     /* Bounded float32, bounds exact as floats: compare as floats */
    DOM_BOX_F32_D    /* Bounded float32, other bounds: compare as doubles */
};

static void prepare_domain(crl__env_leaf *l)
{
    const crl_spec *s = l->spec;
    crl_device sd = crl_spec_device(s), bd = crl_tensor_device(l->buf);
    crl_dtype dt = crl_tensor_dtype(l->buf);
    l->dom = DOM_SPEC;
    /* crl_spec_is_in first matches dtype, shape and device; the buffer was
     * made from the spec, but be sure. */
    if (sd.type != bd.type || sd.index != bd.index || crl_spec_dtype(s) != dt || crl_spec_ndim(s) != crl_tensor_ndim(l->buf) ||
        memcmp(crl_spec_shape(s), crl_tensor_shape(l->buf), sizeof(int64_t) * (size_t)crl_spec_ndim(s)) != 0 ||
        !crl_tensor_is_contiguous(l->buf))
        return;
    switch (crl_spec_get_kind(s)) {
    case CRL_SPEC_UNBOUNDED:
        l->dom = DOM_ALWAYS;
        break;
    case CRL_SPEC_CATEGORICAL:
        /* check_domain's test is !(v >= 0 && v < n && v == floor(v)) on
         * the value as a double; integers always pass the floor part.  For
         * 0 <= n <= 2^53 (n exact as a double) it is 0 <= x < n on the
         * integer x: an x below n is below 2^53, so exact, and rounding
         * keeps x >= n at or above n. */
        l->dom_n = (double)crl_spec_n(s);
        l->dom_ni = crl_spec_n(s);
        if (dt == CRL_I64)
            l->dom = l->dom_ni >= 0 && l->dom_ni <= (INT64_C(1) << 53) ? DOM_CAT_I64 : DOM_CAT_I64_D;
        else if (dt == CRL_I32)
            l->dom = l->dom_ni >= 0 && l->dom_ni <= (INT64_C(1) << 53) ? DOM_CAT_I32 : DOM_SPEC;
        break;
    case CRL_SPEC_BOUNDED: {
        const crl_tensor *lo = crl_spec_low(s), *hi = crl_spec_high(s);
        if (!lo || !hi || crl_tensor_dtype(lo) != CRL_F64 || crl_tensor_dtype(hi) != CRL_F64 ||
            crl_tensor_numel(lo) != l->numel || crl_tensor_numel(hi) != l->numel || !crl_tensor_is_contiguous(lo) ||
            !crl_tensor_is_contiguous(hi))
            break;
        l->dom_lo = crl_tensor_data(lo);
        l->dom_hi = crl_tensor_data(hi);
        if (dt == CRL_F64) {
            l->dom = DOM_BOX_F64;
        } else if (dt == CRL_F32) {
            /* A float compared with a bound that is exactly a float orders
             * as its double compared with the double bound. */
            bool exact = true;
            for (int64_t i = 0; i < l->numel && exact; i++)
                exact = (double)(float)l->dom_lo[i] == l->dom_lo[i] && (double)(float)l->dom_hi[i] == l->dom_hi[i];
            if (exact) {
                l->dom_flo = g_new(float, (gsize)l->numel + 1);
                l->dom_fhi = g_new(float, (gsize)l->numel + 1);
                for (int64_t i = 0; i < l->numel; i++) {
                    l->dom_flo[i] = (float)l->dom_lo[i];
                    l->dom_fhi[i] = (float)l->dom_hi[i];
                }
            }
            l->dom = exact ? DOM_BOX_F32 : DOM_BOX_F32_D;
        }
        break;
    }
    default:
        break;
    }
}

/* Buffers, views, key handles and user-facing leaf specs. */
static int prepare_leaves(crl_env *env, bool shared, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    env->buffers = crl_td_new(1, &env->num, &e);
    if (!env->buffers)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    for (size_t i = 0; i < env->nleaves; i++) {
        crl__env_leaf *l = &env->leaves[i];
        l->exposed = !(env->pixels_only && l->role == CRL__ROLE_OBS) && (env->return_state || l->role != CRL__ROLE_STATE);
        char *nk = g_strconcat("next.", l->key, NULL);
        l->k = crl_td_key_new(l->key, &e);
        l->nk = l->k ? crl_td_key_new(nk, &e) : NULL;
        g_free(nk);
        if (!l->nk)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        l->buf = (shared ? crl_tensor_new_shared : crl_tensor_new)(crl_spec_dtype(l->spec), crl_spec_ndim(l->spec),
                                                                   crl_spec_shape(l->spec), &e);
        if (!l->buf)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        l->row_elems = env->num ? crl_tensor_numel(l->buf) / env->num : 0;
        l->row_bytes = (size_t)l->row_elems * crl_dtype_size(crl_tensor_dtype(l->buf));
        if (env->batch_ndim == 0) {
            l->ubuf = crl_tensor_index(l->buf, 0, 0, &e);
            l->uspec = l->ubuf ? crl__spec_drop_batch(l->spec, &e) : NULL;
        } else {
            l->ubuf = crl_tensor_ref(l->buf);
            l->uspec = crl_spec_ref(l->spec);
        }
        if (!l->uspec)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        l->bdata = crl_tensor_data(l->buf);
        l->udata = crl_tensor_data(l->ubuf);
        l->ubytes = crl_tensor_nbytes(l->ubuf);
        l->numel = crl_tensor_numel(l->buf);
        l->ucontig = crl_tensor_is_contiguous(l->ubuf);
        l->is_float = crl_dtype_is_float(crl_tensor_dtype(l->buf));
        if (l->role == CRL__ROLE_ACTION)
            prepare_domain(l);
        if (env->frame_skip > 1 && is_output_role(l->role) && l->role != CRL__ROLE_PIXELS) {
            l->snap = crl_tensor_new(crl_tensor_dtype(l->buf), crl_tensor_ndim(l->buf), crl_tensor_shape(l->buf), &e);
            if (!l->snap)
                return crl_error_pass(err, &e, CRL_E_NOMEM);
        }
        if (env->frame_skip > 1 && l->role == CRL__ROLE_REWARD)
            l->acc = g_new0(double, (gsize)crl_tensor_numel(l->buf));
        if (env->autoreset == CRL_AUTORESET_SAME_STEP && is_output_role(l->role)) {
            l->rst = crl_tensor_new(crl_tensor_dtype(l->buf), crl_tensor_ndim(l->buf), crl_tensor_shape(l->buf), &e);
            if (!l->rst)
                return crl_error_pass(err, &e, CRL_E_NOMEM);
        }
        switch (l->role) {
        case CRL__ROLE_DONE: env->done_leaf = l; break;
        case CRL__ROLE_TERMINATED: env->term_leaf = l; break;
        case CRL__ROLE_TRUNCATED: env->trunc_leaf = l; break;
        case CRL__ROLE_PIXELS: env->pixels_leaf = l; break;
        default: break;
        }
        int rc = l->role != CRL__ROLE_PIXELS ? crl_td_set(env->buffers, l->key, l->buf, err) : CRL_OK;
        if (rc) {
            crl_error_prefix(err, "cannot lay out the env buffers: ");
            return rc;
        }
    }
    return CRL_OK;
}

/* User-facing Composite of the exposed leaves whose role is in [lo, hi]
 * (or, for observations, OBS/INFO/PIXELS). */
static crl_spec *user_composite(crl_env *env, int lo, int hi, crl_error *err)
{
    crl_spec *c = crl_spec_composite(env->batch_ndim, env->batch_shape, err);
    for (size_t i = 0; c && i < env->nleaves; i++) {
        const crl__env_leaf *l = &env->leaves[i];
        if (!l->exposed || l->role < lo || l->role > hi)
            continue;
        if (crl_spec_composite_set(c, l->key, l->uspec, err)) {
            crl_spec_unref(c);
            c = NULL;
        }
    }
    return c;
}

static int build_user_specs(crl_env *env, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    env->obs_spec = user_composite(env, CRL__ROLE_OBS, CRL__ROLE_PIXELS, &e);
    env->action_spec = env->obs_spec ? user_composite(env, CRL__ROLE_ACTION, CRL__ROLE_ACTION, &e) : NULL;
    env->reward_spec = env->action_spec ? user_composite(env, CRL__ROLE_REWARD, CRL__ROLE_REWARD, &e) : NULL;
    env->done_spec = env->reward_spec ? user_composite(env, CRL__ROLE_DONE, CRL__ROLE_TRUNCATED, &e) : NULL;
    env->state_spec = env->done_spec ? user_composite(env, CRL__ROLE_STATE, CRL__ROLE_STATE, &e) : NULL;
    if (!env->state_spec)
        return crl_error_pass(err, &e, CRL_E_INVALID);
    /* One step's td: root = observation, action, done, state; next = the
     * same without action, plus reward. */
    crl_spec *full = crl_spec_composite(env->batch_ndim, env->batch_shape, &e);
    crl_spec *next = full ? crl_spec_composite(env->batch_ndim, env->batch_shape, &e) : NULL;
    int rc = next ? CRL_OK : crl_error_pass(err, &e, CRL_E_INVALID);
    for (size_t i = 0; !rc && i < env->nleaves; i++) {
        const crl__env_leaf *l = &env->leaves[i];
        if (!l->exposed)
            continue;
        if (l->role != CRL__ROLE_REWARD)
            rc = crl_spec_composite_set(full, l->key, l->uspec, err);
        if (!rc && l->role != CRL__ROLE_ACTION)
            rc = crl_spec_composite_set(next, l->key, l->uspec, err);
    }
    if (!rc)
        rc = crl_spec_composite_set(full, "next", next, err);
    crl_spec_unref(next);
    if (rc) {
        crl_spec_unref(full);
        return rc;
    }
    env->full_spec = full;
    return CRL_OK;
}

/* ---- construction ----------------------------------------------------------- */

int crl__env_async_refuse(const crl_env *env, const char *fn, crl_error *err)
{
    return crl_error_set(err, CRL_E_INVALID, "%s: [%s] has batch_size = %" G_GINT64_FORMAT " < num_envs = %"
                         G_GINT64_FORMAT ", so it runs async: use crl_env_async_reset, crl_env_send and "
                         "crl_env_recv (or drop batch_size for synchronous steps)", fn, env->section,
                         (gint64)env->async_batch, (gint64)env->num);
}

crl_env *crl__env_alloc(const crl_env_desc *d)
{
    crl_env *env = g_new0(crl_env, 1);
    env->host = d->host;
    env->section = g_strdup(d->section);
    env->backend = g_strdup(d->backend);
    env->plugin = g_strdup(d->plugin);
    env->id = g_strdup(d->id);
    env->ops = d->ops;
    env->num = d->num;
    env->batch_ndim = d->batch_ndim;
    env->batch_shape[0] = d->num;
    env->frame_skip = d->frame_skip;
    env->from_pixels = d->from_pixels;
    env->pixels_only = d->pixels_only;
    env->return_state = d->return_state;
    env->project_actions = d->project_actions;
    env->autoreset = d->autoreset;
    env->max_steps = d->max_steps;
    return env;
}

int crl__env_attach(crl_env *env, crl_env_specs *sp, bool shared, crl_error *err)
{
    char nb[300];
    env->render_h = sp->render_height > 0 && sp->render_width > 0 ? sp->render_height : 0;
    env->render_w = env->render_h ? sp->render_width : 0;
    if (env->max_steps == 0)
        env->max_steps = sp->max_episode_steps > 0 ? sp->max_episode_steps : 0;
    if (env->from_pixels && (!env->render_h || !env->ops.render))
        return crl_error_set(err, CRL_E_UNSUPPORTED, "%s cannot render, so from_pixels = true is not possible; set "
                             "from_pixels = false", crl__env_name(env, nb, sizeof nb));
    int rc = collect_leaves(env, sp, err);
    if (!rc)
        rc = prepare_leaves(env, shared, err);
    if (!rc)
        rc = build_user_specs(env, err);
    if (rc)
        return rc;
    size_t n = (size_t)env->num;
    env->steps = g_new0(int64_t, n);
    env->needs_reset = g_new0(bool, n);
    env->just_reset = g_new0(bool, n);
    env->done_now = g_new0(bool, n);
    env->active = g_new0(bool, n);
    env->ended_early = g_new0(bool, n);
    env->pending = g_new0(bool, n);
    env->mask = g_new0(bool, n);
    env->mask2 = g_new0(bool, n);
    env->seed_pending = g_new0(bool, n);
    env->seeds = g_new0(uint64_t, n);
    env->ridx = g_new0(int64_t, n);
    for (size_t i = 0; i < n; i++)
        env->needs_reset[i] = true;
    crl_error e;
    crl_error_clear(&e);
    env->reset_key = crl_td_key_new("_reset", &e);
    if (!env->reset_key)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    env->next_key = g_intern_static_string("next");
    env->done_p = (uint8_t *)env->done_leaf->bdata;
    env->term_p = (uint8_t *)env->term_leaf->bdata;
    env->trunc_p = (uint8_t *)env->trunc_leaf->bdata;
    /* Room for the usual plans up front, so which slot a miss lands
     * in never decides whether it allocates. */
    size_t ops = 16 + 2 * env->nleaves;
    for (int k = 0; k <= CRL__ENV_SLOTS; k++) {
        crl__step_slot *ss = k < CRL__ENV_SLOTS ? &env->step_slots[k] : &env->step_scratch;
        crl__mdp_slot *ms = k < CRL__ENV_SLOTS ? &env->mdp_slots[k] : &env->mdp_scratch;
        ss->io = g_new0(crl__step_io, env->nleaves + 1);
        ms->ops = g_new0(crl__mdp_op, ops);
        ms->cap = ops;
    }
    env->buf_pins_cap = 8 + env->nleaves;
    env->buf_pins = g_new0(crl__td_pin, env->buf_pins_cap);
    env->act_idx = g_new0(size_t, env->nleaves + 1);
    env->out_idx = g_new0(size_t, env->nleaves + 1);
    for (size_t j = 0; j < env->nleaves; j++) {
        const crl__env_leaf *l = &env->leaves[j];
        if (l->role == CRL__ROLE_ACTION)
            env->act_idx[env->nact++] = j;
        else if (l->exposed)
            env->out_idx[env->nout++] = j;
    }
    rc = env->ops.bind(env->benv, env->buffers, err);
    if (rc)
        crl_error_prefix(err, "%s: bind: ", crl__env_name(env, nb, sizeof nb));
    return rc;
}

void crl_env_free(crl_env *env)
{
    if (!env)
        return;
    crl__env_smr_free(env);
    if (env->chain_ops)
        env->chain_ops->free(env);
    if (env->benv && env->ops.close)
        env->ops.close(env->benv);
    for (size_t i = 0; i < env->nleaves; i++)
        leaf_clear(&env->leaves[i]);
    g_free(env->leaves);
    crl_td_unref(env->buffers);
    crl_spec_unref(env->obs_spec);
    crl_spec_unref(env->action_spec);
    crl_spec_unref(env->reward_spec);
    crl_spec_unref(env->done_spec);
    crl_spec_unref(env->state_spec);
    crl_spec_unref(env->full_spec);
    if (env->native_async_free)
        env->native_async_free(env);
    g_free(env->steps);
    g_free(env->needs_reset);
    g_free(env->just_reset);
    g_free(env->done_now);
    g_free(env->active);
    g_free(env->ended_early);
    g_free(env->pending);
    g_free(env->mask);
    g_free(env->mask2);
    g_free(env->seed_pending);
    g_free(env->seeds);
    g_free(env->ridx);
    crl_td_key_free(env->reset_key);
    for (int k = 0; k < CRL__ENV_SLOTS; k++) {
        g_free(env->step_slots[k].io);
        g_free(env->mdp_slots[k].ops);
    }
    g_free(env->step_scratch.io);
    g_free(env->mdp_scratch.ops);
    g_free(env->buf_pins);
    g_free(env->act_idx);
    g_free(env->out_idx);
    g_free(env->section);
    g_free(env->backend);
    g_free(env->plugin);
    g_free(env->id);
    g_free(env);
}

/* ---- accessors ------------------------------------------------------------------ */

const char *crl_env_id(const crl_env *env) { return env ? env->id : NULL; }
const char *crl_env_backend_name(const crl_env *env) { return env ? env->backend : NULL; }
int64_t crl_env_num(const crl_env *env) { return env ? env->num : 0; }
int crl_env_batch_ndim(const crl_env *env) { return env ? env->batch_ndim : 0; }
const int64_t *crl_env_batch_shape(const crl_env *env) { return env ? env->batch_shape : NULL; }
crl_autoreset crl_env_autoreset(const crl_env *env) { return env ? env->autoreset : CRL_AUTORESET_OFF; }
int64_t crl_env_max_episode_steps(const crl_env *env) { return env ? env->max_steps : 0; }
const crl_spec *crl_env_full_observation_spec(const crl_env *env) { return env ? (env->chain ? env->chain->out.observation : env->obs_spec) : NULL; }
const crl_spec *crl_env_full_action_spec(const crl_env *env) { return env ? (env->chain ? env->chain->out.action : env->action_spec) : NULL; }
const crl_spec *crl_env_full_reward_spec(const crl_env *env) { return env ? (env->chain ? env->chain->out.reward : env->reward_spec) : NULL; }
const crl_spec *crl_env_full_done_spec(const crl_env *env) { return env ? (env->chain ? env->chain->out.done : env->done_spec) : NULL; }
const crl_spec *crl_env_full_state_spec(const crl_env *env) { return env ? (env->chain ? env->chain->out.state : env->state_spec) : NULL; }
const crl_spec *crl_env_observation_spec(const crl_env *env) { return crl_env_full_observation_spec(env); }
const crl_spec *crl_env_state_spec(const crl_env *env) { return crl_env_full_state_spec(env); }

/* The one leaf of comp (at any depth), or NULL when it has none or several. */
static const crl_spec *single_leaf(const crl_spec *comp, size_t *count)
{
    const crl_spec *found = NULL;
    for (size_t i = 0; i < crl_spec_composite_len(comp) && *count <= 1; i++) {
        const crl_spec *c = crl_spec_composite_at(comp, i);
        if (crl_spec_get_kind(c) == CRL_SPEC_COMPOSITE) {
            const crl_spec *l = single_leaf(c, count);
            if (l)
                found = l;
        } else if (++*count == 1) {
            found = c;
        }
    }
    return *count == 1 ? found : NULL;
}

const crl_spec *crl__spec_leaf_or_composite(const crl_spec *comp)
{
    if (!comp || crl_spec_get_kind(comp) != CRL_SPEC_COMPOSITE)
        return comp;
    size_t count = 0;
    const crl_spec *leaf = single_leaf(comp, &count);
    return leaf ? leaf : comp;
}

const crl_spec *crl_env_action_spec(const crl_env *env) { return crl__spec_leaf_or_composite(crl_env_full_action_spec(env)); }
const crl_spec *crl_env_reward_spec(const crl_env *env) { return crl__spec_leaf_or_composite(crl_env_full_reward_spec(env)); }
const crl_spec *crl_env_done_spec(const crl_env *env) { return crl__spec_leaf_or_composite(crl_env_full_done_spec(env)); }
int32_t crl_env_render_height(const crl_env *env) { return env ? env->render_h : 0; }
int32_t crl_env_render_width(const crl_env *env) { return env ? env->render_w : 0; }

uint64_t crl_env_set_seed(crl_env *env, uint64_t seed)
{
    if (!env)
        return crl_seed_next(seed);
    crl_rng_init(&env->rng, seed, ACTION_STREAM);
    env->seed = seed;
    if (env->chain_ops)
        env->chain_ops->seed(env, seed);
    uint64_t s = seed;
    for (int64_t i = 0; i < env->num; i++) {
        env->seeds[i] = s;
        env->seed_pending[i] = true;
        s = crl_seed_next(s);
    }
    return s;
}

/* ---- backend calls ------------------------------------------------------------------ */

/* Append the pins of td's tree, parents first. */
static void pin_tree(crl_env *env, const crl_td *td)
{
    if (env->nbuf_pins == env->buf_pins_cap) {
        env->buf_pins_cap = env->buf_pins_cap ? 2 * env->buf_pins_cap : 8;
        env->buf_pins = g_renew(crl__td_pin, env->buf_pins, env->buf_pins_cap);
    }
    crl__td_pin *p = &env->buf_pins[env->nbuf_pins++];
    p->td = td;
    p->layout = crl__td_layout(td);
    p->stamp = crl__td_stamp(td);
    for (size_t i = 0; i < td->len; i++)
        if (td->entries[i].td)
            pin_tree(env, td->entries[i].td);
}

/* A backend must write into the buffers it got: one that swapped a tensor
 * in the buffer td would silently feed stale data to the user. */
static int check_buffers_slow(crl_env *env, const char *call, crl_error *err)
{
    for (size_t i = 0; i < env->nleaves; i++) {
        const crl__env_leaf *l = &env->leaves[i];
        if (l->role == CRL__ROLE_PIXELS)
            continue;
        crl_tensor *t = crl_td_get_k(env->buffers, l->k);
        if (t == l->buf)
            continue;
        char nb[300];
        if (!t)
            return crl_error_set(err, CRL_E_RUNTIME, "%s: %s removed the buffer of key '%s'; a backend must write "
                                 "into the buffers it got in bind: fix the backend",
                                 crl__env_name(env, nb, sizeof nb), call, l->key);
        char *want = crl__env_dims(crl_tensor_ndim(l->buf), crl_tensor_shape(l->buf));
        char *got = crl__env_dims(crl_tensor_ndim(t), crl_tensor_shape(t));
        int code = crl_tensor_dtype(t) != crl_tensor_dtype(l->buf) ? CRL_E_DTYPE
                   : !crl_tensor_same_shape(t, l->buf)                ? CRL_E_SHAPE
                                                                      : CRL_E_RUNTIME;
        crl_error_set(err, code, "%s: %s replaced the buffer of key '%s' (%s %s) by a %s %s tensor; a backend must "
                      "write into the buffers it got in bind: fix the backend",
                      crl__env_name(env, nb, sizeof nb), call, l->key, crl_dtype_name(crl_tensor_dtype(l->buf)), want,
                      crl_dtype_name(crl_tensor_dtype(t)) ? crl_dtype_name(crl_tensor_dtype(t)) : "?", got);
        crl_free(want);
        crl_free(got);
        return code;
    }
    env->nbuf_pins = 0;
    pin_tree(env, env->buffers);
    return CRL_OK;
}

static inline int check_buffers(crl_env *env, const char *call, crl_error *err)
{
    /* When no td of the buffer tree changed since every buffer was last
     * found in place, every entry still holds the same tensor.  Pins are
     * parents first, and a parent with its stamp still owns its subs. */
    size_t np = env->nbuf_pins, k = 0;
    while (k < np && crl__td_stamp(env->buf_pins[k].td) == env->buf_pins[k].stamp)
        k++;
    if (np && k == np)
        return CRL_OK;
    return check_buffers_slow(env, call, err);
}

static int render_env(crl_env *env, int64_t i, crl_error *err)
{
    crl__env_leaf *p = env->pixels_leaf;
    uint8_t *rgb = (uint8_t *)crl_tensor_data(p->buf) + (size_t)i * p->row_bytes;
    int rc = env->ops.render(env->benv, i, rgb, err);
    if (rc) {
        char nb[300];
        crl_error_prefix(err, "%s: render env %" G_GINT64_FORMAT ": ", crl__env_name(env, nb, sizeof nb), (gint64)i);
    }
    return rc;
}

static int backend_reset_call(crl_env *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    int rc = env->ops.reset(env->benv, mask, seeds, from_state, err);
    if (rc) {
        char nb[300];
        crl_error_prefix(err, "%s: reset: ", crl__env_name(env, nb, sizeof nb));
        return rc;
    }
    return check_buffers(env, "reset", err);
}

/* Reset the envs in mask (NULL: all) in the backend, applying pending
 * seeds, then the host's bookkeeping: flags cleared, counters zeroed,
 * pixels rendered. */
static int backend_reset(crl_env *env, const bool *mask, bool from_state, crl_error *err)
{
    int64_t n = env->num;
    /* The envs in mask, in order (few of many, so no branch per env). */
    int64_t *idx = env->ridx, k = crl__env_mask_list(mask, n, idx);
    bool any_seeded = false, any_plain = false;
    for (int64_t m = 0; m < k; m++) {
        bool sp = env->seed_pending[idx[m]];
        any_seeded |= sp;
        any_plain |= !sp;
    }
    if (!any_seeded && !any_plain)
        return CRL_OK;
    int rc = CRL_OK;
    if (any_seeded && !any_plain) {
        rc = backend_reset_call(env, mask, env->seeds, from_state, err);
    } else if (any_plain && !any_seeded) {
        rc = backend_reset_call(env, mask, NULL, from_state, err);
    } else {
        for (int64_t i = 0; i < n; i++) {
            bool in = !mask || mask[i];
            env->mask2[i] = in && env->seed_pending[i];
        }
        rc = backend_reset_call(env, env->mask2, env->seeds, from_state, err);
        for (int64_t i = 0; !rc && i < n; i++) {
            bool in = !mask || mask[i];
            env->mask2[i] = in && !env->seed_pending[i];
        }
        if (!rc)
            rc = backend_reset_call(env, env->mask2, NULL, from_state, err);
    }
    if (rc)
        return rc;
    env->started = true;
    uint8_t *done = env->done_p, *term = env->term_p, *trunc = env->trunc_p;
    bool pixels = env->pixels_leaf != NULL;
    for (int64_t m = 0; m < k; m++) {
        int64_t i = idx[m];
        env->seed_pending[i] = false;
        env->steps[i] = 0;
        env->needs_reset[i] = false;
        env->just_reset[i] = false;
        env->done_now[i] = false;
        done[i] = 0;
        term[i] = 0;
        trunc[i] = 0;
        if (pixels && (rc = render_env(env, i, err)))
            return rc;
    }
    return CRL_OK;
}

/* ---- writing outputs into the caller's td -------------------------------------------- */

/* Bring td's entry for leaf l (at the root, or under "next") to buf's
 * values: every env, or only those in rows.  The td's tensor is reused
 * when its dtype and shape fit; otherwise a copy is stored. */
static int put_leaf(crl_env *env, crl_td *td, const crl__env_leaf *l, bool next, const bool *rows, crl_error *err)
{
    const crl_td_key *k = next ? l->nk : l->k;
    crl_tensor *dst = crl_td_get_k(td, k);
    if (dst && crl_tensor_dtype(dst) == crl_tensor_dtype(l->ubuf) && crl_tensor_same_shape(dst, l->ubuf)) {
        if (!rows)
            return crl_tensor_copy(dst, l->ubuf, err);
        for (int64_t i = 0; i < env->num; i++)
            if (rows[i])
                crl__env_row_to_user(env, dst, l, l->buf, i);
        return CRL_OK;
    }
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *t = crl_tensor_clone(l->ubuf, &e);
    if (!t)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = crl_td_set_k(td, k, t, err);
    crl_tensor_unref(t);
    if (rc)
        crl_error_prefix(err, "env: cannot store '%s%s' in the TensorDict: ", next ? "next." : "", l->key);
    return rc;
}

int crl__env_check_batch(const crl_env *env, const crl_td *td, const char *fn, crl_error *err)
{
    int nd = crl_td_batch_ndim(td);
    const int64_t *sh = crl_td_batch_shape(td);
    if (nd == env->batch_ndim && (nd == 0 || sh[0] == env->batch_shape[0]))
        return CRL_OK;
    char *got = crl__env_dims(nd, sh);
    char *want = crl__env_dims(env->batch_ndim, env->batch_shape);
    char nb[300];
    crl_error_set(err, CRL_E_SHAPE, "%s: the TensorDict has batch shape %s but %s has batch shape %s", fn, got,
                  crl__env_name(env, nb, sizeof nb), want);
    crl_free(got);
    crl_free(want);
    return CRL_E_SHAPE;
}

/* ---- reset ------------------------------------------------------------------------------ */

static bool has_state(const crl_env *env)
{
    for (size_t i = 0; i < env->nleaves; i++)
        if (env->leaves[i].role == CRL__ROLE_STATE)
            return true;
    return false;
}

/* Copy td's state entries into the state buffers of the envs in mask. */
static int load_state(crl_env *env, const crl_td *td, const bool *mask, crl_error *err)
{
    char nb[300];
    /* Check every entry before writing any, so a bad td changes nothing. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t j = 0; j < env->nleaves; j++) {
            crl__env_leaf *l = &env->leaves[j];
            if (l->role != CRL__ROLE_STATE)
                continue;
            crl_tensor *t = crl_td_get_k(td, l->k);
            if (pass == 0) {
                if (!t)
                    return crl_error_set(err, CRL_E_NOT_FOUND, "reset_from_state: the TensorDict has no state entry "
                                         "'%s' (%s declares it); put the state to start from there%s",
                                         l->key, crl__env_name(env, nb, sizeof nb),
                                         env->return_state ? "" : " (with return_state = true every reset and "
                                                                  "step output holds it)");
                if (crl_tensor_dtype(t) != crl_tensor_dtype(l->ubuf))
                    return crl_error_set(err, CRL_E_DTYPE, "reset_from_state: key '%s': expected dtype %s but got %s",
                                         l->key, crl_dtype_name(crl_tensor_dtype(l->ubuf)),
                                         crl_dtype_name(crl_tensor_dtype(t)));
                if (!crl_tensor_same_shape(t, l->ubuf)) {
                    char *a = crl__env_dims(crl_tensor_ndim(l->ubuf), crl_tensor_shape(l->ubuf));
                    char *b = crl__env_dims(crl_tensor_ndim(t), crl_tensor_shape(t));
                    crl_error_set(err, CRL_E_SHAPE, "reset_from_state: key '%s': expected shape %s but got %s", l->key,
                                  a, b);
                    crl_free(a);
                    crl_free(b);
                    return CRL_E_SHAPE;
                }
                continue;
            }
            for (int64_t i = 0; i < env->num; i++)
                if (!mask || mask[i])
                    row_from_user(env, l->buf, l, t, i);
        }
    }
    return CRL_OK;
}

int crl__env_reset_backend(crl_env *env, const crl_td *state_td, const bool *mask, bool from_state, crl_error *err)
{
    int rc;
    if (from_state && (rc = load_state(env, state_td, mask, err)))
        return rc;
    return backend_reset(env, mask, from_state, err);
}

int crl__env_reset_into(crl_env *env, crl_td *td, const bool *mask, bool from_state, crl_error *err)
{
    int rc = crl__env_reset_backend(env, td, mask, from_state, err);
    return rc ? rc : crl__env_put_root(env, td, mask, err);
}

int crl__env_put_root(crl_env *env, crl_td *td, const bool *mask, crl_error *err)
{
    int rc;
    for (size_t j = 0; j < env->nleaves; j++) {
        const crl__env_leaf *l = &env->leaves[j];
        if (!l->exposed || !is_output_role(l->role))
            continue;
        if ((rc = put_leaf(env, td, l, false, mask, err)))
            return rc;
    }
    return CRL_OK;
}

/* The "_reset" entry of td as a per-env mask in env->mask; *has says
 * whether there is one. */
static int read_reset_mask(crl_env *env, const crl_td *td, bool *has, crl_error *err)
{
    *has = false;
    if (!td)
        return CRL_OK;
    crl_tensor *t = crl_td_get_k(td, env->reset_key);
    if (!t) {
        if (crl_td_get_td(td, "_reset"))
            return crl_error_set(err, CRL_E_INVALID, "reset: '_reset' must be a bool tensor, not a TensorDict");
        return CRL_OK;
    }
    if (crl_tensor_dtype(t) != CRL_BOOL)
        return crl_error_set(err, CRL_E_DTYPE, "reset: key '_reset': expected dtype bool but got %s",
                             crl_dtype_name(crl_tensor_dtype(t)));
    int nd = crl_tensor_ndim(t);
    const int64_t *sh = crl_tensor_shape(t);
    bool ok = nd == env->batch_ndim + 1 && sh[nd - 1] == 1 && (env->batch_ndim == 0 || sh[0] == env->num);
    if (!ok) {
        int64_t want[2] = { env->num, 1 };
        char *a = crl__env_dims(env->batch_ndim + 1, env->batch_ndim ? want : want + 1);
        char *b = crl__env_dims(nd, sh);
        crl_error_set(err, CRL_E_SHAPE, "reset: key '_reset': expected shape %s (batch shape + [1]) but got %s", a, b);
        crl_free(a);
        crl_free(b);
        return CRL_E_SHAPE;
    }
    for (int64_t i = 0; i < env->num; i++) {
        int64_t idx[2] = { i, 0 };
        env->mask[i] = crl_tensor_get_f64(t, env->batch_ndim ? idx : idx + 1) != 0.0;
    }
    *has = true;
    return CRL_OK;
}

int crl__env_reset_through(crl_env *env, crl_td *td, const bool *mask, bool from_state, crl_error *err)
{
    return env->chain ? env->chain_ops->reset(env, td, mask, from_state, err)
                      : crl__env_reset_into(env, td, mask, from_state, err);
}

static crl_td *reset_impl(crl_env *env, crl_td *td, bool from_state, crl_error *err)
{
    const char *fn = from_state ? "reset_from_state" : "reset";
    char nb[300];
    if (!env) {
        crl_error_set(err, CRL_E_INVALID, "%s: env is NULL", fn);
        return NULL;
    }
    if (env->async_batch) {
        crl__env_async_refuse(env, fn, err);
        return NULL;
    }
    if (from_state && !has_state(env)) {
        crl_error_set(err, CRL_E_UNSUPPORTED, "reset_from_state: %s declares no state spec, so it cannot start from a "
                      "state; use crl_env_reset", crl__env_name(env, nb, sizeof nb));
        return NULL;
    }
    if (from_state && !td) {
        crl_error_set(err, CRL_E_INVALID, "reset_from_state: give a TensorDict holding the state entries");
        return NULL;
    }
    if (td && crl__env_check_batch(env, td, fn, err))
        return NULL;
    bool has_mask = false;
    if (read_reset_mask(env, td, &has_mask, err))
        return NULL;
    crl_td *out = td ? crl_td_ref(td) : crl_td_new(env->batch_ndim, env->batch_shape, err);
    if (!out)
        return NULL;
    const bool *mask = has_mask ? env->mask : NULL;
    if (crl__env_reset_through(env, out, mask, from_state, err)) {
        crl_td_unref(out);
        return NULL;
    }
    /* TorchRL drops the reset keys from what reset returns. */
    if (has_mask)
        crl_td_del(out, "_reset", NULL);
    return out;
}

crl_td *crl_env_reset(crl_env *env, crl_td *td, crl_error *err)
{
    return reset_impl(env, td, false, err);
}

crl_td *crl_env_reset_from_state(crl_env *env, crl_td *td, crl_error *err)
{
    return reset_impl(env, td, true, err);
}

/* ---- step ---------------------------------------------------------------------------------- */

static double elem(const crl_tensor *t, int64_t pos)
{
    const void *d = crl_tensor_data(t);
    switch (crl_tensor_dtype(t)) {
    case CRL_F16: return crl_half_to_float(((const uint16_t *)d)[pos]);
    case CRL_F32: return ((const float *)d)[pos];
    case CRL_F64: return ((const double *)d)[pos];
    default: return crl_tensor_flat_get(t, pos);
    }
}

/* Flat position of the first NaN in a float action buffer, or -1. */
static int64_t first_nan(const crl__env_leaf *l)
{
    int64_t n = l->numel;
    switch (crl_tensor_dtype(l->buf)) {
    case CRL_F32: {
        const float *p = (const float *)(const void *)l->bdata;
        bool any = false;
        for (int64_t i = 0; i < n; i++)
            any |= isnan(p[i]);
        if (!any)
            return -1;
        break;
    }
    case CRL_F64: {
        const double *p = (const double *)(const void *)l->bdata;
        bool any = false;
        for (int64_t i = 0; i < n; i++)
            any |= isnan(p[i]);
        if (!any)
            return -1;
        break;
    }
    default:
        break;
    }
    for (int64_t p = 0; p < n; p++)
        if (isnan(elem(l->buf, p)))
            return p;
    return -1;
}

/* crl_spec_is_in(l->spec, l->buf), with the common kinds as tight loops
 * (prepare_domain says which apply). */
static bool action_in_domain(const crl__env_leaf *l)
{
    int64_t n = l->numel;
    bool ok = true;
    switch (l->dom) {
    case DOM_ALWAYS:
        return true;
    case DOM_CAT_I64: {
        /* 0 <= x < n as one unsigned compare (n >= 0) */
        const int64_t *p = (const int64_t *)(const void *)l->bdata;
        uint64_t hi = (uint64_t)l->dom_ni;
        uint8_t bad = 0;
        for (int64_t i = 0; i < n; i++)
            bad |= (uint64_t)p[i] >= hi;
        return !bad;
    }
    case DOM_CAT_I64_D: {
        const int64_t *p = (const int64_t *)(const void *)l->bdata;
        double hi = l->dom_n;
        for (int64_t i = 0; i < n; i++) {
            double v = (double)p[i];
            ok &= (v >= 0) & (v < hi);
        }
        return ok;
    }
    case DOM_CAT_I32: {
        const int32_t *p = (const int32_t *)(const void *)l->bdata;
        uint64_t hi = (uint64_t)l->dom_ni;
        uint8_t bad = 0;
        for (int64_t i = 0; i < n; i++)
            bad |= (uint64_t)(int64_t)p[i] >= hi;
        return !bad;
    }
    case DOM_BOX_F64: {
        const double *p = (const double *)(const void *)l->bdata;
        const double *lo = l->dom_lo, *hi = l->dom_hi;
        for (int64_t i = 0; i < n; i++)
            ok &= (p[i] >= lo[i]) & (p[i] <= hi[i]);
        return ok;
    }
    case DOM_BOX_F32: {
        const float *p = (const float *)(const void *)l->bdata;
        const float *lo = l->dom_flo, *hi = l->dom_fhi;
        for (int64_t i = 0; i < n; i++)
            ok &= (p[i] >= lo[i]) & (p[i] <= hi[i]);
        return ok;
    }
    case DOM_BOX_F32_D: {
        const float *p = (const float *)(const void *)l->bdata;
        const double *lo = l->dom_lo, *hi = l->dom_hi;
        for (int64_t i = 0; i < n; i++) {
            double v = p[i];
            ok &= (v >= lo[i]) & (v <= hi[i]);
        }
        return ok;
    }
    default:
        return crl_spec_is_in(l->spec, l->buf);
    }
}

/* An action leaf out of its domain: name the first env whose row is bad. */
static int action_domain_error(crl_env *env, const crl__env_leaf *l, crl_error *err)
{
    crl_error le;
    crl_error_clear(&le);
    crl_spec *row_spec = crl__spec_drop_batch(l->spec, &le);
    if (!row_spec)
        return crl_error_pass(err, &le, CRL_E_INVALID);
    int rc = CRL_OK;
    for (int64_t i = 0; i < env->num && !rc; i++) {
        crl_tensor *row = crl_tensor_index(l->buf, 0, i, &le);
        if (!row) {
            rc = crl_error_pass(err, &le, CRL_E_NOMEM);
            break;
        }
        crl_error e;
        crl_error_clear(&e);
        if (crl_spec_check(row_spec, row, l->key, &e))
            rc = crl_error_set(err, CRL_E_RANGE, "step: env %" G_GINT64_FORMAT ": %s; give actions inside the action "
                               "spec or set [%s] project_actions = true", (gint64)i, e.message, env->section);
        crl_tensor_unref(row);
    }
    crl_spec_unref(row_spec);
    if (!rc)
        rc = crl_error_set(err, CRL_E_RANGE, "step: key '%s': the action is outside the action spec", l->key);
    return rc;
}

/* An action just copied into its buffer: no NaN, inside the spec (or
 * projected into it). */
static inline int check_action(crl_env *env, crl__env_leaf *l, crl_error *err)
{
    /* A box's bounds refuse NaN, so an action inside one needs no NaN search
     * (the search is for the message when it is outside). */
    bool box = l->dom == DOM_BOX_F64 || l->dom == DOM_BOX_F32 || l->dom == DOM_BOX_F32_D;
    if (box && action_in_domain(l))
        return CRL_OK;
    if (l->is_float) {
        int64_t p = first_nan(l);
        if (p >= 0)
            return crl_error_set(err, CRL_E_INVALID, "step: env %" G_GINT64_FORMAT ": key '%s' holds NaN "
                                 "(element %" G_GINT64_FORMAT " of that env's action); check the policy",
                                 (gint64)(p / l->row_elems), l->key, (gint64)(p % l->row_elems));
    }
    if (!box && action_in_domain(l))
        return CRL_OK;
    if (!env->project_actions)
        return action_domain_error(env, l, err);
    return crl_spec_project(l->spec, l->buf, err);
}

/* Env i's row of action leaf l as its own spec (Bounded keeps row i's
 * elementwise bounds; the other kinds are the same for every env). */
static crl_spec *action_row_spec(const crl__env_leaf *l, int64_t i, crl_error *err)
{
    if (crl_spec_get_kind(l->spec) != CRL_SPEC_BOUNDED)
        return crl__spec_drop_batch(l->spec, err);
    crl_tensor *lo = crl_tensor_index((crl_tensor *)crl_spec_low(l->spec), 0, i, err);
    crl_tensor *hi = lo ? crl_tensor_index((crl_tensor *)crl_spec_high(l->spec), 0, i, err) : NULL;
    crl_spec *s = hi ? crl_spec_bounded_t(crl_spec_dtype(l->spec), lo, hi, err) : NULL;
    crl_tensor_unref(lo);
    crl_tensor_unref(hi);
    return s;
}

/* Row i of l's buffer holds a value inside the spec (and no NaN). */
static bool action_row_ok(const crl__env_leaf *l, int64_t i)
{
    int64_t e0 = i * l->row_elems, e1 = e0 + l->row_elems;
    for (int64_t p = e0; l->is_float && p < e1; p++)
        if (isnan(elem(l->buf, p)))
            return false;
    switch (l->dom) {
    case DOM_ALWAYS:
        return true;
    case DOM_CAT_I64:
    case DOM_CAT_I64_D:
    case DOM_CAT_I32:
        for (int64_t p = e0; p < e1; p++) {
            double v = elem(l->buf, p);
            if (!(v >= 0 && v < l->dom_n))
                return false;
        }
        return true;
    case DOM_BOX_F64:
    case DOM_BOX_F32:
    case DOM_BOX_F32_D:
        for (int64_t p = e0; p < e1; p++) {
            double v = elem(l->buf, p);
            if (!(v >= l->dom_lo[p] && v <= l->dom_hi[p]))
                return false;
        }
        return true;
    default: {
        crl_spec *rs = action_row_spec(l, i, NULL);
        crl_tensor *row = rs ? crl_tensor_index(l->buf, 0, i, NULL) : NULL;
        bool ok = row && crl_spec_is_in(rs, row);
        crl_tensor_unref(row);
        crl_spec_unref(rs);
        return ok;
    }
    }
}

int crl__env_check_action_rows(crl_env *env, const int64_t *rows, int64_t k, const char *fn, crl_error *err)
{
    for (size_t a = 0; a < env->nact; a++) {
        crl__env_leaf *l = &env->leaves[env->act_idx[a]];
        for (int64_t m = 0; m < k; m++) {
            int64_t i = rows[m];
            if (action_row_ok(l, i))
                continue;
            for (int64_t p = 0; l->is_float && p < l->row_elems; p++)
                if (isnan(elem(l->buf, i * l->row_elems + p)))
                    return crl_error_set(err, CRL_E_INVALID, "%s: env %" G_GINT64_FORMAT ": key '%s' holds NaN "
                                         "(element %" G_GINT64_FORMAT " of that env's action); check the policy", fn,
                                         (gint64)i, l->key, (gint64)p);
            crl_error le;
            crl_error_clear(&le);
            crl_spec *rs = action_row_spec(l, i, &le);
            crl_tensor *row = rs ? crl_tensor_index(l->buf, 0, i, &le) : NULL;
            int rc = row ? CRL_OK : crl_error_pass(err, &le, CRL_E_NOMEM);
            if (!rc && env->project_actions) {
                rc = crl_spec_project(rs, row, err);
            } else if (!rc) {
                crl_error e;
                crl_error_clear(&e);
                crl_spec_check(rs, row, l->key, &e);
                rc = crl_error_set(err, CRL_E_RANGE, "%s: env %" G_GINT64_FORMAT ": %s; give actions inside the action "
                                   "spec or set [%s] project_actions = true", fn, (gint64)i,
                                   e.code ? e.message : "outside the action spec", env->section);
            }
            crl_tensor_unref(row);
            crl_spec_unref(rs);
            if (rc)
                return rc;
        }
    }
    return CRL_OK;
}

/* Check td's actions and copy them into the action buffers.  (The
 * general paths stay out of line, so the cached path keeps its registers.) */
static __attribute__((noinline)) int load_actions(crl_env *env, const crl_td *td, crl_error *err)
{
    for (size_t j = 0; j < env->nleaves; j++) {
        crl__env_leaf *l = &env->leaves[j];
        if (l->role != CRL__ROLE_ACTION)
            continue;
        crl_tensor *t = crl_td_get_k(td, l->k);
        if (!t)
            return crl_error_set(err, CRL_E_NOT_FOUND, "step: the TensorDict has no '%s'; write an action first "
                                 "(a policy, or crl_env_rand_action)", l->key);
        if (crl_tensor_dtype(t) != crl_tensor_dtype(l->ubuf))
            return crl_error_set(err, CRL_E_DTYPE, "step: key '%s': expected dtype %s but got %s (see the action spec)",
                                 l->key, crl_dtype_name(crl_tensor_dtype(l->ubuf)), crl_dtype_name(crl_tensor_dtype(t)));
        if (!crl_tensor_same_shape(t, l->ubuf)) {
            char *a = crl__env_dims(crl_tensor_ndim(l->ubuf), crl_tensor_shape(l->ubuf));
            char *b = crl__env_dims(crl_tensor_ndim(t), crl_tensor_shape(t));
            crl_error_set(err, CRL_E_SHAPE, "step: key '%s': expected shape %s but got %s (see the action spec)", l->key,
                          a, b);
            crl_free(a);
            crl_free(b);
            return CRL_E_SHAPE;
        }
    }
    for (size_t j = 0; j < env->nleaves; j++) {
        crl__env_leaf *l = &env->leaves[j];
        if (l->role != CRL__ROLE_ACTION)
            continue;
        int rc = crl_tensor_copy(l->ubuf, crl_td_get_k(td, l->k), err);
        if (!rc)
            rc = check_action(env, l, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* ---- the step cache ------------------------------------------------------------------------------
 *
 * A slot remembers, for one td, the entry and data pointer of every action
 * leaf (at the root) and every output leaf (under "next"), each checked as
 * load_actions and put_leaf check them and found contiguous, so
 * crl_tensor_copy would have been one memmove.  While the pinned tds keep
 * their layout the entries stay (see env-private.h); an entry whose stamp
 * moved holds another tensor now, which is checked again. */

/* Index of td among the pins, appending it (with its stamps); -1 when full. */
static int pin_of(crl__td_pin *pins, size_t *n, size_t cap, const crl_td *td)
{
    for (size_t i = 0; i < *n; i++)
        if (pins[i].td == td)
            return (int)i;
    if (*n == cap)
        return -1;
    pins[*n].td = td;
    pins[*n].layout = crl__td_layout(td);
    pins[*n].stamp = crl__td_stamp(td);
    return (int)(*n)++;
}

/* The tensor entry at key k of td, pinning every td on the way. */
static crl__td_entry *pin_entry(crl__step_slot *s, const crl_td *td, const crl_td_key *k)
{
    const crl_td *cur = td;
    for (size_t i = 0; i + 1 < k->n; i++) {
        const crl__td_entry *e = crl__td_find_hinted(cur, k->comp[i], &k->hint[i]);
        if (!e || !e->td)
            return NULL;
        cur = e->td;
        if (pin_of(s->pins, &s->npins, CRL__ENV_PINS, cur) < 0)
            return NULL;
    }
    crl__td_entry *e = crl__td_find_hinted(cur, k->comp[k->n - 1], &k->hint[k->n - 1]);
    return e && e->tensor ? e : NULL;
}

/* After a step on the general path: remember td's layout in a slot. */
static __attribute__((noinline)) void step_fill(crl_env *env, const crl_td *td)
{
    crl__step_slot *s = &env->step_scratch;
    s->npins = 0;
    pin_of(s->pins, &s->npins, CRL__ENV_PINS, td);
    for (size_t k = 0; k < env->nact + env->nout; k++) {
        crl__env_leaf *l = &env->leaves[k < env->nact ? env->act_idx[k] : env->out_idx[k - env->nact]];
        crl__step_io *io = &s->io[k];
        crl__td_entry *e = pin_entry(s, td, k < env->nact ? l->k : l->nk);
        if (!e || !crl__env_fits_contig(e->tensor, l))
            return;
        io->e = e;
        io->stamp = e->stamp;
        io->data = e->tensor->data;
        io->l = l;
        io->udata = l->udata;
        io->n = l->ubytes;
        io->cls = crl__env_move_class(io->n);
    }
    /* Take td's old slot, or the oldest; the slot's arrays become scratch. */
    crl__step_slot *dst = NULL;
    for (int k = 0; k < CRL__ENV_SLOTS && !dst; k++)
        if (env->step_slots[k].npins && env->step_slots[k].pins[0].td == td)
            dst = &env->step_slots[k];
    if (!dst) {
        dst = &env->step_slots[env->step_rr];
        env->step_rr = (env->step_rr + 1) % CRL__ENV_SLOTS;
    }
    crl__step_slot t = *dst;
    *dst = *s;
    *s = t;
}

/* The slot for td when it still describes td, else NULL. */
static crl__step_slot *step_lookup(crl_env *env, const crl_td *td)
{
    crl__step_slot *s = NULL;
    for (int k = 0; k < CRL__ENV_SLOTS && !s; k++)
        if (env->step_slots[k].npins && env->step_slots[k].pins[0].td == td)
            s = &env->step_slots[k];
    if (!s)
        return NULL;
    /* A td whose stamp held kept its layout too: the common case is one
     * compare per pin (each read only after its parents held). */
    size_t held = 0;
    while (held < s->npins && crl__td_stamp(s->pins[held].td) == s->pins[held].stamp)
        held++;
    if (held == s->npins)
        return s;
    bool moved = false;
    for (size_t i = 0; i < s->npins; i++) {
        const crl_td *p = s->pins[i].td;
        if (crl__td_layout(p) != s->pins[i].layout)
            return NULL;
        moved |= crl__td_stamp(p) != s->pins[i].stamp;
    }
    /* No td's stamp moved: no entry's did. */
    if (!moved)
        return s;
    crl__step_io *io = s->io, *end = io + env->nact + env->nout;
    for (; io < end; io++) {
        if (io->e->stamp == io->stamp)
            continue;
        const crl_tensor *t = io->e->tensor;
        if (!crl__env_fits_contig(t, io->l))
            return NULL;
        io->data = t->data;
        io->stamp = io->e->stamp;
    }
    for (size_t i = 0; i < s->npins; i++)
        s->pins[i].stamp = crl__td_stamp(s->pins[i].td);
    return s;
}

crl__step_slot *crl__env_step_slot(crl_env *env, const crl_td *td)
{
    return step_lookup(env, td);
}

/* load_actions through a slot: the same copies and checks. */
static int load_actions_fast(crl_env *env, const crl__step_slot *s, crl_error *err)
{
    for (size_t k = 0; k < env->nact; k++) {
        const crl__step_io *io = &s->io[k];
        crl__env_move_c(io->udata, io->data, io->n, io->cls);
        int rc = check_action(env, io->l, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

/* ---- frame bookkeeping: the one implementation (the sync step below, exec_async.c's one-env steps) ---- */

/* Env i's reward leaves summed over the skipped frames (frame_skip > 1). */
static void acc_rows(crl_env *env, int64_t i, int what)
{
    for (size_t j = 0; j < env->nleaves; j++) {
        crl__env_leaf *l = &env->leaves[j];
        if (!l->acc)
            continue;
        double *acc = l->acc + i * l->row_elems;
        for (int64_t e = 0; e < l->row_elems; e++) {
            int64_t q = i * l->row_elems + e;
            if (what == 0)
                acc[e] = 0;
            else if (what == 1)
                acc[e] += crl_tensor_flat_get(l->buf, q);
            else
                crl_tensor_flat_set(l->buf, q, acc[e]);
        }
    }
}

/* The done bookkeeping's arrays, hoisted (stores through the uint8_t flags may alias anything, so read
 * through env they would be reloaded for every env). */
typedef struct frame_book {
    int64_t *steps;
    uint8_t *done, *term, *trunc;
    int64_t max;
} frame_book;

static inline frame_book book_of(crl_env *env)
{
    return (frame_book){ env->steps, env->done_p, env->term_p, env->trunc_p, env->max_steps };
}

/* After one base-env frame of env i: count it, truncate at the time limit, set done.  Returns whether env
 * i's episode ended. */
static inline bool frame_row(const frame_book *fb, int64_t i)
{
    int64_t st = ++fb->steps[i];
    uint8_t tr = (uint8_t)((fb->trunc[i] != 0) | (fb->max > 0 && st >= fb->max));
    uint8_t dn = (uint8_t)((fb->term[i] != 0) | tr);
    fb->trunc[i] = tr;
    fb->done[i] = dn;
    return dn != 0;
}

/* frame_row for every env after one base-env frame, into done_now; whether any ended. */
static inline uint8_t scan_done(crl_env *env)
{
    const frame_book fb = book_of(env);
    bool *done_now = env->done_now;
    uint8_t anyd = 0;
    for (int64_t i = 0; i < env->num; i++) {
        bool dn = frame_row(&fb, i);
        done_now[i] = dn;
        anyd |= (uint8_t)dn;
    }
    return anyd;
}

bool crl__env_frame_row(crl_env *env, int64_t i)
{
    const frame_book fb = book_of(env);
    bool ended = frame_row(&fb, i);
    if (env->frame_skip > 1)
        acc_rows(env, i, 1);
    return ended;
}

void crl__env_skip_begin(crl_env *env, int64_t i)
{
    if (env->frame_skip > 1)
        acc_rows(env, i, 0);
}

void crl__env_skip_end(crl_env *env, int64_t i)
{
    if (env->frame_skip > 1)
        acc_rows(env, i, 2);
}

/* An env that ended before the last skipped frame keeps its outputs (the backend goes on stepping every
 * env) and stops. */
static __attribute__((noinline)) int ended_early(crl_env *env, int64_t i, crl_error *err)
{
    for (size_t j = 0; j < env->nleaves; j++) {
        crl__env_leaf *l = &env->leaves[j];
        if (l->snap)
            row_copy(l, l->snap, l->buf, i);
    }
    env->active[i] = false;
    env->ended_early[i] = true;
    return env->pixels_leaf ? render_env(env, i, err) : CRL_OK;
}

/* After one base-env frame of every active env.  *any_left says whether an env is still active. */
static inline int after_frame(crl_env *env, bool last, bool *any_left, crl_error *err)
{
    const frame_book fb = book_of(env);
    const bool *active = env->active;
    const bool skip = env->frame_skip > 1;
    bool left = false;
    for (int64_t i = 0; i < env->num; i++) {
        if (!active[i])
            continue;
        bool ended = frame_row(&fb, i);
        if (__builtin_expect(skip, 0))
            acc_rows(env, i, 1);
        if (!ended || last) {
            left = true;
        } else {
            int rc = ended_early(env, i, err);
            if (rc) {
                *any_left = left;
                return rc;
            }
        }
    }
    *any_left = left;
    return CRL_OK;
}

/* frame_skip > 1, after the frames: the outputs kept for envs that ended
 * early, and the reward sums. */
static __attribute__((noinline)) void finish_skip(crl_env *env)
{
    for (int64_t i = 0; i < env->num; i++) {
        if (env->ended_early[i])
            for (size_t j = 0; j < env->nleaves; j++) {
                crl__env_leaf *l = &env->leaves[j];
                if (l->snap)
                    row_copy(l, l->buf, l->snap, i);
            }
        if (!env->pending[i])
            crl__env_skip_end(env, i);
    }
}

/* A step error from the backend, prefixed with the env's name. */
static __attribute__((noinline)) int backend_step_error(crl_env *env, int rc, crl_error *err)
{
    char nb[300];
    crl_error_prefix(err, "%s: step: ", crl__env_name(env, nb, sizeof nb));
    return rc;
}

static int step_frames(crl_env *env, crl_error *err)
{
    bool any = false;
    const int64_t num = env->num;
    bool *active = env->active, *ended = env->ended_early;
    const bool *pending = env->pending;
    uint8_t act = 0;
    for (int64_t i = 0; i < num; i++) {
        active[i] = !pending[i];
        ended[i] = false;
        act |= (uint8_t)active[i];
    }
    any = act != 0;
    for (int64_t i = 0; env->frame_skip > 1 && i < num; i++)
        crl__env_skip_begin(env, i);
    for (int64_t k = 0; any && k < env->frame_skip; k++) {
        int rc = env->ops.step(env->benv, err);
        if (rc)
            return backend_step_error(env, rc, err);
        /* executor = processes, on_worker_failure = restart: envs whose worker was
         * replaced hold a fresh reset observation; their episodes end here, truncated
         * (exec_procs.c), and the done handling below treats them as ended. */
        if (__builtin_expect(env->after_backend_step != NULL, 0))
            env->after_backend_step(env);
        if ((rc = check_buffers(env, "step", err)) || (rc = after_frame(env, k == env->frame_skip - 1, &any, err)))
            return rc;
    }
    if (env->frame_skip > 1)
        finish_skip(env);
    return CRL_OK;
}

static __attribute__((noinline)) int never_reset(const crl_env *env, crl_error *err)
{
    char nb[300];
    if (env->async_batch)
        return crl__env_async_refuse(env, "step", err);
    return crl_error_set(err, CRL_E_INVALID, "step: %s was never reset; call crl_env_reset first",
                         crl__env_name(env, nb, sizeof nb));
}

/* next_step: the step after done resets the env; its action was ignored,
 * its reward is 0 and its done flags are false. */
static __attribute__((noinline)) int reset_pending(crl_env *env, crl_error *err)
{
    const bool *pending = env->pending;
    int rc = backend_reset(env, pending, false, err);
    if (rc)
        return rc;
    for (size_t j = 0; j < env->nleaves; j++) {
        crl__env_leaf *l = &env->leaves[j];
        if (l->role != CRL__ROLE_REWARD)
            continue;
        for (int64_t i = 0; i < env->num; i++)
            if (pending[i])
                memset(l->bdata + (size_t)i * l->row_bytes, 0, l->row_bytes);
    }
    return CRL_OK;
}

/* same_step: reset the envs that ended inside this step; "next" already
 * holds their final values, the reset ones wait in rst for step_mdp. */
static __attribute__((noinline)) int reset_same_step(crl_env *env, crl_error *err)
{
    const int64_t num = env->num;
    const bool *done_now = env->done_now;
    bool *m = env->mask;
    memcpy(m, done_now, sizeof(bool) * (size_t)num);
    int rc = backend_reset(env, m, false, err);
    if (rc) {
        for (int64_t i = 0; i < num; i++)
            env->needs_reset[i] = env->needs_reset[i] || done_now[i];
        return rc;
    }
    int64_t *idx = env->ridx, k = crl__env_mask_list(m, num, idx);
    for (size_t j = 0; j < env->nleaves; j++) {
        const crl__env_leaf *l = &env->leaves[j];
        if (l->rst)
            crl__env_copy_rows(crl_tensor_data(l->rst), l->bdata, l->row_bytes, idx, k);
    }
    memcpy(env->just_reset, m, sizeof(bool) * (size_t)num);
    env->any_just_reset = true;
    return CRL_OK;
}

/* The step's outputs under td's "next" (the general path). */
static __attribute__((noinline)) int put_outputs(crl_env *env, crl_td *td, crl_error *err)
{
    for (size_t j = 0; j < env->nleaves; j++) {
        const crl__env_leaf *l = &env->leaves[j];
        int rc;
        if (l->exposed && l->role != CRL__ROLE_ACTION && (rc = put_leaf(env, td, l, true, NULL, err)))
            return rc;
    }
    return CRL_OK;
}

/* An action just copied into its buffer, the common domains inline; anything else, or a value outside (NaN
 * fails the bounds), through check_action for the error or the projection. */
static inline int check_action_quick(crl_env *env, crl__env_leaf *l, crl_error *err)
{
    bool ok = false;
    if (l->dom == DOM_BOX_F64) {
        const double *v = (const double *)(const void *)l->bdata;
        const double *lo = l->dom_lo, *hi = l->dom_hi;
        uint8_t in = 1;
        for (int64_t i = 0; i < l->numel; i++)
            in &= (uint8_t)((v[i] >= lo[i]) & (v[i] <= hi[i]));
        ok = in;
    } else if (l->dom == DOM_CAT_I64) {
        const int64_t *v = (const int64_t *)(const void *)l->bdata;
        uint64_t hi = (uint64_t)l->dom_ni;
        uint8_t bad = 0;
        for (int64_t i = 0; i < l->numel; i++)
            bad |= (uint64_t)v[i] >= hi;
        ok = !bad;
    } else if (l->dom == DOM_BOX_F32) {
        const float *v = (const float *)(const void *)l->bdata;
        const float *lo = l->dom_flo, *hi = l->dom_fhi;
        uint8_t in = 1;
        for (int64_t i = 0; i < l->numel; i++)
            in &= (uint8_t)((v[i] >= lo[i]) & (v[i] <= hi[i]));
        ok = in;
    }
    return ok ? CRL_OK : check_action(env, l, err);
}

/* crl__env_step_base through td's slot with nothing pending, one frame
 * and no pixels: the same copies, checks, flags and resets, without the
 * per-env loops of frame skipping and pending resets (active, ended_early
 * and just_reset are scratch nobody reads after such a step, but
 * just_reset while any_just_reset holds). */
static int step_quick(crl_env *env, const crl__step_slot *s, crl_error *err)
{
    int rc;
    const crl__step_io *io = s->io, *io_end = io + env->nact;
    for (; io < io_end; io++) {
        crl__env_move_c(io->udata, io->data, io->n, io->cls);
        if ((rc = check_action_quick(env, io->l, err)))
            return rc;
    }
    if ((rc = env->ops.step(env->benv, err)))
        return backend_step_error(env, rc, err);
    if (__builtin_expect(env->after_backend_step != NULL, 0))
        env->after_backend_step(env);
    if ((rc = check_buffers(env, "step", err)))
        return rc;
    const uint8_t anyd = scan_done(env);
    for (io = s->io + env->nact, io_end = io + env->nout; io < io_end; io++)
        crl__env_move_c(io->data, io->udata, io->n, io->cls);
    env->any_just_reset = false;
    if (__builtin_expect(!anyd, 1))
        return CRL_OK;
    if (env->autoreset == CRL_AUTORESET_SAME_STEP)
        return reset_same_step(env, err);
    /* Nothing was pending, so needs_reset was all false. */
    memcpy(env->needs_reset, env->done_now, sizeof(bool) * (size_t)env->num);
    return CRL_OK;
}

int crl_env_step(crl_env *env, crl_td *td, crl_error *err)
{
    if (!env || !td)
        return crl_error_set(err, CRL_E_INVALID, "step: %s is NULL", !env ? "env" : "the TensorDict");
    if (__builtin_expect(env->chain != NULL, 0))
        return env->chain_ops->step(env, td, err);
    return crl__env_step_base(env, td, err);
}

int crl__env_step_base(crl_env *env, crl_td *td, crl_error *err)
{
    int rc;
    if (!(td->batch_ndim == env->batch_ndim && (td->batch_ndim == 0 || td->batch_shape[0] == env->batch_shape[0])) &&
        (rc = crl__env_check_batch(env, td, "step", err)))
        return rc;
    if (!env->started)
        return never_reset(env, err);
    const int64_t num = env->num;
    bool *pending = env->pending;
    const bool *needs_reset = env->needs_reset;
    uint8_t anyp = 0;
    for (int64_t i = 0; i < num; i++) {
        pending[i] = needs_reset[i];
        anyp |= (uint8_t)needs_reset[i];
    }
    bool any_pending = anyp != 0;
    if (any_pending && env->autoreset == CRL_AUTORESET_OFF)
        for (int64_t i = 0; i < num; i++)
            if (pending[i])
                return crl_error_set(err, CRL_E_INVALID, "step: env %" G_GINT64_FORMAT " is done; reset it first "
                                     "(pass _reset) or set %s.auto_reset", (gint64)i, env->section);
    /* Decided before anything runs: nothing below changes td's layout
     * until the outputs are written. */
    crl__step_slot *slot = step_lookup(env, td);
    if (slot)
        env->step_fast++;
    else
        env->step_slow++;
    if (__builtin_expect(slot && !any_pending && env->frame_skip == 1 && !env->pixels_leaf, 1))
        return step_quick(env, slot, err);
    if ((rc = slot ? load_actions_fast(env, slot, err) : load_actions(env, td, err)) || (rc = step_frames(env, err)))
        return rc;
    if (any_pending && (rc = reset_pending(env, err)))
        return rc;
    if (env->pixels_leaf)
        for (int64_t i = 0; i < num; i++)
            if (!env->ended_early[i] && !pending[i] && (rc = render_env(env, i, err)))
                return rc;
    if (slot) {
        const crl__step_io *io = slot->io + env->nact, *end = io + env->nout;
        for (; io < end; io++)
            crl__env_move_c(io->data, io->udata, io->n, io->cls);
    } else if ((rc = put_outputs(env, td, err))) {
        return rc;
    }
    const uint8_t *done = env->done_p;
    bool *done_now = env->done_now, *just_reset = env->just_reset;
    uint8_t anyd = 0;
    for (int64_t i = 0; i < num; i++) {
        done_now[i] = done[i] != 0;
        just_reset[i] = false;
        anyd |= done[i];
    }
    bool any_done = anyd != 0;
    env->any_just_reset = false;
    if (env->autoreset == CRL_AUTORESET_SAME_STEP && any_done) {
        if ((rc = reset_same_step(env, err)))
            return rc;
    } else {
        crl__env_move(env->needs_reset, done_now, sizeof(bool) * (size_t)num);
    }
    if (!slot)
        step_fill(env, td);
    return CRL_OK;
}

int crl__env_step_fused(crl_env *env, const crl__smr_slot *p, crl_error *err)
{
    /* crl__env_step_base with nothing pending, one frame and no pixels:
     * the same copies, checks and flags, without the loops those need. */
    int rc;
    const crl__step_io *io = p->io, *io_end = io + env->nact;
    for (; io < io_end; io++) {
        crl__env_move_c(io->udata, io->data, io->n, io->cls);
        if ((rc = check_action_quick(env, io->l, err)))
            return crl__env_smr_fail(rc, err);
    }
    if ((rc = env->ops.step(env->benv, err)))
        return crl__env_smr_fail(backend_step_error(env, rc, err), err);
    if (__builtin_expect(env->after_backend_step != NULL, 0))
        env->after_backend_step(env);
    if ((rc = check_buffers(env, "step", err)))
        return crl__env_smr_fail(rc, err);
    /* just_reset is read only while any_just_reset holds: left alone. */
    const uint8_t anyd = scan_done(env);
    /* Each output into td's "next" and next_root, a loop per size class. */
    const crl__smr_move *m = p->moves, *e1 = p->ends[0], *e4 = p->ends[1], *e8 = p->ends[2], *e32 = p->ends[3];
    const crl__smr_move *m_end = p->ends[4];
    for (; m < e1; m++) {
        char c = *m->s;
        *m->d1 = c;
        *m->d2 = c;
    }
    for (; m < e4; m++) {
        uint32_t a, b;
        size_t n = m->n;
        __builtin_memcpy(&a, m->s, 4);
        __builtin_memcpy(&b, m->s + n - 4, 4);
        __builtin_memcpy(m->d1, &a, 4);
        __builtin_memcpy(m->d1 + n - 4, &b, 4);
        __builtin_memcpy(m->d2, &a, 4);
        __builtin_memcpy(m->d2 + n - 4, &b, 4);
    }
    for (; m < e8; m++) {
        uint64_t a, b;
        size_t n = m->n;
        __builtin_memcpy(&a, m->s, 8);
        __builtin_memcpy(&b, m->s + n - 8, 8);
        __builtin_memcpy(m->d1, &a, 8);
        __builtin_memcpy(m->d1 + n - 8, &b, 8);
        __builtin_memcpy(m->d2, &a, 8);
        __builtin_memcpy(m->d2 + n - 8, &b, 8);
    }
    for (; m < e32; m++) {
        uint64_t w[4];
        size_t n = m->n;
        __builtin_memcpy(w, m->s, 16);
        __builtin_memcpy(&w[2], m->s + n - 16, 16);
        __builtin_memcpy(m->d1, w, 16);
        __builtin_memcpy(m->d1 + n - 16, &w[2], 16);
        __builtin_memcpy(m->d2, w, 16);
        __builtin_memcpy(m->d2 + n - 16, &w[2], 16);
    }
    for (; m < m_end; m++) {
        crl__env_move_c(m->d1, m->s, m->n, m->cls);
        crl__env_move_c(m->d2, m->s, m->n, m->cls);
    }
    env->any_just_reset = false;
    /* Nothing was pending, so needs_reset is all false unless an env ended. */
    if (__builtin_expect(!anyd && !p->nx, 1))
        return CRL_OK;
    if (anyd && env->autoreset == CRL_AUTORESET_SAME_STEP) {
        if ((rc = reset_same_step(env, err)))
            return crl__env_smr_fail(rc, err);
    } else if (anyd) {
        memcpy(env->needs_reset, env->done_now, sizeof(bool) * (size_t)env->num);
    }
    return crl__env_smr_finish(env, p, anyd != 0, err);
}

/* ---- render ---------------------------------------------------------------------------------- */

int crl_env_render(crl_env *env, int64_t i, crl_tensor *frame, crl_error *err)
{
    if (!env || !frame)
        return crl_error_set(err, CRL_E_INVALID, "render: %s is NULL", !env ? "env" : "frame");
    char nb[300];
    if (!env->render_h || !env->ops.render)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "render: %s cannot render (it declares no frame size)",
                             crl__env_name(env, nb, sizeof nb));
    if (i < 0 || i >= env->num)
        return crl_error_set(err, CRL_E_RANGE, "render: env index %" G_GINT64_FORMAT " is out of range (0..%"
                             G_GINT64_FORMAT ")", (gint64)i, (gint64)(env->num - 1));
    int64_t shape[3] = { env->render_h, env->render_w, 3 };
    if (crl_tensor_dtype(frame) != CRL_U8)
        return crl_error_set(err, CRL_E_DTYPE, "render: the frame must be uint8, not %s",
                             crl_dtype_name(crl_tensor_dtype(frame)));
    if (crl_tensor_ndim(frame) != 3 || memcmp(crl_tensor_shape(frame), shape, sizeof shape) != 0) {
        char *a = crl__env_dims(3, shape);
        char *b = crl__env_dims(crl_tensor_ndim(frame), crl_tensor_shape(frame));
        crl_error_set(err, CRL_E_SHAPE, "render: the frame must have shape %s (height, width, rgb) but has %s", a, b);
        crl_free(a);
        crl_free(b);
        return CRL_E_SHAPE;
    }
    int rc;
    if (crl_tensor_is_contiguous(frame)) {
        rc = env->ops.render(env->benv, i, crl_tensor_data(frame), err);
    } else {
        crl_error e;
        crl_error_clear(&e);
        crl_tensor *tmp = crl_tensor_new(CRL_U8, 3, shape, &e);
        if (!tmp)
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        rc = env->ops.render(env->benv, i, crl_tensor_data(tmp), err);
        if (!rc)
            rc = crl_tensor_copy(frame, tmp, err);
        crl_tensor_unref(tmp);
    }
    if (rc)
        crl_error_prefix(err, "%s: render env %" G_GINT64_FORMAT ": ", crl__env_name(env, nb, sizeof nb), (gint64)i);
    return rc;
}
