// The state the loop scheduler's passes share: the program's buffers partitioned into fusion
// groups (future kernels), the dependencies between groups, the legality of merging two groups
// and the decision log.
//
// Cost: every query and merge is proportional to the groups and edges it touches, never to the
// whole program: groups keep their dependency edges (merged as sets), a valid execution order is
// kept up to date locally (a merge reorders only the groups between the two), reachability is a
// search bounded by the execution order, and whether pointwise groups form one loop nest is
// decided from per-buffer facts (codegen::pointwiseNestFacts) over the loads between the two
// groups. Only a group with a reduction builds the loop nest to decide.
#pragma once
#include <cstdint>
#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/KernelPlan.h"
#include "ir/loop/LoopIR.h"
#include "passes/loop/Schedule.h"

namespace kiln::passes::loop {

// "[4, 8]": the extents of loop ranges, for the decision log.
std::string sizesText(const std::vector<IterVar>& ranges);


class FusionGroups {
public:
  // Every buffer starts in a group of its own, in program order; the group of buffer i is named
  // i until it is merged into another.
  explicit FusionGroups(const LoopProgram& p, int64_t maxKernelOps = kMaxKernelOps);

  const LoopProgram& program() const { return p_; }
  // The groups in execution order, each listing buffer indices in program order: a topological
  // order of the groups, among the ready groups the one with the earliest buffer first (so
  // unrelated work keeps its program order), except that a group nothing depends on runs right
  // after the last group it waits for.
  std::vector<std::vector<size_t>> groups() const;
  // The same, as group names.
  std::vector<size_t> executionOrder() const;

  // The live groups' names in a valid execution order (merged-away names are skipped); positions
  // change only when groups merge.
  std::vector<size_t> order() const;
  // The working order by position: slots() positions, at(i) the group there or kNoGroup (a
  // merged-away slot).
  static constexpr size_t kNoGroup = SIZE_MAX;
  size_t slots() const { return order_.size(); }
  size_t at(size_t position) const { return order_[position]; }
  bool alive(size_t g) const { return alive_[g]; }
  size_t position(size_t g) const { return pos_[g]; }
  const std::vector<size_t>& members(size_t g) const { return members_[g]; }

  // Body ops of g's buffers, and the most a kernel may have.
  int64_t ops(size_t g) const { return ops_[g]; }
  int64_t maxKernelOps() const { return maxKernelOps_; }
  bool hasReduction(size_t g) const { return reductions_[g] > 0; }
  bool hasExtern(size_t g) const { return externs_[g] > 0; }
  // Whether a buffer of group `b` reads a buffer of group `a`.
  bool reads(size_t b, size_t a) const { return readSucc_[a].count(b) > 0; }
  // Whether group `b` must run after group `a`: it reads a buffer of `a`, or it writes in
  // place into a version of a storage that `a` computes or reads (write after read).
  bool dependsOn(size_t b, size_t a) const { return depSucc_[a].count(b) > 0; }
  // Whether a buffer of group `a` and one of group `b` read the same input or buffer.
  bool shareReads(size_t a, size_t b) const;
  // Whether `to` depends on `from`, directly or through other groups.
  bool reaches(size_t from, size_t to) const;
  // "%buf0, %buf1" (a long group: its first and last buffers and how many are between).
  std::string describe(size_t g) const;
  // "[4, 8]" or "[4] over [8]" for a group's first buffer.
  std::string rangesOf(size_t g) const;

  // Groups reading a buffer of g (its consumers), and groups g reads.
  const std::set<size_t>& consumers(size_t g) const { return readSucc_[g]; }
  const std::set<size_t>& producers(size_t g) const { return readPred_[g]; }
  // Groups reading an input or buffer that g reads (g excluded).
  std::vector<size_t> sharingReads(size_t g) const;
  // The live groups with a reduction.
  const std::set<size_t>& reductionGroups() const { return reductionGroups_; }

  // Merges b into a (a before b in execution order) and returns "", or returns why the two
  // cannot be one kernel: externs are never fused, a path a -> x -> b would become a cycle, the
  // kernel would exceed the size bound, or the kernel planner would not plan the merged group as
  // one loop nest (an in-place write fuses only where every member reads its storage at the
  // element written: codegen::buildNest).
  std::string tryMerge(size_t a, size_t b);

  void log(const std::string& line) { log_.push_back(line); }
  const std::vector<std::string>& logLines() const { return log_; }

private:
  std::string whyNotMergeable(size_t a, size_t b) const;
  bool oneNest(size_t a, size_t b) const;
  void merge(size_t a, size_t b);
  // The first group strictly between a and b in execution order on a path from a to b, or
  // kNoGroup.
  size_t firstBetween(size_t a, size_t b) const;
  void compactOrder();

  const LoopProgram& p_;
  int64_t maxKernelOps_;
  size_t n_;
  // Per buffer.
  std::vector<std::vector<size_t>> bufReads_;   // buffers it reads
  std::vector<std::vector<int>> bufNames_;      // inputs and buffers it reads (name ids), sorted
  std::vector<std::vector<size_t>> bufAfter_;   // in-place buffer -> the base and its earlier readers
  std::vector<std::optional<codegen::PointwiseNestFacts>> pwFacts_;
  std::vector<std::vector<size_t>> pwBad_;         // buffers it reads where a nest cannot
  std::vector<std::vector<size_t>> pwBadReaders_;  // buffers reading it where a nest cannot
  std::vector<std::vector<size_t>> readersOfName_;               // name id -> buffers reading it
  std::vector<int64_t> bufOps_;
  std::vector<size_t> groupOf_;
  // Per group (indexed by name; dead ones empty).
  std::vector<bool> alive_;
  std::vector<std::vector<size_t>> members_;
  std::vector<std::vector<int>> names_; // name ids read by its members, sorted
  std::vector<int> reductions_, externs_, notPointwiseNest_;
  std::vector<int64_t> ops_;
  std::vector<std::set<size_t>> readSucc_, readPred_, depSucc_, depPred_;
  std::set<size_t> reductionGroups_;
  // Execution order: live names and tombstones (SIZE_MAX); pos_[g] is g's index in order_.
  std::vector<size_t> order_;
  std::vector<size_t> pos_;
  size_t dead_ = 0;
  // Marks of the bounded searches (a stamp per search instead of clearing).
  mutable std::vector<uint32_t> fwd_, bwd_;
  mutable uint32_t stamp_ = 0;
  std::vector<std::string> log_;
};

} // namespace kiln::passes::loop
