// convolution (1-d, 2-d and 3-d) and convolution_backward through im2col + GEMM. A
// chunk of samples is unfolded into columns [C/groups * kd * kh * kw, samples * OD * OH * OW], so that one
// GEMM per group covers the whole chunk (cpu/Gemm.h threads it); unfolding, folding and the layout
// copies between [N, C, L] and [C, N * L] run in OpenMP loops. A 1x1 kernel with unit stride and
// no padding multiplies the input directly, one sample at a time. A transposed convolution is
// the adjoint of a direct one: its forward is that direct convolution's input gradient, its input
// gradient that convolution's forward, its weight gradient that convolution's weight gradient with
// the roles of input and grad_output swapped.
#include <cstdint>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/cpu/DnnlConvolution.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/LaneSums.h"
#include "runtime/cpu/RowLoops.h"
#include "runtime/ViewGeometry.h"

namespace kiln::kernels {

namespace {

// Strides of a dense NCHW-shaped tensor stored NHWC.
// The unfolded columns of one chunk stay within this budget (at least one sample per chunk).
constexpr int64_t kColumnBytes = int64_t(1) << 20;
constexpr int64_t kParallelGrain = 32768;

// A convolution as 3-d (depth, height, width): a 2-d one has d = kd = 1, unit stride and
// dilation, no padding in depth; a 1-d one the same in height too.
struct ConvShape {
  int64_t n = 0, c = 0, d = 1, h = 1, w = 0;
  int64_t cout = 0, kd = 1, kh = 1, kw = 0;
  int64_t sd = 1, sh = 1, sw = 1, pd = 0, ph = 0, pw = 0, dd = 1, dh = 1, dw = 1;
  int64_t od = 1, oh = 1, ow = 0;
  int64_t groups = 1;
  int64_t spatialDims = 2;

  int64_t cg() const { return c / groups; }
  int64_t coutg() const { return cout / groups; }
  int64_t taps() const { return kd * kh * kw; }
  int64_t k() const { return cg() * taps(); }
  int64_t l() const { return od * oh * ow; }
  int64_t plane() const { return d * h * w; }
  bool pointwise() const {
    return taps() == 1 && sd == 1 && sh == 1 && sw == 1 && pd == 0 && ph == 0 && pw == 0;
  }
  // oneDNN's path (DnnlConvShape) is 2-d only.
  bool planar() const { return spatialDims <= 2; }
  DimVector outSizes() const { return sizes(cout, od, oh, ow); }
  DimVector inSizes() const { return sizes(c, d, h, w); }

 private:
  DimVector sizes(int64_t channels, int64_t depth, int64_t height, int64_t width) const {
    if (spatialDims == 1) return DimVector(IntArrayRef{n, channels, width});
    if (spatialDims == 2) return DimVector(IntArrayRef{n, channels, height, width});
    return DimVector(IntArrayRef{n, channels, depth, height, width});
  }
};

// The geometry of spatial dims [first, first + count) of a convolution (PyTorch's order) placed
// in the trailing slots of ConvShape's (depth, height, width): 1-d fills width, 2-d height and width.
void setSpatial(ConvShape& s, int64_t dims, const DimVector& in, const DimVector& kernel, const DimVector& st,
                const DimVector& pad, const DimVector& dil, const DimVector& out) {
  int64_t* slots[][6] = {{&s.d, &s.kd, &s.sd, &s.pd, &s.dd, &s.od},
                         {&s.h, &s.kh, &s.sh, &s.ph, &s.dh, &s.oh},
                         {&s.w, &s.kw, &s.sw, &s.pw, &s.dw, &s.ow}};
  for (int64_t i = 0; i < dims; ++i) {
    int64_t** slot = slots[3 - dims + i];
    const size_t d = size_t(i);
    *slot[0] = in[d];
    *slot[1] = kernel[d];
    *slot[2] = st[d];
    *slot[3] = pad[d];
    *slot[4] = dil[d];
    *slot[5] = out[d];
  }
}

// The sizes of t's dims after the first two (batch and channels).
DimVector spatialSizes(const Tensor& t) {
  return DimVector(IntArrayRef(t.sizes().data() + 2, size_t(t.dim() - 2)));
}

std::string legacyTypeName(ScalarType t) { return strCat("kiln.", scalarTypeShortName(t), "Tensor"); }

// PyTorch's expand_param_if_needed: one value stands for every spatial dim.
DimVector expandParam(IntArrayRef v, const char* name, int64_t dims) {
  if (v.size() == 1) return DimVector(size_t(dims), v[0]);
  KILN_CHECK(int64_t(v.size()) == dims, "expected ", name,
             " to be a single integer value or a list of ", dims,
             " values to match the convolution dimensions, but got ", name, "=", shapeString(v));
  return DimVector(v);
}

void checkTypesAndDevices(const Tensor& input, const Tensor& weight,
                          std::optional<ScalarType> biasType) {
  KILN_CHECK(input.dtype() == weight.dtype(), "Input type (", legacyTypeName(input.dtype()),
             ") and weight type (", legacyTypeName(weight.dtype()), ") should be the same");
  KILN_CHECK(!biasType || *biasType == input.dtype(), "Input type (",
             legacyTypeName(input.dtype()), ") and bias type (",
             legacyTypeName(biasType.value_or(input.dtype())), ") should be the same");
  KILN_CHECK(input.device().type == weight.device().type,
             "Expected all tensors to be on the same device, but found at least two devices, ",
             input.device().str(), " and ", weight.device().str(), "!");
}

// A transposed convolution's checks (PyTorch's, for transposed=True) and the shape of the direct
// convolution it is the adjoint of: that convolution's input is the transposed one's output
// (N, weight.size(1) * groups, out...), its output the transposed one's input (N, weight.size(0),
// in...), its weight the same tensor read as [cout = weight.size(0), cin / groups, k...].
ConvShape transposedConvShape(const Tensor& input, const Tensor& weight,
                              const std::optional<DimVector>& biasSizes,
                              std::optional<ScalarType> biasType, const DimVector& st,
                              const DimVector& pad, const DimVector& dil, const DimVector& outPad,
                              int64_t groups) {
  const int64_t dims = weight.dim() - 2;
  const int64_t cin = weight.size(0), cout = weight.size(1) * groups;
  KILN_CHECK(cin >= groups, "Given groups=", groups, ", expected weight to be at least ", groups,
             " at dimension 0, but got weight of size ", weight.shapeString(), " instead");
  KILN_CHECK(cin % groups == 0, "Given groups=", groups, ", expected weight to be divisible by ",
             groups, " at dimension 0, but got weight of size ", weight.shapeString(), " instead");
  KILN_CHECK(input.size(1) == cin, "Given transposed=1, weight of size ", weight.shapeString(),
             ", expected input", input.shapeString(), " to have ", cin, " channels, but got ",
             input.size(1), " channels instead");
  KILN_CHECK(!biasSizes || (biasSizes->size() == 1 && (*biasSizes)[0] == cout),
             "Given transposed=1, weight of size ", weight.shapeString(),
             ", expected bias to be 1-dimensional with ", cout, " elements, but got bias of size ",
             biasSizes ? shapeString(*biasSizes) : "", " instead");
  DimVector out(static_cast<size_t>(dims), 0);
  std::string inText, outText;
  bool positive = true;
  for (size_t d = 0; d < size_t(dims); ++d) {
    KILN_CHECK(outPad[d] >= 0 && (outPad[d] < st[d] || outPad[d] < dil[d]),
               "output padding must be smaller than either stride or dilation, but got ",
               "output_padding=", shapeString(outPad), ", stride=", shapeString(st),
               ", dilation=", shapeString(dil));
    const int64_t in = input.size(2 + int64_t(d)), k = weight.size(2 + int64_t(d));
    out[d] = (in - 1) * st[d] - 2 * pad[d] + dil[d] * (k - 1) + outPad[d] + 1;
    positive = positive && out[d] > 0;
    inText += (d ? " x " : "") + std::to_string(input.size(2 + int64_t(d)));
    outText += (d ? " x " : "") + std::to_string(out[d]);
  }
  KILN_CHECK(positive, "Given input size per channel: (", inText,
             "). Calculated output size per channel: (", outText, "). Output size is too small");
  checkTypesAndDevices(input, weight, biasType);
  ConvShape s;
  s.spatialDims = dims;
  s.n = input.size(0);
  s.c = cout;
  s.cout = cin;
  s.groups = groups;
  setSpatial(s, dims, out, spatialSizes(weight), st, pad, dil, spatialSizes(input));
  return s;
}

// PyTorch's checks of convolution's arguments (check_shape_forward and the dtype checks), in its
// order; biasSizes is the bias's shape when there is one.
ConvShape convShape(const Tensor& input, const Tensor& weight, const std::optional<DimVector>& biasSizes,
                    std::optional<ScalarType> biasType, IntArrayRef stride, IntArrayRef padding,
                    IntArrayRef dilation, bool transposed, IntArrayRef outputPadding,
                    int64_t groups) {
  KILN_CHECK(groups > 0, "non-positive groups is not supported");
  const int64_t k = weight.dim();
  KILN_CHECK(k >= 3, "weight should have at least three dimensions");
  const int64_t dims = k - 2;
  DimVector st = expandParam(stride, "stride", dims), pad = expandParam(padding, "padding", dims),
            dil = expandParam(dilation, "dilation", dims);
  expandParam(outputPadding, "output_padding", dims);
  if (dims > 3)
    throw NotImplementedError(strCat("convolution: kiln supports 1-d, 2-d and 3-d convolutions, got a ",
                                     dims, "-d weight of size ", weight.shapeString()));
  KILN_CHECK(std::all_of(pad.begin(), pad.end(), [](int64_t v) { return v >= 0; }),
             "negative padding is not supported");
  KILN_CHECK(std::all_of(st.begin(), st.end(), [](int64_t v) { return v > 0; }),
             "non-positive stride is not supported");
  KILN_CHECK(std::all_of(dil.begin(), dil.end(), [](int64_t v) { return v > 0; }),
             "non-positive dilation is not supported");
  KILN_CHECK(input.dim() == k, "Expected ", k, "-dimensional input for ", k,
             "-dimensional weight ", weight.shapeString(), ", but got ", input.dim(),
             "-dimensional input of size ", input.shapeString(), " instead");
  if (transposed)
    return transposedConvShape(input, weight, biasSizes, biasType, st, pad, dil,
                               expandParam(outputPadding, "output_padding", dims), groups);
  const int64_t cout = weight.size(0);
  KILN_CHECK(cout >= groups, "Given groups=", groups, ", expected weight to be at least ", groups,
             " at dimension 0, but got weight of size ", weight.shapeString(), " instead");
  KILN_CHECK(cout % groups == 0, "Given groups=", groups, ", expected weight to be divisible by ",
             groups, " at dimension 0, but got weight of size [", weight.shapeString(),
             "] instead");
  KILN_CHECK(input.size(1) == weight.size(1) * groups, "Given groups=", groups,
             ", weight of size ", weight.shapeString(), ", expected input", input.shapeString(),
             " to have ", weight.size(1) * groups, " channels, but got ", input.size(1),
             " channels instead");
  KILN_CHECK(!biasSizes || (biasSizes->size() == 1 && (*biasSizes)[0] == cout),
             "Given weight of size ", weight.shapeString(), ", expected bias to be 1-dimensional with ",
             cout, " elements, but got bias of size ", biasSizes ? shapeString(*biasSizes) : "", " instead");
  bool fits = true;
  std::string padded, kernel;
  for (int64_t d = 0; d < dims; ++d) {
    int64_t in = input.size(2 + d) + 2 * pad[size_t(d)];
    int64_t ker = dil[size_t(d)] * (weight.size(2 + d) - 1) + 1;
    fits = fits && in >= ker;
    padded += (d ? " x " : "") + std::to_string(in);
    kernel += (d ? " x " : "") + std::to_string(ker);
  }
  KILN_CHECK(fits, "Calculated padded input size per channel: (", padded, "). Kernel size: (",
             kernel, "). Kernel size can't be greater than actual input size");
  checkTypesAndDevices(input, weight, biasType);

  DimVector in = spatialSizes(input), kernelSizes = spatialSizes(weight), out(size_t(dims), 0);
  for (size_t d = 0; d < size_t(dims); ++d)
    out[d] = (in[d] + 2 * pad[d] - dil[d] * (kernelSizes[d] - 1) - 1) / st[d] + 1;
  ConvShape s;
  s.spatialDims = dims;
  s.n = input.size(0);
  s.c = input.size(1);
  s.cout = cout;
  s.groups = groups;
  setSpatial(s, dims, in, kernelSizes, st, pad, dil, out);
  return s;
}

// The output columns x whose input column x * stride + offset lies in [0, size): [lo, hi).
std::pair<int64_t, int64_t> validRange(int64_t offset, int64_t stride, int64_t size, int64_t outSize) {
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = size - 1 - offset >= 0 ? std::min(outSize, (size - 1 - offset) / stride + 1) : 0;
  lo = std::min(lo, outSize);
  return {lo, std::max(lo, hi)};
}

// Unfolds samples [n0, n0 + count) of channels [c0, c0 + cg) into cols [k, count * l]: row
// (c, a, i, j) holds, for every output position, the input element under kernel tap (a, i, j),
// or 0 in the padding.
template <typename T>
void unfold(const T* in, const ConvShape& s, int64_t n0, int64_t count, int64_t c0, T* cols) {
  const int64_t l = s.l(), rowLen = count * l, taps = s.taps(), rows = s.cg() * taps;
#pragma omp parallel for collapse(2) schedule(static) if (rows * rowLen > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t n = 0; n < count; ++n) {
      const int64_t c = r / taps, a = r % taps / (s.kh * s.kw), i = r % (s.kh * s.kw) / s.kw, j = r % s.kw;
      const T* plane = in + ((n0 + n) * s.c + c0 + c) * s.plane();
      T* dst = cols + r * rowLen + n * l;
      const int64_t offW = j * s.dw - s.pw;
      const auto [lo, hi] = validRange(offW, s.sw, s.w, s.ow);
      for (int64_t zy = 0; zy < s.od * s.oh; ++zy, dst += s.ow) {
        const int64_t id = zy / s.oh * s.sd - s.pd + a * s.dd, ih = zy % s.oh * s.sh - s.ph + i * s.dh;
        if (id < 0 || id >= s.d || ih < 0 || ih >= s.h) {
          std::fill(dst, dst + s.ow, T(0));
          continue;
        }
        const T* line = plane + (id * s.h + ih) * s.w + offW;
        std::fill(dst, dst + lo, T(0));
        if (s.sw == 1) {
          std::copy(line + lo, line + hi, dst + lo);
        } else {
          for (int64_t x = lo; x < hi; ++x) dst[x] = line[x * s.sw];
        }
        std::fill(dst + hi, dst + s.ow, T(0));
      }
    }
  }
}

// The adjoint of unfold: sums every column entry back into the input element it was read from,
// writing planes [n0, n0 + count) x [c0, c0 + cg) of gradIn whole (each plane by one thread).
template <typename T>
void fold(const T* cols, const ConvShape& s, int64_t n0, int64_t count, int64_t c0, T* gradIn) {
  using A = opmath_t<T>;
  const int64_t l = s.l(), rowLen = count * l, taps = s.taps(), planes = count * s.cg();
#pragma omp parallel for schedule(static) if (planes * s.k() * l / s.cg() > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t n = p / s.cg(), c = p % s.cg();
    T* plane = gradIn + ((n0 + n) * s.c + c0 + c) * s.plane();
    std::fill(plane, plane + s.plane(), T(0));
    for (int64_t tap = 0; tap < taps; ++tap) {
      const int64_t a = tap / (s.kh * s.kw), i = tap % (s.kh * s.kw) / s.kw, j = tap % s.kw;
      const T* src = cols + (c * taps + tap) * rowLen + n * l;
      const int64_t offW = j * s.dw - s.pw;
      const auto [lo, hi] = validRange(offW, s.sw, s.w, s.ow);
      for (int64_t zy = 0; zy < s.od * s.oh; ++zy) {
        const int64_t id = zy / s.oh * s.sd - s.pd + a * s.dd, ih = zy % s.oh * s.sh - s.ph + i * s.dh;
        if (id < 0 || id >= s.d || ih < 0 || ih >= s.h) continue;
        T* line = plane + (id * s.h + ih) * s.w + offW;
        const T* row = src + zy * s.ow;
        if (s.sw == 1) {
          for (int64_t x = lo; x < hi; ++x) line[x] = T(A(line[x]) + A(row[x]));
        } else {
          for (int64_t x = lo; x < hi; ++x) line[x * s.sw] = T(A(line[x * s.sw]) + A(row[x]));
        }
      }
    }
  }
}

// Copies between the [N, C, L] layout (samples [n0, n0 + count)) and the [C, count * L] layout
// of a chunk's GEMM; toChunk picks the direction.
template <typename T>
void relayout(T* nclData, T* chunkData, int64_t n0, int64_t count, int64_t channels, int64_t l,
              bool toChunk) {
#pragma omp parallel for collapse(2) schedule(static) if (count * channels * l > kParallelGrain)
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t n = 0; n < count; ++n) {
      T* ncl = nclData + ((n0 + n) * channels + c) * l;
      T* chunk = chunkData + (c * count + n) * l;
      if (toChunk)
        std::memcpy(chunk, ncl, size_t(l) * sizeof(T));
      else
        std::memcpy(ncl, chunk, size_t(l) * sizeof(T));
    }
  }
}

// A [rows, cols] matrix over t's memory at element offset, with row stride ld.
Tensor matrix(const Tensor& t, int64_t offset, int64_t rows, int64_t cols, int64_t ld) {
  return t.asStrided({rows, cols}, {ld, 1}, t.storageOffset() + offset);
}

Tensor transposedMatrix(const Tensor& t, int64_t offset, int64_t rows, int64_t cols, int64_t ld) {
  return t.asStrided({rows, cols}, {1, ld}, t.storageOffset() + offset);
}

// Samples per chunk: as many as the column budget allows (one when the input is multiplied
// directly).
int64_t chunkSize(const ConvShape& s, size_t elementBytes) {
  if (s.pointwise()) return 1;
  int64_t perSample = std::max<int64_t>(1, s.k() * s.l() * int64_t(elementBytes));
  return std::clamp<int64_t>(kColumnBytes / perSample, 1, std::max<int64_t>(s.n, 1));
}

// OpenMP threads over samples, each unfolding into its own columns and running single-threaded
// GEMMs straight into its samples' outputs: one parallel region per call (float32/float64).
template <typename T> int sampleThreads(const ConvShape& s) {
  if (s.n < 2 || s.n * s.cout * s.l() * s.k() < kParallelGrain) return 1;
  return int(std::min<int64_t>(omp_get_max_threads(), s.n));
}

template <typename T>
std::vector<Tensor> threadColumns(const ConvShape& s, int threads, ScalarType dt) {
  std::vector<Tensor> cols(static_cast<size_t>(threads), Tensor());
  if (!s.pointwise())
    for (auto& c : cols) c = Tensor::empty({s.k(), s.l()}, dt);
  return cols;
}

template <typename T>
void convolutionForwardPerSample(const ConvShape& s, const Tensor& x, const Tensor& w, const Tensor& out) {
  const int64_t l = s.l(), k = s.k(), cg = s.cg(), coutg = s.coutg();
  const int threads = sampleThreads<T>(s);
  std::vector<Tensor> cols = threadColumns<T>(s, threads, x.dtype());
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t n = 0; n < s.n; ++n) {
    const Tensor& buf = cols[size_t(omp_get_thread_num())];
    for (int64_t g = 0; g < s.groups; ++g) {
      Tensor b;
      if (s.pointwise()) {
        b = matrix(x, (n * s.c + g * cg) * l, cg, l, l);
      } else {
        unfold(x.data<T>(), s, n, 1, g * cg, buf.data<T>());
        b = matrix(buf, 0, k, l, l);
      }
      cpu::gemmInto(matrix(w, g * coutg * k, coutg, k, k), b,
                    matrix(out, (n * s.cout + g * coutg) * l, coutg, l, l), false);
    }
  }
}

template <typename T>
void convolutionBackwardPerSample(const ConvShape& s, const Tensor& go, const Tensor& x, const Tensor& w,
                                  const Tensor& gradInput, const Tensor& gradWeight) {
  const int64_t l = s.l(), k = s.k(), cg = s.cg(), coutg = s.coutg();
  const int threads = sampleThreads<T>(s);
  std::vector<Tensor> cols = threadColumns<T>(s, threads, x.dtype());
  // Each thread sums its samples' weight gradients into its own buffer; the buffers are added
  // after the loop.
  std::vector<Tensor> partial(static_cast<size_t>(threads), Tensor());
  if (gradWeight.defined()) {
    for (auto& p : partial) p = ops::zeros(gradWeight.sizes(), gradWeight.dtype(), std::nullopt);
  }
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t n = 0; n < s.n; ++n) {
    const int t = omp_get_thread_num();
    const Tensor& buf = cols[size_t(t)];
    for (int64_t g = 0; g < s.groups; ++g) {
      Tensor grad = matrix(go, (n * s.cout + g * coutg) * l, coutg, l, l);
      if (gradWeight.defined()) {
        Tensor colsT;
        if (s.pointwise()) {
          colsT = transposedMatrix(x, (n * s.c + g * cg) * l, l, cg, l);
        } else {
          unfold(x.data<T>(), s, n, 1, g * cg, buf.data<T>());
          colsT = transposedMatrix(buf, 0, l, k, l);
        }
        cpu::gemmInto(grad, colsT, matrix(partial[size_t(t)], g * coutg * k, coutg, k, k), true);
      }
      if (gradInput.defined()) {
        Tensor wT = transposedMatrix(w, g * coutg * k, k, coutg, k);
        if (s.pointwise()) {
          cpu::gemmInto(wT, grad, matrix(gradInput, (n * s.c + g * cg) * l, cg, l, l), false);
        } else {
          cpu::gemmInto(wT, grad, matrix(buf, 0, k, l, l), false);
          fold(buf.data<T>(), s, n, 1, g * cg, gradInput.data<T>());
        }
      }
    }
  }
  if (!gradWeight.defined()) return;
  T* dst = gradWeight.data<T>();
  const int64_t count = gradWeight.numel();
  std::fill(dst, dst + count, T(0));
  for (const Tensor& p : partial) {
    const T* src = p.data<T>();
    for (int64_t i = 0; i < count; ++i) dst[i] += src[i];
  }
}

template <typename T>
void convolutionForward(const ConvShape& s, const Tensor& x, const Tensor& w, const Tensor& bias,
                        const Tensor& out) {
  const int64_t l = s.l(), k = s.k(), cg = s.cg(), coutg = s.coutg();
  const int64_t chunk = chunkSize(s, sizeof(T));
  constexpr bool blasType = std::is_same_v<T, float> || std::is_same_v<T, double>;
  if constexpr (std::is_same_v<T, float>) if (s.planar()) {
    // oneDNN's direct convolution on blocked layouts (bench/nn_kernels.py: about twice as fast
    // as im2col + GEMM on a CNN's 3x3 layers); im2col below when it has no kernel for a shape.
    cpu::DnnlConvShape d{s.n, s.c, s.h, s.w, s.cout, s.kh, s.kw, s.sh, s.sw,
                         s.ph, s.pw, s.dh, s.dw, s.oh, s.ow, s.groups};
    if (cpu::dnnlConvolutionForward(d, x.data<T>(), w.data<T>(),
                                    bias.defined() ? bias.data<T>() : nullptr, out.data<T>()))
      return;
  }
  Tensor cols = s.pointwise() || blasType ? Tensor() : Tensor::empty({k, chunk * l}, x.dtype());
  Tensor outChunk = chunk > 1 && !blasType ? Tensor::empty({s.cout, chunk * l}, x.dtype()) : Tensor();
  if constexpr (blasType) convolutionForwardPerSample<T>(s, x, w, out);
  for (int64_t n0 = 0; n0 < s.n && !blasType; n0 += chunk) {
    const int64_t count = std::min(chunk, s.n - n0);
    for (int64_t g = 0; g < s.groups; ++g) {
      Tensor b;
      if (s.pointwise()) {
        b = matrix(x, (n0 * s.c + g * cg) * l, cg, l, l);
      } else {
        unfold(x.data<T>(), s, n0, count, g * cg, cols.data<T>());
        b = matrix(cols, 0, k, count * l, count * l);
      }
      Tensor c = count == 1 ? matrix(out, (n0 * s.cout + g * coutg) * l, coutg, l, l)
                            : matrix(outChunk, g * coutg * count * l, coutg, count * l, count * l);
      cpu::gemmInto(matrix(w, g * coutg * k, coutg, k, k), b, c, false);
    }
    if (count > 1) relayout(out.data<T>(), outChunk.data<T>(), n0, count, s.cout, l, false);
  }
  if (!bias.defined()) return;
  const T* bp = bias.data<T>();
  T* op = out.data<T>();
#pragma omp parallel for schedule(static) if (out.numel() > kParallelGrain)
  for (int64_t row = 0; row < s.n * s.cout; ++row) {
    const T v = bp[row % s.cout];
    T* dst = op + row * l;
    for (int64_t i = 0; i < l; ++i) dst[i] += v;
  }
}

// 16-bit floats come here widened to float32 (convolutionBackward).
template <typename T>
void convolutionBackwardInputWeight(const ConvShape& s, const Tensor& go, const Tensor& x,
                                    const Tensor& w, const Tensor& gradInput,
                                    const Tensor& gradWeight) {
  if constexpr (std::is_same_v<T, float>) if (s.planar()) {
    cpu::DnnlConvShape d{s.n, s.c, s.h, s.w, s.cout, s.kh, s.kw, s.sh, s.sw,
                         s.ph, s.pw, s.dh, s.dw, s.oh, s.ow, s.groups};
    if (cpu::dnnlConvolutionBackward(d, go.data<T>(), x.data<T>(), w.data<T>(),
                                     gradInput.defined() ? gradInput.data<T>() : nullptr,
                                     gradWeight.defined() ? gradWeight.data<T>() : nullptr))
      return;
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return convolutionBackwardPerSample<T>(s, go, x, w, gradInput, gradWeight);
  }
  const int64_t l = s.l(), k = s.k(), cg = s.cg(), coutg = s.coutg();
  const int64_t chunk = chunkSize(s, sizeof(T));
  Tensor cols = s.pointwise() ? Tensor() : Tensor::empty({k, chunk * l}, x.dtype());
  Tensor goChunk = chunk > 1 ? Tensor::empty({s.cout, chunk * l}, x.dtype()) : Tensor();
  for (int64_t n0 = 0; n0 < s.n; n0 += chunk) {
    const int64_t count = std::min(chunk, s.n - n0);
    if (count > 1) relayout(go.data<T>(), goChunk.data<T>(), n0, count, s.cout, l, true);
    for (int64_t g = 0; g < s.groups; ++g) {
      Tensor grad = count == 1 ? matrix(go, (n0 * s.cout + g * coutg) * l, coutg, l, l)
                               : matrix(goChunk, g * coutg * count * l, coutg, count * l, count * l);
      if (gradWeight.defined()) {
        Tensor colsT;
        if (s.pointwise()) {
          colsT = transposedMatrix(x, (n0 * s.c + g * cg) * l, l, cg, l);
        } else {
          unfold(x.data<T>(), s, n0, count, g * cg, cols.data<T>());
          colsT = transposedMatrix(cols, 0, count * l, k, count * l);
        }
        cpu::gemmInto(grad, colsT, matrix(gradWeight, g * coutg * k, coutg, k, k), n0 > 0);
      }
      if (gradInput.defined()) {
        Tensor wT = transposedMatrix(w, g * coutg * k, k, coutg, k);
        if (s.pointwise()) {
          cpu::gemmInto(wT, grad, matrix(gradInput, (n0 * s.c + g * cg) * l, cg, l, l), false);
        } else {
          cpu::gemmInto(wT, grad, matrix(cols, 0, k, count * l, count * l), false);
          fold(cols.data<T>(), s, n0, count, g * cg, gradInput.data<T>());
        }
      }
    }
  }
}

// grad_bias[c] = the sum of grad_output over samples and positions, accumulated in double.
template <typename T> void convolutionBackwardBias(const ConvShape& s, const Tensor& go, const Tensor& gb) {
  const T* src = go.data<T>();
  T* dst = gb.data<T>();
  const int64_t l = s.l();
#pragma omp parallel for schedule(static) if (go.numel() > kParallelGrain)
  for (int64_t c = 0; c < s.cout; ++c) {
    double total = 0;
    for (int64_t n = 0; n < s.n; ++n) {
      total += double(cpu::laneSum<opmath_t<T>>(src + (n * s.cout + c) * l, l, [](auto v) { return v; }));
    }
    dst[c] = T(opmath_t<T>(total));
  }
}

constexpr bool isHalfPrecision(ScalarType t) { return t == ScalarType::Float16 || t == ScalarType::BFloat16; }

Tensor widened(const Tensor& t) {
  return t.defined() ? ops::_to_copy(t, ScalarType::Float32, std::nullopt) : t;
}

// The bias's shape for the sums of a transposed convolution's grad_output: its channels and
// positions are those of the direct convolution's input.
ConvShape transposedOutputShape(ConvShape s) {
  s.cout = s.c;
  s.od = s.d;
  s.oh = s.h;
  s.ow = s.w;
  return s;
}

// A transposed convolution's forward (s: the direct convolution it is the adjoint of, x its
// output's shape): that convolution's input gradient for grad_output x, plus the bias.
template <typename T>
void transposedForward(const ConvShape& s, const Tensor& x, const Tensor& w, const Tensor& bias,
                       const Tensor& out) {
  // `out` stands in for the direct convolution's input, which only a weight gradient reads.
  convolutionBackwardInputWeight<T>(s, x, out, w, out, Tensor());
  if (!bias.defined()) return;
  const T* bp = bias.data<T>();
  T* op = out.data<T>();
  const int64_t l = s.plane();
#pragma omp parallel for schedule(static) if (out.numel() > kParallelGrain)
  for (int64_t row = 0; row < s.n * s.c; ++row) {
    const T v = bp[row % s.c];
    T* dst = op + row * l;
    for (int64_t i = 0; i < l; ++i) dst[i] += v;
  }
}

// A transposed convolution's input and weight gradients: the direct convolution's forward of
// grad_output, and its weight gradient with grad_output as that convolution's input.
template <typename T>
void transposedBackward(const ConvShape& s, const Tensor& go, const Tensor& x, const Tensor& w,
                        const Tensor& gi, const Tensor& gw) {
  if (gi.defined()) convolutionForward<T>(s, go, w, Tensor(), gi);
  if (gw.defined()) convolutionBackwardInputWeight<T>(s, x, go, w, Tensor(), gw);
}


Tensor convolutionTransposed(const ConvShape& s, const Tensor& input, const Tensor& weight,
                             const Tensor& bias) {
  const ScalarType dt = input.dtype();
  Tensor out = Tensor::empty(s.inSizes(), dt, input.device());
  // PyTorch's transposed convolutions (slow_conv_transpose, oneDNN's) are floating only.
  if (!isFloatingType(dt)) throwUnsupportedDtype("slow_conv_transpose2d_cpu", dt);
  if (out.isMeta() || out.numel() == 0) return out;
  if (input.numel() == 0) return ops::zero_(out);
  Tensor x = cpu::contiguousInput(input), w = cpu::contiguousInput(weight);
  Tensor b = bias.defined() ? cpu::contiguousInput(bias) : Tensor();
  if (isHalfPrecision(dt)) {
    Tensor wide = Tensor::empty(s.inSizes(), ScalarType::Float32);
    transposedForward<float>(s, widened(x), widened(w), widened(b), wide);
    ops::copy_(out, wide, false);
    return out;
  }
  KILN_DISPATCH_FLOATING(dt, "convolution", [&]<typename T>() {
    if constexpr (!isHalfPrecision(ScalarTypeOf<T>::value)) transposedForward<T>(s, x, w, b, out);
  });
  return out;
}

std::tuple<Tensor, Tensor, Tensor>
convolutionTransposedBackward(const ConvShape& s, const Tensor& gradOutput, const Tensor& input,
                              const Tensor& weight, const Tensor& gi, const Tensor& gw,
                              const Tensor& gb) {
  const ScalarType dt = input.dtype();
  if (input.isMeta() || gradOutput.isMeta()) return {gi, gw, gb};
  const bool empty = s.n == 0 || s.l() == 0 || s.plane() == 0;
  if (gi.defined() && empty) ops::zero_(gi);
  if (gw.defined() && empty) ops::zero_(gw);
  Tensor go = cpu::contiguousInput(gradOutput), x = cpu::contiguousInput(input),
         w = cpu::contiguousInput(weight);
  const ConvShape sums = transposedOutputShape(s);
  if (isHalfPrecision(dt)) {
    Tensor wgi = gi.defined() ? Tensor::empty(gi.sizes(), ScalarType::Float32) : Tensor();
    Tensor wgw = gw.defined() ? Tensor::empty(gw.sizes(), ScalarType::Float32) : Tensor();
    if (!empty) transposedBackward<float>(s, widened(go), widened(x), widened(w), wgi, wgw);
    if (gi.defined() && !empty) ops::copy_(gi, wgi, false);
    if (gw.defined() && !empty) ops::copy_(gw, wgw, false);
    if (gb.defined()) {
      if (dt == ScalarType::BFloat16) convolutionBackwardBias<BFloat16>(sums, go, gb);
      else convolutionBackwardBias<Half>(sums, go, gb);
    }
    return {gi, gw, gb};
  }
  KILN_DISPATCH_FLOATING(dt, "convolution_backward", [&]<typename T>() {
    if constexpr (!isHalfPrecision(ScalarTypeOf<T>::value)) {
      if (!empty) transposedBackward<T>(s, go, x, w, gi, gw);
      if (gb.defined()) convolutionBackwardBias<T>(sums, go, gb);
    }
  });
  return {gi, gw, gb};
}
} // namespace

Tensor convolution(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, bool transposed,
                   IntArrayRef outputPadding, int64_t groups) {
  std::optional<DimVector> biasSizes;
  std::optional<ScalarType> biasType;
  if (bias) {
    biasSizes = DimVector(bias->sizes());
    biasType = bias->dtype();
  }
  ConvShape s = convShape(input, weight, biasSizes, biasType, stride, padding, dilation, transposed,
                          outputPadding, groups);
  const ScalarType dt = input.dtype();
  if (transposed) return convolutionTransposed(s, input, weight, bias ? *bias : Tensor());
  // A float32 input laid out channels-last (NHWC in memory) gives a channels-last output, as
  // PyTorch's oneDNN path does; oneDNN's kernels then read and write it without reorders.
  const bool channelsLast = dt == ScalarType::Float32 && !transposed && input.dim() == 4 && isChannelsLast(input);
  Tensor out = channelsLast ? Tensor::emptyStrided(s.outSizes(), channelsLastStrides(s.outSizes()),
                                                   dt, input.device())
                            : Tensor::empty(s.outSizes(), dt, input.device());
  if (dt == ScalarType::Bool) throwUnsupportedDtype(s.spatialDims == 3 ? "compute_columns3d" : "slow_conv2d_cpu", dt);
  // PyTorch's dilated convolution has no integer kernel but int64's.
  if (!isFloatingType(dt) && dt != ScalarType::Int64 && (s.dd > 1 || s.dh > 1 || s.dw > 1))
    throwUnsupportedDtype("slow_conv_dilated<>", dt);
  if (out.isMeta() || out.numel() == 0) return out;
  Tensor w = cpu::contiguousInput(weight);
  Tensor b = bias ? cpu::contiguousInput(*bias) : Tensor();
  if (channelsLast) {
    cpu::DnnlConvShape d{s.n, s.c, s.h, s.w, s.cout, s.kh, s.kw, s.sh, s.sw,
                         s.ph, s.pw, s.dh, s.dw, s.oh, s.ow, s.groups};
    if (cpu::dnnlConvolutionForward(d, input.data<float>(), w.data<float>(),
                                    b.defined() ? b.data<float>() : nullptr, out.data<float>(), true))
      return out;
    // No oneDNN kernel: computed in NCHW and copied into the channels-last output.
    Tensor plain = Tensor::empty(s.outSizes(), dt, input.device());
    convolutionForward<float>(s, cpu::contiguousInput(input), w, b, plain);
    ops::copy_(out, plain, false);
    return out;
  }
  Tensor x = cpu::contiguousInput(input);
  if (isHalfPrecision(dt)) {
    Tensor wide = Tensor::empty(s.outSizes(), ScalarType::Float32);
    convolutionForward<float>(s, widened(x), widened(w), widened(b), wide);
    ops::copy_(out, wide, false);
    return out;
  }
  KILN_DISPATCH_NUMERIC(dt, "convolution", [&]<typename T>() {
    if constexpr (!isHalfPrecision(ScalarTypeOf<T>::value)) convolutionForward<T>(s, x, w, b, out);
  });
  return out;
}

std::tuple<Tensor, Tensor, Tensor>
convolutionBackward(const Tensor& gradOutput, const Tensor& input, const Tensor& weight,
                    std::optional<IntArrayRef> biasSizes, IntArrayRef stride, IntArrayRef padding,
                    IntArrayRef dilation, bool transposed, IntArrayRef outputPadding, int64_t groups,
                    IntArrayRef outputMask) {
  std::optional<DimVector> bias;
  if (biasSizes) bias = DimVector(*biasSizes);
  ConvShape s = convShape(input, weight, bias, std::nullopt, stride, padding, dilation, transposed,
                          outputPadding, groups);
  KILN_CHECK(outputMask.size() == 3, "convolution_backward: output_mask must have 3 entries, got ",
             outputMask.size());
  DimVector expected = transposed ? s.inSizes() : s.outSizes();
  KILN_CHECK(DimVector(gradOutput.sizes()) == expected, "convolution_backward: expected grad_output of size ",
             shapeString(expected), " for input ", input.shapeString(), " and weight ",
             weight.shapeString(), ", but got ", gradOutput.shapeString());
  KILN_CHECK(gradOutput.dtype() == input.dtype(), "convolution_backward: expected grad_output of dtype ",
             scalarTypeName(input.dtype()), ", but got ", scalarTypeName(gradOutput.dtype()));
  const ScalarType dt = input.dtype();
  if (!isFloatingType(dt)) throwUnsupportedDtype("convolution_backward", dt);
  Tensor gi = outputMask[0] ? Tensor::empty(input.sizes(), dt, input.device()) : Tensor();
  Tensor gw = outputMask[1] ? Tensor::empty(weight.sizes(), dt, input.device()) : Tensor();
  const int64_t biasChannels = transposed ? s.c : s.cout;
  Tensor gb = outputMask[2] ? Tensor::empty(biasSizes ? *biasSizes : IntArrayRef({biasChannels}), dt,
                                            input.device())
                            : Tensor();
  if (transposed) return convolutionTransposedBackward(s, gradOutput, input, weight, gi, gw, gb);
  if (input.isMeta() || gradOutput.isMeta()) return {gi, gw, gb};
  if (gw.defined() && s.n == 0) ops::zero_(gw);
  if (gi.defined() && gi.numel() > 0 && s.l() == 0) ops::zero_(gi);
  Tensor go = cpu::contiguousInput(gradOutput), x = cpu::contiguousInput(input),
         w = cpu::contiguousInput(weight);
  const bool inputOrWeight = (gi.defined() || gw.defined()) && s.n > 0 && s.l() > 0;
  if (isHalfPrecision(dt)) {
    // PyTorch's bfloat16 backward computes in float32 and rounds once: so does kiln's. Its
    // float16 backward does too on CPUs with AVX512-FP16 (oneDNN's kernels); elsewhere it rounds
    // per sample (within a few float16 ulps of this). kiln takes the accurate one everywhere.
    Tensor wgi = gi.defined() ? Tensor::empty(gi.sizes(), ScalarType::Float32) : Tensor();
    Tensor wgw = gw.defined() ? Tensor::empty(gw.sizes(), ScalarType::Float32) : Tensor();
    if (inputOrWeight)
      convolutionBackwardInputWeight<float>(s, widened(go), widened(x), widened(w), wgi, wgw);
    if (gi.defined() && inputOrWeight) ops::copy_(gi, wgi, false);
    if (gw.defined() && inputOrWeight) ops::copy_(gw, wgw, false);
    if (gb.defined()) {
      if (dt == ScalarType::BFloat16) convolutionBackwardBias<BFloat16>(s, go, gb);
      else convolutionBackwardBias<Half>(s, go, gb);
    }
    return {gi, gw, gb};
  }
  KILN_DISPATCH_FLOATING(dt, "convolution_backward", [&]<typename T>() {
    if (inputOrWeight) convolutionBackwardInputWeight<T>(s, go, x, w, gi, gw);
    if (gb.defined()) convolutionBackwardBias<T>(s, go, gb);
  });
  return {gi, gw, gb};
}

} // namespace kiln::kernels
