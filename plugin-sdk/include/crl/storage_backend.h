/* crl plugin SDK: the replay storage ABI (TorchRL's Storage, in C).  Since ABI 1.1.
 *
 * A storage is registered as kind CRL_KIND_STORAGE.  It holds up to
 * `capacity` items in slots 0..capacity-1; an item is a TensorDict (batch
 * shape [] per item; a batch of n items is a TensorDict whose first batch
 * dim is n).  Which slot an item goes to is the host's writer's choice; the
 * storage only stores and fetches.  Samplers live in the host.
 *
 * Durability (for storages that declare it, such as memmap): when `set`
 * returns CRL_OK the items are acknowledged.  If the process is killed at
 * any moment afterwards (kill -9), reopening the same directory finds every
 * acknowledged item intact; a slot whose write was cut short is reported as
 * empty by `has` and never returned half-written.  `sync` extends the
 * promise to power loss (fsync).  Data that fails a check on open (a flipped
 * byte, a missing file) is CRL_E_CORRUPT naming the file and slot, never
 * dropped in silence; `check` reports it and, when asked, drops it. */
#ifndef CRL_STORAGE_BACKEND_H
#define CRL_STORAGE_BACKEND_H

#include <crl/td.h>
#include <crl/options.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One thing wrong in a stored storage, handed to crl_storage_report's
 * `finding` callback (borrowed: valid during the call only). */
typedef struct crl_storage_finding {
    const char *file;    /* path of the file at fault (the directory when no one file is) */
    int64_t slot;        /* the slot it costs, or -1 when it is about a whole file */
    int64_t offset;      /* byte offset in `file`, or -1 when not one place */
    const char *reason;  /* what is wrong, one line without a trailing newline */
} crl_storage_finding;

/* What `check` found (and with CRL_STORAGE_REPAIR did).  Owned by the
 * caller, who sets struct_size, finding and user; check writes the rest,
 * never past struct_size. */
typedef struct crl_storage_report {
    uint32_t struct_size;  /* sizeof(crl_storage_report) as the caller knows it */
    uint32_t reserved;
    /* Called once per finding, in slot order after the whole-file ones; may be NULL. */
    void (*finding)(void *user, const crl_storage_finding *f);
    void *user;
    int64_t capacity;      /* slots, or -1 when the storage's own description is unreadable */
    int64_t items;         /* slots holding an item that passed every check (after a repair: that remain) */
    int64_t bad_slots;     /* slots whose commit record or data failed a check */
    int64_t bad_files;     /* files missing, of the wrong size or unreadable (slots were then not checked) */
    int64_t dropped;       /* CRL_STORAGE_REPAIR: bad slots emptied */
} crl_storage_report;

/* Flags of check. */
enum {
    /* Empty every bad slot (their items are lost and nothing else changes)
     * and make that durable.  Refused (CRL_E_CORRUPT, nothing changed) when
     * a whole file is at fault, since no slot could then be trusted. */
    CRL_STORAGE_REPAIR = 1u << 0
};

typedef struct crl_storage_ops {
    uint32_t struct_size;      /* sizeof(crl_storage_ops) */
    uint32_t reserved;

    /* Open a storage of `capacity` slots with the component's validated
     * options.  A durable storage whose directory already holds a storage
     * resumes it; a different layout or capacity there is CRL_E_CONFIG
     * naming the directory, what differs and the fix (never stale data).
     * Sets *st. */
    int (*open)(const crl_opts *opts, int64_t capacity, void **st, crl_error *err);

    /* Write item k of `items` (first batch dim n) to slot idx[k], for k in
     * [0, n).  The first write fixes the layout for storages that need one
     * (keys, dtypes, per-item shapes); a later item that differs is
     * CRL_E_SHAPE / CRL_E_DTYPE / CRL_E_NOT_FOUND naming the key and both
     * layouts, and nothing is written.  A full disk is CRL_E_IO saying
     * "no space left" with the path, never SIGBUS.  On error, slots written
     * before the failing one keep their new items; the failing one holds
     * its old item or is empty. */
    int (*set)(void *st, const int64_t *idx, size_t n, const crl_td *items, crl_error *err);

    /* A new TensorDict with batch shape [n] holding the items of slots
     * idx[0..n) (stacked).  CRL_E_RANGE for an empty or out-of-range slot;
     * CRL_E_SHAPE when the items cannot be stacked (list storage with
     * varying shapes: fetch one at a time). */
    crl_td *(*get)(void *st, const int64_t *idx, size_t n, crl_error *err);

    /* One past the highest slot ever written (TorchRL's len(storage)). */
    int64_t (*len)(void *st);

    /* Whether slot i holds an item.  NULL: every slot below len does. */
    bool (*has)(void *st, int64_t i);

    /* Items acknowledged over the storage's whole life, persisted by durable
     * storages: the round-robin writer resumes at write_count % capacity. */
    uint64_t (*write_count)(void *st);

    /* Make every acknowledged item durable against power loss.  NULL for
     * memory storages. */
    int (*sync)(void *st, crl_error *err);

    /* Empty every slot (len and write_count become 0). */
    int (*clear)(void *st, crl_error *err);

    /* Write everything the storage holds into the existing empty directory
     * `dir` (the host's checkpoint writes it to a temporary directory,
     * fsyncs and renames it).  Use crl/checkpoint.h for the files. */
    int (*dump)(void *st, const char *dir, crl_error *err);

    /* Replace the storage's contents with what dump wrote into `dir`.  Every
     * size and offset is validated: a corrupted, truncated or missing file
     * is CRL_E_CORRUPT / CRL_E_IO naming the file (and offset); on error
     * the storage is left empty or as it was, never half-loaded. */
    int (*load)(void *st, const char *dir, crl_error *err);

    /* Free everything (unsynced durable data stays acknowledged).  NULL-safe. */
    void (*close)(void *st);

    /* ---- since ABI 1.2: read only when struct_size covers them ---- */

    /* Check a durable storage at rest, without opening it for use:
     * `location` is where open's options put it (memmap: its `dir`).  Every
     * slot's commit record and data are verified; each problem goes to
     * report->finding and is counted in *report.  With CRL_STORAGE_REPAIR,
     * bad slots are emptied (report->dropped) and no data file is removed.
     * Returns CRL_OK when the storage could be examined, whatever was found
     * (bad_slots + bad_files == 0 means clean); CRL_E_NOT_FOUND when
     * `location` holds no such storage; CRL_E_IO when it cannot be read or is
     * open in another process (never checked under a writer); CRL_E_CORRUPT
     * when a repair was asked but refused (the message says why and what to
     * do); CRL_E_INVALID for NULL arguments.  NULL for storages that keep
     * nothing at rest (list, tensor). */
    int (*check)(const char *location, unsigned flags, crl_storage_report *report, crl_error *err);
} crl_storage_ops;

#ifdef __cplusplus
}
#endif
#endif
