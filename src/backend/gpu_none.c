/* The GPU back end of builds without CUDA: opening it fails with a message
 * that says why and what to do, so the facade needs no #ifdef. */
#include "backend/backend.h"

static slabfeed_status none_open(const sf__context *ctx, sf__backend **out,
                                 sf__err *e)
{
  *out = NULL;
  return sf__fail(e, SLABFEED_ERR_UNSUPPORTED,
                  "device %d requested, but slabfeed was built without CUDA "
                  "(SLABFEED_CUDA=OFF or no nvcc); use device -1",
                  ctx->cfg->pub.device);
}

const sf__backend_ops sf__gpu_backend = {.name = "gpu (not built)",
                                         .open = none_open};

int slabfeed_warm_device(int device)
{
  (void)device;
  return 0;
}
