/* core/nn internals shared by the MLP, its init, I/O, TensorDict modules and actors. */
#ifndef CRL_NN_PRIVATE_H
#define CRL_NN_PRIVATE_H

#include "crl-private.h"
#include "tensor-private.h"
#include <crl/nn.h>
#include <crl/actor.h>
#include <crl/distributions.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct crl__layer {
    int64_t in, out;
    size_t w_off, b_off;   /* into the flat parameter vector */
} crl__layer;

/* One stage of a conv encoder: Conv2d (followed by the encoder's activation) or MaxPool2d, on rows
 * [cin, hin, win] giving [cout, hout, wout] (a pool keeps the channels). */
enum { CRL__STAGE_CONV = 0, CRL__STAGE_POOL = 1 };
typedef struct crl__stage {
    int kind;
    int64_t cin, hin, win, cout, hout, wout, k, stride, pad;
    size_t w_off, b_off;   /* conv: weight [cout, cin, k, k] and bias [cout] in the flat parameters */
    int seq;               /* its index in TorchRL's ConvNet (nn.Sequential numbers activations too) */
} crl__stage;

struct crl_mlp {
    int refs;
    char *name;
    /* The per-row input shape ([in_features] without an encoder, [C, H, W] with one). */
    int in_ndim;
    int64_t in_shape[CRL_MAX_DIMS];
    int64_t in_features, out_features;
    /* The conv encoder in front of the layers (n_stages = 0: none), as given to crl_convnet_new. */
    int n_stages;
    crl__stage *stages;
    crl_conv_layer *spec;
    crl_activation conv_act;
    int64_t enc_max;           /* widest row among the encoder's input and stage outputs */
    bool dueling;              /* the last layer gives [value, advantages] (out_features + 1) */
    bool normalize_images;     /* the input rows are uint8 pixel values: divided by 255 first (SB3's) */
    crl_tensor *col;           /* im2col columns of one image (the largest stage's), shared by all stages */
    crl_tensor **sacts;        /* [n_stages + 1]: the input rows, then each stage's output (the cache) */
    int32_t **pidx;            /* per stage: a pool's argmax per output value (the cache; NULL for a conv) */
    crl_tensor *eg[2], *ie[2]; /* encoder rows: backward's gradients, infer's activations (ping-pong) */
    crl_tensor *dq;            /* dueling: the forward's output [B, out_features] */
    int n_layers;
    crl__layer *layers;
    crl_activation act;
    bool activate_last;
    int64_t max_width;
    crl_tensor *params, *grads;   /* float32 [P] */
    /* Backward cache: acts[0] is a copy of the input, acts[l + 1] layer l's
     * output; g[0..1] ping-pong gradient rows; gin the input gradient.  All
     * sized for `batch` rows and kept until the batch size changes. */
    int64_t batch;
    bool have_forward;
    crl_tensor **acts;
    crl_tensor *g[2], *gin;
    /* crl_mlp_infer's own ping-pong rows, so it never spoils the cache. */
    int64_t infer_batch;
    crl_tensor *ib[2];
    float **outs;   /* per-layer output pointers, scratch of one call */
};

static inline bool crl__layer_activated(const crl_mlp *m, int l)
{
    return l < m->n_layers - 1 || m->activate_last;
}

/* The [net.*] sections of an experiment, checked against their types (nn_config.c); a loss's options
 * carry them (crl__opts_set_nets) to crl_net_new.  NULL with CRL_E_CONFIG naming FILE:LINE. */
typedef struct crl__nets crl__nets;
struct crl_config;
CRL_INTERNAL crl__nets *crl__nets_new(const struct crl_config *cfg, crl_error *err);
CRL_INTERNAL void crl__nets_free(crl__nets *n);
/* After the loss was built: CRL_E_CONFIG naming the first section no network was built from (`who`
 * names the loss). */
CRL_INTERNAL int crl__nets_check_used(const crl__nets *n, const char *who, crl_error *err);

/* Encoder kernels (nn_conv.c).  Sizes per row of a stage; the columns one image needs. */
CRL_INTERNAL int64_t crl__stage_in_size(const crl__stage *s);
CRL_INTERNAL int64_t crl__stage_out_size(const crl__stage *s);
CRL_INTERNAL int64_t crl__stage_col_size(const crl__stage *s);
/* y[B, cout*hout*wout] = conv(x[B, cin*hin*win]) + b; col is scratch of crl__stage_col_size floats. */
CRL_INTERNAL void crl__conv_forward(const crl__stage *s, const float *x, int64_t B, const float *W, const float *b,
                                    float *y, float *col);
/* dW += , db += ; dx = (not accumulated) when not NULL. */
CRL_INTERNAL void crl__conv_backward(const crl__stage *s, const float *x, const float *dy, int64_t B, const float *W,
                                     float *dW, float *db, float *dx, float *col);
/* MaxPool2d; arg (may be NULL) gets each output's argmax within its input plane. */
CRL_INTERNAL void crl__pool_forward(const crl__stage *s, const float *x, int64_t B, float *y, int32_t *arg);
CRL_INTERNAL void crl__pool_backward(const crl__stage *s, const float *dy, int64_t B, const int32_t *arg, float *dx);
/* Dueling: q[B, n] = v + a - mean(a) of va[B, 1 + n] = [v, a]; and its backward (dva set). */
CRL_INTERNAL void crl__dueling_forward(const float *va, int64_t B, int64_t n, float *q);
CRL_INTERNAL void crl__dueling_backward(const float *dq, int64_t B, int64_t n, float *dva);

/* y[B, out] = x[B, in] W^T + b, W [out, in] row-major (rows contiguous). */
/* crl_optim_load in two steps, so a caller can check several optimizers' sections before it changes any
 * (the trainer): check validates everything (CRL_E_CORRUPT as crl_optim_load), apply then copies the
 * state and cannot fail. */
CRL_INTERNAL int crl__optim_check_load(const crl_optim *o, const crl_ckpt_reader *r, const char *prefix,
                                       crl_error *err);
CRL_INTERNAL void crl__optim_apply_load(crl_optim *o, const crl_ckpt_reader *r, const char *prefix);

/* A module's checkpoint sections from its state dict sd (the parameter views; taken over, unref'd here).  sd is
 * NULL when building it failed, e saying why (CRL_E_NOMEM).  Load checks that the sections under prefix hold
 * exactly sd's keys as float32 tensors of sd's shapes before it writes any (a bad file changes nothing:
 * CRL_E_CORRUPT naming the file, section and module "KIND module 'NAME'", KIND omitted when NULL). */
CRL_INTERNAL int crl__state_dict_save(crl_td *sd, const crl_error *e, crl_ckpt_writer *w, const char *prefix,
                                      crl_error *err);
CRL_INTERNAL int crl__state_dict_load(crl_td *sd, const crl_error *e, const crl_ckpt_reader *r, const char *prefix,
                                      const char *kind, const char *name, crl_error *err);

CRL_INTERNAL void crl__linear_forward(const float *x, int64_t B, const float *W, const float *b,
                                      int64_t in, int64_t out, float *y);
/* dW += dy^T x, db += column sums of dy, and dx = dy W when dx is not NULL. */
CRL_INTERNAL void crl__linear_backward(const float *x, const float *dy, int64_t B, const float *W,
                                       int64_t in, int64_t out, float *dW, float *db, float *dx);
/* In place on a layer's output; the backward reads the output, not the input. */
CRL_INTERNAL void crl__act_forward(crl_activation a, float *y, size_t n);
CRL_INTERNAL void crl__act_backward(crl_activation a, const float *y, float *g, size_t n);

/* Index of name in names[0..n) (ASCII case-insensitive), or -1. */
CRL_INTERNAL int crl__name_index(const char *const *names, size_t n, const char *name);

/* Draw a layer's weight and bias. */
CRL_INTERNAL void crl__init_layer(crl_init scheme, double gain, int64_t in, int64_t out, float *W, float *b,
                                  crl_rng *rng);

/* A contiguous float32 [rows, cols] buffer of *t, recreated only when the
 * row count changes (the steady state allocates nothing). */
CRL_INTERNAL int crl__rows_buffer(crl_tensor **t, int64_t rows, int64_t cols, crl_error *err);
/* Copy a float32 [B, f] tensor of any strides into contiguous rows, and
 * back; no allocation. */
CRL_INTERNAL void crl__rows_in(float *dst, const crl_tensor *src);
CRL_INTERNAL void crl__rows_out(crl_tensor *dst, const float *src);
/* Check that t is float32 [B, features] (B >= 1) for module `name`. */
CRL_INTERNAL int crl__check_rows(const char *name, const char *what, const crl_tensor *t, int64_t features,
                                 crl_error *err);

/* TensorDict rows: a key's tensor [batch..., cols] seen as rows = the
 * product of td's batch dims.  read copies (casting to float) into
 * dst[rows, stride] at column col0; write sets key from src[rows, cols],
 * in place when a contiguous float32 tensor of that shape is there.  Errors
 * name module `who` and the key. */
CRL_INTERNAL int crl__td_read_rows(const char *who, const crl_td *td, const crl_td_key *k, int64_t cols,
                                   float *dst, int64_t stride, int64_t col0, crl_error *err);
/* Write src [rows] as k with the td's batch shape (no feature dim), in place when it fits. */
CRL_INTERNAL int crl__td_write_batch(const char *who, crl_td *td, const crl_td_key *k, const float *src,
                                     crl_error *err);
CRL_INTERNAL int crl__td_write_rows(const char *who, crl_td *td, const crl_td_key *k, const float *src,
                                    int64_t cols, crl_error *err);
/* Rows of td (product of the batch dims, 1 for none). */
CRL_INTERNAL int64_t crl__td_rows(const crl_td *td);
/* A key list's handles; NULL with err for an empty list or key. */
CRL_INTERNAL crl_td_key **crl__keys_new(const char *who, const char *const *keys, size_t *n, crl_error *err);
CRL_INTERNAL void crl__keys_free(crl_td_key **k, size_t n);

/* A TensorDict module's network run on td without writing out_key:
 * the output rows [rows, out] (borrowed), with the backward cache when
 * `cache`, else through crl_mlp_infer. */
CRL_INTERNAL crl_tensor *crl__tdmodule_run(crl_tdmodule *mod, const crl_td *td, bool cache, crl_error *err);

/* An actor's action space, from the env's action spec. */
typedef struct crl__action_space {
    crl_spec_kind kind;   /* CATEGORICAL, ONEHOT, BOUNDED or UNBOUNDED */
    crl_dtype dtype;
    int64_t n;            /* classes (discrete) */
    int64_t d;            /* dims (continuous) */
    float *low, *high;    /* [d] for BOUNDED, else NULL */
} crl__action_space;

/* What every actor holds: its TensorDict module, action space and the
 * "action" key.  init checks the spec (`discrete` selects the kinds) and
 * that the network gives `per` outputs per action (discrete) or action dim
 * (continuous); `what` and `why` word the error ("a TanhNormal", "loc and
 * scale per action dim"). */
typedef struct crl__actor_base {
    crl_tdmodule *mod;
    crl__action_space space;
    crl_td_key *k_action;
} crl__actor_base;

CRL_INTERNAL int crl__actor_base_init(crl__actor_base *b, crl_mlp *net, const char *const *in_keys,
                                      const struct crl_spec *spec, bool discrete, int64_t per, const char *out_key,
                                      const char *what, const char *why, crl_error *err);
CRL_INTERNAL void crl__actor_base_clear(crl__actor_base *b);

/* A linear schedule (EGreedyModule's epsilon, the noise modules' scale):
 * from init to end over `steps` frames, then constant. */
typedef struct crl__anneal {
    double init, end, value;
    int64_t steps;   /* 0: not set */
} crl__anneal;

/* CRL_E_RANGE (naming `what`) unless init and end are in [lo, hi] and steps >= 1. */
CRL_INTERNAL int crl__anneal_set(crl__anneal *an, const char *what, double init, double end, int64_t steps,
                                 double lo, double hi, crl_error *err);
CRL_INTERNAL void crl__anneal_step(crl__anneal *an, int64_t frames);

/* `discrete` selects which kinds are accepted; errors name module who. */
CRL_INTERNAL int crl__action_space_init(crl__action_space *s, const char *who, const struct crl_spec *spec,
                                        bool discrete, crl_error *err);
CRL_INTERNAL void crl__action_space_clear(crl__action_space *s);
/* Write class indices [rows] as the spec encodes them (index or one-hot). */
CRL_INTERNAL int crl__write_classes(const char *who, crl_td *td, const crl_td_key *k, const crl__action_space *s,
                                    const int64_t *idx, crl_error *err);
/* Read them back (one-hot: the set position); CRL_E_RANGE outside [0, n). */
CRL_INTERNAL int crl__read_classes(const char *who, const crl_td *td, const crl_td_key *k, const crl__action_space *s,
                                   int64_t *idx, crl_error *err);

/* The states of the last forward (infer: of the last crl_rnn_infer) time-major, [(T+1), B, H]: slot 0
 * the initial state, slot t+1 the state after step t; h, or c (LSTM) when `cell`.  NULL before any run. */
struct crl_rnn;
CRL_INTERNAL const float *crl__rnn_states(const struct crl_rnn *r, bool infer, bool cell);

#endif
