// The CPU random number generator: the 32-bit Mersenne Twister (mt19937, Matsumoto & Nishimura
// 1998), seeded and read as PyTorch's CPU generator is, so that kiln.manual_seed(s) followed by
// the same random ops gives PyTorch's values (model initializations, dropout masks, shuffles
// and so the losses of a training script equal PyTorch's). mt19937 is a sequential stream: a
// random op takes the lock once and draws its values in element order, as PyTorch's kernels do,
// so results never depend on the thread count.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>

namespace kiln {

class Generator {
public:
  // The default seed of a torch.Generator(), so a fresh generator starts from a known state.
  static constexpr uint64_t kDefaultSeed = 67280421310721ull;
  static constexpr int kStateWords = 624;
  // get_state's byte size: PyTorch's CPUGeneratorImplState (the legacy TH layout, then the float
  // normal cache), so a state saved by torch.get_rng_state() loads here and the other way round.
  static constexpr size_t kStateBytes = 5056;

  explicit Generator(uint64_t seed = kDefaultSeed) { seedEngine(seed); }

  // Restarts the stream: the same seed gives the same values again (the low 32 bits seed the
  // twister; initialSeed keeps all 64).
  void manualSeed(uint64_t seed);
  // Seeds from a nondeterministic source; returns the seed chosen.
  uint64_t seedNondeterministic();
  uint64_t initialSeed() const;
  // The whole state in PyTorch's byte layout (kStateBytes), and back; setState checks validity.
  void saveState(uint8_t* bytes) const;
  void loadState(const uint8_t* bytes);

  // Random ops hold this lock for the whole op and draw through the unlocked calls below.
  std::mutex& mutex() const { return mutex_; }
  // One 32-bit output of the twister.
  uint32_t random() {
    if (--left_ == 0) twist();
    uint32_t y = state_[size_t(next_++)];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
  }
  // Two outputs, the first as the high word (PyTorch's random64).
  uint64_t random64() {
    uint64_t hi = random();
    return (hi << 32) | random();
  }
  // The second value of a double Box-Muller pair, kept for the next small normal_ (PyTorch's
  // next_double_normal_sample); manual_seed clears it. The float cache exists only to round-trip
  // PyTorch's state (no CPU kernel reads it).
  std::optional<double>& nextDoubleNormal() { return nextDoubleNormal_; }

private:
  void seedEngine(uint64_t seed);
  void twist();

  mutable std::mutex mutex_;
  uint64_t seed_ = 0;
  int left_ = 1;
  uint32_t next_ = 0;
  std::array<uint32_t, kStateWords> state_{};
  std::optional<double> nextDoubleNormal_;
  std::optional<float> nextFloatNormal_;
};

// The generator kiln.manual_seed and every random op use.
Generator& defaultGenerator();

} // namespace kiln
