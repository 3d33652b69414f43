// The random number generator: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC 2011; the generator of cuRAND and of PyTorch's CUDA backend). It is counter-based:
// a draw of n values reserves n counters, and value i is a pure function of (seed, counter + i),
// so kernels fill in parallel and results never depend on the thread count.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>

namespace kiln {

// Philox4x32-10 of a 128-bit counter under a 64-bit key: four independent 32-bit words.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

class Generator {
public:
  // PyTorch's default CPU seed, so a fresh process starts from a known state.
  static constexpr uint64_t kDefaultSeed = 67280421310721ull;
  // get_state/set_state: the seed and the next unused counter.
  struct State {
    uint64_t seed;
    uint64_t offset;
  };

  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}

  // Restarts the stream: the same seed gives the same values again.
  void manualSeed(uint64_t seed);
  // Seeds from a nondeterministic source; returns the seed chosen.
  uint64_t seedNondeterministic();
  uint64_t initialSeed() const;
  State state() const;
  void setState(State s);

  // One draw: n consecutive counters from `first`, under the seed's key.
  struct Draw {
    std::array<uint32_t, 2> key;
    uint64_t first;
  };
  // Reserves the counters of a draw of n values (thread-safe); value i then comes from
  // randomWords(draw, i).
  Draw reserve(uint64_t n);

private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The generator kiln.manual_seed and every random op use.
Generator& defaultGenerator();

// Four random words for element `index` of a draw.
inline std::array<uint32_t, 4> randomWords(const Generator::Draw& draw, uint64_t index) {
  uint64_t c = draw.first + index;
  return philox4x32({uint32_t(c), uint32_t(c >> 32), 0, 0}, draw.key);
}

} // namespace kiln
