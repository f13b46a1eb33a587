/* plugins/replay: the replay plugin (replay.so), registering storage/list, storage/tensor and storage/memmap. */
#include "config.h"
#include "replay.h"

static const crl_component replay_components[] = {
    { sizeof(crl_component), CRL_KIND_STORAGE, "list",
      "in memory, one TensorDict per slot (items may differ in shape)", NULL, &rp_list_ops },
    { sizeof(crl_component), CRL_KIND_STORAGE, "tensor",
      "in memory, contiguous [capacity, ...] tensors laid out from the first item", NULL, &rp_tensor_ops },
    { sizeof(crl_component), CRL_KIND_STORAGE, "memmap",
      "on disk, durable: every acknowledged item survives kill -9; reopening the dir resumes it", rp_memmap_options,
      &rp_memmap_ops },
};

static int replay_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    for (size_t i = 0; i < sizeof replay_components / sizeof replay_components[0]; i++) {
        int rc = crl_host_register(host, &replay_components[i], err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

CRL_PLUGIN_DEFINE(replay, "replay", PACKAGE_VERSION, "MIT",
                  "replay storages: list and tensor in memory, memmap on disk (durable)", NULL, replay_init, NULL)
