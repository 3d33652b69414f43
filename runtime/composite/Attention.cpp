// scaled_dot_product_attention written in other ops (PyTorch's math path): two GEMMs around a
// masked softmax, over any leading batch dims.
#include <cstdint>
#include <cmath>
#include <limits>
#include <vector>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/Error.h"

namespace kiln::kernels {

namespace {

// Repeats each key/value head `groups` times along dim -3 (repeat_interleave), for grouped
// query attention.
Tensor repeatHeads(const Tensor& t, int64_t groups) {
  if (groups == 1) return t;
  std::vector<int64_t> expanded(t.sizes().begin(), t.sizes().end());
  expanded.insert(expanded.end() - 2, groups);
  std::vector<int64_t> merged(t.sizes().begin(), t.sizes().end());
  merged[merged.size() - 3] *= groups;
  return ops::reshape(ops::expand(ops::unsqueeze(t, t.dim() - 2), expanded), merged);
}

} // namespace

Tensor scaledDotProductAttention(const Tensor& query, const Tensor& key, const Tensor& value,
                                 const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                                 std::optional<double> scale, bool enable_gqa) {
  KILN_CHECK(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2,
             "scaled_dot_product_attention: expected query, key and value of at least 2 dims, got ",
             query.shapeString(), ", ", key.shapeString(), ", ", value.shapeString());
  KILN_CHECK(query.dtype() == key.dtype() && query.dtype() == value.dtype(),
             "Expected query, key, and value to have the same dtype, but got query.dtype: ",
             scalarTypeShortName(query.dtype()), " key.dtype: ", scalarTypeShortName(key.dtype()),
             " and value.dtype: ", scalarTypeShortName(value.dtype()), " instead.");
  KILN_CHECK(isFloatingType(query.dtype()), "scaled_dot_product_attention: expected floating-point query, key and value, got ",
             scalarTypeShortName(query.dtype()));
  KILN_CHECK(!(is_causal && attn_mask), "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
  if (attn_mask)
    KILN_CHECK(attn_mask->dtype() == ScalarType::Bool || attn_mask->dtype() == query.dtype(),
               "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: ",
               scalarTypeName(attn_mask->dtype()), " and  query.dtype: ", scalarTypeName(query.dtype()), " instead.");
  // 16-bit inputs are computed in float32 and rounded once, as PyTorch's CPU kernels accumulate.
  if (query.dtype() == ScalarType::Float16 || query.dtype() == ScalarType::BFloat16) {
    auto up = [](const Tensor& t) { return ops::to(t, ScalarType::Float32); };
    std::optional<Tensor> mask = attn_mask;
    if (mask && mask->dtype() != ScalarType::Bool) mask = up(*mask);
    return ops::to(scaledDotProductAttention(up(query), up(key), up(value), mask, dropout_p, is_causal, scale, enable_gqa),
                   query.dtype());
  }
  Tensor k = key, v = value;
  if (enable_gqa && query.dim() >= 3 && key.dim() >= 3) {
    int64_t qHeads = query.size(-3), kvHeads = key.size(-3);
    KILN_CHECK(kvHeads > 0 && qHeads % kvHeads == 0 && value.size(-3) == kvHeads,
               "scaled_dot_product_attention: number of heads in key and value must divide the number of heads in query (query ",
               query.shapeString(), ", key ", key.shapeString(), ", value ", value.shapeString(), ")");
    k = repeatHeads(key, qHeads / kvHeads);
    v = repeatHeads(value, qHeads / kvHeads);
  }
  int64_t L = query.size(-2), S = k.size(-2);
  double factor = scale ? *scale : 1.0 / std::sqrt(double(query.size(-1)));
  Tensor scores = ops::matmul(ops::mul(query, factor), ops::transpose(k, -2, -1));
  const double inf = std::numeric_limits<double>::infinity();
  bool mayMaskWholeRows = false;
  if (is_causal) {
    Tensor causal = ops::tril(ops::ones({L, S}, ScalarType::Bool, query.device()));
    scores = ops::masked_fill(scores, ops::logical_not(causal), -inf); // every row keeps column 0
  } else if (attn_mask) {
    scores = attn_mask->dtype() == ScalarType::Bool ? ops::masked_fill(scores, ops::logical_not(*attn_mask), -inf)
                                                    : ops::add(scores, *attn_mask);
    mayMaskWholeRows = true;
  }
  Tensor weights = ops::softmax(scores, -1);
  // A query that may attend to nothing gets zeros, not NaN (PyTorch's _safe_softmax).
  if (mayMaskWholeRows) weights = ops::masked_fill(weights, ops::allDim(ops::eq(scores, -inf), -1, true), 0);
  if (dropout_p > 0.0) weights = ops::dropout(weights, dropout_p, true);
  return ops::matmul(weights, v);
}

} // namespace kiln::kernels
