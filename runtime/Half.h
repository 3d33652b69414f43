// 16-bit floating point storage types (IEEE half and bfloat16); arithmetic goes through float.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln {

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(fromFloat(f)) {}
  operator float() const { return toFloat(bits); }

  static uint16_t fromFloat(float f) {
    return std::bit_cast<uint16_t>(static_cast<_Float16>(f));
  }
  static float toFloat(uint16_t b) { return static_cast<float>(std::bit_cast<_Float16>(b)); }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(fromFloat(f)) {}
  operator float() const { return toFloat(bits); }

  // Round to nearest even, like PyTorch's c10::BFloat16.
  static uint16_t fromFloat(float f) {
    if (std::isnan(f)) return 0x7FC0;
    uint32_t u = std::bit_cast<uint32_t>(f);
    uint32_t rounding = ((u >> 16) & 1u) + 0x7FFFu;
    return static_cast<uint16_t>((u + rounding) >> 16);
  }
  static float toFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }
};

} // namespace kiln
