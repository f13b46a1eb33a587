/* no_entry: a shared object that is not a crl plugin (no crl_plugin_v1 symbol). */
#include "fixture.h"

int no_entry_version(void);

int no_entry_version(void)
{
    fixture_mark("no_entry.ran", "ran\n");
    return 1;
}
