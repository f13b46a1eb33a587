/* Internals of the gym plugin shared by plugin.c, spaces.c and data.c. */
#ifndef CRL_GYM_H
#define CRL_GYM_H

#include "pyembed.h"

#define GYM_MAX_DEPTH 16 /* nesting of Dict/Tuple observation spaces */

typedef enum gym_kind {
    GYM_BOX = 0,
    GYM_DISCRETE,
    GYM_MULTI_DISCRETE,
    GYM_MULTI_BINARY,
    GYM_INFO
} gym_kind;

/* One observation, action or info leaf: what the space (or the first
 * reset's info) says, and where its values go. */
typedef struct gym_leaf {
    char *key;                 /* crl key, dotted for nested Dict/Tuple entries */
    gym_kind kind;
    crl_dtype dt;              /* the buffer's dtype */
    int ndim;                  /* the buffer's dims after [num] */
    int64_t shape[CRL_MAX_DIMS];
    int vndim;                 /* the value's shape, as the space (or info) gives it */
    Py_ssize_t vshape[CRL_MAX_DIMS];
    int64_t numel;             /* per env */
    size_t row_bytes;          /* per env */
    PyObject *path[GYM_MAX_DEPTH]; /* item keys from the root value (Dict keys, Tuple indices) */
    int depth;
    PyObject *np_dtype;        /* the buffer's numpy dtype name, for the cast fallback */
    PyObject *space_dtype;     /* the space's numpy dtype name */
    bool widened;              /* the space's dtype has no crl dtype: every value is cast */
    int64_t n;                 /* Discrete: categories; MultiBinary: last dim */
    int64_t *nvec;             /* MultiDiscrete: nvec of the last dim (k entries) */
    size_t k;
    int64_t *start;            /* Discrete: 1, MultiDiscrete: numel entries; NULL: all 0 */
    double *low, *high;        /* Box: numel each; NULL: Unbounded */
    bool warned;               /* the cast fallback was announced */
    uint8_t *buf;              /* bound: the [num, ...] buffer */
    int64_t oh_width;          /* MultiDiscrete action one-hot: int64 values per buffer row (sum of nvec); the
                                * env's value (row_bytes) is then decoded into staging; 0 otherwise */
} gym_leaf;

/* One Python env of the batch and what is called on it (owned refs). */
typedef struct gym_one {
    PyObject *env, *step, *reset, *seed, *render;
    bool reset_seed;           /* reset() takes seed= */
    bool started;              /* reset at least once */
    bool ended;                /* terminated or truncated and not reset since: not stepped */
    PyObject *action;          /* numpy array over this env's action row (or staging); NULL for Discrete */
    uint8_t *staging;          /* MultiDiscrete with start: start + index, what the env gets */
} gym_one;

typedef struct gym_env {
    char *id;                  /* for messages: the id, or the entry point */
    int64_t num;
    gym_one *envs;
    gym_leaf *obs;
    size_t nobs;
    gym_leaf *info;
    size_t ninfo;
    gym_leaf action;           /* a single action leaf; unused (zeroed) with a Dict / Tuple action space */
    gym_leaf *acts;            /* Dict / Tuple action space: its leaves (action.KEY), else NULL */
    size_t nacts;
    PyObject *composer;        /* Dict / Tuple action space: support.ActionComposer, else NULL */
    bool onehot;               /* Discrete action as OneHot, MultiDiscrete as MultiOneHot */
    bool tuple2;               /* 2-Tuple observation space (see split_reset) */
    int32_t render_h, render_w;
    int64_t max_steps;
    PyObject *support;         /* the _crl_gym_1 module */
    PyObject *cast;            /* support.cast */
    PyObject *seed_kw;         /* "seed" */
    PyObject *timelimit_key;   /* "TimeLimit.truncated" */
    PyObject *empty;           /* () */
    bool bound;
    bool warned_seed;
    float *reward;             /* [num, 1] */
    uint8_t *terminated, *truncated;
} gym_env;

/* The host handle for logging (set in init, cleared in fini). */
extern crl_host *gym_host;

/* spaces.c: read the support module's leaf tuples into leaves (GIL
 * held); free a leaf's memory (GIL held: it drops Python refs). */
int gym_leaves_from_python(PyObject *list, gym_leaf **out, size_t *n, const char *what, crl_error *err);
void gym_leaf_clear(gym_leaf *l);
/* The leaf's spec with batch [num] (new reference). */
crl_spec *gym_leaf_spec(const gym_leaf *l, int64_t num, bool onehot, crl_error *err);
/* Composite [num] of leaves (new reference). */
crl_spec *gym_composite(const gym_leaf *leaves, size_t n, int64_t num, bool onehot, crl_error *err);

/* data.c (GIL held): copy env i's value of a leaf into its buffer row;
 * navigate from root (the observation or info) first.  `what` names the
 * call ("step", "reset") in messages. */
int gym_write_leaf(gym_env *e, gym_leaf *l, int64_t i, PyObject *root, const char *what, crl_error *err);
/* Zero env i's row (an info key missing at a step). */
void gym_zero_leaf(gym_leaf *l, int64_t i);
/* A frame from render() into rgb [h, w, 3]. */
int gym_copy_frame(gym_env *e, int64_t i, PyObject *frame, uint8_t *rgb, crl_error *err);
/* The Python object env i's step gets: an int (Discrete), else the bound
 * numpy view (staging filled first); with a Dict / Tuple action space, the
 * dict / tuple the composer builds.  New reference. */
PyObject *gym_action_arg(gym_env *e, int64_t i);

#endif
