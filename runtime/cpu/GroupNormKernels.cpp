// native_group_norm and native_group_norm_backward: the input seen as [N, C, HxW], each (sample,
// group) block of C / group channels normalized by its own mean and biased variance, then a
// per-channel affine. Parallel over blocks; sums in the compute type along each channel's
// contiguous run and in double across runs.
#include <cstdint>
#include <omp.h>

#include <cmath>
#include <vector>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/cpu/LaneSums.h"
#include "runtime/cpu/RowLoops.h"

namespace kiln::kernels {

namespace {

constexpr int64_t kParallelGrain = 16384;

struct GroupLayout {
  int64_t n, c, hw, groups;
  int64_t channelsPerGroup() const { return c / groups; }
  int64_t blocks() const { return n * groups; }
  int64_t blockSize() const { return channelsPerGroup() * hw; }
};

template <typename F> void parallelFor(int64_t count, int64_t work, const F& f) {
#pragma omp parallel for schedule(static) if (work > kParallelGrain && !omp_in_parallel())
  for (int64_t i = 0; i < count; ++i) f(i);
}

template <typename P> double paramAt(const P* p, int64_t stride, int64_t c, double fallback) {
  return p ? double(p[c * stride]) : fallback;
}

void checkGroupNorm(const char* op, const Tensor& input, const std::optional<Tensor>& weight,
                    const std::optional<Tensor>& bias, int64_t n, int64_t c, int64_t hw,
                    int64_t group) {
  KILN_CHECK(group > 0, op, ": num_groups must be positive, but got ", group);
  KILN_CHECK(c % group == 0, "Expected number of channels in input to be divisible by num_groups, ",
             "but got input of shape ", input.shapeString(), " and num_groups=", group);
  KILN_CHECK(input.numel() == n * c * hw, op, ": expected input of N * C * HxW = ", n, " * ", c,
             " * ", hw, " elements, but got input of shape ", input.shapeString());
  for (const auto& [p, name] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    KILN_CHECK(!*p || !(*p)->defined() || ((*p)->dim() == 1 && (*p)->numel() == c), "Expected ",
               name, " to be a vector of size equal to the number of channels in input, but got ",
               name, " of shape ", (*p)->shapeString(), " and input of shape ", input.shapeString());
  }
  if (!isFloatingType(input.dtype())) throwUnsupportedDtype("GroupNormKernelImpl", input.dtype());
  for (const auto* p : {&weight, &bias}) {
    if (!*p || !(*p)->defined()) continue;
    ScalarType pt = (*p)->dtype();
    KILN_CHECK(pt == input.dtype() || (pt == ScalarType::Float32 && !(input.dtype() == ScalarType::Float32 ||
                                                                      input.dtype() == ScalarType::Float64)),
               op, ": expected weight and bias of dtype ", scalarTypeName(input.dtype()),
               ", but got ", scalarTypeName(pt));
  }
}

} // namespace

std::tuple<Tensor, Tensor, Tensor> nativeGroupNorm(const Tensor& input,
                                                   const std::optional<Tensor>& weight,
                                                   const std::optional<Tensor>& bias, int64_t N,
                                                   int64_t C, int64_t HxW, int64_t group, double eps) {
  checkGroupNorm("native_group_norm", input, weight, bias, N, C, HxW, group);
  const GroupLayout l{N, C, HxW, group};
  // mean and rstd have the parameters' dtype (float32 for a 16-bit input with float32 parameters).
  const ScalarType pt = weight && weight->defined() ? weight->dtype()
                        : bias && bias->defined()   ? bias->dtype()
                                                    : input.dtype();
  Tensor out = Tensor::empty(input.sizes(), input.dtype(), input.device());
  Tensor mean = Tensor::empty({N, group}, pt, input.device());
  Tensor rstd = Tensor::empty({N, group}, pt, input.device());
  if (out.isMeta()) return {out, mean, rstd};
  Tensor x = cpu::contiguousInput(input);
  Tensor w = weight && weight->defined() ? cpu::contiguousInput(*weight) : Tensor();
  Tensor b = bias && bias->defined() ? cpu::contiguousInput(*bias) : Tensor();
  KILN_DISPATCH_FLOATING(input.dtype(), "GroupNormKernelImpl", [&]<typename T>() {
    using A = opmath_t<T>;
    auto run = [&]<typename P>() {
      const P* wp = w.defined() ? w.data<P>() : nullptr;
      const P* bp = b.defined() ? b.data<P>() : nullptr;
      const T* xp = x.data<T>();
      T* op = out.data<T>();
      P* mp = mean.data<P>();
      P* rp = rstd.data<P>();
      const int64_t d = l.channelsPerGroup(), size = l.blockSize();
      parallelFor(l.blocks(), input.numel(), [&](int64_t blk) {
        const T* src = xp + blk * size;
        double sum = 0;
        for (int64_t ch = 0; ch < d; ++ch)
          sum += double(cpu::laneSum<A>(src + ch * l.hw, l.hw, [](auto v) { return v; }));
        const double mu = size ? sum / double(size) : 0.0;
        const A m = A(mu);
        double sq = 0;
        for (int64_t ch = 0; ch < d; ++ch)
          sq += double(cpu::laneSum<A>(src + ch * l.hw, l.hw, [m](auto v) { return (v - m) * (v - m); }));
        const double var = size ? sq / double(size) : 0.0;
        const double r = 1.0 / std::sqrt(var + eps);
        mp[blk] = P(mu);
        rp[blk] = P(r);
        const int64_t c0 = blk % l.groups * d;
        T* dst = op + blk * size;
        for (int64_t ch = 0; ch < d; ++ch) {
          const double wc = paramAt(wp, 1, c0 + ch, 1.0);
          const A scale = A(r * wc), shift = A(paramAt(bp, 1, c0 + ch, 0.0) - mu * r * wc);
          for (int64_t i = 0; i < l.hw; ++i)
            dst[ch * l.hw + i] = T(A(src[ch * l.hw + i]) * scale + shift);
        }
      });
    };
    if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
      if (pt == ScalarType::Float32) return run.template operator()<float>();
    }
    run.template operator()<T>();
  });
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor>
nativeGroupNormBackward(const Tensor& gradOut, const Tensor& input, const Tensor& mean,
                        const Tensor& rstd, const std::optional<Tensor>& weight, int64_t N, int64_t C,
                        int64_t HxW, int64_t group, IntArrayRef outputMask) {
  checkGroupNorm("native_group_norm_backward", input, weight, std::nullopt, N, C, HxW, group);
  KILN_CHECK(outputMask.size() == 3, "native_group_norm_backward: output_mask must have 3 entries, got ",
             outputMask.size());
  KILN_CHECK(DimVector(gradOut.sizes()) == DimVector(input.sizes()),
             "native_group_norm_backward: expected grad_out of size ", input.shapeString(),
             ", but got ", gradOut.shapeString());
  const bool statsOk = mean.dtype() == rstd.dtype() &&
                       (mean.dtype() == input.dtype() ||
                        (mean.dtype() == ScalarType::Float32 && input.dtype() != ScalarType::Float64));
  KILN_CHECK(gradOut.dtype() == input.dtype() && statsOk,
             "native_group_norm_backward: expected grad_out of dtype ", scalarTypeName(input.dtype()),
             " and mean and rstd of that dtype (or float32), but got ", scalarTypeName(gradOut.dtype()),
             ", ", scalarTypeName(mean.dtype()), " and ", scalarTypeName(rstd.dtype()));
  KILN_CHECK(mean.numel() == N * group && rstd.numel() == N * group,
             "native_group_norm_backward: expected mean and rstd of N * group = ", N * group,
             " elements, but got ", mean.shapeString(), " and ", rstd.shapeString());
  const GroupLayout l{N, C, HxW, group};
  const ScalarType pt = weight && weight->defined() ? weight->dtype() : input.dtype();
  Tensor gi = outputMask[0] ? Tensor::empty(input.sizes(), input.dtype(), input.device()) : Tensor();
  Tensor gw = outputMask[1] ? Tensor::empty({C}, pt, input.device()) : Tensor();
  Tensor gb = outputMask[2] ? Tensor::empty({C}, pt, input.device()) : Tensor();
  if (input.isMeta() || gradOut.isMeta()) return {gi, gw, gb};
  Tensor x = cpu::contiguousInput(input), go = cpu::contiguousInput(gradOut);
  // The statistics as float64 (N * group values), whatever their dtype.
  Tensor mc = ops::_to_copy(mean, ScalarType::Float64, std::nullopt);
  Tensor rc = ops::_to_copy(rstd, ScalarType::Float64, std::nullopt);
  Tensor w = weight && weight->defined() ? cpu::contiguousInput(*weight) : Tensor();
  KILN_DISPATCH_FLOATING(input.dtype(), "GroupNormBackwardKernelImpl", [&]<typename T>() {
    using A = opmath_t<T>;
    auto run = [&]<typename P>() {
      const P* wp = w.defined() ? w.data<P>() : nullptr;
      const T* xp = x.data<T>();
      const T* gp = go.data<T>();
      const double* mp = mc.data<double>();
      const double* rp = rc.data<double>();
      const int64_t d = l.channelsPerGroup(), size = l.blockSize();
      // Per (sample, channel): ds = sum(go * x), db = sum(go).
      std::vector<double> ds(size_t(N * C)), db(size_t(N * C));
      parallelFor(l.blocks(), input.numel(), [&](int64_t blk) {
        const int64_t n = blk / l.groups, c0 = blk % l.groups * d;
        const T* xs = xp + blk * size;
        const T* gs = gp + blk * size;
        double dsg = 0, dbg = 0;
        for (int64_t ch = 0; ch < d; ++ch) {
          A s, bsum;
          cpu::laneSumDot<A>(xs + ch * l.hw, gs + ch * l.hw, l.hw, [](auto v) { return v; }, bsum, s);
          ds[size_t(n * C + c0 + ch)] = double(s);
          db[size_t(n * C + c0 + ch)] = double(bsum);
          const double wc = paramAt(wp, 1, c0 + ch, 1.0);
          dsg += double(s) * wc;
          dbg += double(bsum) * wc;
        }
        if (!gi.defined()) return;
        const double mu = double(mp[blk]), r = double(rp[blk]);
        const double scale = size ? 1.0 / double(size) : 0.0;
        const double c2 = (dbg * mu - dsg) * r * r * r * scale;
        const double c3 = -c2 * mu - dbg * r * scale;
        T* dst = gi.data<T>() + blk * size;
        for (int64_t ch = 0; ch < d; ++ch) {
          const A c1 = A(r * paramAt(wp, 1, c0 + ch, 1.0));
          const A a2 = A(c2), a3 = A(c3);
          for (int64_t i = 0; i < l.hw; ++i)
            dst[ch * l.hw + i] = T(c1 * A(gs[ch * l.hw + i]) + a2 * A(xs[ch * l.hw + i]) + a3);
        }
      });
      if (!gw.defined() && !gb.defined()) return;
      P* gwp = gw.defined() ? gw.data<P>() : nullptr;
      P* gbp = gb.defined() ? gb.data<P>() : nullptr;
      parallelFor(C, N * C, [&](int64_t c) {
        const int64_t g = c / d;
        double sw = 0, sb = 0;
        for (int64_t n = 0; n < N; ++n) {
          const double mu = double(mp[n * group + g]), r = double(rp[n * group + g]);
          sw += (ds[size_t(n * C + c)] - db[size_t(n * C + c)] * mu) * r;
          sb += db[size_t(n * C + c)];
        }
        if (gwp) gwp[c] = P(sw);
        if (gbp) gbp[c] = P(sb);
      });
    };
    if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
      if (pt == ScalarType::Float32) return run.template operator()<float>();
    }
    run.template operator()<T>();
  });
  return {gi, gw, gb};
}

} // namespace kiln::kernels
