/* NVTX ranges named "slabfeed:<stage>" (read, plan, get, h2d, transform,
 * wait), so that an Nsight Systems timeline shows where the loader spends
 * its time. Compiled out without NVTX. */
#ifndef SF_NVTX_H
#define SF_NVTX_H

#ifdef SF_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#define SF_RANGE_PUSH(stage) nvtxRangePushA("slabfeed:" stage)
#define SF_RANGE_POP() nvtxRangePop()
#else
#define SF_RANGE_PUSH(stage) ((void)0)
#define SF_RANGE_POP() ((void)0)
#endif

#endif
