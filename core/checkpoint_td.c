/* TensorDicts in checkpoint files: crl_ckpt_write_td and the validating crl_ckpt_read_td.
 *
 * A TensorDict under prefix P is section "P/td" (the index) plus one section
 * "P/<i>" per leaf holding its contiguous bytes.  The index (little-endian):
 *   u32 format (1), u32 node count (the root included), u32 leaf count, u32 0
 *   nodes, parents before children, the root first with an empty key:
 *     u32 key length, dotted key, u32 batch ndim, i64 batch dims
 *   leaves, leaf i's bytes in "P/<i>":
 *     u32 key length, dotted key, u32 dtype, u32 ndim, i64 dims, u64 bytes
 * A leaf's section holds its elements in order, each little-endian (the
 * tensor's memory on little-endian hosts); a bool is one byte, 0 or 1.
 * Nodes carry nested TensorDicts' own batch shapes, empty ones included, so
 * a read gives back a TensorDict crl_td_equal to the one written. */
#include "checkpoint-private.h"
#include "td-private.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define TD_INDEX_FORMAT 1
/* Longest dotted key a checkpoint stores. */
#define TD_KEY_MAX 4096

/* ---- writing ----------------------------------------------------------- */

typedef struct td_writer {
    crl_ckpt_writer *w;
    const char *prefix;
    GByteArray *nodes, *leaves;
    uint32_t nnodes, nleaves;
    char *secname;
} td_writer;

static void put32(GByteArray *b, uint32_t v)
{
    uint8_t x[4];
    crl__put_le32(x, v);
    g_byte_array_append(b, x, 4);
}

static void put64(GByteArray *b, uint64_t v)
{
    uint8_t x[8];
    crl__put_le64(x, v);
    g_byte_array_append(b, x, 8);
}

static void put_key_shape(GByteArray *b, const char *key, int ndim, const int64_t *shape)
{
    size_t klen = strlen(key);
    put32(b, (uint32_t)klen);
    g_byte_array_append(b, (const guint8 *)key, (guint)klen);
    put32(b, (uint32_t)ndim);
    for (int i = 0; i < ndim; i++)
        put64(b, (uint64_t)shape[i]);
}

static int write_tree(td_writer *tw, const crl_td *td, GString *key, crl_error *err)
{
    for (size_t i = 0; i < crl_td_len(td); i++) {
        size_t keep = key->len;
        if (keep)
            g_string_append_c(key, '.');
        g_string_append(key, crl_td_key_at(td, i));
        if (key->len > TD_KEY_MAX)
            return crl_error_set(err, CRL_E_INVALID, "crl_ckpt_write_td: key '%.64s...' is %zu bytes (max %d)",
                                 key->str, key->len, TD_KEY_MAX);
        crl_td *sub = crl_td_td_at(td, i);
        int rc;
        if (sub) {
            put_key_shape(tw->nodes, key->str, crl_td_batch_ndim(sub), crl_td_batch_shape(sub));
            tw->nnodes++;
            rc = write_tree(tw, sub, key, err);
        } else {
            crl_tensor *t = crl_td_tensor_at(td, i);
            if (crl_tensor_device(t).type != CRL_DEVICE_CPU)
                return crl_error_set(err, CRL_E_UNSUPPORTED,
                                     "crl_ckpt_write_td: '%s' is not on the CPU; move it to the CPU before "
                                     "checkpointing",
                                     key->str);
            crl_error e;
            crl_error_clear(&e);
            crl_tensor *c = crl_tensor_contiguous(t, &e);
            if (!c)
                return crl_error_pass(err, &e, CRL_E_NOMEM);
            g_free(tw->secname);
            tw->secname = g_strdup_printf("%s/%" PRIu32, tw->prefix, tw->nleaves);
            size_t nbytes = crl_tensor_nbytes(c), esize = crl_dtype_size(crl_tensor_dtype(c));
            const void *bytes = crl_tensor_data(c);
            void *le = NULL;
            if (!crl_ckpt_host_is_le() && esize > 1 && nbytes) {
                if (!(le = g_try_malloc(nbytes))) {
                    crl_tensor_unref(c);
                    return crl_error_set(err, CRL_E_NOMEM, "crl_ckpt_write_td: no memory for the %zu bytes of '%s'",
                                         nbytes, key->str);
                }
                crl_ckpt_byteswap_copy(le, bytes, esize, nbytes / esize);
                bytes = le;
            }
            rc = crl_ckpt_write(tw->w, tw->secname, bytes, nbytes, err);
            g_free(le);
            if (!rc) {
                put_key_shape(tw->leaves, key->str, 0, NULL);
                /* put_key_shape wrote ndim 0; replace it by dtype, ndim, dims. */
                g_byte_array_set_size(tw->leaves, tw->leaves->len - 4);
                put32(tw->leaves, (uint32_t)crl_tensor_dtype(c));
                put32(tw->leaves, (uint32_t)crl_tensor_ndim(c));
                for (int d = 0; d < crl_tensor_ndim(c); d++)
                    put64(tw->leaves, (uint64_t)crl_tensor_shape(c)[d]);
                put64(tw->leaves, (uint64_t)nbytes);
                tw->nleaves++;
            }
            crl_tensor_unref(c);
        }
        if (rc)
            return rc;
        g_string_truncate(key, keep);
    }
    return CRL_OK;
}

int crl_ckpt_write_td(crl_ckpt_writer *w, const char *prefix, const crl_td *td, crl_error *err)
{
    if (!w || !prefix || !td)
        return crl_error_set(err, CRL_E_INVALID, "crl_ckpt_write_td: %s is NULL",
                             !w ? "writer" : !prefix ? "prefix" : "TensorDict");
    size_t plen = strlen(prefix);
    /* Room for "/" and a 10-digit leaf number. */
    if (plen == 0 || plen + 11 > CRL_CKPT_NAME_MAX)
        return crl_error_set(err, CRL_E_INVALID, "crl_ckpt_write_td: prefix '%.64s' is %zu bytes (1..%d)", prefix,
                             plen, CRL_CKPT_NAME_MAX - 11);
    if (crl_td_device(td).type != CRL_DEVICE_CPU)
        return crl_error_set(err, CRL_E_UNSUPPORTED,
                             "crl_ckpt_write_td: TensorDict '%s' is not on the CPU; move it to the CPU first", prefix);
    td_writer tw = {w, prefix, g_byte_array_new(), g_byte_array_new(), 1, 0, NULL};
    put_key_shape(tw.nodes, "", crl_td_batch_ndim(td), crl_td_batch_shape(td));
    GString *key = g_string_new(NULL);
    int rc = write_tree(&tw, td, key, err);
    g_string_free(key, TRUE);
    if (!rc) {
        GByteArray *idx = g_byte_array_new();
        put32(idx, TD_INDEX_FORMAT);
        put32(idx, tw.nnodes);
        put32(idx, tw.nleaves);
        put32(idx, 0);
        g_byte_array_append(idx, tw.nodes->data, tw.nodes->len);
        g_byte_array_append(idx, tw.leaves->data, tw.leaves->len);
        g_free(tw.secname);
        tw.secname = g_strdup_printf("%s/td", prefix);
        rc = crl_ckpt_write(w, tw.secname, idx->data, idx->len, err);
        g_byte_array_free(idx, TRUE);
    }
    g_free(tw.secname);
    g_byte_array_free(tw.nodes, TRUE);
    g_byte_array_free(tw.leaves, TRUE);
    return rc;
}

/* ---- reading ----------------------------------------------------------- */

typedef struct cursor {
    const crl_ckpt_reader *r;
    const char *sec;   /* the index section's name */
    const uint8_t *p;
    size_t len, pos;
    uint64_t base;     /* file offset of p[0] */
    crl_error *err;
} cursor;

static int bad(cursor *c, size_t at, const char *fmt, ...) CRL_PRINTF(3, 4);
static int bad(cursor *c, size_t at, const char *fmt, ...)
{
    char msg[CRL_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return crl_error_set(c->err, CRL_E_CORRUPT, "%s: offset %" PRIu64 ": TensorDict index '%s': %s",
                         crl_ckpt_path(c->r), c->base + at, c->sec, msg);
}

static int take(cursor *c, size_t n, const char *what, const uint8_t **out)
{
    *out = c->p + c->pos;
    if (c->len - c->pos < n) {
        bad(c, c->pos, "ends inside %s", what);
        return CRL_E_CORRUPT;
    }
    c->pos += n;
    return CRL_OK;
}

static int get32(cursor *c, const char *what, uint32_t *v)
{
    const uint8_t *q;
    if (take(c, 4, what, &q))
        return CRL_E_CORRUPT;
    *v = crl__le32(q);
    return CRL_OK;
}

/* ndim then dims; every dim >= 0 and the product of the dims (zeros taken
 * as 1, so strides cannot overflow either) fits int64. */
static int get_shape(cursor *c, const char *key, int *ndim, int64_t *shape, int64_t *numel)
{
    size_t at = c->pos;
    uint32_t nd;
    if (get32(c, "an ndim", &nd))
        return CRL_E_CORRUPT;
    if (nd > CRL_MAX_DIMS)
        return bad(c, at, "'%s' has %" PRIu32 " dims (max %d)", key, nd, CRL_MAX_DIMS);
    int64_t n = 1, span = 1;
    for (uint32_t i = 0; i < nd; i++) {
        const uint8_t *q;
        size_t dat = c->pos;
        if (take(c, 8, "a shape", &q))
            return CRL_E_CORRUPT;
        int64_t d = (int64_t)crl__le64(q);
        if (d < 0)
            return bad(c, dat, "'%s' dim %" PRIu32 " is negative (%" PRId64 ")", key, i, d);
        if (__builtin_mul_overflow(span, d > 0 ? d : 1, &span))
            return bad(c, dat, "'%s' shape is too large (element count overflows)", key);
        n *= d;
        shape[i] = d;
    }
    *ndim = (int)nd;
    *numel = n;
    return CRL_OK;
}

/* A dotted key: 1..TD_KEY_MAX bytes, no NUL, non-empty components, at most
 * CRL__TD_MAX_DEPTH of them.  *last points at the last component. */
static int get_key(cursor *c, char *key, const char **last)
{
    size_t at = c->pos;
    uint32_t klen;
    const uint8_t *q;
    if (get32(c, "a key length", &klen))
        return CRL_E_CORRUPT;
    if (klen == 0 || klen > TD_KEY_MAX)
        return bad(c, at, "key length %" PRIu32 " is out of range (1..%d)", klen, TD_KEY_MAX);
    if (take(c, klen, "a key", &q))
        return CRL_E_CORRUPT;
    memcpy(key, q, klen);
    key[klen] = '\0';
    if (memchr(q, 0, klen))
        return bad(c, at + 4, "key holds a NUL byte");
    size_t depth = 1;
    *last = key;
    for (uint32_t i = 0; i < klen; i++) {
        if (key[i] != '.')
            continue;
        if (i == 0 || key[i - 1] == '.' || i + 1 == klen)
            return bad(c, at + 4, "key '%s' has an empty component", key);
        depth++;
        *last = key + i + 1;
    }
    if (key[0] == '.')
        return bad(c, at + 4, "key '%s' has an empty component", key);
    if (depth > CRL__TD_MAX_DEPTH)
        return bad(c, at + 4, "key '%.64s...' nests %zu levels (max %d)", key, depth, CRL__TD_MAX_DEPTH);
    return CRL_OK;
}

/* The TensorDict a key's parent names (the root for a plain key). */
static crl_td *parent_of(cursor *c, size_t at, crl_td *root, char *key, const char *last)
{
    if (last == key)
        return root;
    char *dot = (char *)last - 1;
    *dot = '\0';
    crl_td *p = crl_td_get_td(root, key);
    if (!p)
        bad(c, at, "'%s' is listed before its parent '%s' (or the parent is not a TensorDict)", last, key);
    *dot = '.';
    return p;
}

static bool leads_with(int ndim, const int64_t *shape, const crl_td *td)
{
    int bn = crl_td_batch_ndim(td);
    const int64_t *bs = crl_td_batch_shape(td);
    if (ndim < bn)
        return false;
    for (int i = 0; i < bn; i++)
        if (shape[i] != bs[i])
            return false;
    return true;
}

static int read_tree(cursor *c, const char *prefix, crl_td **out)
{
    uint32_t fmt, nnodes, nleaves, zero;
    if (get32(c, "the format", &fmt) || get32(c, "the node count", &nnodes) ||
        get32(c, "the leaf count", &nleaves) || get32(c, "the header", &zero))
        return CRL_E_CORRUPT;
    if (fmt != TD_INDEX_FORMAT)
        return bad(c, 0, "format %" PRIu32 " is not supported (this crl reads %d)", fmt, TD_INDEX_FORMAT);
    if (nnodes == 0 || nnodes > CRL_CKPT_MAX_SECTIONS)
        return bad(c, 4, "node count %" PRIu32 " is out of range (1..%d)", nnodes, CRL_CKPT_MAX_SECTIONS);
    if (nleaves > CRL_CKPT_MAX_SECTIONS)
        return bad(c, 8, "leaf count %" PRIu32 " is out of range (0..%d)", nleaves, CRL_CKPT_MAX_SECTIONS);
    if (zero)
        return bad(c, 12, "reserved field is not zero");
    int64_t shape[CRL_MAX_DIMS];
    int ndim;
    int64_t numel;
    size_t at = c->pos;
    uint32_t rootlen;
    if (get32(c, "the root key length", &rootlen))
        return CRL_E_CORRUPT;
    if (rootlen != 0)
        return bad(c, at, "the root entry has a key (length %" PRIu32 ")", rootlen);
    if (get_shape(c, "(root)", &ndim, shape, &numel))
        return CRL_E_CORRUPT;
    crl_error e;
    crl_error_clear(&e);
    crl_td *root = crl_td_new(ndim, shape, &e);
    if (!root)
        return crl_error_pass(c->err, &e, CRL_E_NOMEM);
    char *key = g_malloc(TD_KEY_MAX + 1);
    char *secname = NULL;
    int rc = CRL_OK;
    for (uint32_t i = 1; i < nnodes && !rc; i++) {
        const char *last;
        at = c->pos;
        if ((rc = get_key(c, key, &last)) || (rc = get_shape(c, key, &ndim, shape, &numel)))
            break;
        if (crl_td_has(root, key)) {
            rc = bad(c, at, "duplicate key '%s'", key);
            break;
        }
        crl_td *parent = parent_of(c, at, root, key, last);
        if (!parent) {
            rc = CRL_E_CORRUPT;
            break;
        }
        if (!leads_with(ndim, shape, parent)) {
            rc = bad(c, at, "nested TensorDict '%s': batch shape does not start with its parent's", key);
            break;
        }
        crl_td *sub = crl_td_new(ndim, shape, &e);
        if (!sub) {
            rc = crl_error_pass(c->err, &e, CRL_E_NOMEM);
            break;
        }
        rc = crl_td_set_td(parent, last, sub, c->err);
        crl_td_unref(sub);
    }
    for (uint32_t i = 0; i < nleaves && !rc; i++) {
        const char *last;
        at = c->pos;
        uint32_t dt;
        const uint8_t *q;
        if ((rc = get_key(c, key, &last)))
            break;
        size_t dat = c->pos;
        if ((rc = get32(c, "a dtype", &dt)))
            break;
        if (dt >= CRL_DTYPE_COUNT) {
            rc = bad(c, dat, "'%s' has unknown dtype %" PRIu32, key, dt);
            break;
        }
        if ((rc = get_shape(c, key, &ndim, shape, &numel)))
            break;
        size_t bat = c->pos;
        if ((rc = take(c, 8, "a byte count", &q)))
            break;
        uint64_t nbytes = crl__le64(q);
        int64_t want;
        if (__builtin_mul_overflow(numel, (int64_t)crl_dtype_size((crl_dtype)dt), &want) ||
            (uint64_t)want != nbytes) {
            char need[32] = "more than 2^63";
            if ((uint64_t)want != nbytes && want >= 0 && numel <= INT64_MAX / 8)
                snprintf(need, sizeof need, "%" PRId64, want);
            rc = bad(c, bat, "'%s' claims %" PRIu64 " bytes; its dtype and shape need %s", key, nbytes, need);
            break;
        }
        if (crl_td_has(root, key)) {
            rc = bad(c, at, "duplicate key '%s'", key);
            break;
        }
        crl_td *parent = parent_of(c, at, root, key, last);
        if (!parent) {
            rc = CRL_E_CORRUPT;
            break;
        }
        if (!leads_with(ndim, shape, parent)) {
            rc = bad(c, at, "'%s': shape does not start with its TensorDict's batch shape", key);
            break;
        }
        g_free(secname);
        secname = g_strdup_printf("%s/%" PRIu32, prefix, i);
        size_t have;
        crl_error_clear(&e);
        const void *data = crl_ckpt_section(c->r, secname, &have, &e);
        if (!data) {
            rc = crl_error_pass(c->err, &e, CRL_E_CORRUPT);
            break;
        }
        if ((uint64_t)have != nbytes) {
            rc = crl_error_set(c->err, CRL_E_CORRUPT,
                               "%s: offset %" PRIu64 ": section '%s' (leaf '%s') holds %zu bytes; its dtype and "
                               "shape need %" PRIu64,
                               crl_ckpt_path(c->r), crl__ckpt_section_offset(c->r, secname), secname, key, have, nbytes);
            break;
        }
        if (dt == CRL_BOOL) {
            const uint8_t *b = data, *end = b + have;
            while (b < end && *b <= 1)
                b++;
            if (b < end) {
                size_t el = (size_t)(b - (const uint8_t *)data);
                rc = crl_error_set(c->err, CRL_E_CORRUPT,
                                   "%s: offset %" PRIu64 ": section '%s' (bool leaf '%s'): element %zu is %u, not 0 "
                                   "or 1",
                                   crl_ckpt_path(c->r), crl__ckpt_section_offset(c->r, secname) + el, secname, key,
                                   el, *b);
                break;
            }
        }
        crl_tensor *t = crl_tensor_new((crl_dtype)dt, ndim, shape, &e);
        if (!t) {
            rc = crl_error_pass(c->err, &e, CRL_E_NOMEM);
            break;
        }
        size_t esize = crl_dtype_size((crl_dtype)dt);
        crl__ckpt_le_copy(crl_tensor_data(t), data, esize, have / esize);
        rc = crl_td_set(parent, last, t, c->err);
        crl_tensor_unref(t);
    }
    if (!rc && c->pos != c->len)
        rc = bad(c, c->pos, "%zu unexpected bytes after the last entry", c->len - c->pos);
    g_free(secname);
    g_free(key);
    if (rc) {
        crl_td_unref(root);
        return rc;
    }
    *out = root;
    return CRL_OK;
}

crl_td *crl_ckpt_read_td(const crl_ckpt_reader *r, const char *prefix, crl_error *err)
{
    if (!r || !prefix) {
        crl_error_set(err, CRL_E_INVALID, "crl_ckpt_read_td: %s is NULL", !r ? "reader" : "prefix");
        return NULL;
    }
    char *sec = g_strdup_printf("%s/td", prefix);
    size_t len;
    const uint8_t *p = crl_ckpt_section(r, sec, &len, err);
    crl_td *td = NULL;
    if (p) {
        cursor c = {r, sec, p, len, 0, crl__ckpt_section_offset(r, sec), err};
        read_tree(&c, prefix, &td);
    }
    g_free(sec);
    return td;
}
