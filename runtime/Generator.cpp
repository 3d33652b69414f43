// The generator's state: seeding, counters, state save/restore, and the default generator.
#include "runtime/Generator.h"

#include <cstdint>
#include <chrono>
#include <random>

namespace kiln {

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
