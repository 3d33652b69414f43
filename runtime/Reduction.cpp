// Reduction dims, result shapes, empty-input errors and the loop geometry of a reduction.
#include "runtime/Reduction.h"

#include <cstdint>
#include <algorithm>
#include <vector>

namespace kiln {

DimMask makeDimMask(std::optional<IntArrayRef> dims, int64_t ndim, bool emptyMeansAll) {
  KILN_CHECK(ndim <= 64, "reductions support tensors of at most 64 dims, but got ", ndim);
  DimMask all = ndim == 64 ? ~DimMask(0) : (DimMask(1) << ndim) - 1;
  if (!dims || (dims->empty() && emptyMeansAll)) return all;
  DimMask mask = 0;
  for (int64_t d : *dims) {
    int64_t w = wrapDim(d, ndim);
    KILN_CHECK(!(mask >> w & 1), "dim ", w, " appears multiple times in the list of dims");
    mask |= DimMask(1) << w;
  }
  return mask;
}

DimVector reducedSizes(IntArrayRef sizes, DimMask mask, bool keepdim) {
  DimVector out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!(mask >> d & 1)) out.push_back(sizes[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Tensor emptyReduction(const Tensor& self, DimMask mask, bool keepdim, ScalarType dtype) {
  return Tensor::empty(reducedSizes(self.sizes(), mask, keepdim), dtype, self.device());
}

void checkReductionHasElements(const char* op, const Tensor& self, DimMask mask, bool dimGiven,
                               bool indexOp) {
  if (!dimGiven) {
    if (self.numel() != 0) return;
    if (indexOp)
      throw IndexError(
          strCat(op, "(): Expected reduction dim to be specified for input.numel() == 0."));
    throw Error(strCat(op, "(): Expected reduction dim to be specified for input.numel() == 0. ",
                       "Specify the reduction dim with the 'dim' argument."));
  }
  for (int64_t d = 0; d < self.dim(); ++d) {
    KILN_CHECK_INDEX(!(mask >> d & 1) || self.sizes()[size_t(d)] != 0, op,
                     "(): Expected reduction dim ", d, " to have non-zero size.");
  }
}

namespace {

struct PlanDim {
  int64_t size;
  int64_t inStride;
  int64_t outStride[ReductionPlan::kMaxOutputs];
};

// Innermost (smallest input stride) first; ties keep the later logical dim innermost.
void sortInnermostFirst(std::vector<PlanDim>& dims) {
  std::reverse(dims.begin(), dims.end());
  std::stable_sort(dims.begin(), dims.end(),
                   [](const PlanDim& a, const PlanDim& b) { return a.inStride < b.inStride; });
}

// Merges neighbours that step through memory (input and every output) as one dim would.
std::vector<PlanDim> coalesce(const std::vector<PlanDim>& dims, int nout) {
  std::vector<PlanDim> out;
  for (const PlanDim& d : dims) {
    if (!out.empty()) {
      PlanDim& prev = out.back();
      bool merge = d.inStride == prev.inStride * prev.size;
      for (int k = 0; k < nout && merge; ++k)
        merge = d.outStride[k] == prev.outStride[k] * prev.size;
      if (merge) {
        prev.size *= d.size;
        continue;
      }
    }
    out.push_back(d);
  }
  return out;
}

} // namespace

ReductionPlan planReduction(const Tensor& input, DimMask mask,
                            std::initializer_list<Tensor> outputs) {
  ReductionPlan p;
  KILN_CHECK(outputs.size() <= size_t(ReductionPlan::kMaxOutputs),
             "a reduction plan takes at most ", ReductionPlan::kMaxOutputs, " outputs");
  p.input = input.rawData();
  p.numOutputTensors = int(outputs.size());
  int64_t inSize = int64_t(elementSize(input.dtype()));
  std::vector<PlanDim> kept, reduced;
  int64_t keptSeen = 0;
  for (int64_t d = 0; d < input.dim(); ++d) {
    int64_t size = input.sizes()[size_t(d)];
    PlanDim pd{size, input.strides()[size_t(d)] * inSize, {0, 0}};
    if (mask >> d & 1) {
      p.reduceSize *= size;
      if (size != 1) reduced.push_back(pd);
      continue;
    }
    p.numOutputs *= size;
    int k = 0;
    for (const Tensor& out : outputs) {
      // keepdim results have every input dim; the others only the kept ones, in order.
      int64_t od = out.dim() == input.dim() ? d : keptSeen;
      pd.outStride[k++] = out.strides()[size_t(od)] * int64_t(elementSize(out.dtype()));
    }
    ++keptSeen;
    if (size != 1) kept.push_back(pd);
  }
  int k = 0;
  for (const Tensor& out : outputs) p.outputs[k++] = out.rawData();

  sortInnermostFirst(kept);
  sortInnermostFirst(reduced);
  kept = coalesce(kept, p.numOutputTensors);
  reduced = coalesce(reduced, 0);
  if (reduced.empty()) reduced.push_back(PlanDim{1, 0, {0, 0}});

  for (const PlanDim& d : kept) {
    p.keptSizes.push_back(d.size);
    p.keptInputStrides.push_back(d.inStride);
    for (int o = 0; o < p.numOutputTensors; ++o) p.keptOutputStrides[o].push_back(d.outStride[o]);
  }
  for (const PlanDim& d : reduced) {
    p.reducedSizes.push_back(d.size);
    p.reducedStrides.push_back(d.inStride);
  }
  p.innerReduction =
      kept.empty() || (p.reduceSize > 1 && reduced[0].inStride < kept[0].inStride);
  return p;
}

} // namespace kiln
