# Library sources, by module (see docs/ARCHITECTURE.md for the layering).
set(SLABFEED_SOURCES
  src/loader.c                                  # facade
  src/config.c src/stats.c                      # options, statistics
  src/host.c                                    # host back end
  src/batch.c                                   # batch plan
  src/placement.c src/store.c src/slab.c src/h5.c src/gather.c  # slabs, windows, pieces
  src/fetch.c                                   # remote pieces ahead
  src/inject.c src/geometry.c src/sampler.c src/symmetry.c src/transform.c src/errors.c
  src/gen.c src/reference.c)                    # tools
if(SLABFEED_HAVE_CUDA)
  list(APPEND SLABFEED_SOURCES src/gpu.c src/cudart.c src/transform.cu)
else()
  list(APPEND SLABFEED_SOURCES src/gpu_none.c)
endif()
