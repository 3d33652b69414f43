// Checking loop programs: names, ranges, body structure, dtypes and load bounds.
#include "ir/loop/Verifier.h"

#include <cstdint>
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "ir/Identifier.h"
#include "ir/Type.h"

namespace kiln {

namespace {

class LoopVerifier {
public:
  explicit LoopVerifier(const LoopProgram& p) : p_(p) {}

  std::vector<Diagnostic> run() {
    for (const std::string& s : p_.sizeSymbols()) {
      symbols_.insert(s);
      symbolFacts_[s] = VarRange{kMinSizeSymbol, std::nullopt};
    }
    std::set<std::string> seen;
    for (const LoopInput& in : p_.inputs) {
      std::string where = "%" + in.name;
      if (!isNameText(in.name)) report(in.parsedAt, where + ": invalid input name");
      if (!seen.insert(in.name).second) report(in.parsedAt, where + ": duplicate input name");
      if (in.strides.size() != in.sizes.size())
        report(in.parsedAt, where + ": " + std::to_string(in.strides.size()) + " strides for " +
                                std::to_string(in.sizes.size()) + " dims");
      checkSizes(in.sizes, in.parsedAt, where);
      available_[in.name] = &in;
      root_[in.name] = in.name;
      current_[in.name] = in.name;
    }
    std::string kernel;
    std::set<std::string> kernels;
    for (const Buffer& b : p_.buffers) {
      std::string where = "%" + b.name;
      if (!isNameText(b.name)) report(b.parsedAt, where + ": invalid buffer name");
      if (!seen.insert(b.name).second)
        report(b.parsedAt, where + ": the name is taken by an earlier input or buffer");
      if (b.kernel != kernel) {
        if (!b.kernel.empty() && !kernels.insert(b.kernel).second)
          report(b.parsedAt, where + ": the buffers of kernel @" + b.kernel + " are not adjacent");
        if (!b.kernel.empty() && !isIdentifier(b.kernel))
          report(b.parsedAt, where + ": invalid kernel name '" + b.kernel + "'");
        kernel = b.kernel;
      }
      checkSizes(b.sizes, b.parsedAt, where);
      checkBuffer(b, where);
      if (!b.reuses.empty()) checkReuse(b, where);
      buffers_[b.name] = &b;
      const std::string* base = b.writesInto();
      std::string root = base && root_.count(*base) ? root_[*base] : b.name;
      root_[b.name] = root;
      current_[root] = b.name;
    }
    for (const std::string& out : p_.outputs) {
      if (!available_.count(out) && !buffers_.count(out))
        report(p_.parsedAt, "output %" + out + " is not an input or buffer of the program");
      else
        checkCurrent(out, p_.parsedAt, "output");
    }
    for (const std::string& out : p_.outputs)
      if (const Buffer* b = p_.findBuffer(out); b && !b->reuses.empty())
        report(b->parsedAt, "%" + b->name + ": an output has storage of its own; it cannot reuse %" +
                                b->reuses + "'s");
    for (const auto& [reused, by] : reusedBy_)
      if (std::count(p_.outputs.begin(), p_.outputs.end(), reused))
        report(by->parsedAt, "%" + by->name + ": reuses the storage of %" + reused +
                                 ", an output of the program");
    return std::move(problems_);
  }

private:
  static bool isNameText(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), isNameChar);
  }

  void report(TextPos pos, std::string msg) { problems_.push_back({pos, std::move(msg)}); }

  // A use of `name` (a version of some storage) after a later version overwrote it reads
  // values that are gone.
  void checkCurrent(const std::string& name, TextPos pos, const std::string& what) {
    auto r = root_.find(name);
    if (r == root_.end()) return;
    const std::string& latest = current_[r->second];
    if (latest != name)
      report(pos, what + " %" + name + ": its storage was overwritten in place by %" + latest);
  }

  // The structure of a memory-plan entry; that the reused buffer is dead by then is checked by
  // the code generator, which knows the order its loop nests run in.
  void checkReuse(const Buffer& b, const std::string& where) {
    auto it = buffers_.find(b.reuses);
    if (it == buffers_.end()) {
      report(b.parsedAt, where + ": reuses %" + b.reuses + ", which is not a buffer defined before it");
      return;
    }
    const Buffer& r = *it->second;
    if (r.dtype != b.dtype || numel(r.sizes) != numel(b.sizes))
      report(b.parsedAt, where + ": " + dtypeShortName(b.dtype) + " with " + numel(b.sizes).str() +
                             " elements cannot reuse the storage of %" + r.name + ": " +
                             dtypeShortName(r.dtype) + " with " + numel(r.sizes).str() +
                             " elements (the dtype and element count must match)");
    auto [prev, fresh] = reusedBy_.emplace(r.name, &b);
    if (!fresh)
      report(b.parsedAt, where + ": the storage of %" + r.name + " is already reused by %" +
                             prev->second->name);
  }

  static IndexExpr numel(const std::vector<IndexExpr>& sizes) {
    IndexExpr n(1);
    for (const IndexExpr& s : sizes) n = n * s;
    return n;
  }

  // Variables of `e` that are neither size symbols nor in `allowed`.
  std::vector<std::string> strangers(const IndexExpr& e, const std::set<std::string>& allowed) {
    std::vector<std::string> out;
    for (const std::string& v : e.variables())
      if (!symbols_.count(v) && !allowed.count(v)) out.push_back(v);
    return out;
  }

  void checkSizes(const std::vector<IndexExpr>& sizes, TextPos pos, const std::string& where) {
    for (const IndexExpr& s : sizes) {
      if (auto c = s.constant(); c && *c < 0)
        report(pos, where + ": negative size " + std::to_string(*c));
      for (const std::string& v : strangers(s, {}))
        report(pos, where + ": size " + s.str() + " uses '" + v +
                        "', which is not a size symbol of the inputs");
    }
  }

  IndexExpr product(const std::vector<IndexExpr>& es) {
    IndexExpr r(1);
    for (const IndexExpr& e : es)
      r = r * e;
    return r;
  }

  // Loop variables: identifiers, unique, not size symbols; extents over size symbols.
  void checkRanges(const std::vector<IterVar>& ranges, TextPos pos, const std::string& where,
                   std::set<std::string>& vars, RangeFacts& facts) {
    for (const IterVar& r : ranges) {
      if (!isIdentifier(r.name))
        report(pos, where + ": invalid loop variable name '" + r.name + "'");
      if (symbols_.count(r.name))
        report(pos, where + ": loop variable " + r.name + " has the name of a size symbol");
      if (!vars.insert(r.name).second)
        report(pos, where + ": loop variable " + r.name + " is declared twice");
      if (auto c = r.extent.constant(); c && *c < 0)
        report(pos, where + ": loop variable " + r.name + " has a negative extent " +
                        std::to_string(*c));
      for (const std::string& v : strangers(r.extent, {}))
        report(pos, where + ": the extent of " + r.name + " uses '" + v +
                        "', which is not a size symbol of the inputs");
      Bounds b = bounds(r.extent, symbolFacts_);
      std::optional<int64_t> hi;
      if (b.hi) hi = *b.hi;
      facts[r.name] = VarRange{0, hi};
      extents_[r.name] = r.extent;
    }
  }

  // The sizes and strides of the storage a load of `name` addresses (an in-place version's
  // root's): an input's own, a buffer's contiguous ones; nullopt for an unknown name.
  std::optional<std::pair<std::vector<IndexExpr>, std::vector<IndexExpr>>>
  storageLayout(const std::string& name) {
    if (auto r = root_.find(name); r != root_.end() && r->second != name) return storageLayout(r->second);
    if (auto it = available_.find(name); it != available_.end())
      return std::make_pair(it->second->sizes, it->second->strides);
    if (auto bt = buffers_.find(name); bt != buffers_.end())
      return std::make_pair(bt->second->sizes, contiguousStrides(bt->second->sizes));
    return std::nullopt;
  }

  // How many elements a load may address: a buffer's element count, or one past an input's
  // last element; nullopt when symbolic.
  std::optional<int64_t> storageExtent(const std::string& name) {
    auto layout = storageLayout(name);
    if (!layout) return std::nullopt;
    const auto& [sizes, strides] = *layout;
    __int128 extent = 1;
    for (size_t d = 0; d < sizes.size() && d < strides.size(); ++d) {
      auto size = sizes[d].constant(), stride = strides[d].constant();
      if (!size || !stride) return std::nullopt;
      if (*size == 0) return 0;
      extent += __int128(*size - 1) * (*stride < 0 ? -*stride : *stride);
      if (extent > INT64_MAX) return std::nullopt;
    }
    return int64_t(extent);
  }

  // An extern input's view must address only elements of the input's storage.
  void checkView(const StridedView& v, const std::string& input, TextPos pos,
                 const std::string& where) {
    std::string what = where + ": the view of extern input %" + input;
    if (v.sizes.size() != v.strides.size()) {
      report(pos, what + " has " + std::to_string(v.sizes.size()) + " sizes and " +
                      std::to_string(v.strides.size()) + " strides");
      return;
    }
    if (v.offset < 0) report(pos, what + " has a negative offset");
    __int128 last = v.offset;
    bool empty = false, symbolic = false;
    for (size_t d = 0; d < v.sizes.size(); ++d) {
      auto size = v.sizes[d].constant(), stride = v.strides[d].constant();
      if (!size || !stride) {
        // Over size symbols (each >= kMinSizeSymbol): the signs are checked; the extent is
        // the storage's, checked where the symbols are bound.
        std::optional<int64_t> lo = bounds(v.sizes[d], symbolFacts_).lo, slo = bounds(v.strides[d], symbolFacts_).lo;
        if (!lo || *lo < 0 || !slo || *slo < 0) {
          report(pos, what + " has a size or stride that may be negative");
          return;
        }
        symbolic = true;
        continue;
      }
      if (*size < 0 || *stride < 0) {
        report(pos, what + " has a negative size or stride");
        return;
      }
      empty |= *size == 0;
      last += __int128(*size > 0 ? *size - 1 : 0) * *stride;
    }
    if (symbolic) return;
    std::optional<int64_t> extent = storageExtent(input);
    if (!empty && extent && last >= *extent)
      report(pos, what + " reaches element " + std::to_string(int64_t(last)) +
                      " of a storage of " + std::to_string(*extent));
  }

  void checkBuffer(const Buffer& b, const std::string& where) {
    if (const auto* ext = std::get_if<Extern>(&b.computation)) {
      if (!isIdentifier(ext->kernel))
        report(b.parsedAt, where + ": invalid extern kernel name '" + ext->kernel + "'");
      for (const std::string& in : ext->inputs)
        if (!available_.count(in) && !buffers_.count(in))
          report(b.parsedAt, where + ": extern input %" + in +
                                 " is not an input or an earlier buffer");
        else
          checkCurrent(in, b.parsedAt, where + ": extern input");
      if (!ext->views.empty() && ext->views.size() != ext->inputs.size())
        report(b.parsedAt, where + ": extern views do not match its inputs");
      for (size_t i = 0; i < ext->views.size() && i < ext->inputs.size(); ++i)
        if (ext->views[i]) checkView(*ext->views[i], ext->inputs[i], b.parsedAt, where);
      std::set<std::string> keys;
      for (const auto& [key, value] : ext->args) {
        if (!isIdentifier(key))
          report(b.parsedAt, where + ": invalid keyword argument name '" + key + "'");
        if (!keys.insert(key).second)
          report(b.parsedAt, where + ": keyword argument '" + key + "' given twice");
      }
      return;
    }
    std::set<std::string> vars;
    RangeFacts facts = symbolFacts_;
    const LoopBody* body;
    std::vector<IterVar> outRanges;
    const Reduction* red = std::get_if<Reduction>(&b.computation);
    if (red) {
      checkRanges(red->ranges, b.parsedAt, where, vars, facts);
      checkRanges(red->reductionRanges, b.parsedAt, where, vars, facts);
      body = &red->body;
      outRanges = red->ranges;
    } else {
      const Pointwise& pw = std::get<Pointwise>(b.computation);
      checkRanges(pw.ranges, b.parsedAt, where, vars, facts);
      body = &pw.body;
      outRanges = pw.ranges;
    }
    // Indirect index variables range over [0, size): the op checks its value against the size.
    std::set<std::string> withIndirect = vars;
    for (const LoopOp& op : body->ops) {
      if (op.code != LoopOpCode::Indirect) continue;
      withIndirect.insert(op.var);
      if (!vars.count(op.var) && !symbols_.count(op.var))
        facts[op.var] = VarRange{0, op.index.constant()};
    }
    if (!red) checkInPlace(b, std::get<Pointwise>(b.computation), where, withIndirect, facts);

    std::vector<IndexExpr> extents;
    for (const IterVar& r : outRanges)
      extents.push_back(r.extent);
    try {
      IndexExpr covered = product(extents), numel = product(b.sizes);
      if (covered != numel)
        report(b.parsedAt, where + ": the ranges cover " + covered.str() +
                               " elements but the buffer has " + numel.str());
    } catch (const std::exception& e) {
      report(b.parsedAt, where + ": " + e.what());
    }
    checkBody(b, *body, red, where, vars, facts);
  }

  void checkBody(const Buffer& b, const LoopBody& body, const Reduction* red,
                 const std::string& where, const std::set<std::string>& vars,
                 const RangeFacts& facts) {
    LoopOpCode last = red ? LoopOpCode::Reduce : LoopOpCode::Store;
    std::set<std::string> visible = vars; // loop variables and the indirect ones bound so far
    if (body.ops.empty() || body.ops.back().code != last)
      report(b.parsedAt, where + ": the body must end with " + loopOpName(last));
    for (size_t k = 0; k < body.ops.size(); ++k) {
      const LoopOp& op = body.ops[k];
      std::string at = where + ": " + loopOpName(op.code) + ": ";
      TextPos pos = op.parsedAt.known() ? op.parsedAt : b.parsedAt;
      if ((op.code == LoopOpCode::Store || op.code == LoopOpCode::Reduce) &&
          (op.code != last || k + 1 != body.ops.size())) {
        report(pos, at + (op.code != last ? std::string("not allowed in a ") +
                                                (red ? "reduction" : "pointwise") + " body"
                                          : std::string("must be the last op of the body")));
      }
      std::vector<ScalarType> dtypes;
      bool operandsOk = true;
      for (int o : op.operands) {
        if (o < 0 || o >= int(k) || !definesValue(body.ops[o].code)) {
          report(pos, at + "operand " + std::to_string(o) + " is not an earlier value");
          operandsOk = false;
          continue;
        }
        dtypes.push_back(body.ops[o].dtype);
      }
      if (!operandsOk) continue;
      switch (op.code) {
      case LoopOpCode::Load:
        checkLoad(op, pos, at, visible, facts);
        break;
      case LoopOpCode::Indirect:
        checkIndirect(op, dtypes, pos, at, vars, visible);
        visible.insert(op.var);
        break;
      case LoopOpCode::IndexExpr:
        for (const std::string& v : strangers(op.index, visible))
          report(pos, at + "'" + v + "' is not a loop variable of " + where +
                          " or a size symbol");
        if (op.dtype != ScalarType::Int64 && op.dtype != ScalarType::Int32)
          report(pos, at + "the value is i32 or i64, not " + dtypeShortName(op.dtype));
        break;
      case LoopOpCode::Constant:
        checkConstant(op, pos, at);
        break;
      case LoopOpCode::Cast:
        if (dtypes.size() != 1) report(pos, at + "takes 1 operand");
        break;
      default: {
        if (auto problem = checkLoopOpDtypes(op.code, dtypes)) {
          report(pos, where + ": " + *problem);
          break;
        }
        ScalarType expected = op.code == LoopOpCode::Store || op.code == LoopOpCode::Reduce
                                  ? dtypes[0]
                                  : inferLoopOpDtype(op.code, dtypes);
        if (op.dtype != expected)
          report(pos, at + "records dtype " + dtypeShortName(op.dtype) + " but its operands give " +
                          dtypeShortName(expected));
        if (op.code == LoopOpCode::Store && dtypes[0] != b.dtype)
          report(pos, at + "stores " + dtypeShortName(dtypes[0]) + " into %" + b.name +
                          " of dtype " + dtypeShortName(b.dtype));
        if (op.code == LoopOpCode::Reduce && red) checkReduce(*red, dtypes[0], b, pos, at);
      }
      }
    }
  }

  // An in-place write: into the current version of an input or earlier buffer, of its dtype,
  // at offsets inside its storage; the body reads that version only at the element it writes
  // (anything else could already be overwritten).
  void checkInPlace(const Buffer& b, const Pointwise& pw, const std::string& where,
                    const std::set<std::string>& vars, const RangeFacts& facts) {
    if (pw.into.empty()) return;
    std::string at = where + ": into %" + pw.into + ": ";
    if (!available_.count(pw.into) && !buffers_.count(pw.into)) {
      report(b.parsedAt, at + "not an input or an earlier buffer");
      return;
    }
    checkCurrent(pw.into, b.parsedAt, where + ": writes into");
    const std::string& root = root_[pw.into];
    ScalarType rootDtype = available_.count(root) ? available_[root]->dtype : buffers_[root]->dtype;
    if (b.dtype != rootDtype)
      report(b.parsedAt, at + "the buffer is " + dtypeShortName(b.dtype) + " but the storage of %" +
                             root + " is " + dtypeShortName(rootDtype));
    std::vector<std::string> bad = strangers(pw.intoIndex, vars);
    for (const std::string& v : bad)
      report(b.parsedAt, at + "'" + v + "' in the index written is not a loop variable of " +
                             where + " or a size symbol");
    if (bad.empty()) {
      std::optional<int64_t> extent = storageExtent(root);
      Bounds bd = bounds(pw.intoIndex, facts);
      bool empty = false;
      for (const IterVar& r : pw.ranges)
        empty |= r.extent.constant() == std::optional<int64_t>(0);
      if (!empty && bd.lo && *bd.lo < 0)
        report(b.parsedAt, at + "the index written " + pw.intoIndex.str() +
                               " can be negative (down to " + std::to_string(*bd.lo) + ")");
      if (!empty && extent && bd.hi && *bd.hi >= *extent)
        report(b.parsedAt, at + "the index written " + pw.intoIndex.str() + " reaches " +
                               std::to_string(*bd.hi) + ", but the storage of %" + root +
                               " has " + std::to_string(*extent) + " elements");
    }
    for (const LoopOp& op : pw.body.ops)
      if (op.code == LoopOpCode::Load && op.buffer == pw.into &&
          simplify(op.index - pw.intoIndex, facts) != IndexExpr(0))
        report(op.parsedAt.known() ? op.parsedAt : b.parsedAt,
               at + "reads %" + pw.into + "[" + op.index.str() + "] while writing it in place at [" +
                   pw.intoIndex.str() + "]: only the element written may be read");
  }

  // indirect: an integer operand, a fresh index variable, a size over size symbols and an
  // error "IndexError: ..." or "RuntimeError: ...".
  void checkIndirect(const LoopOp& op, const std::vector<ScalarType>& dtypes, TextPos pos,
                     const std::string& at, const std::set<std::string>& loopVars,
                     const std::set<std::string>& visible) {
    if (dtypes.size() != 1) {
      report(pos, at + "takes 1 operand");
      return;
    }
    if (isFloatingType(dtypes[0]) || dtypes[0] == ScalarType::Bool)
      report(pos, at + "the index value is an integer, not " + dtypeShortName(dtypes[0]));
    if (op.dtype != ScalarType::Int64)
      report(pos, at + "the value is i64, not " + dtypeShortName(op.dtype));
    if (!isIdentifier(op.var))
      report(pos, at + "invalid index variable name '" + op.var + "'");
    else if (loopVars.count(op.var) || symbols_.count(op.var))
      report(pos, at + "the index variable " + op.var + " is already a loop variable or size symbol");
    else if (visible.count(op.var))
      report(pos, at + "the index variable " + op.var + " is bound twice");
    for (const std::string& v : strangers(op.index, {}))
      report(pos, at + "the size " + op.index.str() + " uses '" + v + "', which is not a size symbol");
    if (auto c = op.index.constant(); c && *c < 0)
      report(pos, at + "negative size " + std::to_string(*c));
    if (!op.error.starts_with("IndexError: ") && !op.error.starts_with("RuntimeError: "))
      report(pos, at + "the error must start with 'IndexError: ' or 'RuntimeError: '");
  }

  void checkReduce(const Reduction& red, ScalarType value, const Buffer& b, TextPos pos,
                   const std::string& at) {
    if ((red.kind == ReductionKind::WelfordMean || red.kind == ReductionKind::WelfordVar) &&
        !isFloatingType(value))
      report(pos, at + reductionKindName(red.kind) + " needs floating values, got " +
                      dtypeShortName(value));
    ScalarType result = reductionResultDtype(red.kind, value);
    if (result != b.dtype)
      report(pos, at + reductionKindName(red.kind) + " of " + dtypeShortName(value) + " gives " +
                      dtypeShortName(result) + ", but %" + b.name + " is " +
                      dtypeShortName(b.dtype));
  }

  void checkConstant(const LoopOp& op, TextPos pos, const std::string& at) {
    if (isFloatingType(op.dtype)) return;
    int64_t v = op.intValue;
    int64_t lo = 0, hi = 0;
    switch (op.dtype) {
    case ScalarType::Bool:
      lo = 0, hi = 1;
      break;
    case ScalarType::UInt8:
      lo = 0, hi = 255;
      break;
    case ScalarType::Int8:
      lo = -128, hi = 127;
      break;
    case ScalarType::Int16:
      lo = -32768, hi = 32767;
      break;
    case ScalarType::Int32:
      lo = INT32_MIN, hi = INT32_MAX;
      break;
    default:
      lo = INT64_MIN, hi = INT64_MAX;
    }
    if (v < lo || v > hi)
      report(pos, at + std::to_string(v) + " does not fit in " + dtypeShortName(op.dtype));
  }

  void checkLoad(const LoopOp& op, TextPos pos, const std::string& at,
                 const std::set<std::string>& vars, const RangeFacts& facts) {
    std::optional<ScalarType> source;
    if (auto it = available_.find(op.buffer); it != available_.end())
      source = it->second->dtype;
    else if (auto bt = buffers_.find(op.buffer); bt != buffers_.end())
      source = bt->second->dtype;
    if (!source) {
      report(pos, at + "%" + op.buffer + " is not an input or an earlier buffer");
      return;
    }
    if (*source != op.dtype)
      report(pos, at + "records dtype " + dtypeShortName(op.dtype) + " but %" + op.buffer +
                      " is " + dtypeShortName(*source));
    checkCurrent(op.buffer, pos, at + "reads");
    std::vector<std::string> bad = strangers(op.index, vars);
    for (const std::string& v : bad)
      report(pos, at + "'" + v + "' in the index of %" + op.buffer +
                      " is not a loop variable of the computation or a size symbol");
    if (!bad.empty()) return;
    // A loop with an empty range never runs its body: nothing is read.
    for (const auto& [name, range] : facts)
      if (vars.count(name) && range.hi == 0) return;
    std::optional<int64_t> extent = storageExtent(op.buffer);
    Bounds bd = bounds(op.index, facts);
    if (bd.lo && *bd.lo < 0)
      report(pos, at + "the index " + op.index.str() + " into %" + op.buffer +
                      " can be negative (down to " + std::to_string(*bd.lo) + ")");
    if (extent && bd.hi && *bd.hi >= *extent)
      report(pos, at + "the index " + op.index.str() + " into %" + op.buffer + " reaches " +
                      std::to_string(*bd.hi) + ", but %" + op.buffer + " has " +
                      std::to_string(*extent) + " elements");
    if (!extent || !bd.hi) checkSymbolicLoad(op, pos, at, vars);
  }

  // A load over symbolic sizes, when its index is affine in the loop variables with strides of
  // a known sign: its largest value (each variable at the end of its range that maximizes it)
  // must be able to stay inside the storage; reported when it is past the end for every value
  // of the size symbols.
  void checkSymbolicLoad(const LoopOp& op, TextPos pos, const std::string& at,
                         const std::set<std::string>& vars) {
    std::optional<IndexExpr> extent;
    try {
      extent = symbolicStorageExtent(op.buffer);
    } catch (const std::exception&) {
    }
    if (!extent) return;
    std::map<std::string, IndexExpr> atMax;
    for (const std::string& v : op.index.variables()) {
      if (!vars.count(v)) continue;
      IndexExpr stride = op.index.substitute({{v, IndexExpr::var(v) + 1}}) - op.index;
      for (const std::string& w : stride.variables())
        if (vars.count(w)) return; // not affine in the loop variables
      Bounds b = bounds(stride, symbolFacts_);
      auto extentOf = extents_.find(v);
      if (extentOf == extents_.end()) return; // an indirect variable: checked at run time
      if (b.lo && *b.lo >= 0)
        atMax[v] = extentOf->second - 1;
      else if (b.hi && *b.hi <= 0)
        atMax[v] = 0;
      else
        return;
    }
    try {
      IndexExpr last = op.index.substitute(atMax);
      Bounds room = bounds(*extent - 1 - last, symbolFacts_);
      if (room.hi && *room.hi < 0)
        report(pos, at + "the index " + op.index.str() + " into %" + op.buffer + " reaches " +
                        last.str() + ", past its last element " + (*extent - 1).str());
    } catch (const std::exception&) {
      // int64 overflow in a constant: nothing can be proven.
    }
  }

  // storageExtent over symbolic sizes and strides (strides of unknown sign: nullopt).
  std::optional<IndexExpr> symbolicStorageExtent(const std::string& name) {
    auto layout = storageLayout(name);
    if (!layout) return std::nullopt;
    const auto& [sizes, strides] = *layout;
    IndexExpr extent(1);
    for (size_t d = 0; d < sizes.size() && d < strides.size(); ++d) {
      if (sizes[d].constant() == 0) return IndexExpr(0);
      Bounds b = bounds(strides[d], symbolFacts_);
      if (!b.lo || *b.lo < 0) {
        if (!b.hi || *b.hi > 0) return std::nullopt;
        extent = extent - (sizes[d] - 1) * strides[d];
      } else {
        extent = extent + (sizes[d] - 1) * strides[d];
      }
    }
    return extent;
  }

  const LoopProgram& p_;
  std::set<std::string> symbols_;
  RangeFacts symbolFacts_;
  std::map<std::string, IndexExpr> extents_; // loop variable -> extent, of the current computation
  std::unordered_map<std::string, const LoopInput*> available_;
  std::unordered_map<std::string, const Buffer*> buffers_;
  std::unordered_map<std::string, std::string> root_;    // version -> the storage's root
  std::unordered_map<std::string, std::string> current_; // root -> its latest version
  std::map<std::string, const Buffer*> reusedBy_; // buffer -> the buffer taking its storage
  std::vector<Diagnostic> problems_;
};

} // namespace

std::vector<Diagnostic> verifyLoopProgram(const LoopProgram& p) { return LoopVerifier(p).run(); }

void verifyLoopProgramOrThrow(const LoopProgram& p) {
  std::vector<Diagnostic> problems = verifyLoopProgram(p);
  if (!problems.empty()) throw IRError(problems.front());
}

} // namespace kiln
