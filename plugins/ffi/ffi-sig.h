/* The C signature language shared by env/ffi and transform/function: C types, the parser of one signature
 * into a prepared libffi call, value conversions, and the library's loading (path security, dlopen, dlsym).
 * Compiled into ffi.so and transforms.so; uses only the SDK and libffi.
 *
 * The caller says what a signature may contain: the names a buffer argument may bind to ("leaves", with
 * the per-element shape each must have) and where each special word (handle, seed, index, ...) may appear.
 * Every error is CRL_E_CONFIG with the option's FILE:LINE (crl_opts_origin), so `crl config check` exits 2. */
#ifndef CRL_FFI_SIG_H
#define CRL_FFI_SIG_H

#include <crl/crl.h>

#include <ffi.h>
#include <stdbool.h>
#include <stdint.h>

#define FFI_MAX_ARGS 16
#define FFI_MAX_DIMS 4
#define FFI_MAX_LEAVES 8

typedef enum ctype { T_INT8, T_INT16, T_INT32, T_INT64, T_UINT8, T_UINT16, T_UINT32, T_UINT64, T_FLOAT, T_DOUBLE,
                     T_BOOL, T_COUNT } ctype;

typedef struct ctype_info {
    const char *name;
    size_t size;
    bool is_float, is_signed;
} ctype_info;

extern const ctype_info ffi_ctypes[T_COUNT];

/* Argument kinds: the special words, a constant, a buffer. */
typedef enum argkind { A_HANDLE, A_SEED, A_INDEX, A_COUNT, A_SEEDS, A_MASK, A_RGB, A_CONST, A_BUFFER, A_KINDS } argkind;

typedef union slot {
    int64_t i64;
    uint64_t u64;
    int32_t i32;
    uint32_t u32;
    int16_t i16;
    uint16_t u16;
    int8_t i8;
    uint8_t u8;
    float f;
    double d;
    void *p;
} slot;

typedef struct arg {
    argkind kind;
    ctype type;     /* A_CONST, A_BUFFER element type */
    bool is_const;  /* A_BUFFER declared const: the library only reads it */
    int leaf;       /* A_BUFFER: index into the rules' leaves */
    int ndims;      /* A_BUFFER: the [SIZE, ...] written after the leaf (0: none) */
    int64_t dims[FFI_MAX_DIMS];
    slot value;     /* A_CONST; the pointer or scalar passed, refreshed per call */
    void *staging;  /* A_BUFFER whose C type differs from the crl dtype (owned by the user of the fn) */
} arg;

typedef enum rkind { R_VOID, R_HANDLE, R_SCALAR } rkind;

typedef struct fn {
    const char *key;    /* the option: "step" */
    char symbol[128];
    rkind ret;
    ctype rtype;
    bool has_ok;        /* "ok=V": any other return value is an error */
    double ok;
    int nargs;
    arg args[FFI_MAX_ARGS];
    ffi_type *atypes[FFI_MAX_ARGS];
    void *avalues[FFI_MAX_ARGS];
    ffi_cif cif;
    void (*addr)(void);
} fn;

/* What one signature may contain. */
typedef struct ffi_sig_rules {
    const char *const *leaves;   /* NULL-terminated names a buffer may bind to */
    const char *leaf_list;       /* the same names for messages: "observation, action, reward, ..." */
    /* Per leaf: the shape an explicit [SIZE] must equal: shape[l][0] dims, then the sizes; shape[l][0] < 0
     * accepts any (the caller checks arg.dims once it knows the shape). */
    const int64_t (*shape)[FFI_MAX_DIMS + 1];
    /* Per special word (A_HANDLE .. A_RGB): NULL where the word may appear in this signature, else where it
     * may ("the seeding function"), for the message. */
    const char *word_only_in[A_CONST];
    bool returns_handle;         /* this signature must return handle (make); no other may */
} ffi_sig_rules;

/* A description error: CRL_E_CONFIG "FILE:LINE: [SECTION] KEY: message".  Returns the code. */
__attribute__((format(printf, 4, 5))) int ffi_sig_error(const crl_opts *opts, const char *key, crl_error *err,
                                                        const char *fmt, ...);

/* Parse `sig`, the value of option `key`, into *f and prepare its libffi call (ffi_prep_cif).  f->addr is
 * left NULL (ffi_sig_bind sets it).  Errors as ffi_sig_error. */
int ffi_sig_parse(const crl_opts *opts, const char *key, const char *sig, const ffi_sig_rules *rules, fn *f,
                  crl_error *err);

/* Load the library named by option `key` (a path or a soname): a path is checked with the plugin host's
 * rules (crl_file_check_code) before dlopen; a soname found in LD_LIBRARY_PATH is checked there first, and
 * one the dynamic linker finds elsewhere is checked at the path it was loaded from (and unloaded when that
 * fails).  RTLD_NOW | RTLD_LOCAL.  *lib is the handle (dlclose it), NULL on error. */
int ffi_sig_open(const crl_opts *opts, const char *key, const char *lib_name, void **lib, crl_error *err);

/* Look up f's symbol in lib (dlsym) into f->addr; an unknown symbol is an error naming it and the library. */
int ffi_sig_bind(const crl_opts *opts, void *lib, const char *lib_name, fn *f, crl_error *err);

typedef union ffi_retval {
    ffi_arg a;
    ffi_sarg s;
    double d;
    float f;
    void *p;
    int64_t i64;
    uint64_t u64;
} ffi_retval;

/* A scalar return value as a double (for ok= and messages). */
double ffi_sig_ret_double(const fn *f, const ffi_retval *r);

/* Whether a crl buffer of dtype dt can be passed as is for a C array of type t. */
bool ffi_same_repr(crl_dtype dt, ctype t);
/* n elements of crl dtype dt at src into the C array dst of type t (the staging before a call). */
void ffi_to_c(crl_dtype dt, const void *src, ctype t, void *dst, int64_t n);
/* n elements of C type t at src into crl dtype dt at dst (after a call), bools normalised to 0/1.  src may
 * be dst when ffi_same_repr(dt, t).  With check_nan and a floating t, stops at the first NaN and returns
 * its index; else -1. */
int64_t ffi_from_c(ctype t, const void *src, crl_dtype dt, void *dst, int64_t n, bool check_nan);

#endif
