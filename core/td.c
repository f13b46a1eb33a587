/* crl_td (TensorDict): nested dotted keys, sorted entries, get/set/del, key handles, iteration, repr. */
#include "td-private.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- stamps --------------------------------------------------------------- */

#define STAMP_BLOCK 1024

/* The last stamp handed to any thread's block. */
static uint64_t stamp_counter;
/* This thread's block: stamps in [stamp_next, stamp_end) are its own.
 * initial-exec: a plain %fs access, not a __tls_get_addr call; 16 bytes
 * fit glibc's static TLS surplus even when libcrl is dlopened. */
static __thread uint64_t stamp_next __attribute__((tls_model("initial-exec")));
static __thread uint64_t stamp_end __attribute__((tls_model("initial-exec")));

uint64_t crl__td_fresh_stamp(void)
{
    if (G_UNLIKELY(stamp_next == stamp_end)) {
        stamp_next = __atomic_fetch_add(&stamp_counter, STAMP_BLOCK, __ATOMIC_RELAXED) + 1;
        stamp_end = stamp_next + STAMP_BLOCK;
    }
    return stamp_next++;
}

/* ---- lifetime ---------------------------------------------------------- */

crl_td *crl__td_alloc(int ndim, const int64_t *shape)
{
    crl_td *td = g_new0(crl_td, 1);
    td->refcount = 1;
    td->batch_ndim = ndim;
    if (ndim > 0)
        memcpy(td->batch_shape, shape, sizeof(int64_t) * (size_t)ndim);
    td->device.type = CRL_DEVICE_CPU;
    td->device.index = 0;
    crl__td_touch_layout(td, NULL);
    return td;
}

crl_td *crl_td_new(int batch_ndim, const int64_t *batch_shape, crl_error *err)
{
    if (batch_ndim < 0 || batch_ndim > CRL_MAX_DIMS) {
        crl_error_set(err, CRL_E_INVALID, "crl_td_new: batch ndim %d is out of range (0..%d)",
                      batch_ndim, CRL_MAX_DIMS);
        return NULL;
    }
    if (batch_ndim > 0 && !batch_shape) {
        crl_error_set(err, CRL_E_INVALID, "crl_td_new: batch_shape is NULL but batch ndim is %d",
                      batch_ndim);
        return NULL;
    }
    for (int i = 0; i < batch_ndim; i++) {
        if (batch_shape[i] < 0) {
            char b[CRL__SHAPE_BUF];
            crl_error_set(err, CRL_E_INVALID, "crl_td_new: batch dim %d of %s is negative", i,
                          crl__shape_fmt(b, batch_ndim, batch_shape));
            return NULL;
        }
    }
    return crl__td_alloc(batch_ndim, batch_shape);
}

crl_td *crl_td_ref(crl_td *td)
{
    if (td)
        g_atomic_int_inc(&td->refcount);
    return td;
}

void crl_td_unref(crl_td *td)
{
    if (!td || !g_atomic_int_dec_and_test(&td->refcount))
        return;
    for (size_t i = 0; i < td->len; i++) {
        crl_tensor_unref(td->entries[i].tensor);
        crl_td_unref(td->entries[i].td);
    }
    g_free(td->entries);
    g_free(td);
}

int crl_td_batch_ndim(const crl_td *td) { return td ? td->batch_ndim : 0; }
const int64_t *crl_td_batch_shape(const crl_td *td) { return td ? td->batch_shape : NULL; }

crl_device crl_td_device(const crl_td *td)
{
    crl_device d = {CRL_DEVICE_CPU, 0};
    return td ? td->device : d;
}

/* ---- entries ----------------------------------------------------------- */

/* Position of the first entry whose key is >= (comp, len) in byte order;
 * *found says whether it is equal. */
static size_t lower_bound(const crl_td *td, const char *comp, size_t len, bool *found)
{
    size_t lo = 0, hi = td->len;
    *found = false;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *k = td->entries[mid].key;
        int r = strncmp(k, comp, len);
        if (r == 0)
            r = k[len] != '\0';
        if (r < 0) {
            lo = mid + 1;
        } else {
            if (r == 0)
                *found = true;
            hi = mid;
        }
    }
    return lo;
}

static crl__td_entry *find_comp(const crl_td *td, const char *comp, size_t len)
{
    bool found;
    size_t i = lower_bound(td, comp, len, &found);
    return found ? &td->entries[i] : NULL;
}

void crl__td_insert(crl_td *td, const char *ikey, crl_tensor *t, crl_td *sub)
{
    bool found;
    size_t pos = lower_bound(td, ikey, strlen(ikey), &found);
    if (td->len == td->cap) {
        td->cap = td->cap ? td->cap * 2 : 8;
        td->entries = g_renew(crl__td_entry, td->entries, td->cap);
    }
    memmove(&td->entries[pos + 1], &td->entries[pos], sizeof(crl__td_entry) * (td->len - pos));
    td->entries[pos].key = ikey;
    td->entries[pos].tensor = t;
    td->entries[pos].td = sub;
    td->len++;
    crl__td_touch_layout(td, &td->entries[pos]);
}

crl__td_entry *crl__td_lookup(const crl_td *td, const char *key)
{
    if (!td || !key)
        return NULL;
    const char *p = key;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        crl__td_entry *e = find_comp(td, p, len);
        if (!dot || !e)
            return e;
        if (!e->td)
            return NULL;
        td = e->td;
        p = dot + 1;
    }
}

bool crl__td_remove(crl_td *td, const char *key)
{
    const char *dot = strrchr(key, '.');
    crl_td *parent = td;
    if (dot) {
        char *head = g_strndup(key, (size_t)(dot - key));
        crl__td_entry *pe = crl__td_lookup(td, head);
        g_free(head);
        if (!pe || !pe->td)
            return false;
        parent = pe->td;
    }
    const char *leaf = dot ? dot + 1 : key;
    bool found;
    size_t i = lower_bound(parent, leaf, strlen(leaf), &found);
    if (!found)
        return false;
    crl_tensor_unref(parent->entries[i].tensor);
    crl_td_unref(parent->entries[i].td);
    memmove(&parent->entries[i], &parent->entries[i + 1],
            sizeof(crl__td_entry) * (parent->len - i - 1));
    parent->len--;
    crl__td_touch_layout(parent, NULL);
    return true;
}

const char *crl__td_path_str(const crl__td_path *p, const char *leaf, char *buf, size_t n)
{
    const char *parts[CRL__TD_MAX_DEPTH + 1];
    size_t k = 0;
    if (leaf)
        parts[k++] = leaf;
    for (; p && k < G_N_ELEMENTS(parts); p = p->up)
        parts[k++] = p->key;
    size_t off = 0;
    buf[0] = '\0';
    while (k-- > 0 && off + 1 < n) {
        int w = snprintf(buf + off, n - off, "%s%s", parts[k], k ? "." : "");
        if (w < 0)
            break;
        off += (size_t)w;
    }
    return buf;
}

static void keys_list_rec(const crl_td *td, GString *s, const char *prefix)
{
    for (size_t i = 0; i < td->len; i++) {
        const crl__td_entry *e = &td->entries[i];
        if (s->len)
            g_string_append(s, ", ");
        char *full = prefix ? g_strconcat(prefix, ".", e->key, NULL) : g_strdup(e->key);
        g_string_append(s, full);
        if (e->td)
            keys_list_rec(e->td, s, full);
        g_free(full);
    }
}

char *crl__td_keys_list(const crl_td *td)
{
    GString *s = g_string_new(NULL);
    keys_list_rec(td, s, NULL);
    if (!s->len)
        g_string_append(s, "(none)");
    return g_string_free(s, FALSE);
}

/* ---- keys -------------------------------------------------------------- */

static int check_key(const char *key, crl_error *err)
{
    if (!key)
        return crl_error_set(err, CRL_E_INVALID, "TensorDict key is NULL");
    if (!*key)
        return crl_error_set(err, CRL_E_INVALID,
                             "TensorDict key is empty; use a name like 'observation' or 'next.reward'");
    size_t depth = 1;
    for (const char *p = key;; p++) {
        if (*p == '.' || *p == '\0') {
            if (p == key || p[-1] == '.' || (*p == '.' && p[1] == '\0'))
                return crl_error_set(err, CRL_E_INVALID,
                                     "TensorDict key '%s' has an empty component; dotted keys "
                                     "look like 'next.reward'",
                                     key);
            if (!*p)
                break;
            depth++;
        }
    }
    if (depth > CRL__TD_MAX_DEPTH)
        return crl_error_set(err, CRL_E_INVALID, "TensorDict key '%.64s...' nests %zu levels (max %d)",
                             key, depth, CRL__TD_MAX_DEPTH);
    return CRL_OK;
}

int crl__td_split(const char *key, const char **comps, size_t *n, crl_error *err)
{
    int rc = check_key(key, err);
    if (rc)
        return rc;
    char stackbuf[256];
    size_t len = strlen(key);
    char *buf = len < sizeof stackbuf ? stackbuf : g_malloc(len + 1);
    memcpy(buf, key, len + 1);
    size_t k = 0;
    char *p = buf;
    for (;;) {
        char *dot = strchr(p, '.');
        if (dot)
            *dot = '\0';
        comps[k++] = g_intern_string(p);
        if (!dot)
            break;
        p = dot + 1;
    }
    if (buf != stackbuf)
        g_free(buf);
    *n = k;
    return CRL_OK;
}

crl_td_key *crl_td_key_new(const char *key, crl_error *err)
{
    const char *comps[CRL__TD_MAX_DEPTH];
    size_t n;
    if (crl__td_split(key, comps, &n, err))
        return NULL;
    /* One block: the struct, the components, then the hints. */
    crl_td_key *k = g_malloc(sizeof *k + n * (sizeof(const char *) + sizeof(uint32_t)));
    k->str = g_strdup(key);
    k->n = n;
    memcpy(k->comp, comps, n * sizeof(const char *));
    k->hint = (uint32_t *)(void *)&k->comp[n];
    memset(k->hint, 0, n * sizeof(uint32_t));
    return k;
}

void crl_td_key_free(crl_td_key *k)
{
    if (!k)
        return;
    g_free(k->str);
    g_free(k);
}

const char *crl_td_key_str(const crl_td_key *k)
{
    return k ? k->str : NULL;
}

/* ---- set --------------------------------------------------------------- */

/* True when b is a (possibly nested) part of a, or a itself. */
static bool td_reaches(const crl_td *a, const crl_td *b)
{
    if (a == b)
        return true;
    for (size_t i = 0; i < a->len; i++)
        if (a->entries[i].td && td_reaches(a->entries[i].td, b))
            return true;
    return false;
}

/* Length of the first k components of a dotted key. */
static int prefix_len(const char *const *comps, size_t k)
{
    size_t len = 0;
    for (size_t i = 0; i < k; i++)
        len += strlen(comps[i]) + (i ? 1 : 0);
    return (int)len;
}

int crl__td_set_path(crl_td *td, const char *const *comps, size_t n, const char *key,
                     crl_tensor *t, crl_td *sub, crl_error *err)
{
    char b[CRL__SHAPE_BUF], c[CRL__SHAPE_BUF];
    crl_td *cur = td;
    size_t i = 0;
    for (;; i++) {
        if (sub && td_reaches(sub, cur))
            return crl_error_set(err, CRL_E_INVALID,
                                 "key '%s': a TensorDict cannot be stored inside itself", key);
        if (i + 1 >= n)
            break;
        crl__td_entry *e = crl__td_find_interned(cur, comps[i]);
        if (!e)
            break;
        if (e->tensor)
            return crl_error_set(err, CRL_E_EXISTS,
                                 "key '%.*s' holds a tensor, so '%s' cannot be nested under it; "
                                 "delete or rename '%.*s' first",
                                 prefix_len(comps, i + 1), key, key, prefix_len(comps, i + 1), key);
        cur = e->td;
    }
    if (t) {
        if (t->device.type != cur->device.type || t->device.index != cur->device.index)
            return crl_error_set(err, CRL_E_INVALID,
                                 "key '%s': the tensor is on another device than the TensorDict",
                                 key);
        if (!crl__td_leads(cur, t->ndim, t->shape))
            return crl_error_set(err, CRL_E_SHAPE,
                                 "key '%s': expected a tensor whose shape starts with the batch "
                                 "shape %s but got %s",
                                 key, crl__shape_fmt(b, cur->batch_ndim, cur->batch_shape),
                                 crl__shape_fmt(c, t->ndim, t->shape));
    } else if (!crl__td_leads(cur, sub->batch_ndim, sub->batch_shape)) {
        return crl_error_set(err, CRL_E_SHAPE,
                             "key '%s': expected a TensorDict whose batch shape starts with %s "
                             "but got %s",
                             key, crl__shape_fmt(b, cur->batch_ndim, cur->batch_shape),
                             crl__shape_fmt(c, sub->batch_ndim, sub->batch_shape));
    }
    if (i + 1 == n) {
        crl__td_entry *e = crl__td_find_interned(cur, comps[i]);
        if (e) {
            if (t) {
                if (e->td)
                    return crl_error_set(err, CRL_E_EXISTS,
                                         "key '%s' holds a TensorDict; delete it before storing a "
                                         "tensor there",
                                         key);
                crl_tensor *old = e->tensor;
                e->tensor = crl_tensor_ref(t);
                if (old != t)
                    crl__td_touch_entry(cur, e);
                crl_tensor_unref(old);
            } else {
                if (e->tensor)
                    return crl_error_set(err, CRL_E_EXISTS,
                                         "key '%s' holds a tensor; delete it before storing a "
                                         "TensorDict there",
                                         key);
                crl_td *old = e->td;
                e->td = crl_td_ref(sub);
                if (old != sub)
                    crl__td_touch_layout(cur, e);
                crl_td_unref(old);
            }
            return CRL_OK;
        }
    }
    for (; i + 1 < n; i++) {
        crl_td *mid = crl__td_alloc(cur->batch_ndim, cur->batch_shape);
        crl__td_insert(cur, comps[i], NULL, mid);
        cur = mid;
    }
    crl__td_insert(cur, comps[n - 1], crl_tensor_ref(t), crl_td_ref(sub));
    return CRL_OK;
}

int crl_td_set(crl_td *td, const char *key, crl_tensor *t, crl_error *err)
{
    if (!td || !t)
        return crl_error_set(err, CRL_E_INVALID, "crl_td_set: %s is NULL (key '%s')",
                             td ? "tensor" : "TensorDict", key ? key : "(null)");
    const char *comps[CRL__TD_MAX_DEPTH];
    size_t n;
    int rc = crl__td_split(key, comps, &n, err);
    if (rc)
        return rc;
    return crl__td_set_path(td, comps, n, key, t, NULL, err);
}

int crl_td_set_td(crl_td *td, const char *key, crl_td *sub, crl_error *err)
{
    if (!td || !sub)
        return crl_error_set(err, CRL_E_INVALID, "crl_td_set_td: %s is NULL (key '%s')",
                             td ? "nested TensorDict" : "TensorDict", key ? key : "(null)");
    const char *comps[CRL__TD_MAX_DEPTH];
    size_t n;
    int rc = crl__td_split(key, comps, &n, err);
    if (rc)
        return rc;
    return crl__td_set_path(td, comps, n, key, NULL, sub, err);
}

int crl_td_set_k(crl_td *td, const crl_td_key *k, crl_tensor *t, crl_error *err)
{
    if (!td || !k || !t)
        return crl_error_set(err, CRL_E_INVALID, "crl_td_set_k: %s is NULL",
                             !td ? "TensorDict" : !k ? "key handle" : "tensor");
    /* Hot path: the entry exists and holds a tensor; swap it in place. */
    crl_td *cur = td;
    size_t i = 0;
    for (; i + 1 < k->n; i++) {
        const crl__td_entry *e = crl__td_find_hinted(cur, k->comp[i], &k->hint[i]);
        if (!e || !e->td)
            break;
        cur = e->td;
    }
    if (i + 1 == k->n) {
        crl__td_entry *e = crl__td_find_hinted(cur, k->comp[i], &k->hint[i]);
        if (e && e->tensor && crl__td_leads(cur, t->ndim, t->shape) &&
            t->device.type == cur->device.type && t->device.index == cur->device.index) {
            if (e->tensor != t) {
                crl_tensor *old = e->tensor;
                e->tensor = crl_tensor_ref(t);
                crl__td_touch_entry(cur, e);
                crl_tensor_unref(old);
            }
            return CRL_OK;
        }
    }
    return crl__td_set_path(td, k->comp, k->n, k->str, t, NULL, err);
}

/* ---- get / has / del --------------------------------------------------- */

crl_tensor *crl_td_get(const crl_td *td, const char *key)
{
    crl__td_entry *e = crl__td_lookup(td, key);
    return e ? e->tensor : NULL;
}

crl_td *crl_td_get_td(const crl_td *td, const char *key)
{
    crl__td_entry *e = crl__td_lookup(td, key);
    return e ? e->td : NULL;
}

bool crl_td_has(const crl_td *td, const char *key)
{
    return crl__td_lookup(td, key) != NULL;
}

crl_tensor *crl_td_get_k(const crl_td *td, const crl_td_key *k)
{
    if (!td || !k)
        return NULL;
    size_t last = k->n - 1;
    for (size_t i = 0; i < last; i++) {
        const crl__td_entry *e = crl__td_find_hinted(td, k->comp[i], &k->hint[i]);
        if (!e || !e->td)
            return NULL;
        td = e->td;
    }
    const crl__td_entry *e = crl__td_find_hinted(td, k->comp[last], &k->hint[last]);
    return e ? e->tensor : NULL;
}

int crl_td_del(crl_td *td, const char *key, crl_error *err)
{
    if (!td)
        return crl_error_set(err, CRL_E_INVALID, "crl_td_del: TensorDict is NULL");
    int rc = check_key(key, err);
    if (rc)
        return rc;
    if (crl__td_remove(td, key))
        return CRL_OK;
    char *keys = crl__td_keys_list(td);
    crl_error_set(err, CRL_E_NOT_FOUND, "no key '%s' in the TensorDict; keys present: %s", key,
                  keys);
    g_free(keys);
    return CRL_E_NOT_FOUND;
}

/* ---- iteration --------------------------------------------------------- */

size_t crl_td_len(const crl_td *td) { return td ? td->len : 0; }

const char *crl_td_key_at(const crl_td *td, size_t i)
{
    return td && i < td->len ? td->entries[i].key : NULL;
}

crl_tensor *crl_td_tensor_at(const crl_td *td, size_t i)
{
    return td && i < td->len ? td->entries[i].tensor : NULL;
}

crl_td *crl_td_td_at(const crl_td *td, size_t i)
{
    return td && i < td->len ? td->entries[i].td : NULL;
}

static void leaf_keys_rec(const crl_td *td, GPtrArray *out, const char *prefix)
{
    for (size_t i = 0; i < td->len; i++) {
        const crl__td_entry *e = &td->entries[i];
        char *full = prefix ? g_strconcat(prefix, ".", e->key, NULL) : g_strdup(e->key);
        if (e->td) {
            leaf_keys_rec(e->td, out, full);
            g_free(full);
        } else {
            g_ptr_array_add(out, full);
        }
    }
}

char **crl_td_leaf_keys(const crl_td *td, crl_error *err)
{
    if (!td) {
        crl_error_set(err, CRL_E_INVALID, "crl_td_leaf_keys: TensorDict is NULL");
        return NULL;
    }
    GPtrArray *keys = g_ptr_array_new_with_free_func(g_free);
    leaf_keys_rec(td, keys, NULL);
    size_t bytes = (keys->len + 1) * sizeof(char *);
    for (guint i = 0; i < keys->len; i++)
        bytes += strlen(keys->pdata[i]) + 1;
    /* One block: the pointer array, then the strings. */
    char **out = g_malloc(bytes);
    char *p = (char *)(out + keys->len + 1);
    for (guint i = 0; i < keys->len; i++) {
        size_t len = strlen(keys->pdata[i]) + 1;
        memcpy(p, keys->pdata[i], len);
        out[i] = p;
        p += len;
    }
    out[keys->len] = NULL;
    g_ptr_array_free(keys, TRUE);
    return out;
}

/* ---- repr -------------------------------------------------------------- */

/* Python's textwrap.indent: prefix every line that is not all whitespace. */
static void indent_into(GString *out, const char *text, const char *prefix)
{
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        const char *end = nl ? nl + 1 : p + strlen(p);
        bool blank = true;
        for (const char *q = p; q < end; q++)
            if (!g_ascii_isspace(*q)) {
                blank = false;
                break;
            }
        if (!blank)
            g_string_append(out, prefix);
        g_string_append_len(out, p, end - p);
        p = end;
    }
}

static void shared_scan(const crl_td *td, size_t *leaves, bool *all)
{
    for (size_t i = 0; i < td->len; i++) {
        if (td->entries[i].td) {
            shared_scan(td->entries[i].td, leaves, all);
        } else {
            (*leaves)++;
            if (!crl_tensor_is_shared(td->entries[i].tensor))
                *all = false;
        }
    }
}

static int cmp_strs(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *td_repr(const crl_td *td)
{
    /* Mirrors tensordict's __repr__/_td_fields: each field is "key: repr",
     * the field strings are sorted, joined with ",\n", and indented. */
    char **fields = g_new0(char *, td->len + 1);
    for (size_t i = 0; i < td->len; i++) {
        const crl__td_entry *e = &td->entries[i];
        char *r = e->td ? td_repr(e->td) : crl_tensor_repr(e->tensor);
        fields[i] = g_strconcat(e->key, ": ", r, NULL);
        g_free(r);
    }
    qsort(fields, td->len, sizeof(char *), cmp_strs);
    GString *joined = g_string_new("\n");
    for (size_t i = 0; i < td->len; i++) {
        if (i)
            g_string_append(joined, ",\n");
        g_string_append(joined, fields[i]);
    }
    g_strfreev(fields);

    GString *inner = g_string_new("fields={");
    indent_into(inner, joined->str, "    ");
    g_string_append(inner, "}");
    g_string_free(joined, TRUE);

    size_t leaves = 0;
    bool all = true;
    shared_scan(td, &leaves, &all);
    char b[CRL__SHAPE_BUF];
    char dev[32];
    if (td->device.type == CRL_DEVICE_CUDA)
        snprintf(dev, sizeof dev, "cuda:%d", (int)td->device.index);
    else
        snprintf(dev, sizeof dev, "cpu");

    GString *out = g_string_new("TensorDict(\n");
    indent_into(out, inner->str, "    ");
    g_string_append_printf(out,
                           ",\n    batch_size=torch.Size(%s),\n    device=%s,\n    is_shared=%s)",
                           crl__shape_fmt(b, td->batch_ndim, td->batch_shape), dev,
                           leaves > 0 && all ? "True" : "False");
    g_string_free(inner, TRUE);
    return g_string_free(out, FALSE);
}

char *crl_td_repr(const crl_td *td)
{
    if (!td)
        return g_strdup("None");
    return td_repr(td);
}
