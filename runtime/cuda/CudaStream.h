// CUDA streams and events. A stream is a (device, CUstream) pair, not owned: the default stream
// is the legacy NULL stream, and kiln.cuda.Stream() hands out streams from a per-device pool of
// 32 that live as long as the process (as PyTorch's pool), so the caching allocator's per-stream
// pools never see a destroyed stream's handle reused.
#pragma once
#include <cstdint>

#include "runtime/cuda/CudaDriverApi.h"

namespace kiln::cuda {

struct CudaStream {
  int device = 0;
  CUstream handle = nullptr; // nullptr: the device's default (legacy NULL) stream
  bool operator==(const CudaStream& o) const { return device == o.device && handle == o.handle; }
};

CudaStream defaultStream(int device);
// This thread's current stream on `device` (the default stream until set).
CudaStream currentStream(int device);
void setCurrentStream(CudaStream stream);
// The next stream of the device's pool (round robin over 32 non-blocking streams).
CudaStream streamFromPool(int device);
void synchronizeStream(CudaStream stream);
// True when every operation queued on the stream has finished.
bool queryStream(CudaStream stream);
// Waits for every stream of the device (cuCtxSynchronize).
void synchronizeDevice(int device);

// An owned CUevent, created on its first record (on the recording stream's device).
class CudaEvent {
public:
  explicit CudaEvent(bool enableTiming = false, bool blocking = false);
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  void record(CudaStream stream);
  // Makes `stream` wait for the work this event recorded (no-op before any record).
  void block(CudaStream stream) const;
  void synchronize() const;
  bool query() const;
  // Milliseconds from this event to `end`; both must have been recorded with timing enabled.
  float elapsedTime(const CudaEvent& end) const;
  bool recorded() const { return event_ != nullptr; }

private:
  CUevent event_ = nullptr;
  int device_ = -1;
  unsigned flags_;
  bool enableTiming_;
};

} // namespace kiln::cuda
