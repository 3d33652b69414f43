// The generator's state: seeding, the twist, state save/restore, and the default generator.
#include "runtime/Generator.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>

#include "runtime/Error.h"

namespace kiln {

namespace {

// Byte offsets of PyTorch's CPUGeneratorImplState (x86-64 alignment): the legacy TH pod
// {uint64 seed; int left; int seeded; uint64 next; uint64 state[624]; double normal_x, normal_y,
// normal_rho; int normal_is_valid;} padded to 8, then {float next_float_normal_sample; bool
// valid;} padded to 8.
constexpr size_t kSeedAt = 0, kLeftAt = 8, kSeededAt = 12, kNextAt = 16, kWordsAt = 24;
constexpr size_t kNormalYAt = kWordsAt + 8 * Generator::kStateWords + 8;
constexpr size_t kNormalValidAt = kNormalYAt + 16;
constexpr size_t kFloatNormalAt = kNormalValidAt + 8, kFloatValidAt = kFloatNormalAt + 4;
static_assert(kFloatValidAt + 4 == Generator::kStateBytes);

template <typename T> void put(uint8_t* bytes, size_t at, T v) { std::memcpy(bytes + at, &v, sizeof(T)); }
template <typename T> T get(const uint8_t* bytes, size_t at) {
  T v;
  std::memcpy(&v, bytes + at, sizeof(T));
  return v;
}

} // namespace

void Generator::seedEngine(uint64_t seed) {
  seed_ = seed;
  state_[0] = uint32_t(seed);
  for (uint32_t j = 1; j < uint32_t(kStateWords); ++j)
    state_[j] = 1812433253u * (state_[j - 1] ^ (state_[j - 1] >> 30)) + j;
  left_ = 1;
  next_ = 0;
  nextDoubleNormal_.reset();
  nextFloatNormal_.reset();
}

void Generator::twist() {
  constexpr int n = kStateWords, m = 397;
  auto mix = [](uint32_t u, uint32_t v) {
    return (((u & 0x80000000u) | (v & 0x7fffffffu)) >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
  };
  uint32_t* s = state_.data();
  // Word j takes word j + m (mod n): three loops keep the index arithmetic free of modulos.
  int j = 0;
  for (; j < n - m; ++j)
    s[j] = s[j + m] ^ mix(s[j], s[j + 1]);
  for (; j < n - 1; ++j)
    s[j] = s[j + m - n] ^ mix(s[j], s[j + 1]);
  s[n - 1] = s[m - 1] ^ mix(s[n - 1], s[0]);
  left_ = n;
  next_ = 0;
}

void Generator::manualSeed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seedEngine(seed);
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

void Generator::saveState(uint8_t* bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::memset(bytes, 0, kStateBytes);
  put<uint64_t>(bytes, kSeedAt, seed_);
  put<int32_t>(bytes, kLeftAt, left_);
  put<int32_t>(bytes, kSeededAt, 1);
  put<uint64_t>(bytes, kNextAt, next_);
  for (size_t j = 0; j < size_t(kStateWords); ++j)
    put<uint64_t>(bytes, kWordsAt + 8 * j, state_[j]);
  if (nextDoubleNormal_) {
    put<double>(bytes, kNormalYAt, *nextDoubleNormal_);
    put<int32_t>(bytes, kNormalValidAt, 1);
  }
  if (nextFloatNormal_) {
    put<float>(bytes, kFloatNormalAt, *nextFloatNormal_);
    bytes[kFloatValidAt] = 1;
  }
}

void Generator::loadState(const uint8_t* bytes) {
  int32_t left = get<int32_t>(bytes, kLeftAt), seeded = get<int32_t>(bytes, kSeededAt);
  uint64_t next = get<uint64_t>(bytes, kNextAt);
  KILN_CHECK(seeded != 0 && left > 0 && left <= kStateWords && next <= uint64_t(kStateWords),
             "Invalid mt19937 state");
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = get<uint64_t>(bytes, kSeedAt);
  left_ = left;
  next_ = uint32_t(next);
  for (size_t j = 0; j < size_t(kStateWords); ++j)
    state_[j] = uint32_t(get<uint64_t>(bytes, kWordsAt + 8 * j));
  nextDoubleNormal_.reset();
  nextFloatNormal_.reset();
  if (get<int32_t>(bytes, kNormalValidAt)) nextDoubleNormal_ = get<double>(bytes, kNormalYAt);
  if (bytes[kFloatValidAt]) nextFloatNormal_ = get<float>(bytes, kFloatNormalAt);
}

Generator& defaultGenerator() {
  static Generator* g = new Generator();
  return *g;
}

} // namespace kiln
