/* libcrl application API: replay buffers (TorchRL's ReplayBuffer and
 * TensorDictReplayBuffer, in C).
 *
 * A buffer is a storage (a registered storage component: list, tensor,
 * memmap), a sampler and a writer, both in the host:
 *   sampler  random | without_replacement | prioritized | slice
 *   writer   round_robin | max_value
 * In INI:
 *   [replay]
 *   storage = memmap        ; selects the storage's own options, e.g. dir =
 *   capacity = 1000000
 *   sampler = prioritized
 *   alpha = 0.7
 *   beta = 0.5
 *   batch_size = 256
 * Sampled batches are TensorDicts of batch shape [batch_size] holding the
 * stored keys plus "index" (int64, the slots drawn), and for the
 * prioritized sampler "_weight" (float32 importance weights), as TorchRL's
 * TensorDictReplayBuffer.  The slice sampler returns [batch_size] made of
 * num_slices contiguous runs of one trajectory each.  Transforms appended to
 * the buffer are applied to every sampled batch. */
#ifndef CRL_REPLAY_H
#define CRL_REPLAY_H

#include <crl/host.h>
#include <crl/transform.h>
#include <crl/storage_backend.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct crl_replay crl_replay;

/* The host's [replay] options (storage, capacity, sampler, writer,
 * batch_size, seed, alpha, beta, beta_end, beta_steps, eps, priority_key,
 * drop_last, shuffle, num_slices, slice_len, traj_key, end_key,
 * strict_length, rank_key, transforms); the storage's options come from its
 * component table (selector key `storage`). */
CRL_API const crl_option *crl_replay_options(void);

/* Build the buffer a section describes ("replay").  Opening a durable
 * storage that holds items resumes it: the writer continues after the last
 * acknowledged item and new samplers see every stored item.  New buffer,
 * free with crl_replay_free (which closes the storage; acknowledged items
 * stay on disk). */
CRL_API crl_replay *crl_replay_from_config(crl_host *host, const crl_config *cfg, const char *section,
                                           crl_error *err);
/* The same from "key=value" strings (NULL-terminated), for code. */
CRL_API crl_replay *crl_replay_new(crl_host *host, const char *const *kv, crl_error *err);
CRL_API void crl_replay_free(crl_replay *rb);

/* Add one item (a TensorDict of batch shape []).  *index (may be NULL)
 * receives its slot. */
CRL_API int crl_replay_add(crl_replay *rb, const crl_td *item, int64_t *index, crl_error *err);
/* Add items[0..n) along the first batch dim (n = batch_shape[0]); index
 * (may be NULL) receives n slots.  All or, on a storage error, the items
 * before the failing one (the error says how many were written). */
CRL_API int crl_replay_extend(crl_replay *rb, const crl_td *items, int64_t *index, crl_error *err);

/* Draw batch_size items (0: the configured batch_size).  New TensorDict.
 * CRL_E_INVALID for an empty buffer; without_replacement with drop_last
 * returns NULL with CRL_E_RANGE when the epoch is exhausted (the next call
 * starts a new epoch), as TorchRL raises StopIteration. */
CRL_API crl_td *crl_replay_sample(crl_replay *rb, size_t batch_size, crl_error *err);

/* Prioritized sampler only (CRL_E_UNSUPPORTED otherwise): set the raw
 * priorities of slots idx[0..n).  Everything is checked first (slots in
 * [0, capacity), priorities finite and >= 0): on error nothing changes.  A
 * slot not written yet is accepted as by TorchRL's PrioritizedSampler: its
 * priority raises the max priority (the default of new items) but no sample
 * draws the empty slot, and the item later written there starts at the
 * default priority. */
CRL_API int crl_replay_update_priority(crl_replay *rb, const int64_t *idx, const double *priority, size_t n,
                                       crl_error *err);
/* The same from a sampled TensorDict: slots from "index", priorities from
 * the priority_key entry (default "td_error", any float dtype, shape
 * [batch] or [batch, 1]; absolute values are used). */
CRL_API int crl_replay_update_td_priority(crl_replay *rb, const crl_td *td, crl_error *err);

/* Items stored (filled slots). */
CRL_API size_t crl_replay_len(const crl_replay *rb);
CRL_API int64_t crl_replay_capacity(const crl_replay *rb);
/* The configured batch_size (0: each crl_replay_sample call gives one). */
CRL_API size_t crl_replay_batch_size(const crl_replay *rb);
/* The item in slot i as a TensorDict of batch []; new reference. */
CRL_API crl_td *crl_replay_get(crl_replay *rb, int64_t i, crl_error *err);
/* Empty the buffer (storage, sampler state, writer cursor). */
CRL_API int crl_replay_empty(crl_replay *rb, crl_error *err);

/* Iterate as TorchRL's `for batch in rb`: batches of batch_size until the
 * sampler's epoch ends (without_replacement), else forever.  Returns NULL
 * with CRL_OK in err->code at the end of the epoch (pass an err to tell
 * the end from a failure). */
CRL_API crl_td *crl_replay_next(crl_replay *rb, crl_error *err);

/* ---- tensor-only buffers (TorchRL's ReplayBuffer storing plain tensors) ----
 * A buffer can store tensors instead of TensorDicts: each tensor is kept
 * as the entry CRL_REPLAY_TENSOR_KEY of an item, with every storage,
 * sampler, writer and checkpoint of the buffer (crl_replay_sample on such a
 * buffer gives the TensorDict view: that key, "index", "_weight").  The
 * first write fixes the per-item shape and dtype where the storage needs
 * one (a later tensor that differs is the storage's CRL_E_SHAPE /
 * CRL_E_DTYPE naming the key); TensorDicts and tensors do not mix in one
 * buffer.  Since ABI 1.2. */
#define CRL_REPLAY_TENSOR_KEY "data"

/* Add one item: the whole tensor (any shape, 0-dim included; copied, the
 * caller keeps item).  *index (may be NULL) receives its slot.  Errors as
 * crl_replay_add; CRL_E_INVALID for a NULL argument. */
CRL_API int crl_replay_add_tensor(crl_replay *rb, crl_tensor *item, int64_t *index, crl_error *err);
/* Add items[0..n) along the first dim (n = shape[0]; copied); index (may
 * be NULL) receives n slots.  CRL_E_SHAPE for a 0-dim tensor; otherwise as
 * crl_replay_extend. */
CRL_API int crl_replay_extend_tensor(crl_replay *rb, crl_tensor *items, int64_t *index, crl_error *err);
/* Draw batch_size items (0: the configured batch_size) stacked along a new
 * first dim: a new tensor [batch_size, item shape...].  With info not NULL,
 * *info receives a new TensorDict of batch [batch_size] with what TorchRL's
 * sample(return_info=True) gives: "index" and, prioritized, "_weight".
 * NULL on error (as crl_replay_sample; CRL_E_INVALID for a buffer holding
 * TensorDicts, naming its keys), *info NULL then. */
CRL_API crl_tensor *crl_replay_sample_tensor(crl_replay *rb, size_t batch_size, crl_td **info, crl_error *err);
/* The tensor in slot i; new reference.  Errors as crl_replay_get, and
 * CRL_E_INVALID for a buffer holding TensorDicts. */
CRL_API crl_tensor *crl_replay_get_tensor(crl_replay *rb, int64_t i, crl_error *err);

/* The buffer takes ownership of t (also on failure).  Applied to every
 * sampled batch, in order. */
CRL_API int crl_replay_append_transform(crl_replay *rb, crl_transform *t, crl_error *err);

/* Set beta now (prioritized only).  With beta_end and beta_steps set, beta
 * anneals linearly from beta to beta_end over beta_steps samples. */
CRL_API int crl_replay_set_beta(crl_replay *rb, double beta, crl_error *err);
CRL_API double crl_replay_beta(const crl_replay *rb);

/* Checkpoint the whole buffer into dir (storage, sampler state including
 * priorities and RNG, writer cursor): written to a temporary directory,
 * fsynced, renamed over dir, parent fsynced (crl/checkpoint.h). */
CRL_API int crl_replay_dump(crl_replay *rb, const char *dir, crl_error *err);
/* Replace the buffer's contents with a checkpoint.  The checkpoint's
 * sampler, writer and capacity must match this buffer's configuration
 * (CRL_E_CONFIG says what differs); every file is validated
 * (CRL_E_CORRUPT names the file and offset).  On error the buffer is left
 * as it was. */
CRL_API int crl_replay_load(crl_replay *rb, const char *dir, crl_error *err);

#ifdef __cplusplus
}
#endif
#endif
