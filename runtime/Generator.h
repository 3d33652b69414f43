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
// Inline so that fill loops vectorize it.
inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u; // golden ratio, sqrt(3) - 1
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kMul0) * c[0], p1 = uint64_t(kMul1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1],
         uint32_t(p0)};
    k = {k[0] + kWeyl0, k[1] + kWeyl1};
  }
  return c;
}

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
