// Philox4x32-10 against the known-answer vectors of Random123 (kat_vectors), and the
// generator's counter bookkeeping.
#include <cstdint>
#include <gtest/gtest.h>

#include "runtime/Generator.h"

using namespace kiln;

TEST(Philox, KnownAnswers) {
  using W = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}), (W{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (W{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (W{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Generator, DrawsReserveConsecutiveCounters) {
  Generator g(42);
  Generator::Draw a = g.reserve(10);
  Generator::Draw b = g.reserve(5);
  EXPECT_EQ(a.first, 0u);
  EXPECT_EQ(b.first, 10u);
  EXPECT_EQ(randomWords(a, 10), randomWords(b, 0));
  g.manualSeed(42);
  EXPECT_EQ(g.reserve(1).first, 0u);
  EXPECT_EQ(g.state().offset, 1u);
}
