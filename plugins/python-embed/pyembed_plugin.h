/* The [plugin.NAME] side every Python-backed plugin shares: the python_path
 * option and an init that starts the interpreter with it. */
#ifndef CRL_PYEMBED_PLUGIN_H
#define CRL_PYEMBED_PLUGIN_H

#include "pyembed.h"

/* The plugin options of a Python-backed plugin ([plugin.NAME] python_path);
 * pass as CRL_PLUGIN_DEFINE's plugin options.  Static data, never freed. */
extern const crl_option pyembed_plugin_options[];

/* Read python_path from the plugin's section (may be NULL) and call
 * pyembed_init(host, who, ...) with it.  Returns CRL_OK, or the error of
 * reading the option or of starting the interpreter (err set, may be NULL).
 * Call without the GIL; returns with it released. */
int pyembed_plugin_init(crl_host *host, const char *who, const crl_opts *section, crl_error *err);

#endif
