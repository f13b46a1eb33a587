/* crl help: the command list; and, for the build and the shell, the man pages crl(1), crl.ini(5) and
 * crl-plugins(7) and the word lists of the bash completion.  All of them come from what the program
 * itself uses: the command table, each command's --help, crl's config schema and the plugins found. */
#include "config.h"
#include "cli-private.h"
#include "examples-private.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void help_usage(FILE *f)
{
    fprintf(f, "Usage: crl help\n"
               "       crl help --man crl|crl.ini|crl-plugins\n"
               "       crl help --complete commands|keys|plugins|options CMD|subcommands CMD|values KEY\n\n"
               "Without options: the list of commands ('crl --help').  --man prints a manual page\n"
               "(roff) made from the command table, each command's --help and the configuration\n"
               "schema with the plugins found; --complete prints one word a line for the bash\n"
               "completion.  Plugins are found as for 'crl plugins' (CRL_PLUGIN_PATH, ...).\n");
}

/* ---- a command's --help, as the command prints it ------------------------------------------------- */

/* What `crl NAME --help` prints, captured from the command itself; NULL when it could not be captured.
 * Free with g_free. */
static char *command_help(const crl_cli_command *c)
{
    fflush(stdout);
    FILE *t = tmpfile();
    if (!t)
        return NULL;
    int saved = dup(STDOUT_FILENO);
    if (saved < 0 || dup2(fileno(t), STDOUT_FILENO) < 0) {
        if (saved >= 0)
            close(saved);
        fclose(t);
        return NULL;
    }
    char *argv[] = { (char *)c->name, (char *)"--help", NULL };
    int rc = c->run(2, argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    GString *s = g_string_new(NULL);
    char buf[4096];
    size_t n;
    rewind(t);
    while ((n = fread(buf, 1, sizeof buf, t)) > 0)
        g_string_append_len(s, buf, (gssize)n);
    fclose(t);
    if (rc != CRL_EXIT_OK || s->len == 0) {
        g_string_free(s, TRUE);
        return NULL;
    }
    return g_string_free(s, FALSE);
}

static const crl_cli_command *find_command(const char *name)
{
    size_t n;
    const crl_cli_command *cmds = crl__cli_commands(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(cmds[i].name, name))
            return &cmds[i];
    return NULL;
}

/* ---- roff ----------------------------------------------------------------------------------------- */

/* Text for a roff line: backslashes and minus signs escaped, and a leading '.' or '\'' made literal.  A
 * slash is followed by a break point (\:), so a long installation path can wrap instead of overflowing
 * the line (groff's "can't break line"). */
static void roff(FILE *f, const char *s)
{
    if (*s == '.' || *s == '\'')
        fputs("\\&", f);
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", f);
        else if (*s == '-')
            fputs("\\-", f);
        else if (*s == '/')
            fputs("/\\:", f);
        else
            fputc(*s, f);
    }
}

static void roff_line(FILE *f, const char *s)
{
    roff(f, s);
    fputc('\n', f);
}

/* Preformatted text (a command's --help): each line literal, blank lines kept. */
static void roff_verbatim(FILE *f, const char *text)
{
    fputs(".PP\n.nf\n.RS 2\n", f);
    char **lines = g_strsplit(text, "\n", -1);
    guint n = g_strv_length(lines);
    while (n > 0 && !*lines[n - 1])
        n--;
    for (guint i = 0; i < n; i++) {
        if (!*lines[i])
            fputs(".sp\n", f);
        else
            roff_line(f, lines[i]);
    }
    g_strfreev(lines);
    fputs(".RE\n.fi\n", f);
}

static void roff_header(FILE *f, const char *title, const char *section)
{
    /* The date of the sources when the build gives one (reproducible builds), else today. */
    time_t t = time(NULL);
    const char *sde = getenv("SOURCE_DATE_EPOCH");
    if (sde && *sde)
        t = (time_t)strtoll(sde, NULL, 10);
    struct tm tm;
    char date[32] = "";
    if (gmtime_r(&t, &tm))
        strftime(date, sizeof date, "%Y-%m-%d", &tm);
    fprintf(f, ".\\\" Made by 'crl help --man' from crl's own tables; do not edit.\n");
    fprintf(f, ".TH \"%s\" \"%s\" \"%s\" \"crl %s\" \"crl manual\"\n", title, section, date, crl_version());
    /* Ragged right: a line ending in a long installation path has no spaces to stretch ("cannot adjust"). */
    fputs(".ad l\n", f);
}

/* One option as a tagged paragraph: key, type, default or "required", range or choices, doc. */
static void roff_option(FILE *f, const crl_option *o)
{
    fputs(".TP\n.B ", f);
    roff(f, o->name);
    if (o->flags & CRL_OPT_PREFIX)
        fputs("NAME", f);
    fprintf(f, "\n(%s", crl__cli_opt_type_name(o->type));
    if (o->flags & CRL_OPT_REQUIRED) {
        fputs(", required", f);
    } else if (o->default_value) {
        fputs(", default \\(lq", f);
        roff(f, o->default_value);
        fputs("\\(rq", f);
    } else {
        fputs(", no default", f);
    }
    if (o->type == CRL_OPT_ENUM && o->choices) {
        fputs(", one of ", f);
        char **ch = g_strsplit(o->choices, "|", -1);
        for (char **c = ch; *c; c++) {
            fputs(c == ch ? "" : ", ", f);
            roff(f, *c);
        }
        g_strfreev(ch);
    }
    if (o->flags & CRL_OPT_RANGE) {
        char lo[64], hi[64];
        bool whole = o->type == CRL_OPT_INT || o->type == CRL_OPT_SIZE || o->type == CRL_OPT_LIST ||
                     o->type == CRL_OPT_DOUBLES;
        snprintf(lo, sizeof lo, whole ? "%.0f" : "%.15g", o->min);
        snprintf(hi, sizeof hi, whole ? "%.0f" : "%.15g", o->max);
        fprintf(f, ", %s ", o->type == CRL_OPT_LIST || o->type == CRL_OPT_DOUBLES ? "length" : "range");
        roff(f, lo);
        fputs(" to ", f);
        roff(f, hi);
    }
    fputs(")\n", f);
    if (o->flags & CRL_OPT_PREFIX) {
        fputs("Any key starting with \\(lq", f);
        roff(f, o->name);
        fputs("\\(rq.\n", f);
    }
    if (o->doc && *o->doc)
        roff_line(f, o->doc);
}

static void roff_options(FILE *f, const crl_option *table)
{
    if (!table || table->type == CRL_OPT_END) {
        fputs(".PP\nNo options.\n", f);
        return;
    }
    for (const crl_option *o = table; o->type != CRL_OPT_END; o++)
        roff_option(f, o);
}

/* ---- crl(1) --------------------------------------------------------------------------------------- */

static int man_crl(FILE *f)
{
    size_t n;
    const crl_cli_command *cmds = crl__cli_commands(&n);
    roff_header(f, "CRL", "1");
    fputs(".SH NAME\ncrl \\- reinforcement\\-learning experiments described by INI files\n", f);
    /* Each command's usage lines, as its --help begins ("Usage: crl run ...", then indented ones). */
    fputs(".SH SYNOPSIS\n.nf\n", f);
    for (size_t i = 0; i < n; i++) {
        char *help = command_help(&cmds[i]);
        char **lines = help ? g_strsplit(help, "\n", -1) : NULL;
        for (char **l = lines; l && *l && **l; l++) {
            const char *u = g_str_has_prefix(*l, "Usage: ") ? *l + 7 : *l;
            while (*u == ' ')
                u++;
            if (!g_str_has_prefix(u, "crl "))
                fputs("    ", f); /* a usage line's continuation */
            roff_line(f, u);
        }
        if (!lines) {
            fputs("crl ", f);
            roff_line(f, cmds[i].name);
        }
        g_strfreev(lines);
        g_free(help);
    }
    fputs(".fi\n", f);
    fputs(".SH DESCRIPTION\n"
          "crl is a reinforcement\\-learning framework in C in the spirit of TorchRL: environments with "
          "specs, transforms, batched and parallel execution, replay buffers, losses and data collection.  "
          "It is a small host library (libcrl) and this command; environments, transforms, storages and "
          "losses come from plugins named in INI files (see\n.BR crl.ini (5)\nand\n.BR crl\\-plugins (7)),\n"
          "so a whole experiment is a configuration file.\n.PP\n"
          "Most commands take experiment files and\n.IB section . key = value\n"
          "overrides, layered over the system and user configuration in that order.\n", f);
    fputs(".SH COMMANDS\n", f);
    int rc = CRL_EXIT_OK;
    for (size_t i = 0; i < n; i++) {
        fputs(".SS \"crl ", f);
        roff(f, cmds[i].name);
        fputs("\"\n", f);
        roff(f, cmds[i].summary);
        fputs(".\n", f);
        char *help = command_help(&cmds[i]);
        if (!help) {
            fprintf(stderr, "crl help --man: 'crl %s --help' printed nothing\n", cmds[i].name);
            rc = CRL_EXIT_RUNTIME;
            continue;
        }
        roff_verbatim(f, help);
        g_free(help);
    }
    fputs(".SH EXAMPLES\nThe example experiments are installed in\n", f);
    roff(f, crl__examples_dir());
    fputs(":\n.PP\n.nf\n.RS 2\n", f);
    roff_line(f, "crl envs");
    fputs("crl run ", f);
    roff(f, crl__examples_dir());
    fputs("/cartpole\\-dqn.ini\ncrl rollout env.backend=classic env.id=Pendulum\\-v1 \\-\\-steps 20\n"
          ".RE\n.fi\n", f);
    fputs(".SH ENVIRONMENT\n"
          ".TP\n.B CRL_PLUGIN_PATH\nColon\\-separated directories searched for plugins before the user and "
          "system plugin directories (see\n.BR crl\\-plugins (7)).\n"
          ".TP\n.B CRL_PLUGIN_SCANNER\nThe plugin scanner program (default ", f);
    roff(f, CRL_SCANNER_PATH);
    fputs(").\n"
          ".TP\n.B CRL_ENV_WORKER\nThe program that runs each worker of a Python env backend under executor = "
          "processes (default ", f);
    roff(f, CRL_ENV_WORKER_PATH);
    fputs(").\n"
          ".TP\n.B XDG_CONFIG_HOME\nThe user configuration is $XDG_CONFIG_HOME/crl/crl.ini "
          "(default ~/.config/crl/crl.ini).\n"
          ".TP\n.B XDG_DATA_HOME\nUser plugins are found in $XDG_DATA_HOME/crl/plugins "
          "(default ~/.local/share/crl/plugins).\n"
          ".TP\n.B XDG_CACHE_HOME\nThe registry cache of scanned plugins is kept in $XDG_CACHE_HOME/crl "
          "(default ~/.cache/crl).\n"
          ".TP\n.B OPENBLAS_NUM_THREADS\nThreads of the BLAS library used by the networks of\n.BR \"crl run\" .\n",
          f);
    fputs(".SH FILES\n.TP\n", f);
    roff(f, CRL_SYSCONFDIR);
    fputs("/crl/crl.ini\nThe system configuration, the lowest layer.\n.TP\n", f);
    roff(f, CRL_PLUGINSDIR);
    fputs("\nThe system plugin directory.\n.TP\n", f);
    roff(f, crl__examples_dir());
    fputs("\nExample experiments.\n", f);
    fputs(".SH EXIT STATUS\n0 ok, 1 runtime failure, 2 bad usage or bad configuration (the message names "
          "FILE:LINE and how to fix it);\n.B crl run\nstopped by SIGINT or SIGTERM: 130 or 143.\n", f);
    fputs(".SH SEE ALSO\n.BR crl.ini (5),\n.BR crl\\-plugins (7)\n", f);
    return rc;
}

/* ---- crl.ini(5) ----------------------------------------------------------------------------------- */

/* The host plus the plugins it finds (scanned, not loaded), configured as crl would be without files. */
static int help_setup(crl_cli_ctx *ctx, crl_error *err)
{
    return crl__cli_setup(ctx, 0, NULL, CRL_CLI_LOAD_PLUGINS | CRL_CLI_TOLERATE_PLUGIN_FAILURES, err);
}

static int man_ini(FILE *f, crl_cli_ctx *ctx)
{
    roff_header(f, "CRL.INI", "5");
    fputs(".SH NAME\ncrl.ini \\- configuration and experiment files of crl\n", f);
    fputs(".SH SYNOPSIS\n", f);
    roff(f, CRL_SYSCONFDIR);
    fputs("/crl/crl.ini\n.br\n$XDG_CONFIG_HOME/crl/crl.ini\n.br\n.I EXPERIMENT.ini\n.br\n"
          ".IB section . key = value\n", f);
    fputs(".SH DESCRIPTION\n"
          "crl reads INI files in layers, each overriding the one before: the system file, the user file, "
          "the experiment files named on the command line in order, then\n.IB section . key = value\n"
          "arguments.\n.B crl config show\nprints the resolved configuration with every default and where "
          "each value came from.\n.PP\n"
          "Lines are\n.IB key \" = \" value\nunder a\n.BI [ section ]\nheader; lines starting with ';' or "
          "'#' are comments.  Configuration is strict: an unknown section or key, a duplicate key, a "
          "malformed line, or a value of the wrong type or out of range is an error naming FILE:LINE (with "
          "a \\(lqdid you mean\\(rq hint for misspellings), and the command exits with status 2.\n"
          ".SH VALUE TYPES\n"
          ".TP\n.B bool\ntrue/false, yes/no, on/off, 1/0.\n"
          ".TP\n.B int\n64\\-bit signed, decimal or 0x hexadecimal.\n"
          ".TP\n.B double\nA finite number.\n"
          ".TP\n.B string\nThe rest of the line, whitespace trimmed.\n"
          ".TP\n.B list\nComma\\-separated strings.\n"
          ".TP\n.B enum\nOne of the listed choices.\n"
          ".TP\n.B size\nBytes: 4096, 64K, 64M, 2G, 1T (powers of 1024).\n"
          ".TP\n.B doubles\nComma\\-separated finite numbers.\n", f);
    fputs(".SH SECTIONS\n", f);
    const char *section, *selector, *doc;
    const crl_option *table;
    crl_kind kind;
    for (size_t i = 0; crl__cli_schema_section(i, &section, &table, &selector, &kind, &doc); i++) {
        bool pattern = g_str_has_suffix(section, ".*");
        fputs(".SS \"[", f);
        if (pattern) {
            fwrite(section, 1, strlen(section) - 1, f);
            fputs("NAME", f);
        } else {
            roff(f, section);
        }
        fputs("]\"\n", f);
        roff(f, doc);
        fputs(".\n", f);
        roff_options(f, table);
        if (!selector)
            continue;
        size_t nc = crl_host_known_count(ctx->host, kind);
        fputs(".PP\n", f);
        fprintf(f, "The %s component that\n.B %s\nnames adds its own options to the section", crl_kind_name(kind),
                selector);
        fputs(nc ? "; those of the components found when this page was made follow.\n" : ".\n", f);
        for (size_t c = 0; c < nc; c++) {
            const crl_component *comp = crl_host_known_at(ctx->host, kind, c);
            fputs(".SS \"[", f);
            if (pattern) {
                fwrite(section, 1, strlen(section) - 1, f);
                fputs("NAME", f);
            } else {
                roff(f, section);
            }
            fputs("] ", f);
            roff(f, selector);
            fputs(" = ", f);
            roff(f, comp->name);
            fputs("\"\n", f);
            if (comp->description && *comp->description) {
                roff(f, comp->description);
                fputs(".\n", f);
            }
            const char *owner = crl_host_component_owner(ctx->host, kind, comp->name);
            if (owner) {
                fputs("(plugin ", f);
                roff(f, owner);
                fputs(")\n", f);
            }
            roff_options(f, comp->options);
        }
    }
    fputs(".SS \"[plugin.NAME]\"\nThe options a plugin declares for itself, given to its init.\n", f);
    for (size_t i = 0; i < crl_host_plugin_count(ctx->host); i++) {
        const crl_plugin_info *p = crl_host_plugin_at(ctx->host, i);
        char *sec = g_strconcat("plugin.", p->name, NULL);
        size_t nt = 0;
        const crl_option *const *tables = crl_schema_tables(crl_host_schema(ctx->host), ctx->cfg, sec, &nt);
        fputs(".SS \"[", f);
        roff(f, sec);
        fputs("]\"\n", f);
        roff(f, p->description);
        fputs(".\n", f);
        bool any = false;
        for (size_t t = 0; tables && t < nt; t++) {
            if (tables[t] && tables[t]->type != CRL_OPT_END) {
                roff_options(f, tables[t]);
                any = true;
            }
        }
        if (!any)
            roff_options(f, NULL);
        g_free(sec);
    }
    fputs(".SH FILES\n.TP\n", f);
    roff(f, CRL_SYSCONFDIR);
    fputs("/crl/crl.ini\nThe system configuration.\n.TP\n", f);
    roff(f, crl__examples_dir());
    fputs("\nExample experiments, one per algorithm and feature.\n", f);
    fputs(".SH SEE ALSO\n.BR crl (1),\n.BR crl\\-plugins (7)\n", f);
    return CRL_EXIT_OK;
}

/* ---- crl-plugins(7) ------------------------------------------------------------------------------- */

static int man_plugins(FILE *f, crl_cli_ctx *ctx)
{
    roff_header(f, "CRL-PLUGINS", "7");
    fputs(".SH NAME\ncrl\\-plugins \\- how crl finds, scans, caches and loads plugins, and how to write one\n", f);
    fputs(".SH DESCRIPTION\n"
          "A crl plugin is a shared object exporting one symbol,\n.BR crl_plugin_v1 ,\n"
          "whose init registers components: env backends, transforms, replay storages and losses.  "
          "crl never links a plugin: it finds plugin files on its search path, scans each new or changed "
          "one in a separate process, remembers the result, and loads a plugin into a command only when "
          "the command uses one of its components.\n", f);
    fputs(".SH SEARCH PATH\nDirectories are searched in this order (the first plugin of a name wins):\n"
          ".IP 1. 4\nThe directories of\n.B [plugins] path\nin the configuration.\n"
          ".IP 2. 4\nThose of the environment variable\n.BR CRL_PLUGIN_PATH \" (colon\\-separated).\"\n"
          ".IP 3. 4\nThe user directory $XDG_DATA_HOME/crl/plugins (default ~/.local/share/crl/plugins).\n"
          ".IP 4. 4\nThe system directory\n", f);
    roff(f, CRL_PLUGINSDIR);
    fputs(".\n.PP\nThe [plugins] section (see\n.BR crl.ini (5))\nchooses what is loaded:\n", f);
    roff_options(f, crl_host_plugins_options());
    fputs(".PP\nEvery directory of a plugin's path, each symbolic link resolved in turn, must be changeable "
          "only by root or the user running crl; a plugin file or directory that others can change is "
          "refused with the chmod or chown that fixes it.\n", f);
    fputs(".SH SCANNER AND REGISTRY CACHE\n"
          "A plugin file crl has not seen, or whose size, modification time or inode changed, is first "
          "opened by\n.B crl\\-plugin\\-scanner\n(", f);
    roff(f, CRL_SCANNER_PATH);
    fputs("), a separate process: it loads the file, checks its descriptor (plugin ABI, name), runs init "
          "with the default options, records and checks what it registered, runs fini, and reports.  A "
          "plugin that crashes, exits, or does not finish within\n.B [plugins] scan_timeout\n"
          "seconds is marked broken with the reason and never loaded into a command.\n.PP\n"
          "Results are kept in the registry cache, $XDG_CACHE_HOME/crl/registry\\-MAJOR.MINOR.bin "
          "(default ~/.cache/crl), so later commands do not scan unchanged files.\n"
          ".B crl plugins \\-\\-rescan\nscans everything again;\n.B crl plugins \\-\\-check\n"
          "exits 1 when any plugin is broken (for package post\\-installation checks).\n", f);
    fputs(".SH PLUGIN ABI\nA plugin records the plugin ABI it was built against (CRL_ABI_MAJOR.CRL_ABI_MINOR "
          "of the SDK headers).  The host loads plugins of its own major version and of a minor version up "
          "to its own; this host has ABI ", f);
    fprintf(f, "%d.%d", CRL_ABI_MAJOR, CRL_ABI_MINOR);
    fputs(".  libcrl's symbols are versioned CRL_1.N, so a plugin using newer symbols is refused with the "
          "ABI message, never with \\(lqundefined symbol\\(rq.  Distribution packages of the host provide "
          "the virtual package\n", f);
    fprintf(f, ".B crl\\-abi\\-%d\nat version %d.%d; a package of a plugin depends on it at the minor version "
               "it was built with (the SDK's pkg\\-config file names the dependency:\n"
               ".BR \"pkg\\-config \\-\\-variable=abi_depends crl\\-plugin\\-sdk\" ).\n",
            CRL_ABI_MAJOR, CRL_ABI_MAJOR, CRL_ABI_MINOR);
    fputs(".SH WRITING A PLUGIN\nThe SDK is the headers in\n", f);
    roff(f, CRL_SDK_INCLUDEDIR);
    fputs(" (only these: a host header does not compile with the SDK's flags), libcrl, and the pkg\\-config "
          "file\n.BR crl\\-plugin\\-sdk .\nA plugin builds and installs with:\n.PP\n.nf\n.RS 2\n"
          "cc \\-std=c11 \\-fPIC \\-fvisibility=hidden $(pkg\\-config \\-\\-cflags crl\\-plugin\\-sdk) \\e\n"
          "   \\-shared \\-o mine.so mine.c $(pkg\\-config \\-\\-libs crl\\-plugin\\-sdk)\n"
          "install \\-m 0644 mine.so \"$(pkg\\-config \\-\\-variable=pluginsdir crl\\-plugin\\-sdk)\"\n"
          "crl plugins \\-\\-verbose\n.RE\n.fi\n.PP\nThe plugin author's guide is\n", f);
    roff(f, CRL_SDKDOCDIR);
    fputs("/GUIDE.md, and a complete out\\-of\\-tree plugin (an env backend, a transform and a replay "
          "storage, with its Makefile) is in\n", f);
    roff(f, CRL_SDKDOCDIR);
    fputs("/examples.\n", f);
    size_t np = crl_host_plugin_count(ctx->host);
    if (np) {
        fputs(".SH PLUGINS OF THIS BUILD\nFound when this page was made (\n.B crl plugins \\-\\-verbose\n"
              "lists those installed now):\n", f);
        for (size_t i = 0; i < np; i++) {
            const crl_plugin_info *p = crl_host_plugin_at(ctx->host, i);
            fputs(".TP\n.B ", f);
            roff(f, p->name);
            fputs("\n", f);
            roff(f, p->description);
            fputs(".\n", f);
        }
    }
    fputs(".SH SEE ALSO\n.BR crl (1),\n.BR crl.ini (5)\n", f);
    return CRL_EXIT_OK;
}

/* ---- completion words ----------------------------------------------------------------------------- */

static void print_unique(GPtrArray *words)
{
    GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; i < words->len; i++) {
        const char *w = words->pdata[i];
        if (g_hash_table_add(seen, (gpointer)w))
            puts(w);
    }
    g_hash_table_destroy(seen);
}

static void add_keys(GPtrArray *out, const char *section, const crl_option *table)
{
    for (const crl_option *o = table; o && o->type != CRL_OPT_END; o++)
        g_ptr_array_add(out, g_strconcat(section, ".", o->name, NULL));
}

/* Every section.key crl accepts: the host's sections (a pattern section such as [transform.NAME] has a
 * name of the user's, so only its fixed sections), the options of every component a selector may name,
 * and [plugin.NAME] of every plugin found. */
static void complete_keys(crl_cli_ctx *ctx)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    const char *section, *selector, *doc;
    const crl_option *table;
    crl_kind kind;
    for (size_t i = 0; crl__cli_schema_section(i, &section, &table, &selector, &kind, &doc); i++) {
        if (g_str_has_suffix(section, ".*"))
            continue;
        add_keys(out, section, table);
        for (size_t c = 0; selector && c < crl_host_known_count(ctx->host, kind); c++)
            add_keys(out, section, crl_host_known_at(ctx->host, kind, c)->options);
    }
    for (size_t i = 0; i < crl_host_plugin_count(ctx->host); i++) {
        char *sec = g_strconcat("plugin.", crl_host_plugin_at(ctx->host, i)->name, NULL);
        size_t nt = 0;
        const crl_option *const *tables = crl_schema_tables(crl_host_schema(ctx->host), ctx->cfg, sec, &nt);
        for (size_t t = 0; tables && t < nt; t++)
            add_keys(out, sec, tables[t]);
        g_free(sec);
    }
    print_unique(out);
    g_ptr_array_free(out, TRUE);
}

/* The values of one key: component names for a selector key (env.backend, transform.NAME.type, ...),
 * plugin names for plugins.load and plugins.disable, the choices of an enum, true/false for a bool. */
static int complete_values(crl_cli_ctx *ctx, const char *key)
{
    const char *dot = strrchr(key, '.');
    if (!dot || dot == key)
        return CRL_EXIT_USAGE;
    char *sec = g_strndup(key, (gsize)(dot - key));
    const char *name = dot + 1;
    if (!strcmp(sec, "plugins") && (!strcmp(name, "load") || !strcmp(name, "disable"))) {
        for (size_t i = 0; i < crl_host_plugin_count(ctx->host); i++)
            puts(crl_host_plugin_at(ctx->host, i)->name);
        g_free(sec);
        return CRL_EXIT_OK;
    }
    const char *section, *selector, *doc;
    const crl_option *table;
    crl_kind kind;
    for (size_t i = 0; crl__cli_schema_section(i, &section, &table, &selector, &kind, &doc); i++) {
        size_t plen = strlen(section) - 1; /* "transform.*" matches "transform.NAME" */
        bool match = g_str_has_suffix(section, ".*")
                         ? !strncmp(sec, section, plen) && sec[plen] && !strchr(sec + plen, '.')
                         : !strcmp(sec, section);
        if (match && selector && !strcmp(name, selector)) {
            for (size_t c = 0; c < crl_host_known_count(ctx->host, kind); c++)
                puts(crl_host_known_at(ctx->host, kind, c)->name);
            g_free(sec);
            return CRL_EXIT_OK;
        }
    }
    size_t nt = 0;
    const crl_option *const *tables = crl_schema_tables(ctx->schema, ctx->cfg, sec, &nt);
    for (size_t t = 0; tables && t < nt; t++) {
        for (const crl_option *o = tables[t]; o && o->type != CRL_OPT_END; o++) {
            if (strcmp(o->name, name))
                continue;
            if (o->type == CRL_OPT_BOOL) {
                puts("true");
                puts("false");
            } else if (o->type == CRL_OPT_ENUM && o->choices) {
                char **ch = g_strsplit(o->choices, "|", -1);
                for (char **c = ch; *c; c++)
                    puts(*c);
                g_strfreev(ch);
            }
        }
    }
    g_free(sec);
    return CRL_EXIT_OK;
}

/* The long options a command's --help lists ("  --steps N", "  -v, --verbose"). */
static int complete_options(const char *cmd)
{
    const crl_cli_command *c = find_command(cmd);
    char *help = c ? command_help(c) : NULL;
    if (!help)
        return CRL_EXIT_USAGE;
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    char **lines = g_strsplit(help, "\n", -1);
    for (char **l = lines; *l; l++) {
        const char *s = *l;
        while (*s == ' ')
            s++;
        if (s == *l || *s != '-')
            continue;
        /* "-v, --verbose  ..." or "--steps N  ...": the leading option words */
        char **words = g_strsplit_set(s, " ,", -1);
        for (char **w = words; *w; w++) {
            if (g_str_has_prefix(*w, "--") && (*w)[2])
                g_ptr_array_add(out, g_strdup(*w));
            else if (**w && **w != '-')
                break;
        }
        g_strfreev(words);
    }
    g_strfreev(lines);
    g_free(help);
    print_unique(out);
    g_ptr_array_free(out, TRUE);
    return CRL_EXIT_OK;
}

/* A command's own subcommands: the lowercase words after "crl CMD" in its usage lines (config check,
 * replay repair); for a usage of the form "crl CMD NAME", the names its help lists ("  core  ..."). */
static int complete_subcommands(const char *cmd)
{
    const crl_cli_command *c = find_command(cmd);
    char *help = c ? command_help(c) : NULL;
    if (!help)
        return CRL_EXIT_USAGE;
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    char *lead = g_strconcat("crl ", cmd, " ", NULL);
    bool names = false;
    char **lines = g_strsplit(help, "\n", -1);
    for (char **l = lines; *l; l++) {
        const char *u = strstr(*l, lead);
        bool usage_line = u && (g_str_has_prefix(*l, "Usage: ") || *l[0] == ' ') && l - lines < 4;
        if (usage_line) {
            const char *w = u + strlen(lead);
            size_t len = strspn(w, "abcdefghijklmnopqrstuvwxyz_");
            if (len && (w[len] == ' ' || !w[len]))
                g_ptr_array_add(out, g_strndup(w, len));
            else if (!strncmp(w, "NAME", 4))
                names = true;
        } else if (names && (*l)[0] == ' ' && (*l)[1] == ' ' && g_ascii_islower((*l)[2])) {
            const char *w = *l + 2;
            size_t len = strspn(w, "abcdefghijklmnopqrstuvwxyz_");
            if (w[len] == ' ')
                g_ptr_array_add(out, g_strndup(w, len));
        }
    }
    g_strfreev(lines);
    g_free(lead);
    g_free(help);
    print_unique(out);
    g_ptr_array_free(out, TRUE);
    return CRL_EXIT_OK;
}

/* ---- the command ---------------------------------------------------------------------------------- */

static int with_host(int (*fn)(FILE *, crl_cli_ctx *), const char *what)
{
    crl_cli_ctx ctx;
    crl_error err;
    crl_error_clear(&err);
    if (help_setup(&ctx, &err))
        return crl__cli_setup_failed(what, &err);
    int rc = fn(stdout, &ctx);
    crl__cli_teardown(&ctx);
    return rc;
}

static int complete_keys_fn(FILE *f, crl_cli_ctx *ctx)
{
    (void)f;
    complete_keys(ctx);
    return CRL_EXIT_OK;
}

static int complete_plugins_fn(FILE *f, crl_cli_ctx *ctx)
{
    (void)f;
    for (size_t i = 0; i < crl_host_plugin_count(ctx->host); i++)
        puts(crl_host_plugin_at(ctx->host, i)->name);
    return CRL_EXIT_OK;
}

static const char *values_key;
static int complete_values_fn(FILE *f, crl_cli_ctx *ctx)
{
    (void)f;
    return complete_values(ctx, values_key);
}

int crl__cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        crl__cli_usage(stdout);
        return CRL_EXIT_OK;
    }
    const char *opt = argv[1];
    if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
        help_usage(stdout);
        return CRL_EXIT_OK;
    }
    if (!strcmp(opt, "--man") && argc == 3) {
        const char *page = argv[2];
        if (!strcmp(page, "crl"))
            return man_crl(stdout);
        if (!strcmp(page, "crl.ini"))
            return with_host(man_ini, "help");
        if (!strcmp(page, "crl-plugins"))
            return with_host(man_plugins, "help");
        fprintf(stderr, "crl help: no manual page '%s' (crl, crl.ini or crl-plugins)\n", page);
        return CRL_EXIT_USAGE;
    }
    if (!strcmp(opt, "--complete") && argc >= 3) {
        const char *what = argv[2];
        if (!strcmp(what, "commands") && argc == 3) {
            size_t n;
            const crl_cli_command *cmds = crl__cli_commands(&n);
            for (size_t i = 0; i < n; i++)
                puts(cmds[i].name);
            puts("help");
            return CRL_EXIT_OK;
        }
        if (!strcmp(what, "keys") && argc == 3)
            return with_host(complete_keys_fn, "help");
        if (!strcmp(what, "plugins") && argc == 3)
            return with_host(complete_plugins_fn, "help");
        if (!strcmp(what, "values") && argc == 4) {
            values_key = argv[3];
            return with_host(complete_values_fn, "help");
        }
        if (!strcmp(what, "options") && argc == 4)
            return complete_options(argv[3]);
        if (!strcmp(what, "subcommands") && argc == 4)
            return complete_subcommands(argv[3]);
    }
    help_usage(stderr);
    return CRL_EXIT_USAGE;
}
