/* crl-env-worker: one block of a Python env backend in a process of its own for the processes executor (see exec_reexec.c). */
#include <crl/host.h>

int main(int argc, char **argv)
{
    return crl_env_worker_main(argc, argv);
}
