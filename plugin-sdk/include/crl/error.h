/* crl plugin SDK: error values.
 *
 * Errors are values, never process exits: every fallible function takes a
 * `crl_error *err` out-parameter (which may be NULL when the caller does not
 * care) and returns a status or NULL.  Messages name the file, line, key,
 * plugin or env involved and say how to fix the problem. */
#ifndef CRL_ERROR_H
#define CRL_ERROR_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CRL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define CRL_API __attribute__((visibility("default")))
#else
#define CRL_PRINTF(f, a)
#define CRL_API
#endif

/* Error codes.  Values are part of the ABI and never change meaning. */
typedef enum crl_status {
    CRL_OK = 0,
    CRL_E_INVALID = 1,     /* bad argument or value */
    CRL_E_NOMEM = 2,       /* allocation failed */
    CRL_E_IO = 3,          /* file or system call failed */
    CRL_E_CONFIG = 4,      /* bad configuration (file:line in the message) */
    CRL_E_NOT_FOUND = 5,   /* unknown key, plugin, env, component */
    CRL_E_EXISTS = 6,      /* duplicate registration or key */
    CRL_E_ABI = 7,         /* plugin ABI mismatch or bad descriptor */
    CRL_E_PLUGIN = 8,      /* plugin failed to load or initialise */
    CRL_E_DTYPE = 9,       /* wrong dtype */
    CRL_E_SHAPE = 10,      /* wrong shape */
    CRL_E_RANGE = 11,      /* value or index out of range */
    CRL_E_RUNTIME = 12,    /* failure while running (env step, worker) */
    CRL_E_UNSUPPORTED = 13,/* feature not available in this build */
    CRL_E_PERM = 14,       /* refused for safety (world-writable plugin) */
    CRL_E_CRASH = 15,      /* code crashed (signal) in a probed child */
    CRL_E_USAGE = 16,      /* bad command-line usage */
    CRL_E_CORRUPT = 17,    /* stored data failed validation (file and offset in the message); since ABI 1.1 */
    CRL_E_TIMEOUT = 18     /* an operation did not finish in time (worker hang); since ABI 1.1 */
} crl_status;

#define CRL_ERROR_MESSAGE_MAX 1024

/* A code and a human-readable message.  Plain struct: put it on the stack. */
typedef struct crl_error {
    int32_t code;                       /* a crl_status */
    uint32_t reserved;
    char message[CRL_ERROR_MESSAGE_MAX];
} crl_error;

/* Record an error.  `err` may be NULL (then nothing happens).  The message
 * is formatted like printf and truncated to CRL_ERROR_MESSAGE_MAX - 1 bytes.
 * Always returns `code`, so `return crl_error_set(err, ...)` is idiomatic. */
CRL_API int crl_error_set(crl_error *err, int code, const char *fmt, ...) CRL_PRINTF(3, 4);

/* Prepend context ("while loading foo.ini: ") to an already-set message.
 * No-op when `err` is NULL or holds no error. */
CRL_API void crl_error_prefix(crl_error *err, const char *fmt, ...) CRL_PRINTF(2, 3);

/* Hand on an error a callee recorded in a local crl_error.  Because `err`
 * may be NULL, code that needs a failing call's code (after a call that
 * returns NULL, say) gives that call a local crl_error instead of its own
 * `err`, then returns crl_error_pass(err, &local, CRL_E_...): this copies
 * `src` into `err` (when `err` is non-NULL) and returns src's code.  When
 * `src` is NULL or holds CRL_OK (the callee failed without recording why),
 * it records `fallback` with a generic message and returns `fallback`, so a
 * failure is never reported as CRL_OK unless `fallback` is CRL_OK (then
 * `err` is cleared).  Never reads `err`; `err` may be NULL. */
CRL_API int crl_error_pass(crl_error *err, const crl_error *src, int fallback);

/* Reset to CRL_OK with an empty message.  `err` may be NULL. */
CRL_API void crl_error_clear(crl_error *err);

/* Static name of a code, e.g. "CRL_E_CONFIG"; "CRL_E_UNKNOWN" if unknown. */
CRL_API const char *crl_status_name(int code);

/* Free memory that a crl function documented as "free with crl_free"
 * returned (reprs, key lists).  NULL is allowed. */
CRL_API void crl_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
