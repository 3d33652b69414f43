// SHA-256 (FIPS 180-4): the content hash naming kernel cache entries and checking artifacts.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::codegen {

// Incremental SHA-256: update() with any number of pieces, then digest() once.
class Sha256 {
public:
  Sha256();
  void update(std::string_view bytes);
  // Appends the length of `field`, then the field: a sequence of fields hashes unambiguously.
  void updateField(std::string_view field);
  std::array<uint8_t, 32> digest();
  // The digest as 64 lowercase hex digits.
  std::string hexDigest();

private:
  void compressBlock(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t totalBytes_ = 0;
};

// The hex SHA-256 of `bytes`.
std::string sha256Hex(std::string_view bytes);

} // namespace kiln::codegen
