/* crl-plugin-scanner: opens one plugin file in a process of its own for the crl host (see scanner_main.c). */
#include <crl/host.h>

int main(int argc, char **argv)
{
    return crl_plugin_scanner_main(argc, argv);
}
