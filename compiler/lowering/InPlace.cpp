// In-place writes (prims.copy_to): a write becomes a pointwise buffer into its storage's
// next version; every alias of the storage reads the new version from then on.
#include "compiler/lowering/Lowerer.h"

#include <algorithm>

namespace kiln::compiler::lowering {

// The input or buffer owning the storage that `version` (a storage name) is a version of.
std::string Lowerer::storageRoot(const std::string& version) const {
  auto it = versionRoot_.find(version);
  return it == versionRoot_.end() ? version : it->second;
}

// Row-major strides of a storage root: an input's own, a buffer's contiguous ones.
Shape Lowerer::storageStrides(const std::string& root, const Shape& sizes) {
  if (const LoopInput* in = program_.findInput(root)) return in->strides;
  return rowMajorStrides(sizes);
}

// The storages (by root) a value's loader reads.
std::set<std::string> Lowerer::readsOf(const Value& v) {
  BodyContext c;
  iterVars("i", v.sizes, c.facts);
  v.load(c, loopVars("i", v.sizes.size()));
  std::set<std::string> roots;
  for (const LoopOp& op : c.body.ops)
    if (op.code == LoopOpCode::Load) roots.insert(storageRoot(op.buffer));
  return roots;
}

// Every view of `root` loads through the root's current loader again.
void Lowerer::refreshAliases(const Node* root) {
  const Value& r = values_.at(root);
  for (auto& [node, v] : values_) {
    if (v.aliasOf != root) continue;
    Loader inner = r.load;
    IndexMap map = v.aliasMap;
    v.load = [inner, map](BodyContext& c, const Index& idx) { return inner(c, map(idx)); };
    v.cost = r.cost;
    v.storage = v.aliasWhole ? r.storage : "";
  }
}

// Whether a node lowered before `now` is used after it (by a later node or the output).
bool Lowerer::usedAfter(const Node* m, const Node* now) const {
  for (const Node* u : m->users())
    if (order_.at(u) > order_.at(now)) return true;
  return false;
}

// Write after read: values computed lazily from `root`'s storage that are still needed after
// `now` are realized before the write, so they keep the values they were defined with.
void Lowerer::snapshotReaders(const std::string& root, const Node* now) {
  std::set<const Node*> needed;
  for (const auto& [node, v] : values_)
    if (usedAfter(node, now)) needed.insert(v.aliasOf ? v.aliasOf : node);
  for (const Node* m : graph_.nodes()) {
    if (!needed.count(m)) continue;
    Value& v = values_.at(m);
    if (!v.storage.empty() || v.aliasOf || !readsOf(v).count(root)) continue;
    realize(v);
    refreshAliases(m);
  }
}

// The source of copy_to(a, b) at an index of a: b's element (b broadcasts to a's shape,
// dims aligned at the right; a number is a constant), cast to a's dtype.
Loader Lowerer::copySource(const Node* n, const Value& dst, int64_t& cost) {
  const Argument* srcArg = argOf(n, 1, "b");
  KILN_CHECK(srcArg && (srcArg->isNode() || srcArg->isNumber()),
             "lowering: prims.copy_to (%", n->name(), ") needs a tensor or number to copy");
  ScalarType dtype = dst.dtype;
  if (!srcArg->isNode()) {
    Argument value = *srcArg;
    cost = 1;
    return [value, dtype](BodyContext& c, const Index&) { return emitConstant(c, value, dtype); };
  }
  const Value& s = valueOf(srcArg->toNode());
  Shape srcSizes = s.sizes, dstSizes = dst.sizes;
  bool fits = srcSizes.size() <= dstSizes.size();
  for (size_t d = 0; fits && d < srcSizes.size(); ++d) {
    const IndexExpr& o = dstSizes[dstSizes.size() - srcSizes.size() + d];
    fits = srcSizes[d] == o || srcSizes[d] == IndexExpr(1);
  }
  KILN_CHECK(fits, "lowering: prims.copy_to (%", n->name(), ") copies a ",
             shapeString(srcSizes), " tensor into ", shapeString(dstSizes));
  Loader inner = s.load;
  cost = s.cost + 1;
  return [inner, srcSizes, dstSizes, dtype](BodyContext& c, const Index& idx) {
    Index in;
    for (size_t d = 0; d < srcSizes.size(); ++d)
      in.push_back(srcSizes[d] == IndexExpr(1) ? IndexExpr(0)
                                    : idx.at(dstSizes.size() - srcSizes.size() + d));
    return emitCast(c, inner(c, in), dtype);
  };
}

// copy_to returns its destination: the same view of the root, loading its current version.
Value Lowerer::copyResult(const Value& dst, const Node* rootNode, const IndexMap& map) {
  const Value& r = values_.at(rootNode);
  Value result = dst;
  result.aliasOf = rootNode;
  result.aliasMap = map;
  result.aliasWhole = dst.aliasOf ? dst.aliasWhole : true;
  Loader inner = r.load;
  result.load = [inner, map](BodyContext& c, const Index& i) { return inner(c, map(i)); };
  result.storage = result.aliasWhole ? r.storage : "";
  result.cost = r.cost;
  return result;
}

// copy_to(a, b): b (cast to a's dtype) is written into a's elements, which are a view of a
// root node's storage; the write becomes a pointwise buffer `into` that storage's current
// version, and the root and all its views read the new version from then on. A write of the
// whole of a root that is not in memory yet overwrites nothing: the root becomes b.
Value Lowerer::lowerCopyTo(const Node* n) {
  const Node* dstNode = operandNode(n, 0, "a");
  const Value dst = valueOf(dstNode);
  const Node* rootNode = dst.aliasOf ? dst.aliasOf : dstNode;
  IndexMap map = dst.aliasOf ? dst.aliasMap : [](const Index& idx) { return idx; };
  int64_t srcCost = 1;
  Loader src = copySource(n, dst, srcCost);
  if ((!dst.aliasOf || dst.aliasWhole) && values_.at(rootNode).storage.empty()) {
    Value& r = values_.at(rootNode);
    r.load = src;
    r.cost = srcCost;
    if (r.cost > kRecomputeLimit) realize(r);
    refreshAliases(rootNode);
    return copyResult(dst, rootNode, map);
  }
  if (values_.at(rootNode).storage.empty()) {
    realize(values_.at(rootNode));
    refreshAliases(rootNode);
  }
  std::string base = values_.at(rootNode).storage;
  std::string root = storageRoot(base);
  Shape strides = storageStrides(root, values_.at(rootNode).sizes);

  Pointwise pw;
  BodyContext c;
  pw.ranges = iterVars("i", dst.sizes, c.facts);
  Index idx = loopVars("i", dst.sizes.size());
  pw.intoIndex = simplify(flatIndex(map(idx), strides), c.facts);
  // Eager refuses a write where two elements share a memory location (a broadcast view or
  // input); so does the compiled program. A write of no elements overlaps nothing.
  bool empty = std::find(dst.sizes.begin(), dst.sizes.end(), IndexExpr(0)) != dst.sizes.end();
  for (size_t d = 0; d < dst.sizes.size() && !empty; ++d) {
    if (dst.sizes[d].constant().value_or(kMinSizeSymbol) < 2) continue;
    std::map<std::string, IndexExpr> one{{"i" + std::to_string(d), IndexExpr(1)}};
    if (simplify(pw.intoIndex.substitute(one) - pw.intoIndex, c.facts).constant() ==
        std::optional<int64_t>(0))
      throw Error("unsupported operation: more than one element of the written-to tensor "
                  "refers to a single memory location. Please clone() the tensor before "
                  "performing the operation. (prims.copy_to %" + n->name() + " into " +
                  scalarTypeName(dst.dtype) + shapeString(dst.sizes) + ")");
  }

  snapshotReaders(root, n);
  BodyContext body = c;
  int x = src(body, idx);
  // The storage may be read only at the element being written (an element-wise update);
  // a source reading it elsewhere (x.add_(x.flip(0))) is computed into a buffer first.
  bool elementwise = true;
  for (const LoopOp& op : body.body.ops)
    if (op.code == LoopOpCode::Load && storageRoot(op.buffer) == root)
      elementwise &= op.buffer == base && op.index == pw.intoIndex;
  if (!elementwise) {
    Value copy = derived(n, src, srcCost);
    copy.sizes = dst.sizes;
    copy.dtype = dst.dtype;
    Value tmp = bufferValue(realize(copy), dst.dtype, dst.sizes);
    body = c;
    x = tmp.load(body, idx);
  }
  body.body.store(x);
  pw.body = std::move(body.body);
  pw.into = base;
  std::string name = freshName();
  program_.buffers.push_back(Buffer{name, dst.dtype, dst.sizes, std::move(pw), "", {}});
  versionRoot_[name] = root;

  // The root (and every view of it) now reads the new version.
  Value& r = values_.at(rootNode);
  ScalarType dtype = r.dtype;
  r.storage = name;
  r.cost = 1;
  r.load = [name, strides, dtype](BodyContext& c, const Index& i) {
    return emitLoad(c, name, flatIndex(i, strides), dtype);
  };
  refreshAliases(rootNode);
  return copyResult(dst, rootNode, map);
}

} // namespace kiln::compiler::lowering
