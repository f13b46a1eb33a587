/* crl plugin SDK: the env backend ABI.
 *
 * A backend makes a batch of `num` envs at once and declares their specs.
 * The host then allocates every buffer once, structure-of-arrays and
 * batch-first, from those specs, and hands them to the backend in `bind`.
 * `reset` and `step` read and write only those buffers and never allocate:
 * the host's TensorDicts are views over them (gym3's libenv idea, with reset
 * masks, terminated/truncated, elementwise bounds, per-env seeds, render and
 * an error channel).
 *
 * The buffer TensorDict given to `bind` has batch shape [num] and holds, at
 * its root, one tensor per leaf of the observation, action, reward, done,
 * state and info specs, under the same (dotted) keys:
 *   observation leaves   written by reset (reset envs only) and step
 *   action leaves        read by step
 *   "reward"             written by step
 *   "terminated"         written by step (and cleared by reset)
 *   "truncated"          written by step when the backend knows of a time
 *                        limit of its own; the host also truncates at
 *                        max_episode_steps
 *   state leaves         written by reset and step; read by reset when
 *                        from_state is true
 *   info leaves          written by step (and reset)
 * The host computes "done" = terminated | truncated itself, and clears the
 * flags of reset envs itself too.  A backend writes into these tensors and
 * never replaces one in the TensorDict: the host checks after every reset
 * and step and reports a replaced buffer as an error naming the key.
 * `step` always steps every env, including envs whose episode ended (with
 * frame_skip, or until the host resets them): their outputs are discarded
 * until the next reset, so stepping past the end must be harmless. */
#ifndef CRL_ENV_BACKEND_H
#define CRL_ENV_BACKEND_H

#include <crl/spec.h>
#include <crl/options.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What `make` declares.  Every spec is a Composite with batch shape [num];
 * the host takes ownership of the references stored here (it unrefs them),
 * also when make fails. */
typedef struct crl_env_specs {
    uint32_t struct_size;      /* set by the host: sizeof(crl_env_specs) it knows */
    uint32_t reserved;
    crl_spec *observation;     /* required: e.g. "observation" [num, 4] float32 */
    crl_spec *action;          /* required: e.g. "action" [num] int64 Categorical */
    crl_spec *reward;          /* required: "reward" [num, 1] */
    crl_spec *done;            /* required: "done", "terminated", "truncated" [num, 1] bool */
    crl_spec *state;           /* may stay NULL: the full simulator state */
    crl_spec *info;            /* may stay NULL: extra per-step outputs */
    int64_t max_episode_steps; /* 0: none; else the host sets truncated at this count */
    int32_t render_height;     /* 0: render is not supported */
    int32_t render_width;
} crl_env_specs;

typedef struct crl_env_ops {
    uint32_t struct_size;      /* sizeof(crl_env_ops) */
    uint32_t reserved;

    /* The env ids this backend offers: a NULL-terminated static array. */
    const char *const *(*list)(void);

    /* Make `num` envs of `id` with the backend's validated options (the
     * [env] section as declared by the component's options table).  Fill
     * `specs` and set *env.  An unknown id is CRL_E_NOT_FOUND naming close
     * matches. */
    int (*make)(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                crl_error *err);

    /* Receive the buffers (borrowed; they stay valid until close).  Called
     * once after make, before any reset. */
    int (*bind)(void *env, crl_td *buffers, crl_error *err);

    /* Reset the envs whose mask entry is true (mask NULL: all).  With
     * `seeds` (NULL: keep each env's random stream going), env i's stream
     * restarts from seeds[i] first.  With from_state, env i starts from the
     * state currently in the state buffers instead of a random draw
     * (CRL_E_UNSUPPORTED when the backend has no state spec).  Writes the
     * reset envs' observations (and state, info) and clears their
     * terminated/truncated flags; other envs' buffers are left untouched. */
    int (*reset)(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err);

    /* Step every env with the action buffers. */
    int (*step)(void *env, crl_error *err);

    /* Draw env i into `rgb`, a row-major [render_height, render_width, 3]
     * uint8 frame.  May be NULL when render_height is 0. */
    int (*render)(void *env, int64_t i, uint8_t *rgb, crl_error *err);

    /* Free everything make allocated.  NULL-safe on env. */
    void (*close)(void *env);

    /* Optional, all three or none: the backend's own async mode (EnvPool's
     * send/recv), which crl_env_async_reset / crl_env_send / crl_env_recv
     * drive when [env] batch_size < num_envs with executor = inline (make
     * reads batch_size from its options and makes its batch async).  Without
     * them such a config is refused and async needs executor = threads.
     * async_reset drops whatever is in flight and starts every env (seeds as
     * for reset; NULL: keep each env's stream); send hands the k envs ids[]
     * their action rows, already in the action buffers, to step, or, where
     * ended[m] is true (the env's episode ended), to reset with the action
     * ignored (EnvPool's auto-reset); recv waits for the next `batch` envs to
     * finish a reset or step, writes their output rows (observation leaves,
     * "reward", "terminated", "truncated"; reward 0 and flags false for a
     * reset) and their ids into ids[0..batch).  An env's rows belong to the
     * backend from send (or async_reset) until a recv names it.  Errors as
     * for step; the host then stops the env until the next async_reset. */
    int (*async_reset)(void *env, const uint64_t *seeds, crl_error *err);
    int (*send)(void *env, const int64_t *ids, const bool *ended, int64_t k, crl_error *err);
    int (*recv)(void *env, int64_t batch, int64_t *ids, crl_error *err);
} crl_env_ops;

/* The done Composite every backend declares: "done", "terminated" and
 * "truncated", each Categorical(2) bool [num, 1], as TorchRL declares them.
 * New reference, or NULL with err set. */
CRL_API crl_spec *crl_env_backend_done_spec(int64_t num, crl_error *err);

/* For bind: the data of buffer `key` in `buffers`, checked to be a
 * contiguous cpu tensor of dtype dt and shape [num] (dim 0) or [num, dim].
 * Borrowed (valid until close).  `who` names the backend and env in
 * messages ("classic: CartPole-v1").  When *rc is already an error it
 * returns NULL at once, so a bind can fetch every buffer and test rc once;
 * otherwise on a missing buffer (CRL_E_NOT_FOUND), wrong dtype
 * (CRL_E_DTYPE), shape (CRL_E_SHAPE) or layout (CRL_E_INVALID) it sets
 * *rc and err and returns NULL. */
CRL_API void *crl_env_backend_buffer(crl_td *buffers, const char *who, const char *key, crl_dtype dt, int64_t num,
                                     int64_t dim, int *rc, crl_error *err);

#ifdef __cplusplus
}
#endif
#endif
