// Current streams per thread and device, the stream pool, and events.
#include "runtime/cuda/CudaStream.h"

#include <array>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "runtime/Error.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaDriver.h"

namespace kiln::cuda {
namespace {

constexpr int kStreamsPerPool = 32;

struct StreamPool {
  std::once_flag created;
  std::array<CUstream, kStreamsPerPool> streams{};
  std::atomic<unsigned> next{0};
};

StreamPool& poolOf(int device) {
  static std::mutex mutex;
  static std::unordered_map<int, StreamPool*> pools; // never freed: streams live with the process
  std::lock_guard<std::mutex> lock(mutex);
  StreamPool*& p = pools[device];
  if (!p) p = new StreamPool();
  return *p;
}

thread_local std::unordered_map<int, CUstream> tlsCurrentStreams;

} // namespace

CudaStream defaultStream(int device) { return {device, nullptr}; }

CudaStream currentStream(int device) {
  auto it = tlsCurrentStreams.find(device);
  return {device, it == tlsCurrentStreams.end() ? nullptr : it->second};
}

void setCurrentStream(CudaStream stream) { tlsCurrentStreams[stream.device] = stream.handle; }

CudaStream streamFromPool(int device) {
  StreamPool& pool = poolOf(device);
  std::call_once(pool.created, [&] {
    CudaDeviceGuard guard(device);
    for (CUstream& s : pool.streams) KILN_CUDA_CHECK(cuStreamCreate, &s, kStreamNonBlocking);
  });
  unsigned i = pool.next.fetch_add(1, std::memory_order_relaxed) % kStreamsPerPool;
  return {device, pool.streams[i]};
}

void synchronizeStream(CudaStream stream) {
  CudaDeviceGuard guard(stream.device);
  KILN_CUDA_CHECK(cuStreamSynchronize, stream.handle);
}

bool queryStream(CudaStream stream) {
  CudaDeviceGuard guard(stream.device);
  CUresult r = CudaDriver::get().api().cuStreamQuery(stream.handle);
  if (r == kCudaErrorNotReady) return false;
  CudaDriver::get().check(r, "cuStreamQuery");
  return true;
}

void synchronizeDevice(int device) {
  CudaDeviceGuard guard(device);
  KILN_CUDA_CHECK(cuCtxSynchronize);
}

CudaEvent::CudaEvent(bool enableTiming, bool blocking)
    : flags_((enableTiming ? kEventDefault : kEventDisableTiming) |
             (blocking ? kEventBlockingSync : 0u)),
      enableTiming_(enableTiming) {}

CudaEvent::~CudaEvent() {
  if (!event_) return;
  // The driver releases a pending event once its work completes; the result is not actionable.
  CudaDriver::get().api().cuEventDestroy(event_);
}

void CudaEvent::record(CudaStream stream) {
  KILN_CHECK(!event_ || device_ == stream.device, "Event device cuda:", device_,
             " does not match recording stream's device cuda:", stream.device, ".");
  CudaDeviceGuard guard(stream.device);
  if (!event_) {
    KILN_CUDA_CHECK(cuEventCreate, &event_, flags_);
    device_ = stream.device;
  }
  KILN_CUDA_CHECK(cuEventRecord, event_, stream.handle);
}

void CudaEvent::block(CudaStream stream) const {
  if (!event_) return;
  CudaDeviceGuard guard(stream.device);
  KILN_CUDA_CHECK(cuStreamWaitEvent, stream.handle, event_, 0u);
}

void CudaEvent::synchronize() const {
  if (event_) KILN_CUDA_CHECK(cuEventSynchronize, event_);
}

bool CudaEvent::query() const {
  if (!event_) return true;
  CUresult r = CudaDriver::get().api().cuEventQuery(event_);
  if (r == kCudaErrorNotReady) return false;
  CudaDriver::get().check(r, "cuEventQuery");
  return true;
}

float CudaEvent::elapsedTime(const CudaEvent& end) const {
  KILN_CHECK(enableTiming_ && end.enableTiming_,
             "Both events must be created with argument 'enable_timing=True'.");
  KILN_CHECK(event_ && end.event_, "Both events must be recorded before calculating elapsed time.");
  float ms = 0;
  KILN_CUDA_CHECK(cuEventElapsedTime, &ms, event_, end.event_);
  return ms;
}

} // namespace kiln::cuda
