/* crl replay check|repair DIR: verify a durable replay storage at rest, and drop its damaged slots. */
#include "config.h"
#include "cli-private.h"

#include <crl/storage_backend.h>
#include <glib.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: crl replay check DIR [--storage NAME] [section.key=value...]\n"
            "       crl replay repair DIR [--storage NAME] [section.key=value...]\n\n"
            "A durable replay storage (storage = memmap: the [replay] dir) at rest, never while a\n"
            "process has it open:\n\n"
            "  check   verify every file and every slot (its commit record and the CRC of its\n"
            "          data); print each problem with its file, slot and reason, then the\n"
            "          items that passed.  Changes nothing.\n"
            "  repair  the same, then empty the damaged slots (their items are lost) and\n"
            "          print how many were dropped.  Only slots.bin is written: no data file\n"
            "          is removed or changed.  A missing or damaged header, or a missing or\n"
            "          cut data file, is never guessed: repair refuses and changes nothing\n"
            "          (the header alone holds the items' keys, dtypes and shapes; a storage\n"
            "          made with the same [replay] settings and capacity has the same header,\n"
            "          which can be copied back).\n\n"
            "  --storage NAME  the storage component (default memmap)\n"
            "  -h, --help      print this help\n\n"
            "Exit status: 0 clean (check) or repaired (repair); 1 damage found (check), a\n"
            "repair refused, or DIR unreadable or in use; 2 bad usage, or DIR holds no storage.\n");
}

/* "section.key=value", as crl__cli_setup tells overrides from files. */
static bool is_override(const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || g_file_test(arg, G_FILE_TEST_EXISTS))
        return false;
    const char *dot = memchr(arg, '.', (size_t)(eq - arg));
    return dot != NULL && dot != arg;
}

/* The report's first line, once, before the first finding or the totals. */
typedef struct head {
    const char *dir, *storage;
    bool printed;
} head;

static void print_head(head *h)
{
    if (!h->printed)
        printf("%s: %s storage\n", h->dir, h->storage);
    h->printed = true;
}

static void print_finding(void *user, const crl_storage_finding *f)
{
    print_head(user);
    if (f->slot >= 0)
        printf("  slot %" PRId64 ": %s: %s\n", f->slot, f->file, f->reason);
    else
        printf("  %s: %s\n", f->file, f->reason);
}

int crl__cmd_replay(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CRL_EXIT_USAGE;
    }
    const char *action = argv[1];
    if (!strcmp(action, "--help") || !strcmp(action, "-h")) {
        usage(stdout);
        return CRL_EXIT_OK;
    }
    bool repair = !strcmp(action, "repair");
    if (!repair && strcmp(action, "check")) {
        static const char *const actions[] = { "check", "repair", NULL };
        const char *hint = crl_did_you_mean(action, actions);
        fprintf(stderr, "crl replay: unknown action '%s'%s%s%s; use check or repair (crl replay --help)\n", action,
                hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
        return CRL_EXIT_USAGE;
    }
    const char *cmd = repair ? "replay repair" : "replay check";
    const char *dir = NULL, *storage = "memmap";
    GPtrArray *ovr = g_ptr_array_new();
    int status = CRL_EXIT_USAGE;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            status = CRL_EXIT_OK;
            goto out;
        } else if (!strcmp(a, "--storage") || !strncmp(a, "--storage=", 10)) {
            if (a[9] == '=') {
                storage = a + 10;
            } else if (i + 1 < argc) {
                storage = argv[++i];
            } else {
                fprintf(stderr, "crl %s: --storage needs a storage name (e.g. --storage memmap)\n", cmd);
                goto out;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "crl %s: unknown option '%s'; run 'crl replay --help'\n", cmd, a);
            goto out;
        } else if (is_override(a)) {
            g_ptr_array_add(ovr, argv[i]);
        } else if (!dir) {
            dir = a;
        } else {
            fprintf(stderr, "crl %s: one DIR only ('%s' and '%s' given)\n", cmd, dir, a);
            goto out;
        }
    }
    if (!dir || !*dir) {
        fprintf(stderr, "crl %s: no DIR given: name the storage's directory (the [replay] dir), e.g. crl %s "
                "runs/x/replay-mm\n", cmd, cmd);
        goto out;
    }

    crl_cli_ctx ctx;
    crl_error err = { 0 };
    if (crl__cli_setup(&ctx, (int)ovr->len, (char **)ovr->pdata, CRL_CLI_LOAD_PLUGINS | CRL_CLI_VALIDATE, &err)) {
        status = crl__cli_setup_failed(cmd, &err);
        goto out;
    }
    const crl_component *c = crl_host_lookup(ctx.host, CRL_KIND_STORAGE, storage, &err);
    const crl_storage_ops *ops = c ? c->ops : NULL;
    if (!c) {
        crl__cli_print_error(cmd, &err);
        status = CRL_EXIT_USAGE;
    } else if (!ops || ops->struct_size < offsetof(crl_storage_ops, check) + sizeof ops->check || !ops->check) {
        fprintf(stderr, "crl %s: storage '%s' (plugin %s) has no check: it keeps nothing on disk to check "
                "(memmap does)\n", cmd, storage, crl_host_component_owner(ctx.host, CRL_KIND_STORAGE, storage));
        status = CRL_EXIT_USAGE;
    } else {
        crl_storage_report rep;
        head h = { dir, storage, false };
        memset(&rep, 0, sizeof rep);
        rep.struct_size = sizeof rep;
        rep.finding = print_finding;
        rep.user = &h;
        int rc = ops->check(dir, repair ? CRL_STORAGE_REPAIR : 0, &rep, &err);
        /* The totals when the storage was examined (a refused repair was too). */
        if (rc == CRL_OK || rc == CRL_E_CORRUPT) {
            print_head(&h);
            if (rep.capacity >= 0)
                printf("capacity: %" PRId64 " slots\n", rep.capacity);
            printf("items: %" PRId64 "\n", rep.items);
            printf("bad slots: %" PRId64 "\n", rep.bad_slots);
            printf("bad files: %" PRId64 "\n", rep.bad_files);
        }
        if (repair && rc == CRL_OK)
            printf("dropped: %" PRId64 " bad slot%s (%s in slots.bin emptied; no data file was removed or "
                   "changed)\n",
                   rep.dropped, rep.dropped == 1 ? "" : "s", rep.dropped == 1 ? "its record" : "their records");
        fflush(stdout);
        if (rc) {
            crl__cli_print_error(cmd, &err);
            status = crl__cli_exit_code(&err);
        } else if (repair || rep.bad_slots + rep.bad_files == 0) {
            printf("status: %s\n", rep.dropped ? "repaired" : "clean");
            status = CRL_EXIT_OK;
        } else {
            printf("status: damaged\n");
            fprintf(stderr, "crl %s: %s is damaged: %" PRId64 " bad slot%s, %" PRId64 " bad file%s (listed above); ",
                    cmd, dir, rep.bad_slots, rep.bad_slots == 1 ? "" : "s", rep.bad_files,
                    rep.bad_files == 1 ? "" : "s");
            if (rep.bad_files)
                fprintf(stderr, "restore the files named above ('crl replay repair' cannot rebuild them)\n");
            else
                fprintf(stderr, "'crl replay repair %s' empties the bad slots (their items are lost)\n", dir);
            status = CRL_EXIT_RUNTIME;
        }
    }
    crl__cli_teardown(&ctx);
out:
    g_ptr_array_free(ovr, TRUE);
    return status;
}
