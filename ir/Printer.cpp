// Printing graphs, nodes, arguments and constants in the text form.
#include "ir/Printer.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "ir/Identifier.h"

namespace kiln {

namespace {

// Dotted paths whose segments are identifiers or integers print bare ("layers.0.weight");
// anything else as a string.
bool isDottedPath(const std::string& s) {
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string seg = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !seg.empty() && seg.find_first_not_of("0123456789") == std::string::npos;
    if (!digits && !isIdentifier(seg)) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

std::string nameOrString(const std::string& s) { return isIdentifier(s) ? s : quoteString(s); }
std::string pathOrString(const std::string& s) { return isDottedPath(s) ? s : quoteString(s); }

std::string sequence(const std::vector<Argument>& items, const char* open, const char* close) {
  std::string s = open;
  for (size_t i = 0; i < items.size(); ++i)
    s += (i ? ", " : "") + printArgument(items[i]);
  return s + close;
}

std::string printMeta(const NodeMeta& meta) {
  std::string s;
  if (meta.type) s += " : " + meta.type->str();
  if (meta.loc)
    s += " loc(" + quoteString(meta.loc->file) + ":" + std::to_string(meta.loc->line) + ":" +
         nameOrString(meta.loc->function) + ")";
  return s;
}

std::string printCall(const Node& n) {
  std::string s = pathOrString(n.target()) + "(";
  bool first = true;
  for (const Argument& a : n.args()) {
    s += (first ? "" : ", ") + printArgument(a);
    first = false;
  }
  for (const auto& [k, v] : n.kwargs()) {
    s += (first ? "" : ", ") + k + "=" + printArgument(v);
    first = false;
  }
  return s + ")";
}

} // namespace

std::string printFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // Shortest round-trip digits, then laid out as Python's repr does: positional for decimal
  // exponents in [-4, 16), scientific with a two-digit exponent otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t e = sci.find('e');
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1); // the decimal point
  if (exp >= -4 && exp < 16) {
    std::string s;
    if (exp < 0) {
      s = "0." + std::string(size_t(-exp - 1), '0') + digits;
    } else if (size_t(exp) + 1 >= digits.size()) {
      s = digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      s = digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
    }
    return sign + s;
  }
  std::string mant = digits.size() > 1 ? digits.substr(0, 1) + "." + digits.substr(1) : digits;
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return sign + mant + ebuf;
}

std::string quoteString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '\\':
      out += "\\\\";
      break;
    case '"':
      out += "\\\"";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\r':
      out += "\\r";
      break;
    default:
      if (c < 0x20 || c == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\x%02x", c);
        out += buf;
      } else {
        out += char(c);
      }
    }
  }
  return out + "\"";
}

std::string printArgument(const Argument& a) {
  switch (a.kind()) {
  case Argument::Kind::None:
    return "None";
  case Argument::Kind::Bool:
    return a.toBool() ? "True" : "False";
  case Argument::Kind::Int:
    return std::to_string(a.toInt());
  case Argument::Kind::Float:
    return printFloat(a.toFloat());
  case Argument::Kind::String:
    return quoteString(a.toString());
  case Argument::Kind::Dtype:
    return dtypeShortName(a.toDtype());
  case Argument::Kind::Device:
    return "device(" + quoteString(a.toDevice().str()) + ")";
  case Argument::Kind::Ellipsis:
    return "...";
  case Argument::Kind::Slice:
    return sequence(a.items(), "slice(", ")");
  case Argument::Kind::Node:
    return "%" + a.toNode()->name();
  case Argument::Kind::List:
    return sequence(a.items(), "[", "]");
  case Argument::Kind::Tuple:
    return sequence(a.items(), "(", a.items().size() == 1 ? ",)" : ")");
  case Argument::Kind::Dict: {
    std::string s = "{";
    for (size_t i = 0; i < a.keys().size(); ++i)
      s += (i ? ", " : "") + quoteString(a.keys()[i]) + ": " + printArgument(a.items()[i]);
    return s + "}";
  }
  }
  return "";
}

std::string printGraph(const Graph& g) {
  std::string s = "graph @" + nameOrString(g.name()) + "(";
  bool first = true;
  for (Node* p : g.placeholders()) {
    s += (first ? "%" : ", %") + p->name();
    first = false;
    if (p->meta.type) s += ": " + p->meta.type->str();
    if (p->meta.loc) s += printMeta(NodeMeta{std::nullopt, p->meta.loc});
  }
  s += ") {\n";
  for (Node* n : g.nodes()) {
    switch (n->opcode()) {
    case Opcode::Placeholder:
      continue;
    case Opcode::Output:
      s += "  output " + (n->args().empty() ? std::string("None") : printArgument(n->args()[0]));
      break;
    case Opcode::GetAttr:
      s += "  %" + n->name() + " = get_attr " + pathOrString(n->target());
      break;
    default:
      s += "  %" + n->name() + " = " + opcodeName(n->opcode()) + " " + printCall(*n);
    }
    s += printMeta(n->meta) + "\n";
  }
  return s + "}\n";
}

std::string printGraphs(const std::vector<Graph>& graphs) {
  std::string s;
  for (size_t i = 0; i < graphs.size(); ++i)
    s += (i ? "\n" : "") + printGraph(graphs[i]);
  return s;
}

} // namespace kiln
