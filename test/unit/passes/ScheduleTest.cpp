// The loop scheduler at scale: on random pointwise programs, the per-buffer nest facts the
// scheduler decides with (codegen::pointwiseNestFacts) agree with the code generator's nest
// builder (codegen::fusesIntoOneNest) on random groups, every kernel the scheduler forms is one
// nest, the scheduled program verifies, and no kernel exceeds the size bound.
#include <cstdint>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codegen/KernelPlan.h"
#include "ir/loop/Parser.h"
#include "ir/loop/Printer.h"
#include "ir/loop/Verifier.h"
#include "passes/loop/Schedule.h"

using namespace kiln;

namespace {

// A program of `n` pointwise buffers over [4, 8] (or [32], which cannot share a nest with the
// others), each reading the input or one or two earlier buffers at: the element computed, its
// row reversed, its row rotated, another row, or the transposed element.
std::string randomProgram(std::mt19937& rng, int n) {
  std::vector<bool> flat(static_cast<size_t>(n), false);
  std::string s = "program @p(%x: f32[4, 8]) {\n";
  auto pick = [&](int k) { return int(rng() % unsigned(k)); };
  for (int i = 0; i < n; ++i) {
    flat[size_t(i)] = pick(6) == 0;
    std::string name = "%b" + std::to_string(i);
    s += "  " + name + (flat[size_t(i)] ? ": f32[32] = pointwise [i0: 32] {\n"
                                        : ": f32[4, 8] = pointwise [i0: 4, i1: 8] {\n");
    int reads = 1 + pick(2);
    for (int r = 0; r < reads; ++r) {
      int src = i == 0 ? -1 : pick(i + 1) - 1; // -1: the input
      std::string buf = src < 0 ? "%x" : "%b" + std::to_string(src);
      std::string index;
      if (flat[size_t(i)]) {
        const char* idx[] = {"i0", "-i0 + 31", "mod(i0 + 8, 32)"};
        index = idx[pick(3)];
      } else {
        const char* idx[] = {"8*i0 + i1", "8*i0 - i1 + 7", "8*i0 + mod(i1 + 3, 8)",
                             "-8*i0 + i1 + 24", "i0 + 4*floordiv(i1, 2) + 16*mod(i1, 2)"};
        index = idx[pick(5)];
      }
      s += "    %" + std::to_string(r) + " = load " + buf + "[" + index + "]\n";
    }
    int last = reads - 1;
    if (reads == 2) {
      s += "    %2 = add %0, %1\n";
      last = 2;
    }
    s += "    %" + std::to_string(last + 1) + " = neg %" + std::to_string(last) + "\n";
    s += "    store %" + std::to_string(last + 1) + "\n  }\n";
  }
  s += "  output %b" + std::to_string(n - 1) + "\n}\n";
  return s;
}

LoopProgram parseOne(const std::string& text) {
  LoopParseResult r = parseLoopPrograms(text);
  EXPECT_FALSE(r.error.has_value()) << text;
  EXPECT_EQ(r.programs.size(), 1u);
  EXPECT_TRUE(verifyLoopProgram(r.programs[0]).empty()) << text;
  return std::move(r.programs[0]);
}

} // namespace

TEST(Schedule, PointwiseNestFactsAgreeWithTheNestBuilder) {
  std::mt19937 rng(13);
  int fused = 0, refused = 0;
  for (int trial = 0; trial < 200; ++trial) {
    LoopProgram p = parseOne(randomProgram(rng, 6));
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < p.buffers.size(); ++i) index[p.buffers[i].name] = i;
    std::vector<codegen::PointwiseNestFacts> facts;
    for (const Buffer& b : p.buffers) facts.push_back(*codegen::pointwiseNestFacts(b));
    for (int group = 0; group < 10; ++group) {
      std::vector<size_t> members;
      for (size_t i = 0; i < p.buffers.size(); ++i)
        if (rng() % 2) members.push_back(i);
      if (members.size() < 2) continue;
      std::set<size_t> in(members.begin(), members.end());
      bool predicted = true;
      std::vector<const Buffer*> bufs;
      for (size_t i : members) {
        bufs.push_back(&p.buffers[i]);
        if (facts[i].extents != facts[members[0]].extents) predicted = false;
        for (const auto& [name, read] : facts[i].loads)
          if (index.count(name) && in.count(index[name]) &&
              read == codegen::PointwiseNestFacts::Read::Other)
            predicted = false;
      }
      EXPECT_EQ(predicted, codegen::fusesIntoOneNest(bufs)) << printLoopProgram(p);
      (predicted ? fused : refused)++;
    }
  }
  EXPECT_GT(fused, 100);
  EXPECT_GT(refused, 100);
}

TEST(Schedule, KernelsAreNestsWithinTheBoundInAValidOrder) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 100; ++trial) {
    LoopProgram p = parseOne(randomProgram(rng, 12));
    passes::loop::ScheduleOptions options;
    options.maxKernelOps = 4 + int64_t(rng() % 16);
    passes::loop::schedule(p, options);
    EXPECT_TRUE(verifyLoopProgram(p).empty()) << printLoopProgram(p);
    std::map<std::string, std::vector<const Buffer*>> kernels;
    for (const Buffer& b : p.buffers)
      if (!b.kernel.empty()) kernels[b.kernel].push_back(&b);
    for (const auto& [name, bufs] : kernels) {
      int64_t ops = 0;
      for (const Buffer* b : bufs) ops += int64_t(std::get<Pointwise>(b->computation).body.ops.size());
      if (bufs.size() > 1) {
        EXPECT_LE(ops, options.maxKernelOps) << printLoopProgram(p);
      }
      EXPECT_TRUE(codegen::fusesIntoOneNest(bufs)) << "@" << name << "\n" << printLoopProgram(p);
    }
  }
}

TEST(Schedule, ALongChainIsSplitIntoBoundedKernels) {
  // 3,000 buffers: scheduling stays fast (the old pairwise scheduler took minutes here).
  std::string s = "program @chain(%x: f32[4, 8]) {\n";
  for (int i = 0; i < 3000; ++i) {
    s += "  %b" + std::to_string(i) + ": f32[4, 8] = pointwise [i0: 4, i1: 8] {\n";
    s += "    %0 = load " + (i ? "%b" + std::to_string(i - 1) : std::string("%x")) + "[8*i0 + i1]\n";
    s += "    %1 = neg %0\n    store %1\n  }\n";
  }
  s += "  output %b2999\n}\n";
  LoopProgram p = parseOne(s);
  passes::loop::schedule(p);
  std::set<std::string> kernels;
  for (const Buffer& b : p.buffers) kernels.insert(b.kernel);
  // 3 ops per buffer, at most 512 per kernel: 170 buffers per kernel.
  EXPECT_EQ(kernels.size(), size_t((3000 + 169) / 170));
  EXPECT_TRUE(verifyLoopProgram(p).empty());
}
