/* The config schema of the crl command (schema.c); also compiled into the suites that validate configs as
 * crl does. */
#ifndef CRL_CLI_SCHEMA_H
#define CRL_CLI_SCHEMA_H

#include <crl/host.h>

/* A new schema of every section crl reads: the host's [plugins] and [log], [env], [transform.*],
 * [replay], [collector], [loss], [optim] and [train] (each with the option table its part declares, and
 * the selector that adds the named component's), then what crl_host_schema_add_plugins declares for the
 * plugins `host` knows now.  Rebuild it after loading plugins; free it (crl_schema_free) before the host.
 * NULL with err set when a table is malformed. */
crl_schema *crl__cli_schema_new(crl_host *host, crl_error *err);

/* The sections crl__cli_schema_new adds, in order (for the man page and completion): the i-th one's
 * name ("transform.*"), option table, selector key (NULL when none) and the kind it selects, and a
 * one-line doc.  Returns false past the end. */
bool crl__cli_schema_section(size_t i, const char **section, const crl_option **table, const char **selector,
                             crl_kind *kind, const char **doc);

#endif
