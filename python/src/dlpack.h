/*
 * The DLPack ABI: the few C structs a producer hands to a consumer in a
 * PyCapsule. Written for slabfeed from the DLPack specification, version
 * 1.0 (https://dmlc.github.io/dlpack/latest/c_api.html, the header
 * include/dlpack/dlpack.h of github.com/dmlc/dlpack at tag v1.0) and the
 * Python protocol of the array API standard ("Data interchange mechanisms",
 * __dlpack__ / __dlpack_device__). Only what slabfeed produces is named
 * here; the layouts are the specification's, member for member.
 *
 * Capsule protocol (Python):
 *  - legacy:    name "dltensor", a DLManagedTensor; a consumer renames it
 *               "used_dltensor" and later calls the deleter;
 *  - versioned: name "dltensor_versioned", a DLManagedTensorVersioned,
 *               handed out only to consumers that pass max_version >= (1,0);
 *               renamed "used_dltensor_versioned" when consumed.
 * A capsule that dies unconsumed calls the deleter itself.
 */
#ifndef SFPY_DLPACK_H
#define SFPY_DLPACK_H

#include <stdint.h>

#define SFPY_DLPACK_MAJOR 1
#define SFPY_DLPACK_MINOR 0

/* Version of the DLPack ABI of a DLManagedTensorVersioned. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/* Device types slabfeed uses (the enum's values are pinned by DLPack). */
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/* Type codes slabfeed uses. */
typedef enum {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLBfloat = 4,
} DLDataTypeCode;

typedef struct {
  uint8_t code;   /* DLDataTypeCode */
  uint8_t bits;   /* 16 or 32 here */
  uint16_t lanes; /* 1: scalars */
} DLDataType;

typedef struct {
  void *data; /* host or device pointer, aligned to 256 bytes ideally */
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;       /* [ndim] */
  int64_t *strides;     /* [ndim] in elements; NULL means C-contiguous */
  uint64_t byte_offset; /* added to data */
} DLTensor;

/* Legacy (pre-1.0) managed tensor: capsule "dltensor". */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* Flags of DLManagedTensorVersioned. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)

/* Versioned managed tensor (DLPack >= 1.0): capsule "dltensor_versioned".
 * Note the order: version first, the tensor last (so that it may grow). */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif /* SFPY_DLPACK_H */
