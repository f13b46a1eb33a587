/* crl plugins: list the known plugins (from their scans: nothing is loaded to list them), what each
 * registers, their options, and the broken ones with their reasons. */
#include "config.h"
#include "cli-private.h"

#include <glib.h>
#include <string.h>

const char *crl__cli_opt_type_name(int32_t type)
{
    switch (type) {
    case CRL_OPT_BOOL: return "bool";
    case CRL_OPT_INT: return "int";
    case CRL_OPT_DOUBLE: return "double";
    case CRL_OPT_STRING: return "string";
    case CRL_OPT_LIST: return "list";
    case CRL_OPT_ENUM: return "enum";
    case CRL_OPT_SIZE: return "size";
    case CRL_OPT_DOUBLES: return "doubles";
    default: return "?";
    }
}

static const crl_kind all_kinds[] = {
    CRL_KIND_ENV, CRL_KIND_TRANSFORM, CRL_KIND_STORAGE, CRL_KIND_SAMPLER, CRL_KIND_WRITER, CRL_KIND_LOSS
};

/* Calls fn for every component `plugin` registered, by kind then name. */
typedef void (*component_fn)(crl_kind kind, const crl_component *c, void *user, bool first);

static void each_component(const crl_host *host, const char *plugin, component_fn fn, void *user)
{
    bool first = true;
    for (size_t k = 0; k < G_N_ELEMENTS(all_kinds); k++)
        for (size_t i = 0; i < crl_host_known_count(host, all_kinds[k]); i++) {
            const crl_component *c = crl_host_known_at(host, all_kinds[k], i);
            const char *owner = crl_host_component_owner(host, all_kinds[k], c->name);
            if (owner && !strcmp(owner, plugin)) {
                fn(all_kinds[k], c, user, first);
                first = false;
            }
        }
}

/* ---- text ---------------------------------------------------------------- */

static void print_range(const crl_option *o)
{
    if (o->type == CRL_OPT_ENUM && o->choices)
        printf("  choices %s", o->choices);
    if (o->flags & CRL_OPT_RANGE) {
        if (o->type == CRL_OPT_LIST || o->type == CRL_OPT_DOUBLES)
            printf("  length [%g, %g]", o->min, o->max);
        else if (o->type == CRL_OPT_INT || o->type == CRL_OPT_SIZE)
            /* Whole numbers: %g would print 1073741824 as 1.07374e+09. */
            printf("  range [%.0f, %.0f]", o->min, o->max);
        else
            printf("  range [%.15g, %.15g]", o->min, o->max);
    }
}

static void print_options(const crl_option *opts, const char *indent)
{
    if (!opts || opts[0].type == CRL_OPT_END) {
        printf("%s(no options)\n", indent);
        return;
    }
    for (const crl_option *o = opts; o->type != CRL_OPT_END; o++) {
        printf("%s%-16s %-7s", indent, o->name, crl__cli_opt_type_name(o->type));
        if (o->flags & CRL_OPT_REQUIRED)
            printf("  required");
        else if (o->default_value)
            printf("  default '%s'", o->default_value);
        else
            printf("  no default");
        print_range(o);
        if (o->flags & CRL_OPT_PREFIX)
            printf("  (prefix: any key starting with '%s')", o->name);
        printf("\n");
        if (o->doc && *o->doc)
            printf("%s    %s\n", indent, o->doc);
    }
}

static void text_component(crl_kind kind, const crl_component *c, void *user, bool first)
{
    bool verbose = *(const bool *)user;
    if (first)
        printf("  registers:\n");
    printf("    %s/%s", crl_kind_name(kind), c->name);
    if (verbose && c->description && *c->description)
        printf(": %s", c->description);
    printf("\n");
    if (verbose)
        print_options(c->options, "        ");
}

static void print_text(const crl_host *host, const crl_config *cfg, bool verbose)
{
    const char *const *path = crl_host_search_path(host);
    size_t n = crl_host_plugin_count(host);
    if (verbose) {
        printf("search path:\n");
        for (const char *const *d = path; d && *d; d++)
            printf("  %s\n", *d);
        printf("\n");
    }
    if (n == 0) {
        printf("no plugins found (searched:");
        for (const char *const *d = path; d && *d; d++)
            printf(" %s", *d);
        printf(")\n");
    }
    for (size_t i = 0; i < n; i++) {
        const crl_plugin_info *p = crl_host_plugin_at(host, i);
        if (i > 0 && verbose)
            printf("\n");
        printf("%s %s (ABI %u.%u) %s\n", p->name, p->version, (unsigned)p->abi_major, (unsigned)p->abi_minor,
               p->path);
        if (verbose) {
            printf("  license:     %s\n", p->license);
            printf("  description: %s\n", p->description);
            printf("  options [plugin.%s]:\n", p->name);
            char *section = g_strconcat("plugin.", p->name, NULL);
            size_t nt = 0;
            const crl_option *const *tables = crl_schema_tables(crl_host_schema((crl_host *)host), cfg, section,
                                                                &nt);
            if (!tables || nt == 0)
                print_options(NULL, "    ");
            for (size_t t = 0; tables && t < nt; t++)
                print_options(tables[t], "    ");
            g_free(section);
        }
        each_component(host, p->name, text_component, &verbose);
    }
    size_t nf = crl_host_failure_count(host);
    if (nf)
        printf("%sbroken (never loaded into crl; fix or remove them, then 'crl plugins --check'):\n",
               n ? "\n" : "");
    for (size_t i = 0; i < nf; i++) {
        const char *file = NULL;
        const crl_error *e = crl_host_failure_at(host, i, &file);
        printf("  %s\n    %s (%s)\n", file ? file : "?", e->message, crl_status_name(e->code));
    }
}

/* ---- JSON ---------------------------------------------------------------- */

static void json_number(double v)
{
    /* %.17g round-trips; JSON has no inf/nan, which ranges never hold. */
    printf("%.17g", v);
}

/* One declared option as a JSON object. */
static void json_option(const crl_option *o)
{
    printf("{\"name\":");
    crl__cli_json_string(stdout, o->name);
    printf(",\"type\":\"%s\",\"required\":%s,\"default\":", crl__cli_opt_type_name(o->type),
           (o->flags & CRL_OPT_REQUIRED) ? "true" : "false");
    if (o->default_value && !(o->flags & CRL_OPT_REQUIRED))
        crl__cli_json_string(stdout, o->default_value);
    else
        printf("null");
    if (o->flags & CRL_OPT_RANGE) {
        printf(",\"min\":");
        json_number(o->min);
        printf(",\"max\":");
        json_number(o->max);
    }
    if (o->type == CRL_OPT_ENUM && o->choices) {
        printf(",\"choices\":[");
        char **ch = g_strsplit(o->choices, "|", -1);
        for (char **c = ch; *c; c++) {
            printf("%s", c == ch ? "" : ",");
            crl__cli_json_string(stdout, *c);
        }
        g_strfreev(ch);
        printf("]");
    }
    printf(",\"prefix\":%s,\"doc\":", (o->flags & CRL_OPT_PREFIX) ? "true" : "false");
    crl__cli_json_string(stdout, o->doc);
    printf("}");
}

/* The options of several tables as one JSON array. */
static void json_option_tables(const crl_option *const *tables, size_t nt)
{
    printf("[");
    bool first = true;
    for (size_t t = 0; tables && t < nt; t++) {
        for (const crl_option *o = tables[t]; o && o->type != CRL_OPT_END; o++) {
            printf("%s", first ? "" : ",");
            json_option(o);
            first = false;
        }
    }
    printf("]");
}

static void json_options(const crl_option *opts)
{
    json_option_tables(&opts, 1);
}

static void json_component(crl_kind kind, const crl_component *c, void *user, bool first)
{
    printf("%s{\"kind\":", first ? "" : ",");
    crl__cli_json_string(stdout, crl_kind_name(kind));
    printf(",\"name\":");
    crl__cli_json_string(stdout, c->name);
    printf(",\"description\":");
    crl__cli_json_string(stdout, c->description);
    printf(",\"options\":");
    json_options(c->options);
    printf("}");
}

static void print_json(const crl_host *host, const crl_config *cfg)
{
    printf("{\"plugins\":[");
    for (size_t i = 0; i < crl_host_plugin_count(host); i++) {
        const crl_plugin_info *p = crl_host_plugin_at(host, i);
        printf("%s{\"name\":", i ? "," : "");
        crl__cli_json_string(stdout, p->name);
        printf(",\"version\":");
        crl__cli_json_string(stdout, p->version);
        printf(",\"file\":");
        crl__cli_json_string(stdout, p->path);
        printf(",\"builtin\":%s,\"loaded\":%s,\"abi\":\"%u.%u\",\"license\":", p->builtin ? "true" : "false",
               p->loaded ? "true" : "false", (unsigned)p->abi_major, (unsigned)p->abi_minor);
        crl__cli_json_string(stdout, p->license);
        printf(",\"description\":");
        crl__cli_json_string(stdout, p->description);
        printf(",\"options\":");
        char *section = g_strconcat("plugin.", p->name, NULL);
        size_t nt = 0;
        const crl_option *const *tables = crl_schema_tables(crl_host_schema((crl_host *)host), cfg, section, &nt);
        json_option_tables(tables, nt);
        g_free(section);
        printf(",\"components\":[");
        each_component(host, p->name, json_component, NULL);
        printf("]}");
    }
    printf("],\"failures\":[");
    for (size_t i = 0; i < crl_host_failure_count(host); i++) {
        const char *path = NULL;
        const crl_error *e = crl_host_failure_at(host, i, &path);
        printf("%s{\"path\":", i ? "," : "");
        crl__cli_json_string(stdout, path);
        printf(",\"code\":");
        crl__cli_json_string(stdout, crl_status_name(e->code));
        printf(",\"message\":");
        crl__cli_json_string(stdout, e->message);
        printf("}");
    }
    printf("],\"search_path\":[");
    const char *const *path = crl_host_search_path(host);
    for (const char *const *d = path; d && *d; d++) {
        printf("%s", d == path ? "" : ",");
        crl__cli_json_string(stdout, *d);
    }
    printf("]}\n");
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: crl plugins [--verbose] [--json] [--check] [--rescan] [FILE.ini...]\n"
            "                   [section.key=value...]\n\n"
            "Find the plugins the configuration asks for ([plugins] path, load, disable,\n"
            "autoload) and list each one: name, version, file, plugin ABI and the\n"
            "components it registers (kind/name), then the broken ones with the reason.\n"
            "New or changed plugin files are scanned in a separate process (a crash,\n"
            "exit or hang there marks the plugin broken) and the results are kept in\n"
            "the registry cache ($XDG_CACHE_HOME/crl/); listing loads no plugin.\n\n"
            "  -v, --verbose  also print license, description, the search path, and the\n"
            "                 option tables of each plugin ([plugin.NAME]) and component\n"
            "  --json         print one JSON object {\"plugins\":[...],\"failures\":[...],\n"
            "                 \"search_path\":[...]} with all of the above\n"
            "  --check        exit 1 when any plugin is broken (for package post-install\n"
            "                 checks and CI)\n"
            "  --rescan       scan every plugin again and rewrite the registry cache\n"
            "  -h, --help     print this help\n\n"
            "Exit status: 0 ok (broken plugins are listed, not fatal), 1 --check found a\n"
            "broken plugin, 2 bad usage or bad config.\n");
}

int crl__cmd_plugins(int argc, char **argv)
{
    bool verbose = false, json = false, check = false, rescan = false;
    GPtrArray *rest = g_ptr_array_new();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            g_ptr_array_free(rest, TRUE);
            return CRL_EXIT_OK;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            verbose = true;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--check")) {
            check = true;
        } else if (!strcmp(a, "--rescan")) {
            rescan = true;
        } else if (!strcmp(a, "--")) {
            for (i++; i < argc; i++)
                g_ptr_array_add(rest, argv[i]);
        } else {
            /* Unknown dashed options are rejected by crl__cli_setup. */
            g_ptr_array_add(rest, argv[i]);
        }
    }
    crl_cli_ctx ctx;
    crl_error err = { 0 };
    int rc = crl__cli_setup(&ctx, (int)rest->len, (char **)rest->pdata,
                            CRL_CLI_LOAD_PLUGINS | CRL_CLI_TOLERATE_PLUGIN_FAILURES |
                                (rescan ? CRL_CLI_RESCAN : 0u),
                            &err);
    g_ptr_array_free(rest, TRUE);
    if (rc)
        return crl__cli_setup_failed("plugins", &err);
    if (json)
        print_json(ctx.host, ctx.cfg);
    else
        print_text(ctx.host, ctx.cfg, verbose);
    fflush(stdout);
    size_t nf = crl_host_failure_count(ctx.host);
    if (check && nf)
        fprintf(stderr, "crl plugins --check: %zu plugin%s broken (listed above)\n", nf, nf == 1 ? " is" : "s are");
    crl__cli_teardown(&ctx);
    return check && nf ? CRL_EXIT_RUNTIME : CRL_EXIT_OK;
}
