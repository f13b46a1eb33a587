/* The state a policy carries from one step to the next in the collector's TensorDict (an LSTM's
 * recurrent_state_h / recurrent_state_c, a GRU's recurrent_state: whatever its act writes under "next"),
 * through the trainer's checkpoints (trainer_carry.c).
 *
 * A resume re-collects the checkpoint's frames by replaying the recorded actions, but the state the policy
 * computes meanwhile comes from the parameters it has then, not from those each step was taken with.  Only
 * the state standing in each sub-collector's TensorDict at the checkpoint reaches later frames (the policy
 * reads it at its next step; the re-collected frames themselves are dropped, or replaced by the
 * checkpoint's replay buffer), so the checkpoint keeps that one and the resume puts it back after
 * re-collecting: num_envs x the state's size per checkpoint, nothing per frame. */
#ifndef CRL_CARRY_PRIVATE_H
#define CRL_CARRY_PRIVATE_H

#include "crl-private.h"

#include <crl/checkpoint.h>
#include <crl/env.h>
#include <crl/loss_backend.h>

/* What the policy carries: the leaves its act writes under "next" (keys relative to "next", with the
 * dtype and shape it writes), found by running it once without exploring, on a copy of rng, on zeros of
 * env's full observation spec (the inputs a loss is built over).  The loss's parameters, buffers that
 * matter and rng do not change (act touches no backward cache; the mode draws nothing).  New reference;
 * an empty TensorDict when the policy carries nothing.  Errors: the policy's, prefixed. */
CRL_INTERNAL crl_td *crl__carry_template(const crl_loss_ops *ops, void *loss, const crl_env *env, const crl_rng *rng,
                                         crl_error *err);

/* The checkpoint sections of sub-collector k: "trainer/carried/<k>/..." (crl_ckpt_write_td). */
#define CRL__CARRY_PREFIX "trainer/carried"

/* Write the leaves of cur (sub-collector k's current TensorDict) that tmpl names, as they stand, under
 * CRL__CARRY_PREFIX "/<k>".  Errors: the writer's, crl_td_select's naming a leaf cur lacks. */
CRL_INTERNAL int crl__carry_save(crl_ckpt_writer *w, size_t k, const crl_td *cur, const crl_td *tmpl,
                                 crl_error *err);

/* Whether r has sub-collector k's carried state. */
CRL_INTERNAL bool crl__carry_has(const crl_ckpt_reader *r, size_t k);

/* Read sub-collector k's carried state, checked against tmpl: the same keys, each of tmpl's dtype and
 * shape.  New reference.  CRL_E_CORRUPT naming the file, section and key; nothing else changes. */
CRL_INTERNAL crl_td *crl__carry_read(const crl_ckpt_reader *r, size_t k, const crl_td *tmpl, crl_error *err);

/* Put saved (crl__carry_read's) into cur, every leaf at the root key of the same name, once all were
 * checked (same dtype and shape there; CRL_E_INVALID naming sub-collector k and the key, cur unchanged). */
CRL_INTERNAL int crl__carry_restore(crl_td *cur, const crl_td *saved, size_t k, crl_error *err);

/* The carried keys of tmpl as "a, b" (for messages); free with g_free. */
CRL_INTERNAL char *crl__carry_names(const crl_td *tmpl);

#endif
