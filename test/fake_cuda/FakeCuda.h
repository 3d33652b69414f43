// What the parts of the fake CUDA libraries share (test/fake_cuda: the driver, NVRTC, cuBLAS).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::fake_cuda {

// Device addresses are host addresses plus kBias: not canonical, so a host read of one crashes.
constexpr uintptr_t kBias = uintptr_t(1) << 62;

// The host address of device range [ptr, ptr + bytes) when it lies inside one live allocation,
// else nullptr.
char* hostRange(unsigned long long ptr, size_t bytes);

// The fake NVRTC's "CUBIN": this line, the architecture's line, then the CUDA source.
inline constexpr const char* kCubinMagic = "KILN-FAKE-CUBIN\n";

// Builds `source` against the CUDA emulator (cuda_emulator.h) into a shared object, cached on
// disk by content; returns its path, or "" with the compiler's output in `log`.
std::string buildEmulated(const std::string& source, std::string& log);

// A module from a fake CUBIN image (nullptr when it is not one or does not build), its
// functions (nullptr when absent), and a launch of one (false when the function is invalid).
void* loadModule(const char* image);
void* moduleFunction(void* module, const char* name);
void unloadModule(void* module);
bool launch(void* function, unsigned grid, unsigned block, void** params);
// The byte size of each parameter of a module function.
std::vector<unsigned> paramSizes(void* function);

// Stream capture (CUDA graphs, FakeCudaDriver.cpp): while `stream` is capturing, work queued on
// it is recorded, to run at each launch of the instantiated graph, instead of running now.
// Returns false when the stream is not capturing (the caller runs the work itself). `work`
// returns false when it fails (a replay then fails with CUDA_ERROR_LAUNCH_FAILED).
bool recordIfCapturing(void* stream, std::function<bool()> work);

} // namespace kiln::fake_cuda
