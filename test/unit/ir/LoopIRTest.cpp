// The loop IR: printing and parsing round-trip (text and structure), the parser survives
// every prefix and random damage of a valid program, and the verifier's checks.
#include <gtest/gtest.h>

#include <random>

#include "ir/loop/Parser.h"
#include "ir/loop/Printer.h"
#include "ir/loop/Verifier.h"

using namespace kiln;

namespace {

const char* kSample = R"(program @f(%x: f32[64, 128], %y: f32[128], %t: f32[128, 64]{strides=[1, 128]}) {
  %buf0: f32[64, 128] = pointwise [i0: 64, i1: 128] {
    %0 = load %x[128*i0 + i1]
    %1 = load %y[i1]
    %2 = mul %0, %1
    store %2
  }
  kernel @k0 {
    %buf1: f32[64] = reduction sum [i0: 64] over [r0: 128] {
      %0 = load %buf0[128*i0 + r0]
      reduce %0
    }
    %buf2: i64[64, 1] = reduction argmax [i0: 64] over [r0: 128] {
      %0 = load %t[i0 + 64*r0]
      reduce %0
    }
  }
  %buf3: f32[64, 64] = extern mm(%x, %t, alpha=1.0, transpose=False, pad=[0, -1])
  %buf4: f16[64] = pointwise [i0: 64] {
    %0 = load %buf1[i0]
    %1 = constant 0.5 : f32
    %2 = constant -inf : f32
    %3 = maximum %0, %2
    %4 = index_expr mod(i0, 3) : i64
    %5 = constant 0 : i64
    %6 = eq %4, %5
    %7 = where %6, %3, %1
    %8 = exp %7
    %9 = cast %8 : f16
    store %9
  }
  %buf5: f32[64] = pointwise [i0: 64] into %buf1[i0] {
    %0 = load %buf1[i0]
    %1 = neg %0
    store %1
  }
  %buf6: f32[2, 64] = pointwise [i0: 2, i1: 64] into %x[i0 + 128*i1 + 3] {
    %0 = load %buf5[i1]
    store %0
  }
  output %buf4, %buf2, %buf6
}

program @"sym prog"(%a: i32[s0, 4], %flag: b8[]) {
  %b: i32[4*s0] = pointwise [i0: 4*s0] {
    %0 = load %a[i0]
    %1 = load %flag[0]
    %2 = constant 7 : i32
    %3 = constant True : b8
    %4 = bitwise_and %1, %3
    %5 = where %4, %0, %2
    store %5
  }
  %v: f64[s0] = reduction welford_var [i0: s0] over [r0: 4] {
    %0 = load %a[4*i0 + r0]
    %1 = cast %0 : f64
    reduce %1
  }
  output %b, %v
}
)";

std::string verifyText(const char* text) {
  LoopParseResult r = parseLoopPrograms(text);
  if (r.error) return "parse: " + r.error->message;
  std::string out;
  for (const LoopProgram& p : r.programs)
    for (const Diagnostic& d : verifyLoopProgram(p))
      out += std::to_string(d.pos.line) + ": " + d.message + "\n";
  return out;
}

} // namespace

TEST(LoopIR, SampleRoundTripsByteForByte) {
  LoopParseResult r = parseLoopPrograms(kSample);
  ASSERT_FALSE(r.error) << r.error->pos.line << ":" << r.error->pos.col << " "
                        << r.error->message;
  ASSERT_EQ(r.programs.size(), 2u);
  for (const LoopProgram& p : r.programs)
    EXPECT_TRUE(verifyLoopProgram(p).empty()) << verifyLoopProgram(p).front().message;
  EXPECT_EQ(printLoopPrograms(r.programs), kSample);
  LoopParseResult again = parseLoopPrograms(printLoopPrograms(r.programs));
  ASSERT_FALSE(again.error);
  EXPECT_TRUE(again.programs == r.programs);
}

TEST(LoopIR, BuiltProgramRoundTrips) {
  LoopProgram p;
  p.name = "built";
  IndexExpr s0 = IndexExpr::var("s0"), i0 = IndexExpr::var("i0"), r0 = IndexExpr::var("r0");
  p.inputs.push_back({"x", ScalarType::Float32, {s0, 8}, contiguousStrides({s0, 8}), {}});
  Reduction red;
  red.kind = ReductionKind::Max;
  red.ranges = {{"i0", s0}};
  red.reductionRanges = {{"r0", 8}};
  int v = red.body.load("x", 8 * i0 + r0, ScalarType::Float32);
  int c = red.body.constantFloat(-0.0, ScalarType::Float32);
  int n = red.body.constantFloat(NAN, ScalarType::Float32);
  int m = red.body.math(LoopOpCode::Maximum, {v, c});
  int w = red.body.math(LoopOpCode::Add, {m, n});
  red.body.reduce(w);
  p.buffers.push_back({"buf0", ScalarType::Float32, {s0}, red, "k1", {}});
  Pointwise pw;
  pw.ranges = {{"i0", s0}};
  int l = pw.body.load("buf0", i0, ScalarType::Float32);
  int i = pw.body.indexExpr(floorDiv(i0, 2) + s0, ScalarType::Int32);
  int f = pw.body.cast(i, ScalarType::Float32);
  int neg = pw.body.math(LoopOpCode::Lt, {l, f});
  pw.body.store(neg);
  p.buffers.push_back({"buf1", ScalarType::Bool, {s0}, pw, "k1", {}});
  p.outputs = {"buf1"};
  std::vector<Diagnostic> problems = verifyLoopProgram(p);
  ASSERT_TRUE(problems.empty()) << problems.front().message;
  std::string text = printLoopProgram(p);
  LoopProgram back = parseLoopProgram(text);
  EXPECT_TRUE(back == p) << text;
  EXPECT_EQ(printLoopProgram(back), text);
  EXPECT_NE(text.find("%1 = constant -0.0 : f32"), std::string::npos) << text;
  EXPECT_NE(text.find("%2 = constant nan : f32"), std::string::npos) << text;
  EXPECT_NE(text.find("index_expr s0 + floordiv(i0, 2) : i32"), std::string::npos) << text;
  // A different constant bit pattern is a different program.
  back.buffers[0].computation = [&] {
    Reduction r = std::get<Reduction>(back.buffers[0].computation);
    r.body.ops[1].floatValue = 0.0;
    return r;
  }();
  EXPECT_FALSE(back == p);
}

TEST(LoopIR, ParserNamesAreNormalizedByPrinting) {
  const char* text = R"(program @p(%in: f32[4]) {
  %out: f32[4] = pointwise [j: 4] {
    %a = load %in[j]
    %b = neg %a
    store %b
  }
  output %out
}
)";
  std::string printed = printLoopProgram(parseLoopProgram(text));
  EXPECT_NE(printed.find("%0 = load %in[j]\n    %1 = neg %0\n    store %1"), std::string::npos)
      << printed;
}

TEST(LoopIR, ParserErrors) {
  auto error = [](const char* text) {
    LoopParseResult r = parseLoopPrograms(text);
    if (!r.error) return std::string("no error");
    return std::to_string(r.error->pos.line) + ":" + std::to_string(r.error->pos.col) + ": " +
           r.error->message;
  };
  EXPECT_EQ(error("program @p(%x: f32[2]) {\n  %b: f32[2] = pointwise [i0: 2] {\n"
                  "    %0 = load %c[i0]\n    store %0\n  }\n"
                  "  %c: f32[2] = pointwise [i0: 2] {\n    %0 = load %x[i0]\n    store %0\n"
                  "  }\n  output %b\n}\n"),
            "3:15: use of %c before its definition (line 6)");
  EXPECT_EQ(error("program @p(%x: f32[2]) {\n  output %q\n}\n"),
            "2:10: use of undefined value %q");
  EXPECT_EQ(error("program @p(%x: f32[2]) {\n  %x: f32[2] = extern f(%x)\n  output %x\n}\n"),
            "2:3: redefinition of %x (first defined at line 1)");
  EXPECT_EQ(error("program @p(%x: f32[2]) {\n  %b: f32[2] = pointwise [i0: 2] {\n"
                  "    %0 = frobnicate %x\n  }\n  output %b\n}\n"),
            "3:10: unknown loop op 'frobnicate'");
  EXPECT_EQ(error("program @p(%x: f32[2]) {\n  %b: f32[2] = pointwise [i0: 2] {\n"
                  "    %0 = load %x[i0]\n    %1 = store %0\n  }\n  output %b\n}\n"),
            "4:10: store defines no value");
  EXPECT_EQ(error("program @p(%x: f32[2]) {\n  %b: f32[2] = pointwise [i0: 2] {\n"
                  "    %0 = load %x[i0]\n    %1 = add %0, %7\n    store %1\n  }\n"
                  "  output %b\n}\n"),
            "4:18: use of undefined value %7");
  EXPECT_EQ(error("program @p(%x: f32[2]) {\n  %b: f32[] = reduction mean [] over [r0: 2] {\n"
                  "  }\n  output %b\n}\n"),
            "2:25: unknown reduction kind 'mean' (expected sum, prod, max, min, argmax, argmin, "
            "any, all, welford_mean or welford_var)");
  EXPECT_EQ(error("program @p(%x: f32[2]) {\n  %b: f32[2] = pointwise [i0: 2] {\n"
                  "    %0 = constant 1.5 : i32\n    store %0\n  }\n  output %b\n}\n"),
            "3:19: a i32 constant is an integer");
  EXPECT_EQ(error("program @p(%x: f32[2]) {\n  %b: f32[2] = pointwise [i0: floordiv(2, 0)] {\n"
                  "  }\n  output %b\n}\n"),
            "2:31: division by zero in an index expression");
  EXPECT_EQ(error("program @p(%x: f32[2]) {\n  output %x\n  %b: f32[2] = extern f(%x)\n}\n"),
            "3:3: output must be the last statement of a program");
  EXPECT_EQ(error("program @p(%x: f32[2]) {\n}\n"), "2:1: program @p has no output statement");
  EXPECT_EQ(error("program @p() {\n  kernel @k {\n  }\n  output\n}\n"),
            "3:3: kernel @k has no buffers");
}

TEST(LoopIR, EveryPrefixFailsCleanly) {
  std::string text = kSample;
  for (size_t n = 0; n < text.size(); ++n) {
    LoopParseResult r = parseLoopPrograms(std::string_view(text).substr(0, n));
    if (r.error) {
      EXPECT_GE(r.error->pos.line, 1) << "prefix of " << n << " bytes";
      EXPECT_FALSE(r.error->message.empty());
    } else {
      // Only prefixes ending after a complete program parse; they print back to themselves.
      std::string printed = printLoopPrograms(r.programs);
      EXPECT_EQ(text.compare(0, printed.size(), printed), 0) << "prefix of " << n << " bytes";
    }
  }
}

TEST(LoopIR, DamagedInputNeverEscapes) {
  std::mt19937 rng(5);
  const std::string alphabet = "%@()[]{},:=*+-.\"\\/ \n0123456789aefimnrsx_\x01\xff";
  std::string text = kSample;
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string damaged = text;
    for (int k = 0; k < 3; ++k)
      damaged[rng() % damaged.size()] = alphabet[rng() % alphabet.size()];
    LoopParseResult r = parseLoopPrograms(damaged);
    if (r.error) {
      EXPECT_GE(r.error->pos.line, 1);
      EXPECT_FALSE(r.error->message.empty());
      continue;
    }
    ++parsed;
    for (const LoopProgram& p : r.programs)
      verifyLoopProgram(p); // must not crash on whatever parsed
    std::string printed = printLoopPrograms(r.programs);
    LoopParseResult again = parseLoopPrograms(printed);
    ASSERT_FALSE(again.error) << printed << "\n" << again.error->message;
    ASSERT_TRUE(again.programs == r.programs) << printed;
    EXPECT_EQ(printLoopPrograms(again.programs), printed);
  }
  EXPECT_GT(parsed, 0);
}

TEST(LoopIR, InPlaceBuffersAreVersionsOfTheirRootsStorage) {
  LoopParseResult r = parseLoopPrograms(kSample);
  ASSERT_FALSE(r.error);
  const LoopProgram& p = r.programs[0];
  EXPECT_EQ(p.storageRoot("buf5"), "buf1");
  EXPECT_EQ(p.storageRoot("buf6"), "x");
  EXPECT_EQ(p.storageRoot("buf4"), "buf4");
  EXPECT_EQ(p.storageRoot("x"), "x");
  EXPECT_EQ(*p.findBuffer("buf5")->writesInto(), "buf1");
  EXPECT_EQ(p.findBuffer("buf1")->writesInto(), nullptr);
  // The base and the index written are part of the structure.
  LoopProgram other = p;
  std::get<Pointwise>(other.buffers[6].computation).intoIndex = IndexExpr::var("i0");
  EXPECT_FALSE(other == p);
  other = p;
  std::get<Pointwise>(other.buffers[5].computation).into = "buf0";
  EXPECT_FALSE(other == p);
}

TEST(LoopIRVerifier, AcceptsTheSample) {
  EXPECT_EQ(verifyText(kSample), "");
}

TEST(LoopIRVerifier, ReportsProblems) {
  // Out-of-bounds load, an index variable of no range, mixed dtypes, a store of the wrong
  // dtype, ranges that do not cover the buffer, a reduction of the wrong result dtype.
  EXPECT_EQ(verifyText(R"(program @p(%x: f32[4, 8], %n: i64[8]) {
  %a: f32[4, 8] = pointwise [i0: 4, i1: 8] {
    %0 = load %x[8*i0 + i1 + 1]
    %1 = load %x[j]
    %2 = load %n[i1]
    %3 = add %0, %2
    store %3
  }
  %b: i64[5] = pointwise [i0: 4] {
    %0 = load %x[i0]
    store %0
  }
  %c: f32[4] = reduction argmax [i0: 4] over [r0: 8] {
    %0 = load %x[8*i0 + r0]
    reduce %0
  }
  output %a
}
)"),
            "3: %a: load: the index 8*i0 + i1 + 1 into %x reaches 32, but %x has 32 elements\n"
            "4: %a: load: 'j' in the index of %x is not a loop variable of the computation or "
            "a size symbol\n"
            "6: %a: add needs operands of one dtype, got f32 and i64\n"
            "9: %b: the ranges cover 4 elements but the buffer has 5\n"
            "11: %b: store: stores f32 into %b of dtype i64\n"
            "15: %c: reduce: argmax of f32 gives i64, but %c is f32\n");
  // Strided inputs: the extent is one past the last element the strides reach.
  EXPECT_EQ(verifyText(R"(program @p(%t: f32[4, 2]{strides=[1, 4]}) {
  %a: f32[8] = pointwise [i0: 4, i1: 2] {
    %0 = load %t[i0 + 4*i1]
    %1 = load %t[i0 + 4*i1 - 1]
    %2 = add %0, %1
    store %2
  }
  output %a
}
)"),
            "4: %a: load: the index i0 + 4*i1 - 1 into %t can be negative (down to -1)\n");
  // Names: loop variables vs size symbols, sizes over unknown symbols; welford of integers, a float op on integers, a constant out of range.
  EXPECT_EQ(verifyText(R"(program @p(%x: i32[s0]) {
  kernel @k {
    %a: i32[s0] = pointwise [s0: s0] {
      %0 = load %x[s0]
      store %0
    }
  }
  %b: f32[n] = extern f(%x)
  %c: i32[] = reduction welford_mean [] over [r0: s0] {
    %0 = load %x[r0]
    %1 = exp %0
    %2 = constant 300 : u8
    reduce %0
  }
  output %a
}
)"),
            "3: %a: loop variable s0 has the name of a size symbol\n"
            "8: %b: size n uses 'n', which is not a size symbol of the inputs\n"
            "11: %c: exp needs a floating dtype, got i32\n"
            "12: %c: constant: 300 does not fit in u8\n"
            "13: %c: reduce: welford_mean needs floating values, got i32\n");
}

TEST(LoopIRVerifier, ChecksBuiltBodies) {
  LoopProgram p;
  p.name = "bad";
  p.inputs.push_back({"x", ScalarType::Float32, {4}, {1}, {}});
  Pointwise pw;
  pw.ranges = {{"i0", 4}};
  int l = pw.body.load("x", IndexExpr::var("i0"), ScalarType::Float64);
  pw.body.ops.push_back(LoopOp{LoopOpCode::Neg, ScalarType::Float32, {5}, "", 0, 0, 0, {}});
  pw.body.store(l);
  pw.body.store(l);
  p.buffers.push_back({"a", ScalarType::Float64, {4}, pw, "k", {}});
  p.buffers.push_back({"e", ScalarType::Float32, {4}, Extern{"f", {"x"}, {}, {}}, "", {}});
  p.buffers.push_back({"g", ScalarType::Float32, {4}, Extern{"f", {"e"}, {{"n", 1.5}}, {}}, "k", {}});
  p.outputs = {"zz"};
  std::vector<Diagnostic> problems = verifyLoopProgram(p);
  std::string all;
  for (const Diagnostic& d : problems)
    all += d.message + "\n";
  EXPECT_EQ(all, "%a: load: records dtype f64 but %x is f32\n"
                 "%a: neg: operand 5 is not an earlier value\n"
                 "%a: store: must be the last op of the body\n"
                 "%g: the buffers of kernel @k are not adjacent\n"
                 "output %zz is not an input or buffer of the program\n");
}
