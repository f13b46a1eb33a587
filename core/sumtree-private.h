/* Internal 16-way sum tree and min tree over float64 priorities (replay buffer sampling core). */
#ifndef CRL_SUMTREE_PRIVATE_H
#define CRL_SUMTREE_PRIVATE_H

#include "crl-private.h"

/* Fan-out of every internal node: a descent scans 16 contiguous child sums. */
#define CRL__SUMTREE_FANOUT 16

/* A sum tree and a min tree sharing one shape.  Leaves are contiguous; each
 * internal node's 16 children are stored as one contiguous block, so a level
 * is an array of child sums.  The depth is that of a tree padded to a power of
 * 16; trailing subtrees that hold no leaf are never allocated.  A leaf that was
 * never set (or was cleared) counts 0 in the sum and +inf in the min.  All
 * memory is allocated by crl__sumtree_new: no call below allocates. */
typedef struct crl__sumtree crl__sumtree;

/* A tree of `capacity` (>= 1) unset leaves; free with crl__sumtree_free.
 * NULL with CRL_E_INVALID (capacity 0) or CRL_E_NOMEM. */
CRL_INTERNAL crl__sumtree *crl__sumtree_new(size_t capacity, crl_error *err);
CRL_INTERNAL void crl__sumtree_free(crl__sumtree *t);
CRL_INTERNAL size_t crl__sumtree_capacity(const crl__sumtree *t);
/* Number of levels below the root (1 for capacity <= 16). */
CRL_INTERNAL int crl__sumtree_depth(const crl__sumtree *t);

/* Set leaf i to p (finite, >= 0).  CRL_E_RANGE for i >= capacity,
 * CRL_E_INVALID for a negative, NaN or infinite p; the tree is unchanged then. */
CRL_INTERNAL int crl__sumtree_set(crl__sumtree *t, size_t i, double p, crl_error *err);
/* Set leaves idx[k] to p[k].  Every pair is checked before any is applied,
 * so on error (CRL_E_RANGE for a negative or too large index, CRL_E_INVALID
 * for a bad priority, message naming position k) nothing changes.  A repeated
 * index takes its last value. */
CRL_INTERNAL int crl__sumtree_set_batch(crl__sumtree *t, const int64_t *idx, const double *p,
                                        size_t n, crl_error *err);
/* Return leaf i to the unset state (0 in the sum, +inf in the min). */
CRL_INTERNAL int crl__sumtree_clear_leaf(crl__sumtree *t, size_t i, crl_error *err);
/* Unset every leaf. */
CRL_INTERNAL void crl__sumtree_clear(crl__sumtree *t);
/* *out = leaf i's priority (0 when unset).  CRL_E_RANGE for i >= capacity. */
CRL_INTERNAL int crl__sumtree_get(const crl__sumtree *t, size_t i, double *out, crl_error *err);
/* true when leaf i holds a priority (set and not cleared); false out of range. */
CRL_INTERNAL bool crl__sumtree_is_set(const crl__sumtree *t, size_t i);
/* Hint the cache to fetch what an update of leaf i touches (no effect on
 * the tree's values; ignored for i >= capacity).  set_batch does this itself. */
CRL_INTERNAL void crl__sumtree_prefetch(const crl__sumtree *t, size_t i);
/* Sum of all leaves. */
CRL_INTERNAL double crl__sumtree_total(const crl__sumtree *t);
/* Smallest set leaf; +inf when no leaf is set. */
CRL_INTERNAL double crl__sumtree_min(const crl__sumtree *t);
/* *out = the leaf i whose running sum first exceeds u, i.e.
 * sum(p[0..i-1]) <= u < sum(p[0..i]); never a zero leaf.  u must be in
 * [0, total): CRL_E_RANGE otherwise (and when total is 0). */
CRL_INTERNAL int crl__sumtree_find_prefix(const crl__sumtree *t, double u, size_t *out, crl_error *err);
/* Draw n leaves i.i.d. with probability p[i] / total (u = uniform * total,
 * one crl_rng_uniform per draw) into out.  CRL_E_INVALID when total is 0. */
CRL_INTERNAL int crl__sumtree_sample(const crl__sumtree *t, crl_rng *rng, size_t n, int64_t *out,
                                     crl_error *err);

#endif
