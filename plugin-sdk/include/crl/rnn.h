/* crl plugin SDK: recurrent networks (PyTorch's nn.LSTM and nn.GRU, one layer, batch_first) and TorchRL's
 * LSTMModule / GRUModule, which carry the hidden state in the TensorDict.
 *
 * A recurrent network runs a batch of B sequences of T steps at once: the input is float32 [B, T, F], the
 * output [B, T, H] (the hidden state after each step).  The state entering step 0 is h0 (and c0 for the
 * LSTM), zero when not given; where an `is_init` flag [B, T] is true the state entering that step is zero
 * instead (an episode starts there), and no gradient flows back across it.  T = 1 is the cell.
 *
 * As for the MLP (crl/nn.h), forward keeps a cache that backward reads (backpropagation through time over
 * the T steps), backward adds into the parameter gradients, the buffers are reused while B and T stay the
 * same (the steady state allocates nothing), and infer runs without touching that cache. */
#ifndef CRL_RNN_H
#define CRL_RNN_H

#include <crl/nn.h>
#include <crl/td.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum crl_rnn_kind {
    CRL_RNN_LSTM = 0,   /* gates i, f, g, o; states h and c */
    CRL_RNN_GRU = 1     /* gates r, z, n (PyTorch's formula: n = tanh(W_in x + b_in + r * (W_hn h + b_hn))); state h */
} crl_rnn_kind;

/* Parse "lstm" or "gru" (case-insensitive).  CRL_E_INVALID names both.  Since ABI 1.2. */
CRL_API int crl_rnn_kind_from_name(const char *name, crl_rnn_kind *out, crl_error *err);
/* "lstm" or "gru"; NULL for an unknown value.  Static string.  Since ABI 1.2. */
CRL_API const char *crl_rnn_kind_name(crl_rnn_kind kind);

typedef struct crl_rnn crl_rnn;

/* A one-layer LSTM or GRU from input_size features to hidden_size.  Parameters are drawn as PyTorch does
 * (every weight and bias ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))) from rng.  `name` labels errors.
 * New reference (crl_rnn_unref), or NULL with CRL_E_INVALID for a size outside [1, 16777216], an unknown
 * kind or no rng.  Since ABI 1.2. */
CRL_API crl_rnn *crl_rnn_new(const char *name, crl_rnn_kind kind, int64_t input_size, int64_t hidden_size,
                             crl_rng *rng, crl_error *err);
/* Another reference (returns r; NULL-safe); drop one (frees with the last; NULL-safe).  Used by one thread
 * at a time.  Since ABI 1.2. */
CRL_API crl_rnn *crl_rnn_ref(crl_rnn *r);
CRL_API void crl_rnn_unref(crl_rnn *r);
/* Accessors; never fail.  The name is borrowed (valid while r lives).  Since ABI 1.2. */
CRL_API const char *crl_rnn_name(const crl_rnn *r);
CRL_API crl_rnn_kind crl_rnn_kind_get(const crl_rnn *r);
CRL_API int64_t crl_rnn_input_size(const crl_rnn *r);
CRL_API int64_t crl_rnn_hidden_size(const crl_rnn *r);

/* Forward through T steps with the backward cache.  x is float32 [B, T, input_size] (any strides, B, T >=
 * 1); h0 and c0 float32 [B, hidden_size] or NULL for zeros (c0 must be NULL for a GRU); is_init [B, T] or
 * [B, T, 1] of any dtype (nonzero = reset) or NULL.  Returns the output [B, T, hidden_size], borrowed: valid
 * until the next forward; do not write into it.  NULL with CRL_E_DTYPE / CRL_E_SHAPE naming the module and
 * the argument, or CRL_E_NOMEM.  Since ABI 1.2. */
CRL_API crl_tensor *crl_rnn_forward(crl_rnn *r, const crl_tensor *x, const crl_tensor *h0, const crl_tensor *c0,
                                    const crl_tensor *is_init, crl_error *err);
/* The state after the last step of the last forward, [B, hidden_size], borrowed like its output (c: NULL
 * for a GRU, and both NULL before any forward).  Since ABI 1.2. */
CRL_API crl_tensor *crl_rnn_last_h(crl_rnn *r);
CRL_API crl_tensor *crl_rnn_last_c(crl_rnn *r);
/* Backpropagation through time of the last crl_rnn_forward.  grad_out is dLoss/dOutput [B, T, hidden_size],
 * grad_hT and grad_cT dLoss/d(final state) [B, hidden_size]; each may be NULL for zero (grad_cT must be
 * NULL for a GRU).  Adds into the parameter gradients.  When not NULL, *grad_in, *grad_h0 and *grad_c0
 * receive dLoss/dx [B, T, input_size], dLoss/dh0 and dLoss/dc0 [B, hidden_size] (borrowed until the next
 * backward; grad_c0 is left untouched for a GRU).  CRL_E_INVALID without a forward before, CRL_E_SHAPE /
 * CRL_E_DTYPE for a gradient of the wrong shape or dtype.  Since ABI 1.2. */
CRL_API int crl_rnn_backward(crl_rnn *r, const crl_tensor *grad_out, const crl_tensor *grad_hT,
                             const crl_tensor *grad_cT, crl_tensor **grad_in, crl_tensor **grad_h0,
                             crl_tensor **grad_c0, crl_error *err);
/* Forward without the backward cache (acting, targets): the same arguments as crl_rnn_forward, results
 * written into the caller's float32 tensors y [B, T, hidden_size], h_out and c_out [B, hidden_size], each
 * optional (NULL).  Zero allocation for fixed B and T.  Errors as crl_rnn_forward.  Since ABI 1.2. */
CRL_API int crl_rnn_infer(crl_rnn *r, const crl_tensor *x, const crl_tensor *h0, const crl_tensor *c0,
                          const crl_tensor *is_init, crl_tensor *y, crl_tensor *h_out, crl_tensor *c_out,
                          crl_error *err);

/* All parameters as one contiguous float32 vector in PyTorch's order (weight_ih_l0 [G*H, F], weight_hh_l0
 * [G*H, H], bias_ih_l0 [G*H], bias_hh_l0 [G*H], G = 4 for the LSTM and 3 for the GRU, gate blocks in
 * PyTorch's order) and their gradients.  Borrowed; valid while r lives.  Since ABI 1.2. */
CRL_API crl_tensor *crl_rnn_params_get(crl_rnn *r);
CRL_API crl_tensor *crl_rnn_grads_get(crl_rnn *r);
/* Set every gradient to 0.  Since ABI 1.2. */
CRL_API void crl_rnn_zero_grad(crl_rnn *r);
/* PyTorch's state dict of the nn.LSTM / nn.GRU ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
 * "bias_hh_l0") as a TensorDict of views into the parameters.  New reference, or NULL with err set.
 * Since ABI 1.2. */
CRL_API crl_td *crl_rnn_state_dict(crl_rnn *r, crl_error *err);
/* A new network of r's kind and sizes with a copy of its parameters.  New reference, or NULL with err
 * set.  Since ABI 1.2. */
CRL_API crl_rnn *crl_rnn_clone(crl_rnn *r, const char *name, crl_error *err);
/* The state dict as checkpoint sections "<prefix>/...", and back into a network of the same kind and
 * sizes (CRL_E_CORRUPT naming the file, section and both shapes; nothing changed on error).
 * Since ABI 1.2. */
CRL_API int crl_rnn_save(crl_rnn *r, crl_ckpt_writer *w, const char *prefix, crl_error *err);
CRL_API int crl_rnn_load(crl_rnn *r, const crl_ckpt_reader *r_ckpt, const char *prefix, crl_error *err);
/* crl_optim_add of the network's parameters and gradients.  Since ABI 1.2. */
CRL_API int crl_optim_add_rnn(crl_optim *o, crl_rnn *r, crl_error *err);

/* Whether [net.ROLE] of the loss's options (as crl_net_new reads them) is a recurrent network (type = lstm
 * or gru): then *recurrent is true, *kind and *hidden_size say which, and crl_net_new(opts, ROLE, ...) builds
 * the MLP head that follows it (pass it [hidden_size] as the input shape).  A loss calls this for the roles it
 * can make recurrent; crl_net_new refuses a recurrent section no one asked about (CRL_E_CONFIG naming its
 * FILE:LINE).  *recurrent is false without such a section or options.  Since ABI 1.2. */
CRL_API int crl_net_recurrent(const crl_opts *opts, const char *role, bool *recurrent, crl_rnn_kind *kind,
                              int64_t *hidden_size, crl_error *err);

/* The conv encoder in front of a recurrent [net.ROLE] (its `encoder = NAME` naming a [net.NAME] type = conv
 * section), as TorchRL composes ConvNet -> LSTMModule -> MLP: the conv layers alone, each frame in_shape
 * [C, H, W] to its flattened feature maps (crl_mlp_out_features of the result; no Linear layer, state dict
 * "0.<i>.weight" / "0.<i>.bias").  *out receives a new reference, or NULL when the section is not recurrent
 * or has no encoder (then nothing is built and CRL_OK is returned).  A loss that calls crl_net_recurrent for
 * ROLE and does not build the encoder gets CRL_E_CONFIG from the config check naming the encoder key's
 * FILE:LINE.  CRL_E_CONFIG naming that key's FILE:LINE for an in_shape that is not [C, H, W], naming the layer
 * that does not fit, CRL_E_NOMEM.  Since ABI 1.2. */
CRL_API int crl_net_encoder(const crl_opts *opts, const char *role, const char *name, int in_ndim,
                            const int64_t *in_shape, crl_rng *rng, crl_mlp **out, crl_error *err);
/* ---- TensorDict module (TorchRL's LSTMModule / GRUModule) ------------------------------------------- */

typedef struct crl_rnn_module crl_rnn_module;

/* Wrap a network: reads in_key [batch..., F], the recurrent state ("recurrent_state_h" and
 * "recurrent_state_c" for the LSTM, "recurrent_state" for the GRU, each [batch..., 1, H] as TorchRL's
 * primer makes them; absent means zeros) and "is_init" [batch..., 1] (absent means false); writes out_key
 * [batch..., H] and the state after the step under ("next", <state key>).  Outside recurrent mode every
 * row of the batch is one step; in recurrent mode the last batch dim is time: the state is read at the
 * first step of each sequence, the steps run in order, and ("next", <state key>) receives the state after
 * every step.  Takes a reference to net.  NULL with CRL_E_INVALID for an empty key.  Since ABI 1.2. */
CRL_API crl_rnn_module *crl_rnn_module_new(crl_rnn *net, const char *in_key, const char *out_key,
                                           crl_error *err);
/* Free the module and its network reference (NULL-safe).  Since ABI 1.2. */
CRL_API void crl_rnn_module_free(crl_rnn_module *mod);
/* The wrapped network, borrowed.  Since ABI 1.2. */
CRL_API crl_rnn *crl_rnn_module_net_get(crl_rnn_module *mod);
/* TorchRL's set_recurrent_mode: true processes [batch..., T] TensorDicts as sequences.  Since ABI 1.2. */
CRL_API void crl_rnn_module_set_recurrent_mode(crl_rnn_module *mod, bool recurrent);
/* The state keys the module reads (i < 2 for the LSTM, i < 1 for the GRU; NULL past them).  Borrowed.
 * Since ABI 1.2. */
CRL_API const char *crl_rnn_module_state_key(const crl_rnn_module *mod, int i);
/* Run the network on td (forward keeps the cache for crl_rnn_module_backward; infer does not) and write
 * out_key and the next state, in place when float32 tensors of the right shapes are there.  Errors name the
 * module and key (CRL_E_NOT_FOUND for a missing in_key, CRL_E_SHAPE for a wrong shape, CRL_E_SHAPE for a
 * TensorDict without a time dim in recurrent mode).  Since ABI 1.2. */
CRL_API int crl_rnn_module_forward(crl_rnn_module *mod, crl_td *td, crl_error *err);
CRL_API int crl_rnn_module_infer(crl_rnn_module *mod, crl_td *td, crl_error *err);
/* Backward of the last crl_rnn_module_forward: grad_out has out_key's shape (any float32 tensor of that
 * many elements).  Adds into the network's gradients.  When grad_in is not NULL, *grad_in receives
 * dLoss/d(in_key) as [N, T, F] (N*T = the td's rows in batch order, T = 1 outside recurrent mode; borrowed
 * until the next backward).  CRL_E_INVALID without a forward, CRL_E_SHAPE for a wrong grad_out.
 * Since ABI 1.2. */
CRL_API int crl_rnn_module_backward(crl_rnn_module *mod, const crl_tensor *grad_out, crl_tensor **grad_in,
                                    crl_error *err);
#ifdef __cplusplus
}
#endif
#endif
