// The text form's constants round-trip exactly, and the parser survives arbitrary damage to
// its input: every prefix and many byte substitutions of a valid text give either graphs or
// a located diagnostic, never a crash or an escaping exception.
#include <cstdint>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ir/Parser.h"
#include "ir/Printer.h"

using namespace kiln;

namespace {

const char* kSample =
    R"(graph @fn(%x: f32[8, 16], %w: f32[s0, 2*s0]{strides=[1, s0], device=cuda:0}) {
  %mm = call_function aten.mul.Tensor(%x, %x) : f32[8, 16]
  %s = call_method sum(%mm, dim=[1], keepdim=True) : f32[8, 1] loc("m.py":3:fwd)
  %p = get_attr layers.0.weight : (f32[32, 16], int)
  %g = call_function operator.getitem(%x, (slice(0, None, 2), None, ...), k={"a": [1.5, -2, "s\n"]})
  output (%mm, %s)
}
)";

uint64_t bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof(b));
  return b;
}

} // namespace

TEST(Printer, FloatsPrintLikePythonRepr) {
  EXPECT_EQ(printFloat(0.1), "0.1");
  EXPECT_EQ(printFloat(1.0), "1.0");
  EXPECT_EQ(printFloat(-2.5), "-2.5");
  EXPECT_EQ(printFloat(1e16), "1e+16");
  EXPECT_EQ(printFloat(1e15), "1000000000000000.0");
  EXPECT_EQ(printFloat(1e-5), "1e-05");
  EXPECT_EQ(printFloat(0.0001), "0.0001");
  EXPECT_EQ(printFloat(-0.0), "-0.0");
  EXPECT_EQ(printFloat(5e-324), "5e-324");
  EXPECT_EQ(printFloat(1.5e300), "1.5e+300");
  EXPECT_EQ(printFloat(INFINITY), "inf");
  EXPECT_EQ(printFloat(-INFINITY), "-inf");
  EXPECT_EQ(printFloat(NAN), "nan");
}

TEST(Printer, FloatsReadBackBitForBit) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    uint64_t b = rng();
    double d;
    std::memcpy(&d, &b, sizeof(d));
    if (std::isnan(d) || std::isinf(d)) continue;
    std::string text = printFloat(d);
    ASSERT_EQ(bits(std::strtod(text.c_str(), nullptr)), b) << text;
  }
}

TEST(Printer, StringsEscape) {
  EXPECT_EQ(quoteString("a\"b\\c\n\t\r\x01\x7f\xc3\xa9"),
            "\"a\\\"b\\\\c\\n\\t\\r\\x01\\x7f\xc3\xa9\"");
  Graph g("s");
  g.output(Argument(std::string("a\"b\\c\n\t\r\x01\x7f\xc3\xa9", 13)));
  Graph back = parseGraph(printGraph(g));
  EXPECT_EQ(back.last()->args()[0].toString(), g.last()->args()[0].toString());
}

TEST(Parser, SampleRoundTrips) {
  Graph g = parseGraph(kSample);
  EXPECT_EQ(printGraph(g), kSample);
}

TEST(Parser, PositionsStartAtTheGivenLine) {
  ParseResult r =
      parseGraphs("graph @f() {\n  %a = call_function aten.nope()\n  output None\n}\n", 40);
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->pos.line, 41);
  EXPECT_EQ(r.error->pos.col, 22);
  EXPECT_TRUE(r.graphs.empty());
}

TEST(Parser, EveryPrefixFailsCleanly) {
  std::string text = kSample;
  for (size_t n = 0; n < text.size(); ++n) {
    ParseResult r = parseGraphs(std::string_view(text).substr(0, n));
    if (r.error) {
      EXPECT_GE(r.error->pos.line, 1) << "prefix of " << n << " bytes";
    }
  }
}

TEST(Parser, DamagedInputNeverEscapes) {
  std::mt19937 rng(11);
  const std::string alphabet = "%@()[]{},:=*+-.\"\\/ \n0123456789aefnsx_\x01\xff";
  std::string text = kSample;
  for (int i = 0; i < 3000; ++i) {
    std::string damaged = text;
    for (int k = 0; k < 3; ++k)
      damaged[rng() % damaged.size()] = alphabet[rng() % alphabet.size()];
    ParseResult r = parseGraphs(damaged);
    if (r.error) {
      EXPECT_GE(r.error->pos.line, 1);
      EXPECT_FALSE(r.error->message.empty());
    } else {
      // Whatever parsed prints and parses again to the same graph.
      std::string printed = printGraphs(r.graphs);
      ParseResult again = parseGraphs(printed);
      ASSERT_FALSE(again.error) << printed << "\n" << again.error->message;
      ASSERT_EQ(again.graphs.size(), r.graphs.size());
      for (size_t j = 0; j < r.graphs.size(); ++j)
        EXPECT_TRUE(structurallyEqual(r.graphs[j], again.graphs[j])) << printed;
    }
  }
}

TEST(Diagnostic, FormatShowsTheLineAndACaret) {
  std::string source = "line one\n\tsecond line\n";
  EXPECT_EQ(formatDiagnostic({{2, 3}, "bad"}, "f.kir", source),
            "f.kir:2:3: error: bad\n\tsecond line\n\t ^\n");
  EXPECT_EQ(formatDiagnostic({{}, "no place"}, "f.kir", source), "f.kir: error: no place\n");
}
