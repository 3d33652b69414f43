// Scalar printing.
#include "runtime/Scalar.h"

#include <cmath>
#include <sstream>

namespace kiln {

std::string Scalar::toString() const {
  if (kind_ == Kind::Bool) return i_ ? "True" : "False";
  if (kind_ == Kind::Int) return std::to_string(i_);
  if (std::isinf(d_)) return d_ > 0 ? "inf" : "-inf";
  if (std::isnan(d_)) return "nan";
  std::ostringstream out;
  out.precision(17);
  out << d_;
  std::string s = out.str();
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

} // namespace kiln
