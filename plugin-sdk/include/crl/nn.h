/* crl plugin SDK: neural networks, TensorDict modules, optimizers.
 *
 * Float32 and batched: a network's input and output are [B, features]
 * tensors (rows = batch), as PyTorch's nn.Linear.  A network keeps what its
 * last forward computed (a cache reused from call to call, so a fixed batch
 * size allocates nothing after the first call); backward reads that cache,
 * accumulates (+=) into the parameter gradients, as PyTorch's .backward(),
 * and can hand back the gradient of the input.  The cache belongs to the
 * network: it is that of the last crl_mlp_forward through it, whichever
 * module or actor ran it, so run each forward's backward before the next
 * forward of the same network (use infer for forwards without backward).
 *
 * A loss plugin runs forward on the networks it is given, computes a scalar
 * loss and its gradient with respect to the outputs, calls backward, and an
 * optimizer then steps every parameter it was given. */
#ifndef CRL_NN_H
#define CRL_NN_H

#include <crl/checkpoint.h>
#include <crl/rng.h>
#include <crl/options.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- activations and init schemes --------------------------------------- */

typedef enum crl_activation {
    CRL_ACT_TANH = 0,        /* TorchRL's MLP default */
    CRL_ACT_RELU = 1,
    CRL_ACT_ELU = 2,         /* alpha = 1 */
    CRL_ACT_LEAKY_RELU = 3,  /* negative_slope = 0.01 */
    CRL_ACT_IDENTITY = 4
} crl_activation;

/* Parse "tanh", "relu", "elu", "leaky_relu", "identity" (also "Tanh",
 * "ReLU", "ELU", "LeakyReLU").  CRL_E_INVALID lists the names. */
CRL_API int crl_activation_from_name(const char *name, crl_activation *out, crl_error *err);
/* The canonical name ("tanh", ...); NULL for an unknown value.  Static string. */
CRL_API const char *crl_activation_name(crl_activation a);

typedef enum crl_init {
    CRL_INIT_DEFAULT = 0,          /* PyTorch's nn.Linear: W, b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
    CRL_INIT_ORTHOGONAL = 1,       /* torch.nn.init.orthogonal_(W, gain), b = 0 */
    CRL_INIT_KAIMING_UNIFORM = 2,  /* W ~ U(+-gain * sqrt(3 / fan_in)), b = 0 (kaiming_uniform_; gain sqrt(2) for relu) */
    CRL_INIT_XAVIER_UNIFORM = 3    /* xavier_uniform_(W, gain), b = 0 */
} crl_init;

/* Parse "default", "orthogonal", "kaiming_uniform", "xavier_uniform" (case-insensitive). */
CRL_API int crl_init_from_name(const char *name, crl_init *out, crl_error *err);

/* ---- MLP (Linear is an MLP without hidden layers) ----------------------- */

typedef struct crl_mlp crl_mlp;

/* TorchRL's MLP: in_features -> cells[0] -> ... -> cells[n_cells-1] ->
 * out_features, `act` after every hidden layer (and after the output layer
 * when activate_last).  n_cells = 0 gives one Linear layer.  Parameters are
 * drawn with CRL_INIT_DEFAULT from rng (same seed, bitwise-same
 * parameters).  `name` labels errors ("module 'qvalue': ...").  New
 * reference (crl_mlp_unref) or NULL with CRL_E_INVALID for a
 * non-positive size or bad activation, CRL_E_NOMEM. */
CRL_API crl_mlp *crl_mlp_new(const char *name, int64_t in_features, int64_t out_features,
                             const int64_t *cells, int n_cells, crl_activation act, bool activate_last,
                             crl_rng *rng, crl_error *err);
/* Another reference (returns m; NULL-safe); drop one (frees with the last;
 * NULL-safe).  A network is used by one thread at a time. */
CRL_API crl_mlp *crl_mlp_ref(crl_mlp *m);
CRL_API void crl_mlp_unref(crl_mlp *m);
/* Accessors: the name (borrowed, valid while m lives), feature counts and
 * the number of Linear layers (n_cells + 1).  Never fail. */
CRL_API const char *crl_mlp_name(const crl_mlp *m);
CRL_API int64_t crl_mlp_in_features(const crl_mlp *m);
CRL_API int64_t crl_mlp_out_features(const crl_mlp *m);
CRL_API int crl_mlp_num_layers(const crl_mlp *m);

/* Re-draw every parameter.  gain scales the hidden layers (orthogonal,
 * xavier, kaiming), last_gain the output layer (PPO uses sqrt(2) and 0.01);
 * both are ignored by CRL_INIT_DEFAULT.  Zeroes the gradients.
 * CRL_E_INVALID for an unknown scheme or a gain <= 0. */
CRL_API int crl_mlp_init(crl_mlp *m, crl_init scheme, double gain, double last_gain, crl_rng *rng,
                         crl_error *err);

/* Forward.  `in` is float32 [B, in_features] (any strides; B >= 1).
 * Returns the output [B, out_features], borrowed: valid until the next
 * forward (take a reference to keep it; do not write into it: backward
 * reads it).  The cache backward needs is the one of this call.  NULL with CRL_E_DTYPE / CRL_E_SHAPE naming the module
 * and both shapes, or CRL_E_NOMEM. */
CRL_API crl_tensor *crl_mlp_forward(crl_mlp *m, const crl_tensor *in, crl_error *err);
/* Forward without touching the backward cache (target networks, acting):
 * writes into `out` (float32 [B, out_features], caller's).  Zero allocation
 * for a fixed B. */
CRL_API int crl_mlp_infer(crl_mlp *m, const crl_tensor *in, crl_tensor *out, crl_error *err);
/* Backward of the last crl_mlp_forward.  grad_out is dLoss/dOutput, float32
 * of the output's shape.  Adds into the parameter gradients.  When grad_in
 * is not NULL, *grad_in receives dLoss/dInput [B, in_features], borrowed
 * like the forward output.  CRL_E_INVALID without a forward before,
 * CRL_E_SHAPE for a grad_out of the wrong shape. */
CRL_API int crl_mlp_backward(crl_mlp *m, const crl_tensor *grad_out, crl_tensor **grad_in, crl_error *err);

/* All parameters as one contiguous float32 vector [P] (layer 0 weight
 * [out, in] row-major, layer 0 bias, layer 1 weight, ...) and their
 * gradients, same layout.  Borrowed; valid while m lives; writing into the
 * parameters is how target networks and loaders update them. */
CRL_API crl_tensor *crl_mlp_params_get(crl_mlp *m);
CRL_API crl_tensor *crl_mlp_grads_get(crl_mlp *m);
/* Set every gradient to 0 (before a backward that should not accumulate). */
CRL_API void crl_mlp_zero_grad(crl_mlp *m);
/* PyTorch's state_dict as a TensorDict of views into the parameters:
 * "0": {"weight", "bias"}, "2": {...}, ... (activations take the odd
 * indices, as nn.Sequential numbers them).  New reference. */
CRL_API crl_td *crl_mlp_state_dict(crl_mlp *m, crl_error *err);

/* A new network with m's architecture and a copy of its parameters (a
 * target network).  New reference, or NULL with err set. */
CRL_API crl_mlp *crl_mlp_clone(crl_mlp *m, const char *name, crl_error *err);

/* Write m's state dict as sections "<prefix>/..." of a checkpoint, and read
 * them back into a network of the same architecture.  Load checks every
 * key and shape (CRL_E_CORRUPT naming the file, the section and both
 * shapes; nothing is changed on error). */
CRL_API int crl_mlp_save(crl_mlp *m, crl_ckpt_writer *w, const char *prefix, crl_error *err);
CRL_API int crl_mlp_load(crl_mlp *m, const crl_ckpt_reader *r, const char *prefix, crl_error *err);

/* ---- conv encoders (TorchRL's ConvNet) and dueling heads ------------------ */

typedef enum crl_conv_kind {
    CRL_CONV2D = 0,     /* nn.Conv2d(in, out_channels, kernel_size, stride, padding), then the activation */
    CRL_MAXPOOL2D = 1   /* nn.MaxPool2d(kernel_size, stride, padding) (padding counts as -inf) */
} crl_conv_kind;

/* One encoder layer.  A fixed layout (arrays of it are passed). */
typedef struct crl_conv_layer {
    int32_t kind;            /* crl_conv_kind */
    int64_t out_channels;    /* CRL_CONV2D; ignored by a pool */
    int64_t kernel_size, stride, padding;
} crl_conv_layer;

/* A network reading rows of in_shape [C, H, W] (each row C*H*W floats,
 * channel-major as PyTorch's NCHW): the encoder layers[0..n_layers) (each
 * Conv2d followed by conv_act), flattened (SquashDims), then an MLP head
 * cells[0..n_cells) with `act` and out_features outputs.  With `dueling`
 * the head's output layer gives a value and out_features advantages, and
 * the output is value + advantage - mean(advantage) (Wang et al., 2016).
 * n_layers = 0 with in_ndim 1 gives an MLP (dueling or not); n_layers > 0,
 * n_cells = 0, out_features = 0 and no dueling give the conv stack alone
 * (its flattened feature maps are the output).  Every
 * parameter is drawn with CRL_INIT_DEFAULT (PyTorch's Conv2d and Linear
 * default).  The state dict names the encoder's entries "0.<i>.weight"
 * ([out, in, k, k], i as TorchRL's ConvNet numbers them: Conv2d and its
 * activation take an index each) and the head's "1.<2l>.weight"; a dueling
 * output layer is "value" and "advantage".  Forward, infer, backward, init,
 * clone, save and load are the crl_mlp calls (allocation-free for a fixed
 * batch size).  New reference, or NULL with CRL_E_INVALID naming the
 * layer whose window no longer fits its input ("conv layer 3: kernel 3 on
 * a 2x2 input"), CRL_E_NOMEM.  Since ABI 1.2. */
CRL_API crl_mlp *crl_convnet_new(const char *name, int in_ndim, const int64_t *in_shape,
                                 const crl_conv_layer *layers, int n_layers, crl_activation conv_act,
                                 const int64_t *cells, int n_cells, crl_activation act, int64_t out_features,
                                 bool dueling, crl_rng *rng, crl_error *err);

/* ---- networks from config ([net.ROLE] sections) --------------------------- */

/* What a loss builds when the config has no [net.ROLE] section, and what
 * such a section's unset keys fall back to: the hidden widths and
 * activation of an MLP.  Set struct_size to sizeof; members past it read
 * as zero.  Since ABI 1.2. */
typedef struct crl_net_defaults {
    uint32_t struct_size;
    const int64_t *cells;
    int n_cells;
    crl_activation act;
} crl_net_defaults;

/* The network a loss uses as `role` ("q", "actor", "critic", ...), built as
 * the [net.ROLE] section of the experiment says (type = mlp | conv, an
 * `encoder` naming a [net.NAME] conv stack that feeds it, num_cells,
 * activation, init, ...), or from `def` alone when there is no such
 * section.  opts are the loss's own options as create received them.
 * The network reads in_shape [in_ndim dims] per row (the observation per
 * env: [4] for CartPole's, [4, 84, 84] for stacked frames) and writes
 * out_features; its input is the rows flattened (crl_mlp_in_features is
 * the product of in_shape).  An MLP without encoder needs in_ndim == 1; a
 * conv encoder needs [C, H, W] and every layer to keep at least one pixel.
 * New reference (crl_mlp_unref), or NULL with CRL_E_CONFIG naming the
 * section's FILE:LINE and the key to change, CRL_E_SHAPE naming the
 * shapes, CRL_E_NOMEM.  Since ABI 1.2. */
CRL_API crl_mlp *crl_net_new(const crl_opts *opts, const char *role, const char *name, int in_ndim,
                             const int64_t *in_shape, int64_t out_features, const crl_net_defaults *def,
                             crl_rng *rng, crl_error *err);
/* True when [net.ROLE] sets `init`: crl_net_new then drew the parameters
 * with it, and the loss skips its own crl_mlp_init.  False without a
 * section or options.  Never fails.  Since ABI 1.2. */
CRL_API bool crl_net_sets_init(const crl_opts *opts, const char *role);
/* The per-row input shape of m into shape[CRL_MAX_DIMS]: [in_features] for
 * an MLP, [C, H, W] for a network with a conv encoder.  Returns the number
 * of dims.  Never fails.  Since ABI 1.2. */
CRL_API int crl_mlp_in_shape(const crl_mlp *m, int64_t *shape);
/* Feed m uint8 pixel values (0..255, as floats) instead of [0, 1] images:
 * the network divides its input by 255 first ((float)v / 255.0f, the very
 * floats ToTensorImage gives), as SB3's NatureCNN does with
 * normalize_images, so that a replay buffer can keep frames as uint8.
 * backward's grad_in is then with respect to the values given.  Clones
 * (crl_mlp_clone) keep the setting; state dicts do not hold it (a loss sets
 * it from the observation's dtype).  CRL_E_INVALID for a NULL m or, with
 * on, a network without a conv encoder.  Since ABI 1.2. */
CRL_API int crl_mlp_set_normalize_images(crl_mlp *m, bool on, crl_error *err);
/* Whether m divides its input by 255 (crl_mlp_set_normalize_images); false
 * for NULL.  Never fails.  Since ABI 1.2. */
CRL_API bool crl_mlp_normalize_images(const crl_mlp *m);

/* ---- parameter vectors ---------------------------------------------------- */

/* Target networks: dst <- (1 - tau) * dst + tau * src (TorchRL's SoftUpdate
 * with eps = 1 - tau), and dst <- src (HardUpdate).  Float32 contiguous
 * vectors of the same length (crl_mlp_params_get of two clones);
 * CRL_E_SHAPE / CRL_E_DTYPE otherwise, CRL_E_RANGE for tau outside [0, 1]. */
CRL_API int crl_params_soft_update(crl_tensor *dst, const crl_tensor *src, double tau, crl_error *err);
CRL_API int crl_params_hard_update(crl_tensor *dst, const crl_tensor *src, crl_error *err);
/* True when every element of a float tensor is finite (false for NaN or
 * +-inf, and for a non-float tensor).  A trainer checks losses and
 * gradients with it and stops cleanly. */
CRL_API bool crl_tensor_all_finite(const crl_tensor *t);

/* ---- optimizers ------------------------------------------------------------ */

typedef enum crl_optim_kind {
    CRL_OPTIM_SGD = 0,      /* momentum, dampening, weight_decay (nesterov = false) */
    CRL_OPTIM_ADAM = 1,     /* beta1, beta2, eps, weight_decay (L2, added to the gradient) */
    CRL_OPTIM_ADAMW = 2,    /* beta1, beta2, eps, weight_decay (decoupled; default 0.01) */
    CRL_OPTIM_RMSPROP = 3   /* alpha, eps, momentum, weight_decay (centered = false) */
} crl_optim_kind;

typedef struct crl_optim crl_optim;

/* Parse "sgd", "adam", "adamw", "rmsprop" (case-insensitive). */
CRL_API int crl_optim_kind_from_name(const char *name, crl_optim_kind *out, crl_error *err);
/* New optimizer with PyTorch's defaults for its kind (Adam: betas 0.9,
 * 0.999, eps 1e-8; AdamW: weight_decay 0.01; RMSprop: alpha 0.99, eps 1e-8;
 * SGD: momentum 0).  CRL_E_INVALID for lr <= 0 or not finite. */
CRL_API crl_optim *crl_optim_new(crl_optim_kind kind, double lr, crl_error *err);
/* Free the optimizer and its state, dropping its references to the
 * parameters (NULL-safe). */
CRL_API void crl_optim_free(crl_optim *o);
/* Set a hyper-parameter by its PyTorch name: "lr", "beta1", "beta2", "eps",
 * "weight_decay", "momentum", "dampening", "alpha".  CRL_E_INVALID names the
 * ones the kind has; CRL_E_RANGE for a value outside its domain. */
CRL_API int crl_optim_set(crl_optim *o, const char *name, double value, crl_error *err);
/* A hyper-parameter's value; NaN when the kind has no such name. */
CRL_API double crl_optim_get(const crl_optim *o, const char *name);
/* Add a parameter vector and its gradient (float32, contiguous, same
 * numel; the optimizer takes references).  Add every network a loss
 * trains: clipping and steps cover them all.  CRL_E_SHAPE for mismatched
 * tensors, CRL_E_EXISTS for a vector added before. */
CRL_API int crl_optim_add(crl_optim *o, crl_tensor *params, crl_tensor *grads, crl_error *err);
/* crl_optim_add of a network's parameters and gradients. */
CRL_API int crl_optim_add_mlp(crl_optim *o, crl_mlp *m, crl_error *err);
/* One update of every parameter from its gradient (PyTorch's formulas).
 * CRL_E_RUNTIME when a gradient is not finite: nothing is changed then. */
CRL_API int crl_optim_step(crl_optim *o, crl_error *err);
/* Zero every gradient the optimizer was given. */
CRL_API void crl_optim_zero_grad(crl_optim *o);
/* torch.nn.utils.clip_grad_norm_: the global L2 norm of all gradients,
 * returned; when above max_norm every gradient is scaled by
 * max_norm / (norm + 1e-6).  Returns NaN or inf (and changes nothing) when a
 * gradient is not finite, NaN (changing nothing) for a max_norm < 0 or NaN. */
CRL_API double crl_optim_clip_grad_norm(crl_optim *o, double max_norm);
/* Steps taken so far. */
CRL_API int64_t crl_optim_steps(const crl_optim *o);
/* Optimizer state (step count and moment buffers) as checkpoint sections
 * "<prefix>/...".  Load requires the same kind and parameter sizes
 * (CRL_E_CORRUPT otherwise, nothing changed). */
CRL_API int crl_optim_save(const crl_optim *o, crl_ckpt_writer *w, const char *prefix, crl_error *err);
CRL_API int crl_optim_load(crl_optim *o, const crl_ckpt_reader *r, const char *prefix, crl_error *err);

/* ---- TensorDict modules (TensorDictModule) ------------------------------- */

typedef struct crl_tdmodule crl_tdmodule;

/* Wrap a network: forward reads in_keys (NULL-terminated; several keys are
 * concatenated along the last dim, as a critic reads observation and
 * action), each float32 [B..., f_i] with the td's batch dims flattened into
 * rows, and writes out_key [B..., out_features].  Takes a reference to net.
 * CRL_E_INVALID for no in_keys or an empty key. */
CRL_API crl_tdmodule *crl_tdmodule_new(crl_mlp *net, const char *const *in_keys, const char *out_key,
                                       crl_error *err);
/* Free the module, dropping its network reference (NULL-safe). */
CRL_API void crl_tdmodule_free(crl_tdmodule *mod);
/* The wrapped network, borrowed (valid while mod lives). */
CRL_API crl_mlp *crl_tdmodule_net_get(crl_tdmodule *mod);
/* The module's in_keys (how many, and key i as given: NULL past the last
 * or for a NULL module) and out_key; borrowed, valid while mod lives.
 * Since ABI 1.2. */
CRL_API size_t crl_tdmodule_num_in_keys(const crl_tdmodule *mod);
CRL_API const char *crl_tdmodule_in_key(const crl_tdmodule *mod, size_t i);
CRL_API const char *crl_tdmodule_out_key(const crl_tdmodule *mod);
/* Run the network on td and write out_key.  An existing float32 tensor of
 * the right shape under out_key is written in place (no allocation);
 * otherwise a new one is set.  Errors name the module and key: a missing
 * key is CRL_E_NOT_FOUND listing the td's keys, a wrong shape CRL_E_SHAPE
 * ("module 'qvalue': in_key 'observation' has shape [32, 5] but the MLP
 * expects 4 input features"). */
CRL_API int crl_tdmodule_forward(crl_tdmodule *mod, crl_td *td, crl_error *err);
/* Forward without the backward cache (target networks, acting). */
CRL_API int crl_tdmodule_infer(crl_tdmodule *mod, crl_td *td, crl_error *err);
/* Backward of the last crl_tdmodule_forward: grad_out has out_key's shape.
 * When grads_in is not NULL, dLoss/d(in_key) is set in it under each
 * in_key (new tensors the td owns). */
CRL_API int crl_tdmodule_backward(crl_tdmodule *mod, const crl_tensor *grad_out, crl_td *grads_in,
                                  crl_error *err);

#ifdef __cplusplus
}
#endif
#endif
