// The DLPack ABI (https://dmlc.github.io/dlpack, v1.0): the C structs exchanged in "dltensor"
// and "dltensor_versioned" capsules. Declared here from the specification; layouts are fixed.
#pragma once
#include <cstdint>

namespace kiln::python::dlpack {

enum DeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 };
enum DataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6
};

struct Device {
  int32_t deviceType;
  int32_t deviceId;
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides; // in elements; null means compact row-major
  uint64_t byteOffset;
};

// The legacy, unversioned capsule payload ("dltensor").
struct ManagedTensor {
  Tensor dlTensor;
  void* managerCtx;
  void (*deleter)(ManagedTensor* self);
};

struct Version {
  uint32_t major;
  uint32_t minor;
};

constexpr uint64_t kFlagReadOnly = 1ull << 0;
constexpr uint64_t kFlagIsCopied = 1ull << 1;

// The versioned capsule payload ("dltensor_versioned", DLPack >= 1.0).
struct ManagedTensorVersioned {
  Version version;
  void* managerCtx;
  void (*deleter)(ManagedTensorVersioned* self);
  uint64_t flags;
  Tensor dlTensor;
};

} // namespace kiln::python::dlpack
