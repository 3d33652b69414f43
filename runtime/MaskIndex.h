// The one form of a boolean-mask index whose write keeps a static shape to reason about without
// the data: a single bool mask among untouched dims (x[mask], x[:, mask], x[mask, 1:3] after the
// slices became views). index_put's meta kernel and its backward use it.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/TensorImpl.h"

namespace kiln {

struct MaskIndex {
  Tensor mask;       // bool, covering dims [first, first + mask.dim()) of the indexed tensor
  int64_t first = 0; // the untouched dims before it
};

// The mask when `indices` are Nones and exactly one bool tensor of at least one dim, else nullopt.
inline std::optional<MaskIndex> singleMaskIndex(const std::vector<std::optional<Tensor>>& indices) {
  std::optional<MaskIndex> found;
  int64_t dim = 0;
  for (const auto& ix : indices) {
    if (!ix || !ix->defined()) {
      ++dim;
      continue;
    }
    if (found || ix->dtype() != ScalarType::Bool || ix->dim() == 0) return std::nullopt;
    found = MaskIndex{*ix, dim};
    dim += ix->dim();
  }
  return found;
}

} // namespace kiln
