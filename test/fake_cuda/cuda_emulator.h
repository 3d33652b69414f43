// The CUDA built-ins kiln's generated kernels use, emulated on the CPU, so that a generated CUDA
// source compiles with the system C++ compiler and runs on a machine without a GPU: a
// std::thread per CUDA thread, one block at a time; warp shuffles and __syncwarp through a
// per-warp std::barrier, __syncthreads through a per-block one; __shared__ arrays are statics.
// A kernel that synchronizes nothing (no barrier, no shuffle: elementwise, a row per thread,
// serial) runs its threads one after the other on the calling thread, which gives the same
// result (no thread reads what another writes) much faster.
//
// Used by two callers, which append the generated source and then one launcher per kernel
// (kiln_emu_launch): test/python/cuda_emulator.py (ctypes; the launch list interpreted in
// Python) and the fake CUDA driver (test/fake_cuda/FakeCudaDriver.cpp: cuModuleLoadData builds
// the source with it, cuLaunchKernel calls the launcher). Arguments follow cuLaunchKernel:
// args[i] points at parameter i's value; a pointer parameter's value is a device address, which
// is the host address plus KILN_EMU_BIAS (the fake driver's device pointers; 0 for the Python
// emulator's host buffers).
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#ifndef KILN_EMU_BIAS
#define KILN_EMU_BIAS 0ull
#endif

using std::isfinite;
struct kiln_emu_dim {
  unsigned x = 0, y = 0, z = 0;
};
static thread_local kiln_emu_dim threadIdx, blockIdx;
static kiln_emu_dim blockDim, gridDim;
struct kiln_emu_warp {
  std::barrier<>* bar;
  unsigned long long slots[32];
};
static thread_local kiln_emu_warp* kiln_emu_tw;
static thread_local std::barrier<>* kiln_emu_tb;
static thread_local int kiln_emu_lane;
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __launch_bounds__(n)
#define __shared__ static
static inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
static inline float __uint_as_float(unsigned i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
static inline unsigned __float_as_uint(float f) {
  unsigned i;
  memcpy(&i, &f, 4);
  return i;
}
static inline double __longlong_as_double(long long i) {
  double d;
  memcpy(&d, &i, 8);
  return d;
}
static inline int atomicExch(int* p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __syncwarp() { kiln_emu_tw->bar->arrive_and_wait(); }
static inline void __syncthreads() { kiln_emu_tb->arrive_and_wait(); }
template <typename T> static T kiln_emu_exchange(T v, int from) {
  static_assert(sizeof(T) <= 8);
  memcpy(&kiln_emu_tw->slots[kiln_emu_lane], &v, sizeof(T));
  kiln_emu_tw->bar->arrive_and_wait();
  T o;
  memcpy(&o, &kiln_emu_tw->slots[from], sizeof(T));
  kiln_emu_tw->bar->arrive_and_wait();
  return o;
}
template <typename T> static T __shfl_xor_sync(unsigned, T v, int mask) {
  return kiln_emu_exchange(v, kiln_emu_lane ^ mask);
}
template <typename T> static T __shfl_sync(unsigned, T v, int lane) { return kiln_emu_exchange(v, lane); }

// Parameter i of the kernel from args[i] (cuLaunchKernel's convention).
template <typename T> static T kiln_emu_arg(void* p) {
  if constexpr (std::is_pointer_v<T>)
    return reinterpret_cast<T>(static_cast<uintptr_t>(*static_cast<unsigned long long*>(p) - KILN_EMU_BIAS));
  else
    return *static_cast<T*>(p);
}
template <typename... P, size_t... I>
static void kiln_emu_call(void (*f)(P...), void** a, std::index_sequence<I...>) {
  f(kiln_emu_arg<P>(a[I])...);
}

// The byte size of each parameter of f, into sizes; returns their count (the fake driver copies
// a launch's parameters when it records the launch into a CUDA graph).
template <typename... P> static unsigned kiln_emu_param_sizes(void (*)(P...), unsigned* sizes) {
  unsigned i = 0;
  ((sizes[i++] = unsigned(sizeof(P))), ...);
  return unsigned(sizeof...(P));
}

// Runs f<<<grid, block>>>(args): concurrently per block when the kernel `syncs`, else one
// thread after the other.
template <typename... P>
static void kiln_emu_launch(void (*f)(P...), unsigned grid, unsigned block, void** a, bool syncs) {
  gridDim.x = grid;
  blockDim.x = block;
  if (!syncs) {
    for (unsigned b = 0; b < grid; ++b)
      for (unsigned t = 0; t < block; ++t) {
        blockIdx.x = b;
        threadIdx.x = t;
        kiln_emu_lane = int(t % 32);
        kiln_emu_call(f, a, std::index_sequence_for<P...>{});
      }
    return;
  }
  for (unsigned b = 0; b < grid; ++b) {
    std::barrier<> blockBar(block);
    unsigned warps = (block + 31) / 32;
    std::vector<kiln_emu_warp> ws(warps);
    std::vector<std::barrier<>*> bars;
    for (unsigned w = 0; w < warps; ++w) {
      unsigned n = std::min(32u, block - 32 * w);
      bars.push_back(new std::barrier<>(n));
      ws[w].bar = bars.back();
    }
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; ++t)
      ts.emplace_back([&, t]() {
        blockIdx.x = b;
        threadIdx.x = t;
        kiln_emu_tw = &ws[t / 32];
        kiln_emu_tb = &blockBar;
        kiln_emu_lane = int(t % 32);
        kiln_emu_call(f, a, std::index_sequence_for<P...>{});
        kiln_emu_tw->bar->arrive_and_drop();
        blockBar.arrive_and_drop();
      });
    for (std::thread& t : ts) t.join();
    for (auto* p : bars) delete p;
  }
}
