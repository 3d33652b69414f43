// The state the loop scheduler's passes share: the program's buffers partitioned into fusion
// groups (future kernels), the dependencies between groups, the legality of merging two groups
// and the decision log.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "ir/loop/LoopIR.h"

namespace kiln::passes::loop {

// "[4, 8]": the extents of loop ranges, for the decision log.
std::string sizesText(const std::vector<IterVar>& ranges);

class FusionGroups {
public:
  // Every buffer starts in a group of its own, in program order.
  explicit FusionGroups(const LoopProgram& p);

  const LoopProgram& program() const { return p_; }
  // The groups in a valid execution order; each lists buffer indices in program order.
  const std::vector<std::vector<size_t>>& groups() const { return groups_; }

  bool hasReduction(size_t g) const;
  bool hasExtern(size_t g) const;
  // Whether a buffer of group `b` reads a buffer of group `a`.
  bool reads(size_t b, size_t a) const;
  // Whether group `b` must run after group `a`: it reads a buffer of `a`, or it writes in
  // place into a version of a storage that `a` computes or reads (write after read).
  bool dependsOn(size_t b, size_t a) const;
  // The first buffer of group g that writes in place, or nullptr.
  const Buffer* inPlaceWriter(size_t g) const;
  // Whether a buffer of group `a` and one of group `b` read the same input or buffer.
  bool shareReads(size_t a, size_t b) const;
  // Whether `to` depends on `from`, directly or through other groups.
  bool reaches(size_t from, size_t to) const;
  // "%buf0, %buf1"
  std::string describe(size_t g) const;
  // "[4, 8]" or "[4] over [8]" for a group's first buffer.
  std::string rangesOf(size_t g) const;

  // Why groups a and b (a before b) cannot be merged into one kernel, or "" when they can:
  // externs and in-place writes are never fused, a path a -> x -> b would become a cycle, and the C++ code
  // generator must emit the merged group as one loop nest.
  std::string whyNotMergeable(size_t a, size_t b) const;
  // Merges b into a and restores an execution order of the groups; only for groups that
  // whyNotMergeable accepts (no cycle).
  void merge(size_t a, size_t b);

  void log(const std::string& line) { log_.push_back(line); }
  const std::vector<std::string>& logLines() const { return log_; }

private:
  void sortGroups();

  const LoopProgram& p_;
  std::vector<std::vector<size_t>> groups_;
  std::vector<std::set<size_t>> readsBuffers_;     // buffer -> buffers it reads
  std::vector<std::set<std::string>> readsNames_;  // buffer -> inputs and buffers it reads
  std::vector<std::set<size_t>> after_; // in-place buffer -> the base and its earlier readers
  std::vector<std::string> log_;
};

} // namespace kiln::passes::loop
