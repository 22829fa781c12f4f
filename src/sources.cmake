# Library sources by folder; each folder is one layer or a few adjacent
# ones (docs/ARCHITECTURE.md has the table that lint.layers reads), and
# every file of src/ is in one.
# Internal headers are included by their path below src/:
# "store/store.h".
set(SLABFEED_SOURCES
  src/loader/loader.c                                   # facade
  src/writer/writer.c                                   # pass writer
  src/backend/host.c                                    # back ends
  src/source/fetch.c src/source/source.c src/source/window.c
  src/source/landed.c src/source/gather.c               # piece sources
  src/plan/batch.c src/plan/placement.c src/plan/sampler.c
  src/plan/tiles.c src/plan/residency.c                 # plans
  src/store/store.c                                     # slab store (windows)
  src/io/volume.c src/io/suite.c src/io/slab.c src/io/h5.c src/io/aside.c # file access
  src/config/config.c src/config/options.c              # options
  src/transform/transform.c                             # host reference
  src/common/errors.c src/common/stats.c src/common/inject.c src/common/sys.c
  src/common/mpilib.c src/common/topo.c
  src/common/geometry.c src/common/symmetry.c src/common/progress.c # base
  src/tools/generate.c src/tools/reference.c src/tools/stats.c
  src/tools/numa_report.c)                              # tools, topology report
if(SLABFEED_HAVE_CUDA)
  list(APPEND SLABFEED_SOURCES src/backend/gpu.c src/backend/resident.c
       src/cuda/cudart.c
       src/transform/transform.cu src/transform/inverse.cu
       src/transform/pieces.cu)
else()
  list(APPEND SLABFEED_SOURCES src/backend/gpu_none.c)
endif()
