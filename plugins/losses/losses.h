/* plugins/losses: shared pieces of the loss components (losses.so). */
#ifndef CRL_LOSSES_H
#define CRL_LOSSES_H

#include <crl/crl.h>
#include <crl/loss_backend.h>
#include <crl/value.h>
#include <crl/rnn.h>

#define LS_MAX_CELLS 8

/* The network options every loss shares (in_key, num_cells, activation). */
typedef struct ls_net_opts {
    char in_key[256];   /* copied: the options are borrowed during create only */
    int64_t cells[LS_MAX_CELLS];
    int n_cells;
    crl_activation act;
} ls_net_opts;

/* Read in_key, num_cells and activation from opts (`who` names the loss in
 * errors: "loss 'dqn'"). */
int ls_net_opts_read(const crl_opts *opts, const char *who, ls_net_opts *out, crl_error *err);

/* Feature count of observation key `key` in the env's observation
 * Composite: a float32 leaf whose last dim is the feature count.
 * CRL_E_NOT_FOUND lists the keys, CRL_E_DTYPE / CRL_E_SHAPE say what is
 * wrong. */
int ls_obs_features(const crl_spec *obs_spec, const char *key, const char *who, int64_t *out, crl_error *err);

/* The per-env shape of observation `key` (dims after the batch's: [4],
 * [C, H, W]) into shape[CRL_MAX_DIMS], its dim count into *nd; errors as
 * ls_obs_features, without the one-dim rule.  With images_u8 non-NULL a
 * uint8 image [C, H, W] is accepted too (frames kept as uint8, for a
 * network with crl_mlp_set_normalize_images) and *images_u8 says so; NULL
 * refuses any dtype but float32. */
int ls_obs_shape(const crl_spec *obs_spec, const char *key, const char *who, int *nd, int64_t *shape,
                 bool *images_u8, crl_error *err);

/* The "action" leaf of the env's action Composite (or the spec itself when
 * it is a leaf); borrowed.  CRL_E_NOT_FOUND when absent. */
const crl_spec *ls_action_leaf(const crl_spec *action_spec, const char *who, crl_error *err);

/* Delete the entries keys[] (NULL-terminated) that td has.  A policy keeps
 * only "action" in what it writes for the collector: the random frames of
 * init_random_frames have nothing else, and every item a replay buffer
 * stores must have the same keys. */
int ls_drop_keys(crl_td *td, const char *const *keys, crl_error *err);

/* The number of actions of a discrete (Categorical or OneHot) action
 * spec; CRL_E_INVALID otherwise, suggesting the loss `instead`. */
int ls_discrete_n(const crl_spec *action_spec, const char *who, const char *instead, int64_t *n, crl_error *err);

/* The network of [net.ROLE] (crl_net_new) reading `shape` [nd] per row, or without that section an MLP
 * in_features -> cells -> out_features from the shared options. */
crl_mlp *ls_net(const crl_opts *opts, const char *role, const char *name, int nd, const int64_t *shape,
                int64_t out, const ls_net_opts *no, crl_rng *rng, crl_error *err);
/* ls_net for a vector of `in` features. */
crl_mlp *ls_mlp(const crl_opts *opts, const char *role, const char *name, int64_t in, int64_t out,
                const ls_net_opts *no, crl_rng *rng, crl_error *err);

/* A float tensor of the batch (any float dtype) read as float rows:
 * `key` must hold rows * width values; *data gets a contiguous float32
 * copy or the tensor's own data (free *owned with crl_tensor_unref).
 * CRL_E_NOT_FOUND names the missing key, CRL_E_SHAPE both sizes. */
int ls_batch_f32(crl_td *batch, const char *key, int64_t rows, int64_t width, const char *who, const float **data,
                 crl_tensor **owned, crl_error *err);
/* The batch's "action" as action indices idx[rows] (an index per row, or
 * a one-hot of n per row).  CRL_E_NOT_FOUND, CRL_E_SHAPE, CRL_E_RANGE. */
int ls_action_index(crl_td *batch, int64_t rows, int64_t n, const char *who, int64_t *idx, crl_error *err);
/* Rows of the batch (its batch dims multiplied). */
int64_t ls_rows(const crl_td *td);
/* Set a float32 scalar entry in losses. */
int ls_set_scalar(crl_td *losses, const char *key, double v, crl_error *err);
/* Set a float32 [rows] tensor with the batch's dims (td_error). */
int ls_set_rows(crl_td *batch, const char *key, const float *v, crl_error *err);
/* ls_set_scalar and ls_set_rows writing into the entry already there when it is a float32 tensor of that
 * shape (no allocation in the steady state), else setting a new one. */
int ls_put_scalar(crl_td *losses, const char *key, double v, crl_error *err);
int ls_put_rows(crl_td *batch, const char *key, const float *v, crl_error *err);

/* Save / load a small array of doubles as section "<prefix>/<name>", each
 * as 8 little-endian bytes.  Load fails with CRL_E_CORRUPT unless the
 * section holds exactly n of them. */
int ls_save_doubles(crl_ckpt_writer *w, const char *prefix, const char *name, const double *v, size_t n,
                    crl_error *err);
int ls_load_doubles(const crl_ckpt_reader *r, const char *prefix, const char *name, double *v, size_t n,
                    crl_error *err);
/* Field `field` (value v) of section "<prefix>/<name>" must be a count: a
 * whole number in [0, 2^53].  CRL_E_CORRUPT naming the file, section and
 * field otherwise. */
int ls_check_count(const crl_ckpt_reader *r, const char *prefix, const char *name, const char *field, double v,
                   crl_error *err);
/* The same for what `ok` says is wrong with the field (`want` says what is expected). */
int ls_check_field(const crl_ckpt_reader *r, const char *prefix, const char *name, const char *field, double v,
                   bool ok, const char *want, crl_error *err);
/* A random stream as section "<prefix>/rng" (crl_ckpt_put_rng); load fails
 * with CRL_E_CORRUPT for a wrong size or a state no stream can be in. */
int ls_save_rng(crl_ckpt_writer *w, const char *prefix, const crl_rng *rng, crl_error *err);
int ls_load_rng(const crl_ckpt_reader *r, const char *prefix, crl_rng *rng, crl_error *err);
/* How many explore_step calls of `frames` frames replay an annealing over
 * `steps` frames bitwise: `calls`, or fewer once the schedule has surely
 * reached its end (further calls change nothing there), so a checkpoint's
 * counts cannot make a load loop for long. */
int64_t ls_anneal_calls(int64_t calls, int64_t frames, int64_t steps);
/* crl_mlp_save / load under "<prefix>/<name>". */
int ls_mlp_save(crl_mlp *m, crl_ckpt_writer *w, const char *prefix, const char *name, crl_error *err);
int ls_mlp_load(crl_mlp *m, const crl_ckpt_reader *r, const char *prefix, const char *name, crl_error *err);

/* The batch's "next.terminated" as float rows, or "next.done" when the
 * batch has no "next.terminated" (TorchRL's fallback); as ls_batch_f32.
 * CRL_E_NOT_FOUND names both keys when neither is there. */
int ls_batch_terminal(crl_td *batch, int64_t rows, const char *who, const float **data, crl_tensor **owned,
                      crl_error *err);
/* Set a float32 [n] tensor v under key (into a loss output of batch []). */
int ls_set_vec(crl_td *td, const char *key, const float *v, int64_t n, crl_error *err);
/* create_from_modules: CRL_E_CONFIG for the first of keys[] (NULL-terminated)
 * the options set, since the user's modules decide it. */
int ls_reject_set(const crl_opts *opts, const char *who, const char *const *keys, crl_error *err);
/* The one key a user's module reads (into *key, borrowed); `what` names
 * the module ("actor") in the CRL_E_INVALID otherwise. */
int ls_module_key(crl_tdmodule *m, const char *who, const char *what, const char **key, crl_error *err);
/* The network options every loss's create_from_modules refuses. */
extern const char *const ls_net_keys[];

/* The env carries what recurrent module m reads (a recurrent [net.ROLE] of hidden_size `hidden`): its state
 * keys as float32 [..., 1, hidden] (a TensorDictPrimer) and is_init (an InitTracker), checked on the
 * observation spec.  CRL_E_CONFIG names the transform to add. */
int ls_rnn_env_check(const crl_spec *obs_spec, const crl_rnn_module *m, const char *who, const char *role,
                     int64_t hidden, crl_error *err);

/* Huber (smooth L1, beta = 1) or squared error of d = pred - target, and
 * its derivative. */
double ls_distance(bool smooth_l1, double d, double *grad);

extern const crl_loss_ops ls_dqn_ops;
extern const crl_option ls_dqn_options[];
extern const crl_loss_ops ls_ppo_ops;
extern const crl_option ls_ppo_options[];
extern const crl_loss_ops ls_a2c_ops;
extern const crl_option ls_a2c_options[];
extern const crl_loss_ops ls_ddpg_ops;
extern const crl_option ls_ddpg_options[];
extern const crl_loss_ops ls_td3_ops;
extern const crl_option ls_td3_options[];
extern const crl_loss_ops ls_sac_ops;
extern const crl_option ls_sac_options[];
extern const crl_loss_ops ls_dsac_ops;
extern const crl_option ls_dsac_options[];
extern const crl_loss_ops ls_reinforce_ops;
extern const crl_option ls_reinforce_options[];

#endif
