/* Internals of the replay buffer shared by replay*.c and sampler_slice.c: the buffer struct, writers, slice index. */
#ifndef CRL_REPLAY_PRIVATE_H
#define CRL_REPLAY_PRIVATE_H

#include "crl-private.h"
#include "sampler-private.h"
#include <crl/replay.h>

enum { CRL__SAMPLER_RANDOM = 0, CRL__SAMPLER_NOREPL = 1, CRL__SAMPLER_PRIO = 2, CRL__SAMPLER_SLICE = 3 };
enum { CRL__WRITER_ROUND_ROBIN = 0, CRL__WRITER_MAX_VALUE = 1 };

/* Names as written in INI, indexed by the enums above. */
CRL_INTERNAL const char *crl__replay_sampler_name(int kind);
CRL_INTERNAL const char *crl__replay_writer_name(int kind);

/* ---- max-value writer: a min-heap of slots keyed by their rank ------------ */
typedef struct crl__maxheap {
    size_t capacity;
    size_t n;         /* slots in the heap */
    int64_t *heap;    /* heap[0] is the slot of smallest rank */
    int64_t *pos;     /* slot -> position in heap, -1 when absent */
    double *rank;     /* slot -> rank */
} crl__maxheap;

CRL_INTERNAL int crl__maxheap_init(crl__maxheap *h, size_t capacity, crl_error *err);
CRL_INTERNAL void crl__maxheap_fini(crl__maxheap *h);
CRL_INTERNAL void crl__maxheap_clear(crl__maxheap *h);
/* Put slot in (absent) or change its rank (present). */
CRL_INTERNAL void crl__maxheap_set(crl__maxheap *h, int64_t slot, double rank);
CRL_INTERNAL void crl__maxheap_remove(crl__maxheap *h, int64_t slot);
/* Slot of smallest rank, -1 when empty. */
CRL_INTERNAL int64_t crl__maxheap_min_slot(const crl__maxheap *h);

/* ---- slice sampler: trajectory index over write numbers ------------------
 * Item number w (the w-th write of the round-robin writer) lives in slot
 * w % capacity.  Trajectories are maximal runs of consecutive write numbers
 * with one trajectory id (by traj_key) or ending at an item whose end flag
 * is set (by end_key); the oldest and newest items and any hole cut them
 * too, so the write cursor's wrap is a boundary and a slot holding an item
 * from before the wrap never joins one after it.  Segments form a queue in
 * write order: a write appends to the last one or opens a new one, and
 * overwriting the oldest item shrinks the first.  A segment is kept at
 * position (first write number % capacity) and those of at least
 * `threshold` items are counted in a Fenwick tree over positions, so a
 * uniform draw among them is O(log capacity) and a batch costs
 * O(num_slices log capacity + batch) whatever the buffer holds; and the
 * draw depends only on what is stored (a rebuilt index draws the same). */
typedef struct crl__slice crl__slice;

CRL_INTERNAL crl__slice *crl__slice_new(size_t capacity, bool by_traj, crl_error *err);
CRL_INTERNAL void crl__slice_free(crl__slice *s);
CRL_INTERNAL void crl__slice_clear(crl__slice *s);
/* Item number w was written (w larger than every earlier w): traj id `key`
 * (by_traj) or end flag `end`.  Items older than w - capacity + 1 leave the
 * index. */
CRL_INTERNAL void crl__slice_push(crl__slice *s, uint64_t w, int64_t key, bool end);
/* Forget every item numbered below `limit` (a slot lost its item). */
CRL_INTERNAL void crl__slice_drop_before(crl__slice *s, uint64_t limit);
/* Number of trajectories (segments) indexed, and the longest one (O(n)). */
CRL_INTERNAL size_t crl__slice_count(const crl__slice *s);
CRL_INTERNAL uint64_t crl__slice_longest(const crl__slice *s);
/* Draw num_slices slices of slice_len items: a segment uniformly among
 * those of at least slice_len items (strict) or among all (not strict,
 * shorter ones give their whole length), then a uniform start inside it.
 * Writes the slots into idx (room for num_slices * slice_len) and their
 * number into *n_out; trunc[k] (same room) is true at the last item of a
 * slice that stops before its trajectory's end.  CRL_E_INVALID when no
 * segment qualifies (message gives the longest). */
CRL_INTERNAL int crl__slice_sample(crl__slice *s, crl_rng *rng, size_t num_slices, size_t slice_len, bool strict,
                                   int64_t *idx, bool *trunc, size_t *n_out, crl_error *err);

/* ---- the buffer ----------------------------------------------------------- */
struct crl_replay {
    crl_host *host;
    char *section;
    char *storage_name;
    crl_opts *opts;              /* kept: a checkpoint load opens a fresh storage with them */
    crl_storage_ops ops;         /* the component's ops, missing trailing members NULL */
    void *st;
    int64_t capacity;
    size_t batch_size;
    uint64_t seed;
    crl_rng rng;

    int sampler;
    int writer;
    bool checkpoint;             /* crl run's checkpoints hold the contents ([replay] checkpoint) */

    /* what is stored: filled[slot], their count, one past the highest */
    uint8_t *filled;
    size_t nfilled;
    int64_t high;
    uint64_t write_count;        /* round-robin cursor = write_count % capacity */
    int64_t next_free;           /* max_value: lowest slot never filled */
    int64_t *dense;              /* filled slots in order, when there are holes */
    bool dense_dirty;

    /* without replacement */
    crl__sampler_norepl *norepl;
    bool drop_last, shuffle;
    bool epoch_over;             /* the last batch ended an epoch */

    /* prioritized */
    crl__sampler_prio *prio;
    double alpha, beta0, beta_end, eps;
    int64_t beta_steps;          /* 0: no annealing */
    uint64_t beta_count;         /* prioritized samples drawn since beta0 was set */
    char *priority_key;

    /* slice */
    crl__slice *slice;
    size_t num_slices, slice_len; /* exactly one is non-zero */
    bool strict_length;
    char *traj_key, *end_key;
    crl_td_key *traj_k, *end_k;

    /* max value */
    crl__maxheap maxh;
    char *rank_key;
    crl_td_key *rank_k;

    GPtrArray *transforms;       /* crl_transform *, owned */

    /* scratch for sampling (capacity-independent, grown on demand) */
    int64_t *scratch_idx;
    double *scratch_w;
    bool *scratch_trunc;
    size_t scratch_n;
};

/* replay_writer.c: read the storage's state (len, holes, write_count) into the
 * buffer and rebuild the sampler and writer indexes from it (resume, load,
 * errors). */
CRL_INTERNAL int crl__replay_sync_from_storage(crl_replay *rb, crl_error *err);
/* replay_config.c: free the parts of rb that hold state about stored items (not config). */
CRL_INTERNAL void crl__replay_free_state(crl_replay *rb);
/* Allocate state for rb's configuration (filled, samplers, heap). */
CRL_INTERNAL int crl__replay_alloc_state(crl_replay *rb, crl_error *err);
/* A buffer's configuration as crl_replay_from_config reads it (options,
 * sampler and writer settings, transforms) without opening its storage or
 * allocating its state, for validation: nothing is created on disk.  Free
 * with crl_replay_free; it cannot store or sample. */
CRL_INTERNAL crl_replay *crl__replay_configure(crl_host *host, const crl_config *cfg, const char *section,
                                               crl_error *err);
/* replay_writer.c: the beta the next prioritized sample uses (annealed). */
CRL_INTERNAL double crl__replay_current_beta(const crl_replay *rb);
/* Per-item values read from TensorDict leaves: row k of a [n, ...] tensor. */
CRL_INTERNAL int crl__row_i64(const crl_tensor *t, int64_t k, int64_t *out);
CRL_INTERNAL bool crl__row_any(const crl_tensor *t, int64_t k);
CRL_INTERNAL double crl__row_f64(const crl_tensor *t, int64_t k);

#endif
