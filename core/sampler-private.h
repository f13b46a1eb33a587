/* Internal replay-buffer samplers: uniform, without replacement, prioritized (TorchRL semantics). */
#ifndef CRL_SAMPLER_PRIVATE_H
#define CRL_SAMPLER_PRIVATE_H

#include "crl-private.h"
#include "sumtree-private.h"

/* Uniform with replacement: n indices i.i.d. in [0, len), one crl_rng_below
 * per draw.  CRL_E_INVALID when len is 0 (empty storage). */
CRL_INTERNAL int crl__sampler_uniform(crl_rng *rng, size_t len, size_t n, int64_t *out, crl_error *err);

/* Without replacement (TorchRL's SamplerWithoutReplacement): an epoch is a
 * permutation of [0, len) (arange when shuffle is false) handed out batch by
 * batch.  With drop_last, a tail shorter than the batch is dropped and the
 * epoch ends; without it, the last batch is short.  A change of len starts a
 * new epoch.  Holds a buffer of `capacity` indices: no allocation after new. */
typedef struct crl__sampler_norepl crl__sampler_norepl;

CRL_INTERNAL crl__sampler_norepl *crl__sampler_norepl_new(size_t capacity, bool drop_last, bool shuffle,
                                                          crl_error *err);
CRL_INTERNAL void crl__sampler_norepl_free(crl__sampler_norepl *s);
/* Write up to `batch` indices of the current epoch into out and their number
 * into *n_out (batch, or fewer for the last batch without drop_last).
 * *ran_out (may be NULL) is set to true when this batch ended the epoch (no
 * full batch is left with drop_last, nothing left without); the next call
 * starts a new permutation.  Errors: CRL_E_INVALID for len 0 or batch 0,
 * CRL_E_RANGE for len > capacity, CRL_E_INVALID for drop_last with
 * batch > len (no batch could be drawn without repeating indices). */
CRL_INTERNAL int crl__sampler_norepl_sample(crl__sampler_norepl *s, crl_rng *rng, size_t len, size_t batch,
                                            int64_t *out, size_t *n_out, bool *ran_out, crl_error *err);
/* Indices left in the current epoch (0 before the first sample). */
CRL_INTERNAL size_t crl__sampler_norepl_remaining(const crl__sampler_norepl *s);

/* The epoch state, for checkpoints: whether an epoch is under way, the
 * length it was made for, the next position and the permutation (borrowed,
 * len entries). */
CRL_INTERNAL void crl__sampler_norepl_state(const crl__sampler_norepl *s, bool *have_epoch, size_t *len, size_t *pos,
                                            const int64_t **perm);
/* Restore a state read back from a checkpoint.  Everything is checked first
 * (len <= capacity, pos <= len, perm a permutation of [0, len)):
 * CRL_E_CORRUPT naming what is wrong, and s is unchanged. */
CRL_INTERNAL int crl__sampler_norepl_restore(crl__sampler_norepl *s, bool have_epoch, size_t len, size_t pos,
                                             const int64_t *perm, crl_error *err);

/* Prioritized (TorchRL's PrioritizedSampler, Schaul et al. 2015): the tree
 * holds (p + eps)^alpha per item; an item is drawn with probability
 * P(i) = tree[i] / total and weighted w_i = (N P(i))^-beta / max_j w_j,
 * the max coming from the min tree: w_i = (tree[i] / min)^-beta. */
typedef struct crl__sampler_prio crl__sampler_prio;

/* alpha > 0, beta >= 0, eps >= 0, all finite; CRL_E_INVALID otherwise
 * (the message names the parameter).  Max priority starts at 1. */
CRL_INTERNAL crl__sampler_prio *crl__sampler_prio_new(size_t capacity, double alpha, double beta, double eps,
                                                      crl_error *err);
CRL_INTERNAL void crl__sampler_prio_free(crl__sampler_prio *s);
/* The sum tree (borrowed), for inspection. */
CRL_INTERNAL const crl__sumtree *crl__sampler_prio_tree(const crl__sampler_prio *s);
/* Largest raw priority seen so far (1 until an update brings a larger one). */
CRL_INTERNAL double crl__sampler_prio_max_priority(const crl__sampler_prio *s);
CRL_INTERNAL int crl__sampler_prio_set_beta(crl__sampler_prio *s, double beta, crl_error *err);
/* Give newly written items idx[0..n) the default priority
 * (max_priority + eps)^alpha.  CRL_E_RANGE for a bad index (nothing changes). */
CRL_INTERNAL int crl__sampler_prio_add(crl__sampler_prio *s, const int64_t *idx, size_t n, crl_error *err);
/* Forget an item the storage dropped (it is never drawn again until added). */
CRL_INTERNAL int crl__sampler_prio_remove(crl__sampler_prio *s, size_t i, crl_error *err);
/* Set raw priorities: tree[idx[k]] = (priority[k] + eps)^alpha, and raise
 * the max priority.  priority[k] must be finite and >= 0.  Everything is
 * checked first: on error (CRL_E_RANGE index, CRL_E_INVALID priority)
 * nothing changes. */
CRL_INTERNAL int crl__sampler_prio_update(crl__sampler_prio *s, const int64_t *idx, const double *priority,
                                          size_t n, crl_error *err);
/* The same where held[k] (NULL: all) says whether slot idx[k] holds an item:
 * an empty slot's priority is checked and raises the max priority but is
 * not put in the tree (TorchRL stores it at a slot no sample reaches, and
 * the write of an item there sets the default priority over it). */
CRL_INTERNAL int crl__sampler_prio_update_held(crl__sampler_prio *s, const int64_t *idx, const double *priority,
                                               size_t n, const bool *held, crl_error *err);
/* Restore tree leaves (already raised to alpha) of slots idx[0..n) and the
 * max priority, from a checkpoint.  Leaves must be finite and >= 0, the max
 * priority finite and > 0: CRL_E_CORRUPT otherwise, s unchanged. */
CRL_INTERNAL int crl__sampler_prio_restore(crl__sampler_prio *s, const int64_t *idx, const double *leaves, size_t n,
                                           double max_priority, crl_error *err);
/* Draw n indices into idx and their importance weights into weight (may be
 * NULL).  CRL_E_INVALID when no item has been added. */
CRL_INTERNAL int crl__sampler_prio_sample(const crl__sampler_prio *s, crl_rng *rng, size_t n, int64_t *idx,
                                          double *weight, crl_error *err);

#endif
