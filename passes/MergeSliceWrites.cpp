// merge-slice-writes (see MergeSliceWrites.h).
#include "passes/MergeSliceWrites.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/OpTarget.h"
#include "ir/SchemaBinding.h"
#include "runtime/OpSchema.h"

namespace kiln {

namespace {

// A slice written as a whole: [start, end) along dim of the zero-filled tensor.
struct SliceWrite {
  Node* slice;
  Node* copy;
  int64_t dim, start, end;
};

// The node's arguments bound to its schema's parameters (null: the default), or nullopt.
std::optional<BoundArguments> bound(const Node* n) {
  if (!n->isOp()) return std::nullopt;
  return bindArguments(opSchema(n->op()), n->args(), n->kwargs());
}

std::optional<int64_t> intOr(const Argument* a, std::optional<int64_t> fallback) {
  if (!a || a->isNone()) return fallback;
  if (a->kind() != Argument::Kind::Int) return std::nullopt;
  return a->toInt();
}

// `slice` of the zeros `z`, when it is read only as the destination of one copy_ whose result
// is unused: its dim and bounds normalized as slice does (negative from the end, clamped).
std::optional<SliceWrite> sliceWrite(Node* slice, Node* z, const TensorType& type) {
  if (slice->op() != OpId::slice_Tensor || slice->users().size() != 1) return std::nullopt;
  Node* copy = slice->users()[0];
  if (copy->op() != OpId::copy_ || !copy->users().empty()) return std::nullopt;
  auto s = bound(slice);
  auto c = bound(copy);
  if (!s || !c || !(*s)[0] || *(*s)[0] != Argument(z) || !(*c)[0] || *(*c)[0] != Argument(slice) ||
      ((*c)[1] && *(*c)[1] == Argument(z)))
    return std::nullopt;
  std::optional<int64_t> dim = intOr((*s)[1], 0), step = intOr((*s)[4], 1);
  if (!dim || step != 1) return std::nullopt;
  int64_t rank = int64_t(type.sizes.size());
  if (*dim < 0) *dim += rank;
  if (*dim < 0 || *dim >= rank) return std::nullopt;
  std::optional<int64_t> size = type.sizes[size_t(*dim)].constant();
  if (!size) return std::nullopt;
  std::optional<int64_t> start = intOr((*s)[2], 0), end = intOr((*s)[3], *size);
  if (!start || !end) return std::nullopt;
  if (*start < 0) *start += *size;
  if (*end < 0) *end += *size;
  *start = std::clamp<int64_t>(*start, 0, *size);
  *end = std::clamp<int64_t>(*end, *start, *size);
  return SliceWrite{slice, copy, *dim, *start, *end};
}

// The slice writes into `z` when z is zeros of a static tensor type read only by them and by
// `sum`; nullopt otherwise.
std::optional<std::vector<SliceWrite>> writesOnly(Node* z, const Node* sum) {
  if (z->op() != OpId::zeros || !z->meta.type || !z->meta.type->isTensor()) return std::nullopt;
  std::vector<SliceWrite> writes;
  int sums = 0;
  for (Node* u : z->users()) {
    if (u == sum) {
      ++sums;
      continue;
    }
    std::optional<SliceWrite> w = sliceWrite(u, z, z->meta.type->tensor());
    if (!w) return std::nullopt;
    writes.push_back(*w);
  }
  if (sums != 1 || writes.empty()) return std::nullopt;
  return writes;
}

bool disjoint(const std::vector<SliceWrite>& writes) {
  for (size_t i = 0; i < writes.size(); ++i)
    for (size_t j = i + 1; j < writes.size(); ++j)
      if (writes[i].dim != writes[j].dim ||
          (writes[i].start < writes[j].end && writes[j].start < writes[i].end))
        return false;
  return true;
}

} // namespace

void mergeSliceWrites(Graph& g) {
  std::unordered_map<const Node*, size_t> position;
  size_t i = 0;
  for (Node* n : g.nodes()) position[n] = i++;
  for (Node* sum : g.nodes()) {
    if (sum->op() != OpId::add_Tensor || sum->args().size() != 2 || !sum->kwargs().empty() ||
        !sum->args()[0].isNode() || !sum->args()[1].isNode())
      continue;
    Node* a = sum->args()[0].toNode();
    Node* b = sum->args()[1].toNode();
    if (a == b || !sum->meta.type || !a->meta.type || !b->meta.type || !(*a->meta.type == *sum->meta.type) ||
        !(*b->meta.type == *sum->meta.type))
      continue;
    auto writesA = writesOnly(a, sum), writesB = writesOnly(b, sum);
    if (!writesA || !writesB) continue;
    std::vector<SliceWrite> all = *writesA;
    all.insert(all.end(), writesB->begin(), writesB->end());
    bool before = std::all_of(all.begin(), all.end(),
                              [&](const SliceWrite& w) { return position.at(w.copy) < position.at(sum); });
    if (!before || !disjoint(all)) continue;
    // The earlier zeros stays: every slice of the later one comes after it.
    Node* kept = position.at(a) < position.at(b) ? a : b;
    Node* gone = kept == a ? b : a;
    for (const SliceWrite& w : kept == a ? *writesB : *writesA) w.slice->setArg(0, Argument(kept));
    g.replaceAllUsesWith(sum, Argument(kept));
    g.erase(sum);
    g.erase(gone);
  }
}

} // namespace kiln
