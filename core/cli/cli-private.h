/* Shared pieces of the `crl` command. */
#ifndef CRL_CLI_PRIVATE_H
#define CRL_CLI_PRIVATE_H

#include <glib.h>
#include <stdio.h>
#include <crl/host.h>
#include <crl/trainer.h>
#include <crl/env_backend.h>

#include "cli-schema.h"

/* Exit codes: 0 ok, 1 runtime failure, 2 bad usage or bad config. */
enum { CRL_EXIT_OK = 0, CRL_EXIT_RUNTIME = 1, CRL_EXIT_USAGE = 2 };

/* What a subcommand works on: the layered config, the plugin host and crl's schema. */
typedef struct crl_cli_ctx {
    crl_config *cfg;
    crl_host *host;
    crl_schema *schema;  /* crl__cli_schema_new over host, rebuilt after the plugins are loaded */
    char **files;      /* experiment files given on the command line */
    char **overrides;  /* section.key=value arguments */
} crl_cli_ctx;

enum {
    CRL_CLI_LOAD_PLUGINS = 1u << 0,  /* load what [plugins] asks for */
    CRL_CLI_VALIDATE = 1u << 1,      /* strict validation against crl's schema */
    CRL_CLI_REQUIRE_FILE = 1u << 2,  /* at least one experiment file is required */
    CRL_CLI_TOLERATE_PLUGIN_FAILURES = 1u << 3, /* a plugin that fails to load is not fatal */
    CRL_CLI_RESCAN = 1u << 4                   /* scan every plugin again, ignoring the registry cache */
};

/* Split positional arguments into experiment files and key=value overrides,
 * then: system and user config, files in order, host, overrides (resolved
 * with the schema before any plugin is loaded), plugins, the schema again,
 * validation.  On failure err is set and the context is torn down. */
int crl__cli_setup(crl_cli_ctx *ctx, int nargs, char **args, unsigned flags, crl_error *err);
void crl__cli_teardown(crl_cli_ctx *ctx);

/* Register the plugins linked into the program (builtins.c; e.g. classic
 * when configured with it), before the configured ones are loaded. */
int crl__cli_load_builtins(crl_host *host, crl_error *err);

/* Map an error to the exit code: 2 for usage/config/not-found, 1 otherwise. */
int crl__cli_exit_code(const crl_error *err);
/* "crl CMD: message" on stderr. */
void crl__cli_print_error(const char *cmd, const crl_error *err);

/* Escape s as a JSON string (with quotes) into f. */
void crl__cli_json_string(FILE *f, const char *s);

/* An option type's name as `crl plugins --verbose` and the man pages print it ("bool", "int", ...). */
const char *crl__cli_opt_type_name(int32_t type);

/* The command table (main.c), in the order `crl --help` lists it. */
typedef struct crl_cli_command {
    const char *name;
    int (*run)(int, char **);
    const char *summary;
} crl_cli_command;
const crl_cli_command *crl__cli_commands(size_t *n);
/* `crl --help`: the commands and their summaries. */
void crl__cli_usage(FILE *f);
/* crl help [--man PAGE | --complete WHAT] (cmd_help.c): man pages and completion lists made from the
 * command table, each command's --help and the config schema. */
int crl__cmd_help(int argc, char **argv);

/* Subcommands: argc/argv start at the subcommand name. */
int crl__cmd_version(int argc, char **argv);
int crl__cmd_plugins(int argc, char **argv);
int crl__cmd_config(int argc, char **argv);
int crl__cmd_bench(int argc, char **argv);
int crl__cmd_envs(int argc, char **argv);
int crl__cmd_inspect(int argc, char **argv);
int crl__cmd_rollout(int argc, char **argv);
int crl__cmd_collect(int argc, char **argv);
/* The loggers of crl run besides metrics.csv, as [train] loggers names them (run_loggers.c):
 * metrics.jsonl (rewound to resume_frames and appended to on a resume; resume_frames < 0: a new run) and
 * a TensorBoard event file (a new one per process).  Errors: CRL_E_CONFIG for an unknown logger naming
 * FILE:LINE, CRL_E_UNSUPPORTED for tensorboard in a crl built without protobuf-c, CRL_E_IO naming the
 * file.  write takes the rows metrics.csv takes (NULL l: nothing). */
typedef struct crl__run_loggers crl__run_loggers;
/* The names only, before any work (what open checks first). */
int crl__run_loggers_check(const crl_config *cfg, crl_error *err);
int crl__run_loggers_open(const crl_config *cfg, const char *dir, int64_t resume_frames, crl__run_loggers **out,
                          crl_error *err);
struct crl_train_stats;
int crl__run_loggers_write(crl__run_loggers *l, const struct crl_train_stats *s, crl_error *err);
int crl__run_loggers_close(crl__run_loggers *l, crl_error *err);

/* What a --resume keeps of a metrics file's rows (metrics.csv after its header, metrics.jsonl): each
 * complete row whose frame count, as frames_of reads it (-1: not a row), is at most `frames`, less a
 * second row at the frame count of the row before it (the end-of-run evaluation, which the resumed run
 * goes on past).  Kept rows are appended to keep; the rows left out are counted in dropped (past the
 * checkpoint, or cut short) and end_evals, and report_rewind says them on stderr, naming path. */
void crl__metrics_rows_keep(const char *rows, int64_t frames, long long (*frames_of)(const char *row), GString *keep,
                            size_t *dropped, size_t *end_evals);
void crl__metrics_report_rewind(const char *path, int64_t frames, size_t dropped, size_t end_evals);

/* TensorBoard event files (tb_events.c): events.out.tfevents.TIME.HOST in dir, opened with the
 * file_version event; scalars as one Event (step, wall_time, Summary of simple_values).  Errors:
 * CRL_E_IO naming the file. */
typedef struct crl__tb_writer crl__tb_writer;
crl__tb_writer *crl__tb_open(const char *dir, double wall_time, crl_error *err);
const char *crl__tb_path(const crl__tb_writer *w);
int crl__tb_scalars(crl__tb_writer *w, double wall_time, int64_t step, const char *const *tags, const double *values,
                    size_t n, crl_error *err);
int crl__tb_close(crl__tb_writer *w, crl_error *err);
/* CRC-32C (Castagnoli), as TFRecord frames use it. */
uint32_t crl__crc32c(const void *data, size_t len);

/* MP4 videos (video.c, when built with libavcodec/libavformat/libswscale): frames of width x height RGB
 * (row-major, 3 bytes a pixel) at fps per second, encoded with libx264 when FFmpeg has it, else mpeg4
 * (crl__video_encoder_name says which).  close finishes the file (err NULL: drop it unfinished) and
 * sets *frames.  Errors: CRL_E_IO naming the file and FFmpeg's message. */
typedef struct crl__video crl__video;
crl__video *crl__video_open(const char *path, int width, int height, int fps, crl_error *err);
int crl__video_add(crl__video *v, const uint8_t *rgb, crl_error *err);
int crl__video_close(crl__video *v, int64_t *frames, crl_error *err);
const char *crl__video_encoder(const crl__video *v);
int64_t crl__video_frames(const crl__video *v);
const char *crl__video_encoder_name(void);

/* Evaluation videos (eval_video.c): a crl_eval_hook recording env 0's first episode of each evaluation
 * (rendered before each action and at the episode's end: steps + 1 frames) to dir/eval-FRAMES.mp4
 * (dir non-NULL) or to path.  last: the file finished last (NULL: none yet) and its frame count. */
typedef struct crl__eval_video crl__eval_video;
crl__eval_video *crl__eval_video_new(const char *dir, const char *path);
struct crl_eval_hook crl__eval_video_hook(crl__eval_video *r);
const char *crl__eval_video_last(const crl__eval_video *r, int64_t *frames);
void crl__eval_video_free(crl__eval_video *r);

/* crl eval RUN_DIR (cmd_eval.c). */
int crl__cmd_eval(int argc, char **argv);
/* The policy of a run directory's checkpoint (RUN_DIR/checkpoint or RUN_DIR): the context set up from its
 * experiment.ini plus the overrides (section.key=value only), then crl_policy_load.  On failure err is
 * set (exit code by crl__cli_exit_code; USAGE for a directory without a checkpoint) and nothing is held. */
struct crl_policy;
int crl__cli_policy_setup(crl_cli_ctx *ctx, const char *run_dir, int nover, char **overrides, struct crl_policy **p,
                          crl_error *err);
/* crl replay check|repair DIR (cmd_replay.c). */
int crl__cmd_replay(int argc, char **argv);

/* One benchmark figure: time per call of the measured operation. */
typedef struct crl_bench_result {
    double ns_per_op;
    uint64_t ops;
} crl_bench_result;

/* Run `fn(state, n)` (n operations per call) in doubling batches until
 * `seconds` have passed, after one warm-up call of `warmup` operations. */
crl_bench_result crl__bench_measure(void (*fn)(void *, uint64_t), void *state, double seconds, uint64_t warmup);

/* The median of v's n > 0 values (the upper one of the middle two when n is even); sorts v in place, so v[0]
 * is then the least. */
double crl__bench_median(double *v, size_t n);

/* An env stepped for a benchmark (bench_stepper.c): step + step_mdp_into between two TensorDicts reused
 * forever, actions taken in turn from CRL__BENCH_BANK pre-drawn ones (seed 11). */
enum { CRL__BENCH_BANK = 64 };
typedef struct crl__bench_stepper {
    crl_config *cfg;
    crl_env *env;
    crl_td *td[2];
    int cur;
    crl_tensor *bank[CRL__BENCH_BANK];
    int64_t next;
    crl_td_key *action_key;
    crl_error err;   /* why a step failed */
    bool failed;
} crl__bench_stepper;

/* Make the env of [env] in `ini` (loaded as file `who`) on host and reset it; *startup_s (may be NULL): the
 * seconds from config to the first reset done.  On failure err is set (CRL_E_INVALID for the config or env,
 * CRL_E_RUNTIME for the reset) and nothing is held. */
int crl__bench_stepper_open(crl__bench_stepper *b, crl_host *host, const char *who, const char *ini,
                            double *startup_s, crl_error *err);
/* Free what b holds; safe on a closed or failed one. */
void crl__bench_stepper_close(crl__bench_stepper *b);
/* n steps, for crl__bench_measure; on a failure b->failed and b->err say why and it stops. */
void crl__bench_stepper_run(void *p, uint64_t n);

/* Pre-drawn actions for a bare backend loop: `k` steps of `step_bytes` each (all envs of the batch), taken in
 * turn, so the rng is not timed (bench_backend.c). */
typedef struct crl__bench_bank {
    uint8_t *data;
    size_t step_bytes;
    int64_t k;
} crl__bench_bank;

/* Fill b with k draws of the [num, ...] action leaf from an rng seeded with seed.  On failure err is set and b
 * holds nothing. */
int crl__bench_bank_fill(crl__bench_bank *b, const crl_spec *leaf, int64_t k, uint64_t seed, crl_error *err);
/* Free b's data; safe on an empty bank. */
void crl__bench_bank_free(crl__bench_bank *b);

/* A backend's envs driven through its ops alone: buffers bound by the bench, each step the bank's next actions
 * copied in, then ops->step, then ops->reset (with a mask) of the envs that ended (terminated, truncated, or at
 * the time limit the host would apply): the backend's work with no host env in between. */
typedef struct crl__bench_backend {
    const crl_env_ops *ops;
    void *env;
    crl_td *buffers;
    int64_t num, max_steps;
    void *action;
    const void *obs;   /* the "observation" buffer, NULL when the backend has none of that name */
    size_t obs_bytes;
    const uint8_t *terminated, *truncated;
    bool *mask;
    int64_t *elapsed;
    const crl__bench_bank *bank; /* set by the caller before stepping; borrowed */
    int64_t next;
    crl_error err;
    bool failed;
} crl__bench_backend;

/* Make num envs of env/backend's `id` with the options of cfg's [bench-bare-backend] section (defaults when it is
 * absent), bind buffers from its specs, reset with the seed chain from `seed` (as crl_env_set_seed hands it out).
 * specs receives the backend's specs (the caller passes them back to close).  On failure err is set and nothing
 * is held. */
int crl__bench_backend_open(crl__bench_backend *b, const crl_host *host, const crl_config *cfg, const char *backend,
                            const char *id, int64_t num, uint64_t seed, crl_env_specs *specs, crl_error *err);
/* Close the backend env and free what b and specs hold; safe on a closed one. */
void crl__bench_backend_close(crl__bench_backend *b, crl_env_specs *specs);
/* One step of every env, then the resets; an error of the backend's step or reset is returned. */
int crl__bench_backend_step(crl__bench_backend *b, crl_error *err);
/* n steps, for crl__bench_measure; on a failure b->failed and b->err say why and it stops. */
void crl__bench_backend_run(void *p, uint64_t n);

/* A config and host for a benchmark, with the classic backend built in or
 * loaded from the plugin path; the caller frees both (also on error). */
int crl__bench_classic_host(crl_config **cfg, crl_host **host, crl_error *err);

/* Report a failed crl__cli_setup of command `cmd` (with a pointer to --help
 * for usage errors) and return the exit code. */
int crl__cli_setup_failed(const char *cmd, const crl_error *err);

/* `crl bench replay`: the prioritized sampler's 16-way trees vs a binary
 * sum tree, in one run. */
int crl__bench_replay(double seconds);

/* `crl bench transforms` (bench_transforms.c): ToTensorImage, Resize and
 * GrayScale on 500x500x3 frames in MB/s next to memcpy of the same bytes. */
int crl__bench_transforms(double seconds);

/* `crl bench nn` (bench_nn.c): MLP training steps/s next to raw sgemm; the Nature-DQN conv stack and an
 * LSTM step next to raw sgemm and, built with oneDNN, next to oneDNN's primitives. */
int crl__bench_nn(double seconds);

/* The oneDNN side of `crl bench nn` (bench_nn_dnnl.c, only with configure --with-dnnl). */
struct crl_rnn;
/* oneDNN's version, its CPU threading runtime and the threads it was set to, for the report. */
void crl__dnnl_describe(char *buf, size_t len);
/* Limit oneDNN to one thread (crl run trains on one OpenBLAS thread); false when its runtime offers no way. */
bool crl__dnnl_single_thread(void);
/* The Nature-DQN stack of m ([4, 84, 84] -> 3 conv + relu -> 512 relu -> out) through oneDNN's
 * convolution (bias and ReLU fused), eltwise and inner-product primitives on m's parameters: [0] plain NCHW
 * and OIHW memory, [1] the layouts oneDNN prefers (format_tag any; the weights stay in the forward's layout
 * as a framework on oneDNN keeps them, and every reorder a step needs, of activations or of weights into a
 * backward primitive's layout, is timed).  Forward on
 * x and forward + backward (parameter gradients, no gradient into x, as crl's step) of gy.  The agreement
 * with crl's own forward and gradients on the same weights is the largest absolute difference (and the
 * largest magnitude, for scale). */
typedef struct crl__dnnl_conv_result {
    double fwd_ns[2], train_ns[2];
    double out_diff, out_max, grad_diff, grad_max;
} crl__dnnl_conv_result;
int crl__bench_dnnl_conv(crl_mlp *m, const crl_tensor *x, const crl_tensor *gy, double seconds,
                         crl__dnnl_conv_result *out, crl_error *err);
/* The LSTM r through oneDNN's lstm_forward and lstm_backward on r's parameters: one acting step (x_act
 * [B, 1, F], states h0 and c0 [B, H], forward_inference), a training forward over x_seq [B, T, F] from
 * zero states (forward_training, with its workspace), and that forward with the backward of g_seq
 * [B, T, H] (no gradient into the final states), all batch-first as crl's.  Agreement as above: on the
 * outputs and final states (diff, max) and on the parameter gradients (grad_diff, grad_max); r's
 * gradients are left holding one backward's. */
typedef struct crl__dnnl_lstm_result {
    double act_ns, seq_ns, train_ns;
    double diff, max, grad_diff, grad_max;
} crl__dnnl_lstm_result;
int crl__bench_dnnl_lstm(struct crl_rnn *r, const crl_tensor *x_act, const crl_tensor *h0, const crl_tensor *c0,
                         const crl_tensor *x_seq, const crl_tensor *g_seq, double seconds,
                         crl__dnnl_lstm_result *out, crl_error *err);
/* `crl bench core`: prints figures, returns an exit code. */
int crl__bench_core(double seconds);
/* `crl bench batched` (bench_batched.c): executors side by side at N = 1..1024. */
int crl__bench_batched(double seconds);
/* `crl bench plugins` (bench_plugins.c): start-up with many plugins, cold vs warm registry cache. */
int crl__bench_plugins(double seconds);
/* `crl bench envs`: host env API vs the bare classic backend. */
int crl__bench_envs(double seconds);
/* `crl bench gym` (bench_gym.c, built with the gym plugin): a pure-Python
 * CartPole stepped by a plain Python loop vs through crl's gym backend. */
int crl__bench_gym(double seconds);
/* `crl bench python` (bench_python.c, built with the gym plugin): env steps/s of a Python env with a realistic
 * step cost inline, on threads and on processes (2 workers), and each one's start-up. */
int crl__bench_python(double seconds);
/* Its table alone, on a host with gym loaded (crl bench gym prints it too).  A CRL_EXIT_* status. */
int crl__bench_python_executors(crl_host *host, double seconds);
/* A config and host with the gym plugin loaded ([plugin.gym] python_path = the test envs; the build tree's
 * gym.so and crl-env-worker when crl is not installed); `who` names the bench in messages. */
int crl__bench_python_host(const char *who, crl_config **cfg, crl_host **host, crl_error *err);
/* `crl bench dm_control` (bench_dm_control.c, built with the dm_control
 * plugin): env steps/s per task next to bare mj_step, and frames/s. */
int crl__bench_dm_control(double seconds);
/* crl bench dm_control --only: the comma-separated tasks to run (checked against the plugin's list when it runs). */
void crl__bench_dm_control_only(const char *names);

/* Env helpers of the env commands (cmd_envs.c). */
struct crl_env;
struct crl_env_ops;
/* The env ops of a component, or NULL when it is not a usable env backend
 * (ops too small for list..step, or one of them NULL). */
const struct crl_env_ops *crl__cli_env_ops(const crl_component *c);
/* crl__cli_setup (plugins, validation), the whole experiment checked
 * (crl_experiment_check, no env stepped), then the env of the [env]
 * section; on failure err is set and the context is torn down. */
int crl__cli_env_setup(crl_cli_ctx *ctx, int nargs, char **args, struct crl_env **env, crl_error *err);

/* JSON output (cmd_inspect.c): a shape as [d0,d1,...]; a tensor's values
 * as nested arrays (inf and nan as the strings "inf", "-inf", "nan"). */
void crl__cli_json_shape(FILE *f, int ndim, const int64_t *shape);
void crl__cli_json_tensor_data(FILE *f, const crl_tensor *t);

/* png.c: write rgb [height, width, 3] (row-major) as a PNG through cairo;
 * errors name the path. */
int crl__png_write_rgb(const char *path, const uint8_t *rgb, int width, int height, crl_error *err);

/* png.c: a learning curve as curve.png draws it: the return panel (training return as a line, evaluation
 * returns as dots, target as a dashed line) over a loss panel (none when ln is 0); NaN values skipped;
 * round tick values.  CRL_E_UNSUPPORTED without cairo, CRL_E_IO naming the path. */
typedef struct crl_curve_plot {
    const char *title;
    const double *x, *y;   /* training return */
    size_t n;
    const double *ex, *ey; /* evaluation returns */
    size_t en;
    const double *lx, *ly; /* loss */
    size_t ln;
    double target;         /* NaN: none */
} crl_curve_plot;
int crl__png_write_curve(const char *path, const crl_curve_plot *p, crl_error *err);
/* png.c: a sweep's curve: mean over the band lo..hi at each x (NaN: skipped), target dashed (NaN: none);
 * errors as crl__png_write_curve. */
int crl__png_write_band(const char *path, const char *title, const double *x, const double *mean,
                        const double *lo, const double *hi, size_t n, double target, crl_error *err);

/* crl run (cmd_run.c). */
int crl__cmd_run(int argc, char **argv);
/* A new run directory runs/NAME[TAG]-YYYYmmdd-HHMMSS (NAME: the first experiment file's), made by mkdir
 * with -2, -3, ... when taken; *out is g_free'd by the caller.  Errors: CRL_E_IO, CRL_E_EXISTS. */
int crl__run_default_dir(const crl_cli_ctx *cli, const char *tag, char **out, crl_error *err);
/* crl run --seeds LIST [--jobs N] (run_sweep.c): args are the experiment files and overrides; the exit
 * status. */
int crl__run_sweep(const char *seeds, const char *jobs, bool quiet, int nargs, char **args);
/* The BLAS library (blas.c): OpenBLAS's switch to one thread (training is bitwise reproducible for a given
 * thread count and kernel), and a line naming the BLAS build and the kernel it picked, for `crl version`. */
void crl__blas_single_thread(void);
void crl__blas_describe(FILE *out);
/* `crl bench train` (bench_train.c): frames and seconds until each training example of conf/examples
 * reaches its target return, over seeds 0..N-1, and how many seeds reached it. */
int crl__bench_train(double seconds);
/* crl bench train --seeds N (1..100, default 5) and --only NAME,...: an exit status (2 with a message on
 * stderr for a bad value). */
int crl__bench_train_options(const char *seeds, const char *only);

/* crl run's mpi backend (mpi_run.c): [distributed] backend = mpi. */
struct crl_trainer;
bool crl__mpi_wanted(const crl_config *cfg);
/* Under mpirun: MPI_Init, num_collectors from the ranks, every rank checks the config and all agree.
 * 0 to go on (*rank set), else the exit status; err set when this rank reports the problem, cleared when
 * another does.  Outside mpirun (or built without Open MPI): CRL_E_CONFIG naming [distributed] backend. */
int crl__mpi_begin(crl_cli_ctx *ctx, bool resume, int *rank, crl_error *err);
/* A collector rank's whole life: answers the learner until it says stop.  The exit status. */
int crl__mpi_collector_main(crl_cli_ctx *ctx);
/* The learner's trainer, its sub-collectors on ranks 1..K-1. */
struct crl_trainer *crl__mpi_trainer(crl_cli_ctx *ctx, crl_error *err);
/* The communication figures of the learner, a line of crl run's summary (nothing without MPI). */
void crl__mpi_summary(FILE *f);
/* Stop the collector ranks (MPI_Abort when one cannot be stopped) and MPI_Finalize; returns status.  A
 * no-op before crl__mpi_begin. */
int crl__mpi_end(int status);
/* `crl bench mpi` (bench_mpi.c). */
int crl__bench_mpi(double seconds);

#endif
