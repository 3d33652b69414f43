// kiln's exception types; the Python binding maps each to the Python exception PyTorch raises.
#pragma once
#include <stdexcept>
#include <string>

namespace kiln {

// RuntimeError in Python.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct IndexError : Error {
  using Error::Error;
};
struct TypeError : Error {
  using Error::Error;
};
struct ValueError : Error {
  using Error::Error;
};
struct NotImplementedError : Error {
  using Error::Error;
};
// A matrix that cannot be factorized (singular, not positive-definite): torch.linalg.LinAlgError,
// a RuntimeError subclass in Python.
struct LinAlgError : Error {
  using Error::Error;
};

// Builds a message from streamable parts: strCat("size ", n, " is bad").
template <typename... Parts> std::string strCat(const Parts&... parts);

} // namespace kiln

#include <sstream>

namespace kiln {
template <typename... Parts> std::string strCat(const Parts&... parts) {
  std::ostringstream out;
  ((out << parts), ...);
  return out.str();
}
} // namespace kiln

#define KILN_CHECK(cond, ...)                                                                      \
  do {                                                                                             \
    if (!(cond)) [[unlikely]]                                                                      \
      throw ::kiln::Error(::kiln::strCat(__VA_ARGS__));                                            \
  } while (0)
#define KILN_CHECK_INDEX(cond, ...)                                                                \
  do {                                                                                             \
    if (!(cond)) [[unlikely]]                                                                      \
      throw ::kiln::IndexError(::kiln::strCat(__VA_ARGS__));                                       \
  } while (0)
#define KILN_CHECK_TYPE(cond, ...)                                                                 \
  do {                                                                                             \
    if (!(cond)) [[unlikely]]                                                                      \
      throw ::kiln::TypeError(::kiln::strCat(__VA_ARGS__));                                        \
  } while (0)
#define KILN_CHECK_VALUE(cond, ...)                                                                \
  do {                                                                                             \
    if (!(cond)) [[unlikely]]                                                                      \
      throw ::kiln::ValueError(::kiln::strCat(__VA_ARGS__));                                       \
  } while (0)
