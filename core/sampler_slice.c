/* Slice sampler (TorchRL's SliceSampler): an incrementally kept trajectory index, O(batch) draws. */
#include "replay-private.h"

#include <inttypes.h>
#include <string.h>

typedef struct {
    uint64_t start;    /* write number of its first item */
    uint64_t len;
    int64_t key;       /* trajectory id (by_traj) */
    int64_t next;      /* position of the next (newer) segment, -1 for the newest */
    bool closed;       /* its last item ends the trajectory (not cut by cursor, hole or age) */
    bool elig;         /* counted in the Fenwick tree */
} seg;

/* A segment is kept at position start % capacity (distinct for the items a
 * buffer holds), so the eligible set, ordered by position, is a function of
 * the stored items alone: an index rebuilt from the storage after a
 * checkpoint load draws exactly what the original would. */
struct crl__slice {
    size_t capacity;
    bool by_traj;
    seg *at;           /* capacity entries */
    uint32_t *fen;     /* Fenwick tree over positions: eligible segments */
    int log2cap;
    int64_t head, tail;  /* positions of the oldest and newest segments */
    uint64_t count;
    size_t n_elig;
    uint64_t thr;
};

crl__slice *crl__slice_new(size_t capacity, bool by_traj, crl_error *err)
{
    crl__slice *s = g_try_new0(crl__slice, 1);
    if (s) {
        s->at = g_try_new0(seg, capacity);
        s->fen = g_try_new0(uint32_t, capacity + 1);
    }
    if (!s || !s->at || !s->fen || capacity > UINT32_MAX) {
        crl__slice_free(s);
        crl_error_set(err, CRL_E_NOMEM, "slice sampler: out of memory for capacity %zu", capacity);
        return NULL;
    }
    s->capacity = capacity;
    s->by_traj = by_traj;
    s->thr = 1;
    while (((size_t)1 << (s->log2cap + 1)) <= capacity)
        s->log2cap++;
    s->head = s->tail = -1;
    return s;
}

void crl__slice_free(crl__slice *s)
{
    if (!s)
        return;
    g_free(s->at);
    g_free(s->fen);
    g_free(s);
}

void crl__slice_clear(crl__slice *s)
{
    memset(s->fen, 0, (s->capacity + 1) * sizeof *s->fen);
    for (size_t i = 0; i < s->capacity; i++)
        s->at[i].elig = false;
    s->head = s->tail = -1;
    s->count = 0;
    s->n_elig = 0;
}

static void fen_add(crl__slice *s, size_t pos, int d)
{
    for (size_t i = pos + 1; i <= s->capacity; i += i & (~i + 1))
        s->fen[i] = (uint32_t)((int64_t)s->fen[i] + d);
}

/* Position of the k-th (0-based) eligible segment. */
static size_t fen_select(const crl__slice *s, uint64_t k)
{
    size_t pos = 0;
    for (int b = s->log2cap; b >= 0; b--) {
        size_t nx = pos + ((size_t)1 << b);
        if (nx <= s->capacity && s->fen[nx] <= k) {
            pos = nx;
            k -= s->fen[nx];
        }
    }
    return pos;   /* 1-based index pos + 1, i.e. position pos */
}

/* Bring segment p's membership in line with its length. */
static void refresh(crl__slice *s, int64_t p)
{
    seg *g = &s->at[p];
    bool want = g->len >= s->thr;
    if (want != g->elig) {
        g->elig = want;
        fen_add(s, (size_t)p, want ? 1 : -1);
        s->n_elig += want ? 1 : (size_t)-1;
    }
}

static void unlist(crl__slice *s, int64_t p)
{
    seg *g = &s->at[p];
    if (g->elig) {
        g->elig = false;
        fen_add(s, (size_t)p, -1);
        s->n_elig--;
    }
}

void crl__slice_drop_before(crl__slice *s, uint64_t limit)
{
    while (s->count > 0) {
        seg *g = &s->at[s->head];
        if (g->start >= limit)
            return;
        uint64_t cut = limit - g->start;
        int64_t old = s->head;
        if (cut >= g->len) {
            unlist(s, old);
            s->head = g->next;
            s->count--;
            if (!s->count)
                s->head = s->tail = -1;
            continue;
        }
        /* what is left starts later: it moves to its new first item's position */
        seg moved = *g;
        unlist(s, old);
        moved.start += cut;
        moved.len -= cut;
        moved.elig = false;
        int64_t p = (int64_t)(moved.start % s->capacity);
        s->at[p] = moved;
        if (s->tail == old)
            s->tail = p;
        s->head = p;
        refresh(s, p);
        return;
    }
}

void crl__slice_push(crl__slice *s, uint64_t w, int64_t key, bool end)
{
    if (w + 1 > s->capacity)
        crl__slice_drop_before(s, w + 1 - s->capacity);
    if (s->count > 0) {
        seg *g = &s->at[s->tail];
        bool contiguous = g->start + g->len == w;
        bool same = s->by_traj ? (contiguous && g->key == key) : (contiguous && !g->closed);
        if (same) {
            g->len++;
            if (!s->by_traj && end)
                g->closed = true;
            refresh(s, s->tail);
            return;
        }
        /* a different id right after it: that trajectory really ended */
        if (s->by_traj && contiguous)
            g->closed = true;
    }
    int64_t p = (int64_t)(w % s->capacity);
    seg *g = &s->at[p];
    g->start = w;
    g->len = 1;
    g->key = key;
    g->next = -1;
    g->elig = false;
    g->closed = !s->by_traj && end;
    if (s->count)
        s->at[s->tail].next = p;
    else
        s->head = p;
    s->tail = p;
    s->count++;
    refresh(s, p);
}

size_t crl__slice_count(const crl__slice *s)
{
    return (size_t)s->count;
}

uint64_t crl__slice_longest(const crl__slice *s)
{
    uint64_t m = 0;
    for (int64_t p = s->head; p >= 0 && s->count; p = s->at[p].next) {
        if (s->at[p].len > m)
            m = s->at[p].len;
        if (p == s->tail)
            break;
    }
    return m;
}

/* A new threshold: rebuild the eligible set once (O(segments)); it is then
 * kept up to date by every write. */
static void set_threshold(crl__slice *s, uint64_t thr)
{
    if (thr == s->thr)
        return;
    s->thr = thr;
    for (int64_t p = s->head; p >= 0 && s->count; p = s->at[p].next) {
        refresh(s, p);
        if (p == s->tail)
            break;
    }
}

int crl__slice_sample(crl__slice *s, crl_rng *rng, size_t num_slices, size_t slice_len, bool strict,
                      int64_t *idx, bool *trunc, size_t *n_out, crl_error *err)
{
    if (num_slices == 0 || slice_len == 0)
        return crl_error_set(err, CRL_E_INVALID, "slice sampler: %s is 0", num_slices ? "slice_len" : "num_slices");
    set_threshold(s, strict ? slice_len : 1);
    if (s->n_elig == 0) {
        if (s->count == 0)
            return crl_error_set(err, CRL_E_INVALID, "slice sampler: the buffer is empty; add data before sampling");
        return crl_error_set(err, CRL_E_INVALID,
                             "slice sampler: no trajectory holds slice_len = %zu items (%zu trajectories, the "
                             "longest has %" PRIu64 "); lower slice_len (or raise num_slices) or set "
                             "strict_length = false",
                             slice_len, crl__slice_count(s), crl__slice_longest(s));
    }
    size_t n = 0;
    for (size_t j = 0; j < num_slices; j++) {
        const seg *g = &s->at[fen_select(s, crl_rng_below(rng, s->n_elig))];
        uint64_t m = slice_len, off = 0;
        if (g->len >= slice_len)
            off = crl_rng_below(rng, g->len - slice_len + 1);
        else
            m = g->len;
        uint64_t first = g->start + off;
        for (uint64_t k = 0; k < m; k++) {
            idx[n + k] = (int64_t)((first + k) % s->capacity);
            trunc[n + k] = false;
        }
        trunc[n + m - 1] = !(off + m == g->len && g->closed);
        n += (size_t)m;
    }
    *n_out = n;
    return CRL_OK;
}
