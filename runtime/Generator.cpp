// Philox4x32-10 and the default generator's state.
#include "runtime/Generator.h"

#include <chrono>
#include <random>

namespace kiln {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u; // golden ratio, sqrt(3) - 1
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kMul0) * c[0], p1 = uint64_t(kMul1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    k = {k[0] + kWeyl0, k[1] + kWeyl1};
  }
  return c;
}

void Generator::manualSeed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seedNondeterministic() {
  std::random_device device;
  uint64_t seed = (uint64_t(device()) << 32) ^ device() ^
                  uint64_t(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  manualSeed(seed);
  return seed;
}

uint64_t Generator::initialSeed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

Generator::State Generator::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {seed_, offset_};
}

void Generator::setState(State s) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = s.seed;
  offset_ = s.offset;
}

Generator::Draw Generator::reserve(uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  Draw d{{uint32_t(seed_), uint32_t(seed_ >> 32)}, offset_};
  offset_ += n;
  return d;
}

Generator& defaultGenerator() {
  static Generator* g = new Generator();
  return *g;
}

} // namespace kiln
