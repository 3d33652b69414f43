// Printing loop programs: inputs, buffers with their computations, kernels, bodies, outputs.
#include "ir/loop/Printer.h"

#include "ir/Identifier.h"
#include "ir/Printer.h"
#include "ir/Type.h"
#include <cstdint>

namespace kiln {

namespace {

std::string joinExprs(const std::vector<IndexExpr>& es) {
  std::string s;
  for (size_t i = 0; i < es.size(); ++i)
    s += (i ? ", " : "") + es[i].str();
  return s;
}

std::string tensorText(ScalarType dtype, const std::vector<IndexExpr>& sizes) {
  return std::string(dtypeShortName(dtype)) + "[" + joinExprs(sizes) + "]";
}

std::string rangesText(const std::vector<IterVar>& ranges) {
  std::string s = "[";
  for (size_t i = 0; i < ranges.size(); ++i)
    s += (i ? ", " : "") + ranges[i].name + ": " + ranges[i].extent.str();
  return s + "]";
}

std::string constantText(const LoopOp& op) {
  if (op.dtype == ScalarType::Bool) return op.intValue ? "True" : "False";
  if (isFloatingType(op.dtype)) return printFloat(op.floatValue);
  return std::to_string(op.intValue);
}

std::string argText(const ExternArg& a) {
  if (auto* i = std::get_if<int64_t>(&a)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&a)) return printFloat(*d);
  if (auto* b = std::get_if<bool>(&a)) return *b ? "True" : "False";
  std::string s = "[";
  const auto& list = std::get<std::vector<int64_t>>(a);
  for (size_t i = 0; i < list.size(); ++i)
    s += (i ? ", " : "") + std::to_string(list[i]);
  return s + "]";
}

std::string exprListText(const std::vector<IndexExpr>& list) {
  std::string s = "[";
  for (size_t i = 0; i < list.size(); ++i)
    s += (i ? ", " : "") + list[i].str();
  return s + "]";
}

void printBody(const LoopBody& body, const std::string& indent, std::string& out) {
  // Value ops are numbered in order; store and reduce define nothing.
  std::vector<int> number(body.ops.size(), -1);
  int next = 0;
  auto ref = [&](int op) {
    return "%" + (op >= 0 && op < int(number.size()) && number[op] >= 0 ? std::to_string(number[op])
                                                                         : "?" + std::to_string(op));
  };
  for (size_t k = 0; k < body.ops.size(); ++k) {
    const LoopOp& op = body.ops[k];
    out += indent;
    if (definesValue(op.code)) {
      number[k] = next++;
      out += ref(int(k)) + " = ";
    }
    out += loopOpName(op.code);
    switch (op.code) {
    case LoopOpCode::Load:
      out += " %" + op.buffer + "[" + op.index.str() + "]";
      break;
    case LoopOpCode::Constant:
      out += " " + constantText(op) + " : " + dtypeShortName(op.dtype);
      break;
    case LoopOpCode::IndexExpr:
      out += " " + op.index.str() + " : " + dtypeShortName(op.dtype);
      break;
    case LoopOpCode::Indirect:
      out += " " + ref(op.operands.empty() ? -1 : op.operands[0]) + " size " + op.index.str() +
             (op.wrap ? " wrap" : "") + " as " + op.var + " error " + quoteString(op.error);
      break;
    default:
      for (size_t i = 0; i < op.operands.size(); ++i)
        out += (i ? ", " : " ") + ref(op.operands[i]);
      if (op.code == LoopOpCode::Cast) out += std::string(" : ") + dtypeShortName(op.dtype);
    }
    out += "\n";
  }
}

void printBuffer(const Buffer& b, const std::string& indent, std::string& out) {
  out += indent + "%" + b.name + ": " + tensorText(b.dtype, b.sizes);
  if (!b.reuses.empty()) out += "{reuses=%" + b.reuses + "}";
  out += " = ";
  if (const auto* pw = std::get_if<Pointwise>(&b.computation)) {
    out += "pointwise " + rangesText(pw->ranges);
    if (!pw->into.empty()) out += " into %" + pw->into + "[" + pw->intoIndex.str() + "]";
    if (!pw->into.empty() && pw->accumulate) out += " accumulate";
    out += " {\n";
    printBody(pw->body, indent + "  ", out);
    out += indent + "}\n";
  } else if (const auto* red = std::get_if<Reduction>(&b.computation)) {
    out += std::string("reduction ") + reductionKindName(red->kind) + " " +
           rangesText(red->ranges) + " over " + rangesText(red->reductionRanges) + " {\n";
    printBody(red->body, indent + "  ", out);
    out += indent + "}\n";
  } else {
    const Extern& ext = std::get<Extern>(b.computation);
    out += "extern " + ext.kernel + "(";
    bool first = true;
    for (size_t i = 0; i < ext.inputs.size(); ++i) {
      out += (first ? "%" : ", %") + ext.inputs[i];
      if (const std::optional<StridedView>& v = ext.viewOf(i))
        out += " view(" + exprListText(v->sizes) + ", " + exprListText(v->strides) + ", " +
               std::to_string(v->offset) + ")";
      first = false;
    }
    for (const auto& [key, value] : ext.args) {
      out += (first ? "" : ", ") + key + "=" + argText(value);
      first = false;
    }
    out += ")\n";
  }
}

} // namespace

std::string printLoopProgram(const LoopProgram& p) {
  std::string out = "program @" + (isIdentifier(p.name) ? p.name : quoteString(p.name)) + "(";
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const LoopInput& in = p.inputs[i];
    out += (i ? ", %" : "%") + in.name + ": " + tensorText(in.dtype, in.sizes);
    if (in.strides != contiguousStrides(in.sizes))
      out += "{strides=[" + joinExprs(in.strides) + "]}";
  }
  out += ") {\n";
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const std::string& kernel = p.buffers[i].kernel;
    if (kernel.empty()) {
      printBuffer(p.buffers[i], "  ", out);
      continue;
    }
    out += "  kernel @" + kernel + " {\n";
    for (; i < p.buffers.size() && p.buffers[i].kernel == kernel; ++i)
      printBuffer(p.buffers[i], "    ", out);
    --i;
    out += "  }\n";
  }
  out += "  output";
  for (size_t i = 0; i < p.outputs.size(); ++i)
    out += (i ? ", %" : " %") + p.outputs[i];
  return out + "\n}\n";
}

std::string printLoopPrograms(const std::vector<LoopProgram>& programs) {
  std::string out;
  for (size_t i = 0; i < programs.size(); ++i)
    out += (i ? "\n" : "") + printLoopProgram(programs[i]);
  return out;
}

} // namespace kiln
