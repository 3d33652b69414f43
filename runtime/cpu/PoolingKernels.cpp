// max_pool2d_with_indices, avg_pool2d, _adaptive_avg_pool2d and their backward kernels: direct
// loops over the output positions of each (sample, channel) plane, parallel over planes. Each
// backward scatters into the gradient plane of its own output plane, so threads never share
// memory. Inputs are [C, H, W] or [N, C, H, W], read contiguous.
#include <cstdint>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/cpu/RowLoops.h"

namespace kiln::kernels {

namespace {

constexpr int64_t kParallelGrain = 16384;

// One pooling's geometry: planes of h x w pooled to oh x ow.
struct PoolShape {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  DimVector outSizes;
};

int64_t divFloor(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// PyTorch's pooling_output_shape, with its checks.
int64_t pooledSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil) {
  KILN_CHECK(stride != 0, "stride should not be zero");
  KILN_CHECK(pad >= 0, "pad must be non-negative, but got pad: ", pad);
  KILN_CHECK(pad <= ((k - 1) * dil + 1) / 2,
             "pad should be at most half of effective kernel size, but got pad=", pad,
             ", kernel_size=", k, " and dilation=", dil);
  int64_t out = divFloor(in + 2 * pad - dil * (k - 1) - 1 + (ceil ? stride - 1 : 0), stride) + 1;
  if (ceil && (out - 1) * stride >= in + pad) --out;
  return out;
}

// kernel_size / stride / padding / dilation as PyTorch's pooling ops read them: one value or two,
// an empty stride meaning the kernel size.
PoolShape poolShape(const char* op, const Tensor& input, IntArrayRef kernel, IntArrayRef stride,
                    IntArrayRef padding, IntArrayRef dilation, bool ceilMode) {
  KILN_CHECK(kernel.size() == 1 || kernel.size() == 2, op,
             ": kernel_size must either be a single int, or a tuple of two ints");
  KILN_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 2, op,
             ": stride must either be omitted, a single int, or a tuple of two ints");
  KILN_CHECK(padding.size() == 1 || padding.size() == 2, op,
             ": padding must either be a single int, or a tuple of two ints");
  KILN_CHECK(dilation.size() == 1 || dilation.size() == 2, op,
             ": dilation must be either a single int, or a tuple of two ints");
  PoolShape p;
  p.kh = kernel[0];
  p.kw = kernel.size() == 1 ? p.kh : kernel[1];
  p.sh = stride.empty() ? p.kh : stride[0];
  p.sw = stride.empty() ? p.kw : stride.size() == 1 ? p.sh : stride[1];
  p.ph = padding[0];
  p.pw = padding.size() == 1 ? p.ph : padding[1];
  p.dh = dilation[0];
  p.dw = dilation.size() == 1 ? p.dh : dilation[1];
  const int64_t nd = input.dim();
  KILN_CHECK(nd == 3 || nd == 4, "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch ",
             "size for input, but got:", input.shapeString());
  KILN_CHECK(p.kw > 0 && p.kh > 0, "kernel size should be greater than zero, but got kH: ", p.kh,
             " kW: ", p.kw);
  KILN_CHECK(p.sw > 0 && p.sh > 0, "stride should be greater than zero, but got dH: ", p.sh,
             " dW: ", p.sw);
  KILN_CHECK(p.dh > 0 && p.dw > 0, "dilation should be greater than zero, but got dilationH: ",
             p.dh, " dilationW: ", p.dw);
  p.h = input.size(-2);
  p.w = input.size(-1);
  const int64_t c = input.size(-3);
  p.oh = pooledSize(p.h, p.kh, p.ph, p.sh, p.dh, ceilMode);
  p.ow = pooledSize(p.w, p.kw, p.pw, p.sw, p.dw, ceilMode);
  bool validDims = input.size(-3) != 0 && input.size(-2) != 0;
  KILN_CHECK((nd == 3 && input.size(0) != 0 && validDims) || (nd == 4 && validDims && input.size(3) != 0),
             "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:",
             input.shapeString());
  KILN_CHECK(p.kw / 2 >= p.pw && p.kh / 2 >= p.ph,
             "pad should be smaller than or equal to half of kernel size, but got padW = ", p.pw,
             ", padH = ", p.ph, ", kW = ", p.kw, ", kH = ", p.kh);
  KILN_CHECK(p.ow >= 1 && p.oh >= 1, "Given input size: (", c, "x", p.h, "x", p.w, "). ",
             "Calculated output size: (", c, "x", p.oh, "x", p.ow, "). Output size is too small");
  p.planes = nd == 4 ? input.size(0) * c : c;
  p.outSizes = DimVector(input.sizes());
  p.outSizes[size_t(nd - 2)] = p.oh;
  p.outSizes[size_t(nd - 1)] = p.ow;
  return p;
}

// Runs f(plane) for every plane, in parallel when the work is large enough.
template <typename F> void forEachPlane(int64_t planes, int64_t work, const F& f) {
#pragma omp parallel for schedule(static) if (work > kParallelGrain && !omp_in_parallel())
  for (int64_t p = 0; p < planes; ++p) f(p);
}

void checkGradShape(const char* op, const Tensor& grad, IntArrayRef expected) {
  KILN_CHECK(DimVector(grad.sizes()) == DimVector(expected), op, ": expected grad_output of size ",
             shapeString(expected), ", but got ", grad.shapeString());
}

template <typename T> bool isNan(T v) {
  if constexpr (std::is_integral_v<T>)
    return false;
  else
    return std::isnan(float(v));
}

// The window of one output position along one dim: [start, end) stepping by dilation, start
// moved into the input.
struct Span {
  int64_t start, end;
};
Span maxWindow(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t dil, int64_t size) {
  int64_t start = o * stride - pad;
  int64_t end = std::min(start + (k - 1) * dil + 1, size);
  while (start < 0) start += dil;
  return {start, end};
}

// avg_pool2d's window: the padded extent (for count_include_pad) and the clipped one.
struct AvgWindow {
  int64_t start, end, paddedLength;
};
AvgWindow avgWindow(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t size) {
  int64_t start = o * stride - pad;
  int64_t end = std::min(start + k, size + pad);
  int64_t padded = end - start;
  return {std::max<int64_t>(start, 0), std::min(end, size), padded};
}

int64_t avgDivisor(const AvgWindow& y, const AvgWindow& x, bool countIncludePad,
                   std::optional<int64_t> divisorOverride) {
  if (divisorOverride) return *divisorOverride;
  return countIncludePad ? y.paddedLength * x.paddedLength : (y.end - y.start) * (x.end - x.start);
}

// _adaptive_avg_pool2d's window for output o of outSize over size: [floor(o*size/outSize),
// ceil((o+1)*size/outSize)).
Span adaptiveWindow(int64_t o, int64_t outSize, int64_t size) {
  return {o * size / outSize, ((o + 1) * size + outSize - 1) / outSize};
}

} // namespace

std::tuple<Tensor, Tensor> maxPool2dWithIndices(const Tensor& self, IntArrayRef kernelSize,
                                                IntArrayRef stride, IntArrayRef padding,
                                                IntArrayRef dilation, bool ceilMode) {
  PoolShape p = poolShape("max_pool2d", self, kernelSize, stride, padding, dilation, ceilMode);
  Tensor out = Tensor::empty(p.outSizes, self.dtype(), self.device());
  Tensor indices = Tensor::empty(p.outSizes, ScalarType::Int64, self.device());
  if (self.dtype() == ScalarType::Bool) throwUnsupportedDtype("max_pool2d", self.dtype());
  if (out.isMeta() || out.numel() == 0) return {out, indices};
  Tensor x = cpu::contiguousInput(self);
  KILN_DISPATCH_NUMERIC(self.dtype(), "max_pool2d", [&]<typename T>() {
    using A = opmath_t<T>;
    const T* in = x.data<T>();
    T* op = out.data<T>();
    int64_t* ip = indices.data<int64_t>();
    // Each output row is swept window offset by window offset (iy, then kx), so the inner loop
    // runs over the row's outputs with no branch on window bounds; per output, the window's
    // elements are still visited in row-major order (the first maximum wins, a NaN replaces it).
    std::vector<int64_t> firstX(size_t(p.ow));
    for (int64_t ox = 0; ox < p.ow; ++ox) firstX[size_t(ox)] = maxWindow(ox, p.sw, p.pw, p.kw, p.dw, p.w).start;
    forEachPlane(p.planes, out.numel() * p.kh * p.kw, [&](int64_t plane) {
      const T* src = in + plane * p.h * p.w;
      T* dst = op + plane * p.oh * p.ow;
      int64_t* idx = ip + plane * p.oh * p.ow;
      std::vector<A> rowBest(size_t(p.ow));
      A* __restrict best = rowBest.data();
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        const Span ys = maxWindow(oy, p.sh, p.ph, p.kh, p.dh, p.h);
        int64_t* __restrict where = idx + oy * p.ow;
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          best[ox] = std::is_integral_v<A> ? std::numeric_limits<A>::lowest() : -std::numeric_limits<A>::infinity();
          where[ox] = ys.start * p.w + firstX[size_t(ox)];
        }
        for (int64_t iy = ys.start; iy < ys.end; iy += p.dh) {
          const T* __restrict row = src + iy * p.w;
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            // The outputs whose window column kx lies inside the row: 0 <= ox*sw + off < w.
            const int64_t off = kx * p.dw - p.pw;
            const int64_t lo = off < 0 ? (-off + p.sw - 1) / p.sw : 0;
            const int64_t hi = off >= p.w ? 0 : std::min(p.ow, (p.w - 1 - off) / p.sw + 1);
            for (int64_t ox = lo; ox < hi; ++ox) {
              const int64_t ix = ox * p.sw + off;
              const A v = A(row[ix]);
              const bool take = v > best[ox] || isNan(v);
              best[ox] = take ? v : best[ox];
              where[ox] = take ? iy * p.w + ix : where[ox];
            }
          }
        }
        for (int64_t ox = 0; ox < p.ow; ++ox) dst[oy * p.ow + ox] = T(best[ox]);
      }
    });
  });
  return {out, indices};
}

Tensor maxPool2dWithIndicesBackward(const Tensor& gradOutput, const Tensor& self,
                                    IntArrayRef kernelSize, IntArrayRef stride, IntArrayRef padding,
                                    IntArrayRef dilation, bool ceilMode, const Tensor& indices) {
  PoolShape p = poolShape("max_pool2d", self, kernelSize, stride, padding, dilation, ceilMode);
  checkGradShape("max_pool2d_with_indices_backward", gradOutput, p.outSizes);
  checkGradShape("max_pool2d_with_indices_backward (indices)", indices, p.outSizes);
  KILN_CHECK(indices.dtype() == ScalarType::Int64,
             "max_pool2d_with_indices_backward: expected indices of dtype int64, but got ",
             scalarTypeName(indices.dtype()));
  KILN_CHECK(gradOutput.dtype() == self.dtype(), "expected scalar type ",
             scalarTypeShortName(self.dtype()), " but found ", scalarTypeShortName(gradOutput.dtype()));
  if (!isFloatingType(self.dtype())) throwUnsupportedDtype("max_pool2d_backward_out_frame", self.dtype());
  Tensor gradIn = Tensor::empty(self.sizes(), self.dtype(), self.device());
  if (gradIn.isMeta() || gradIn.numel() == 0) return gradIn;
  Tensor go = cpu::contiguousInput(gradOutput), idx = cpu::contiguousInput(indices);
  const int64_t planeSize = p.h * p.w;
  const int64_t* ip = idx.data<int64_t>();
  // An index outside its plane is skipped (it would write another thread's plane) and reported
  // after the loop, which must not throw.
  std::atomic<bool> outOfRange{false};
  KILN_DISPATCH_FLOATING(self.dtype(), "max_pool2d_backward_out_frame", [&]<typename T>() {
    using A = opmath_t<T>;
    const T* g = go.data<T>();
    T* gi = gradIn.data<T>();
    const int64_t outPlane = p.oh * p.ow;
    std::memset(static_cast<void*>(gi), 0, size_t(gradIn.numel()) * sizeof(T));
    forEachPlane(p.planes, gradIn.numel() + go.numel(), [&](int64_t plane) {
      T* dst = gi + plane * planeSize;
      const T* src = g + plane * outPlane;
      const int64_t* index = ip + plane * outPlane;
      bool bad = false;
      for (int64_t i = 0; i < outPlane; ++i) {
        const uint64_t at = uint64_t(index[i]);
        if (at >= uint64_t(planeSize)) [[unlikely]] {
          bad = true;
          continue;
        }
        if constexpr (std::is_same_v<T, A>)
          dst[at] += src[i];
        else
          dst[at] = T(A(dst[at]) + A(src[i]));
      }
      if (bad) outOfRange.store(true, std::memory_order_relaxed);
    });
  });
  KILN_CHECK_INDEX(!outOfRange.load(), "max_pool2d_with_indices_backward: an index is out of range for ",
                   "input planes of ", p.h, "x", p.w);
  return gradIn;
}

Tensor avgPool2d(const Tensor& self, IntArrayRef kernelSize, IntArrayRef stride,
                 IntArrayRef padding, bool ceilMode, bool countIncludePad,
                 std::optional<int64_t> divisorOverride) {
  KILN_CHECK(!divisorOverride || *divisorOverride != 0, "divisor must be not zero");
  PoolShape p = poolShape("avg_pool2d", self, kernelSize, stride, padding, {1}, ceilMode);
  Tensor out = Tensor::empty(p.outSizes, self.dtype(), self.device());
  const ScalarType dt = self.dtype();
  if (!isFloatingType(dt) && dt != ScalarType::Int64) throwUnsupportedDtype("avg_pool2d", dt);
  if (out.isMeta() || out.numel() == 0) return out;
  Tensor x = cpu::contiguousInput(self);
  KILN_DISPATCH_NUMERIC(dt, "avg_pool2d", [&]<typename T>() {
    using A = opmath_t<T>;
    const T* in = x.data<T>();
    T* op = out.data<T>();
    forEachPlane(p.planes, out.numel() * p.kh * p.kw, [&](int64_t plane) {
      const T* src = in + plane * p.h * p.w;
      T* dst = op + plane * p.oh * p.ow;
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        const AvgWindow ys = avgWindow(oy, p.sh, p.ph, p.kh, p.h);
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          const AvgWindow xs = avgWindow(ox, p.sw, p.pw, p.kw, p.w);
          if (ys.start >= ys.end || xs.start >= xs.end) {
            dst[oy * p.ow + ox] = T(0);
            continue;
          }
          A sum = 0;
          for (int64_t iy = ys.start; iy < ys.end; ++iy)
            for (int64_t ix = xs.start; ix < xs.end; ++ix) sum += A(src[iy * p.w + ix]);
          dst[oy * p.ow + ox] = T(sum / A(avgDivisor(ys, xs, countIncludePad, divisorOverride)));
        }
      }
    });
  });
  return out;
}

Tensor avgPool2dBackward(const Tensor& gradOutput, const Tensor& self, IntArrayRef kernelSize,
                         IntArrayRef stride, IntArrayRef padding, bool ceilMode,
                         bool countIncludePad, std::optional<int64_t> divisorOverride) {
  KILN_CHECK(!divisorOverride || *divisorOverride != 0, "divisor must be not zero");
  PoolShape p = poolShape("avg_pool2d", self, kernelSize, stride, padding, {1}, ceilMode);
  checkGradShape("avg_pool2d_backward", gradOutput, p.outSizes);
  KILN_CHECK(gradOutput.dtype() == self.dtype(), "expected scalar type ",
             scalarTypeShortName(self.dtype()), " but found ", scalarTypeShortName(gradOutput.dtype()));
  const ScalarType dt = self.dtype();
  if (!isFloatingType(dt) && dt != ScalarType::Int64) throwUnsupportedDtype("avg_pool2d_backward_out_frame", dt);
  Tensor gradIn = Tensor::empty(self.sizes(), dt, self.device());
  if (gradIn.isMeta() || gradIn.numel() == 0) return gradIn;
  Tensor go = cpu::contiguousInput(gradOutput);
  KILN_DISPATCH_NUMERIC(dt, "avg_pool2d_backward_out_frame", [&]<typename T>() {
    using A = opmath_t<T>;
    const T* g = go.data<T>();
    T* gi = gradIn.data<T>();
    forEachPlane(p.planes, go.numel() * p.kh * p.kw, [&](int64_t plane) {
      T* dst = gi + plane * p.h * p.w;
      const T* src = g + plane * p.oh * p.ow;
      // 16-bit floats accumulate in a float plane, rounded once.
      std::vector<A> wide;
      A* acc;
      if constexpr (std::is_same_v<T, A>) {
        std::fill(dst, dst + p.h * p.w, T(0));
        acc = dst;
      } else {
        wide.assign(size_t(p.h * p.w), A(0));
        acc = wide.data();
      }
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        const AvgWindow ys = avgWindow(oy, p.sh, p.ph, p.kh, p.h);
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          const AvgWindow xs = avgWindow(ox, p.sw, p.pw, p.kw, p.w);
          if (ys.start >= ys.end || xs.start >= xs.end) continue;
          const A v = A(src[oy * p.ow + ox]) / A(avgDivisor(ys, xs, countIncludePad, divisorOverride));
          for (int64_t iy = ys.start; iy < ys.end; ++iy)
            for (int64_t ix = xs.start; ix < xs.end; ++ix) acc[iy * p.w + ix] += v;
        }
      }
      if constexpr (!std::is_same_v<T, A>) {
        for (int64_t i = 0; i < p.h * p.w; ++i) dst[i] = T(acc[i]);
      }
    });
  });
  return gradIn;
}

Tensor adaptiveAvgPool2d(const Tensor& self, IntArrayRef outputSize) {
  KILN_CHECK(outputSize.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  KILN_CHECK(outputSize[0] >= 0 && outputSize[1] >= 0,
             "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 ",
             "but received {", outputSize[0], ", ", outputSize[1], "}");
  const int64_t nd = self.dim();
  for (int64_t d = 1; d < nd; ++d) {
    KILN_CHECK(self.size(d) > 0, "adaptive_avg_pool2d(): Expected self to have non-zero size for ",
               "non-batch dimensions, but input has sizes ", self.shapeString(), " with dimension ",
               d, " being empty");
  }
  KILN_CHECK(nd == 3 || nd == 4, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ",
             self.shapeString());
  const int64_t oh = outputSize[0], ow = outputSize[1], h = self.size(-2), w = self.size(-1);
  DimVector outSizes(self.sizes());
  outSizes[size_t(nd - 2)] = oh;
  outSizes[size_t(nd - 1)] = ow;
  Tensor out = Tensor::empty(outSizes, self.dtype(), self.device());
  if (!isFloatingType(self.dtype())) throwUnsupportedDtype("adaptive_avg_pool2d", self.dtype());
  if (out.isMeta() || out.numel() == 0) return out;
  Tensor x = cpu::contiguousInput(self);
  const int64_t planes = self.numel() / (h * w);
  KILN_DISPATCH_FLOATING(self.dtype(), "adaptive_avg_pool2d", [&]<typename T>() {
    using A = opmath_t<T>;
    const T* in = x.data<T>();
    T* op = out.data<T>();
    forEachPlane(planes, self.numel() + out.numel(), [&](int64_t plane) {
      const T* src = in + plane * h * w;
      T* dst = op + plane * oh * ow;
      for (int64_t oy = 0; oy < oh; ++oy) {
        const Span ys = adaptiveWindow(oy, oh, h);
        for (int64_t ox = 0; ox < ow; ++ox) {
          const Span xs = adaptiveWindow(ox, ow, w);
          A sum = 0;
          for (int64_t iy = ys.start; iy < ys.end; ++iy)
            for (int64_t ix = xs.start; ix < xs.end; ++ix) sum += A(src[iy * w + ix]);
          dst[oy * ow + ox] = T(sum / A((ys.end - ys.start) * (xs.end - xs.start)));
        }
      }
    });
  });
  return out;
}

Tensor adaptiveAvgPool2dBackward(const Tensor& gradOutput, const Tensor& self) {
  const int64_t nd = self.dim();
  KILN_CHECK(nd == 3 || nd == 4, "adaptive_avg_pool2d_backward(): Expected 3D or 4D tensor, but got ",
             self.shapeString());
  KILN_CHECK(gradOutput.dim() == nd, "adaptive_avg_pool2d_backward(): Expected grad_output of ", nd,
             " dimensions, but got ", gradOutput.shapeString());
  for (int64_t d = 0; d < nd - 2; ++d) {
    KILN_CHECK(gradOutput.size(d) == self.size(d), "adaptive_avg_pool2d_backward(): grad_output ",
               gradOutput.shapeString(), " does not match input ", self.shapeString(), " at dim ", d);
  }
  KILN_CHECK(gradOutput.dtype() == self.dtype(), "expected dtype ", scalarTypeName(self.dtype()),
             " for `gradOutput` but got dtype ", scalarTypeName(gradOutput.dtype()));
  const int64_t oh = gradOutput.size(-2), ow = gradOutput.size(-1), h = self.size(-2), w = self.size(-1);
  if (!isFloatingType(self.dtype())) throwUnsupportedDtype("adaptive_avg_pool2d_backward_cpu", self.dtype());
  Tensor gradIn = Tensor::empty(self.sizes(), self.dtype(), self.device());
  if (gradIn.isMeta() || gradIn.numel() == 0) return gradIn;
  Tensor go = cpu::contiguousInput(gradOutput);
  const int64_t planes = self.numel() / (h * w);
  KILN_DISPATCH_FLOATING(self.dtype(), "adaptive_avg_pool2d_backward_cpu", [&]<typename T>() {
    using A = opmath_t<T>;
    const T* g = go.data<T>();
    T* gi = gradIn.data<T>();
    forEachPlane(planes, self.numel() + go.numel(), [&](int64_t plane) {
      std::vector<A> acc(size_t(h * w), A(0));
      const T* src = g + plane * oh * ow;
      for (int64_t oy = 0; oy < oh; ++oy) {
        const Span ys = adaptiveWindow(oy, oh, h);
        for (int64_t ox = 0; ox < ow; ++ox) {
          const Span xs = adaptiveWindow(ox, ow, w);
          const A v = A(src[oy * ow + ox]) / A((ys.end - ys.start) * (xs.end - xs.start));
          for (int64_t iy = ys.start; iy < ys.end; ++iy)
            for (int64_t ix = xs.start; ix < xs.end; ++ix) acc[size_t(iy * w + ix)] += v;
        }
      }
      T* dst = gi + plane * h * w;
      for (int64_t i = 0; i < h * w; ++i) dst[i] = T(acc[size_t(i)]);
    });
  });
  return gradIn;
}

} // namespace kiln::kernels
