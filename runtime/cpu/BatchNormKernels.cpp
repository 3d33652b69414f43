// native_batch_norm and native_batch_norm_backward over [N, C, *] inputs: per-channel statistics
// over the batch and spatial dims, parallel over channels. Sums run in the compute type along each
// contiguous (sample, channel) segment and in double across segments; variance is two-pass.
// Parameters and running statistics are the input's dtype, or float32 for a 16-bit input.
#include <cstdint>
#include <omp.h>

#include <cmath>
#include <vector>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/cpu/LaneSums.h"
#include "runtime/cpu/RowLoops.h"
#include "runtime/ViewGeometry.h"

namespace kiln::kernels {

namespace {

constexpr int64_t kParallelGrain = 16384;

// The input as [n, c, s]: s the product of the dims after the channel dim.
struct ChannelLayout {
  int64_t n = 0, c = 0, s = 1;
  int64_t count() const { return n * s; }
};

ChannelLayout channelLayout(const Tensor& input) {
  ChannelLayout l;
  l.n = input.size(0);
  l.c = input.size(1);
  for (int64_t d = 2; d < input.dim(); ++d) l.s *= input.size(d);
  return l;
}

// sum over samples and positions of f(x) for channel c, f in the compute type A.
template <typename A, typename T, typename F>
double channelSum(const T* x, const ChannelLayout& l, int64_t c, const F& f) {
  double total = 0;
  for (int64_t n = 0; n < l.n; ++n) {
    total += double(cpu::laneSum<A>(x + (n * l.c + c) * l.s, l.s, f));
  }
  return total;
}

template <typename F> void forEachChannel(const ChannelLayout& l, const F& f) {
#pragma omp parallel for schedule(static) if (l.n * l.c * l.s > kParallelGrain && !omp_in_parallel())
  for (int64_t c = 0; c < l.c; ++c) f(c);
}

// A 1-D parameter (weight, bias, running stat) read and written through its stride.
template <typename P> struct Param {
  P* data = nullptr;
  int64_t stride = 0;
  explicit Param(const std::optional<Tensor>& t) {
    if (t && t->defined()) {
      data = t->data<P>();
      stride = t->stride(0);
    }
  }
  explicit operator bool() const { return data != nullptr; }
  double get(int64_t c, double fallback) const { return data ? double(data[c * stride]) : fallback; }
  void set(int64_t c, double v) const { data[c * stride] = P(v); }
};

bool isHalf(ScalarType t) { return t == ScalarType::Float16 || t == ScalarType::BFloat16; }

// The dtype of weight/bias/running stats given the input: the input's own, or float32 for a
// 16-bit input whose parameters are float32 (PyTorch's mixed-type batch norm).
ScalarType paramType(const char* op, const Tensor& input,
                     std::initializer_list<const std::optional<Tensor>*> params) {
  std::optional<ScalarType> first;
  for (const auto* p : params)
    if (*p && (*p)->defined() && !first) first = (*p)->dtype();
  ScalarType pt = first.value_or(input.dtype());
  if (pt != input.dtype()) {
    KILN_CHECK(isHalf(input.dtype()) && pt == ScalarType::Float32, op, ": expected ",
               "parameters and running statistics of dtype ", scalarTypeName(input.dtype()),
               " (as the input), but got ", scalarTypeName(pt));
  }
  for (const auto* p : params) {
    KILN_CHECK(!*p || !(*p)->defined() || (*p)->dtype() == pt, op,
               ": expected all parameters and running statistics to have dtype ",
               scalarTypeName(pt), ", but got ", scalarTypeName((*p)->dtype()));
  }
  return pt;
}

void checkPerChannel(const char* name, const std::optional<Tensor>& t, int64_t c) {
  if (!t || !t->defined()) return;
  KILN_CHECK(t->numel() == c && t->dim() == 1, name, " should contain ", c, " elements not ",
             t->numel());
}

void checkInput(const char* op, const Tensor& input) {
  KILN_CHECK(input.dim() >= 2, op, ": expected an input of at least 2 dims (N, C, ...), but got ",
             input.shapeString());
  if (!isFloatingType(input.dtype())) throwUnsupportedDtype("batch_norm", input.dtype());
}

std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

} // namespace

std::tuple<Tensor, Tensor, Tensor>
nativeBatchNorm(const Tensor& input, const std::optional<Tensor>& weight,
                const std::optional<Tensor>& bias, const std::optional<Tensor>& runningMean,
                const std::optional<Tensor>& runningVar, bool training, double momentum,
                double eps) {
  checkInput("native_batch_norm", input);
  const ChannelLayout l = channelLayout(input);
  checkPerChannel("weight", weight, l.c);
  checkPerChannel("bias", bias, l.c);
  checkPerChannel("running_mean", runningMean, l.c);
  checkPerChannel("running_var", runningVar, l.c);
  KILN_CHECK(training || (runningMean && runningVar),
             "native_batch_norm: running_mean and running_var must be given in evaluation mode ",
             "(training=False)");
  const ScalarType pt = paramType("native_batch_norm", input, {&weight, &bias, &runningMean, &runningVar});
  // save_mean / save_invstd have the parameters' dtype, as in PyTorch.
  const ScalarType statType = pt;
  // A channels-last input gives a channels-last output, as PyTorch's kernel (and the
  // decomposition, whose pointwise ops keep the input's layout); computed in NCHW and copied.
  const bool channelsLast = isChannelsLast(input);
  Tensor out = channelsLast ? Tensor::emptyStrided(input.sizes(), channelsLastStrides(input.sizes()),
                                                   input.dtype(), input.device())
                            : Tensor::empty(input.sizes(), input.dtype(), input.device());
  Tensor saveMean = Tensor::empty({training ? l.c : 0}, statType, input.device());
  Tensor saveInvstd = Tensor::empty({training ? l.c : 0}, statType, input.device());
  if (out.isMeta()) return {out, saveMean, saveInvstd};
  Tensor x = cpu::contiguousInput(input);
  Tensor plain = channelsLast ? Tensor::empty(input.sizes(), input.dtype(), input.device()) : out;
  KILN_DISPATCH_FLOATING(input.dtype(), "batch_norm", [&]<typename T>() {
    using A = opmath_t<T>;
    auto run = [&]<typename P>() {
      Param<P> w(weight), b(bias), rm(runningMean), rv(runningVar);
      using S = P;
      S* sm = training ? saveMean.data<S>() : nullptr;
      S* si = training ? saveInvstd.data<S>() : nullptr;
      const T* xp = x.data<T>();
      T* op = plain.data<T>();
      const int64_t count = l.count();
      forEachChannel(l, [&](int64_t c) {
        double mean, invstd;
        if (training) {
          mean = count ? channelSum<A>(xp, l, c, [](auto v) { return v; }) / double(count) : 0.0;
          const A m = A(mean);
          double var = count ? channelSum<A>(xp, l, c, [m](auto v) { return (v - m) * (v - m); }) /
                                   double(count)
                             : 0.0;
          invstd = 1.0 / std::sqrt(var + eps);
          sm[c] = S(mean);
          si[c] = S(invstd);
          if (rm) rm.set(c, momentum * mean + (1 - momentum) * rm.get(c, 0));
          if (rv) {
            double unbiased = count > 1 ? var * double(count) / double(count - 1) : NAN;
            rv.set(c, momentum * unbiased + (1 - momentum) * rv.get(c, 1));
          }
        } else {
          mean = rm.get(c, 0);
          invstd = 1.0 / std::sqrt(rv.get(c, 1) + eps);
        }
        const A scale = A(invstd * w.get(c, 1.0));
        const A shift = A(b.get(c, 0.0) - mean * invstd * w.get(c, 1.0));
        for (int64_t n = 0; n < l.n; ++n) {
          const T* src = xp + (n * l.c + c) * l.s;
          T* dst = op + (n * l.c + c) * l.s;
          for (int64_t i = 0; i < l.s; ++i) dst[i] = T(A(src[i]) * scale + shift);
        }
      });
    };
    if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
      if (pt == ScalarType::Float32) return run.template operator()<float>();
    }
    run.template operator()<T>();
  });
  if (channelsLast) ops::copy_(out, plain, false);
  // The running statistics are written without a version bump, as PyTorch's kernel does: the
  // autograd node saves them (read by the eval-mode backward), and a bump would make the
  // backward of an earlier training-mode call refuse them ("modified by an inplace operation")
  // as soon as the layer ran twice before backward (two views in contrastive learning).
  return {out, saveMean, saveInvstd};
}

std::tuple<Tensor, Tensor, Tensor>
nativeBatchNormBackward(const Tensor& gradOut, const Tensor& input, const std::optional<Tensor>& weight,
                        const std::optional<Tensor>& runningMean, const std::optional<Tensor>& runningVar,
                        const std::optional<Tensor>& saveMean, const std::optional<Tensor>& saveInvstd,
                        bool train, double eps, IntArrayRef outputMask) {
  checkInput("native_batch_norm_backward", input);
  KILN_CHECK(outputMask.size() == 3, "native_batch_norm_backward: output_mask must have 3 entries, got ",
             outputMask.size());
  KILN_CHECK(DimVector(gradOut.sizes()) == DimVector(input.sizes()),
             "native_batch_norm_backward: expected grad_out of size ", input.shapeString(),
             ", but got ", gradOut.shapeString());
  KILN_CHECK(gradOut.dtype() == input.dtype(), "native_batch_norm_backward: expected grad_out of dtype ",
             scalarTypeName(input.dtype()), ", but got ", scalarTypeName(gradOut.dtype()));
  const ChannelLayout l = channelLayout(input);
  checkPerChannel("weight", weight, l.c);
  const std::optional<Tensor>& meanSource = train ? saveMean : runningMean;
  const std::optional<Tensor>& varSource = train ? saveInvstd : runningVar;
  KILN_CHECK(meanSource && meanSource->defined() && varSource && varSource->defined(),
             "native_batch_norm_backward: ", train ? "save_mean and save_invstd" : "running_mean and running_var",
             " must be given when train=", train ? "True" : "False");
  checkPerChannel(train ? "save_mean" : "running_mean", meanSource, l.c);
  checkPerChannel(train ? "save_invstd" : "running_var", varSource, l.c);
  const ScalarType pt = paramType("native_batch_norm_backward", input, {&weight});
  const ScalarType statType = meanSource->dtype();
  KILN_CHECK(varSource->dtype() == statType && (statType == input.dtype() || statType == ScalarType::Float32),
             "native_batch_norm_backward: unexpected statistics dtypes ", scalarTypeName(statType),
             " and ", scalarTypeName(varSource->dtype()), " for an input of dtype ",
             scalarTypeName(input.dtype()));
  Tensor gi = outputMask[0] ? Tensor::empty(input.sizes(), input.dtype(), input.device()) : Tensor();
  Tensor gw = outputMask[1] ? Tensor::empty({l.c}, pt, input.device()) : Tensor();
  Tensor gb = outputMask[2] ? Tensor::empty({l.c}, pt, input.device()) : Tensor();
  if (input.isMeta() || gradOut.isMeta()) return {gi, gw, gb};
  Tensor x = cpu::contiguousInput(input), go = cpu::contiguousInput(gradOut);
  KILN_DISPATCH_FLOATING(input.dtype(), "batch_norm_backward", [&]<typename T>() {
    using A = opmath_t<T>;
    auto run = [&]<typename P, typename S>() {
      Param<P> w(weight), gwp(opt(gw)), gbp(opt(gb));
      Param<S> meanP(meanSource), varP(varSource);
      const T* xp = x.data<T>();
      const T* gp = go.data<T>();
      T* gip = gi.defined() ? gi.data<T>() : nullptr;
      const int64_t count = l.count();
      forEachChannel(l, [&](int64_t c) {
        const double mean = meanP.get(c, 0);
        const double invstd = train ? varP.get(c, 0) : 1.0 / std::sqrt(varP.get(c, 0) + eps);
        const double wc = w.get(c, 1.0);
        double sumGrad = 0, dot = 0;
        if (gwp || gbp || (gip && train)) {
          const A m = A(mean);
          for (int64_t n = 0; n < l.n; ++n) {
            const T* xs = xp + (n * l.c + c) * l.s;
            const T* gs = gp + (n * l.c + c) * l.s;
            A partSum, partDot;
            cpu::laneSumDot<A>(xs, gs, l.s, [m](auto v) { return v - m; }, partSum, partDot);
            sumGrad += double(partSum);
            dot += double(partDot);
          }
        }
        if (gwp) gwp.set(c, dot * invstd);
        if (gbp) gbp.set(c, sumGrad);
        if (!gip) return;
        // grad_input = k * go - proj * x + shift (train), k * go (eval).
        const double k = invstd * wc;
        double proj = 0, shift = 0;
        if (train && count > 0) {
          proj = k * invstd * invstd * dot / double(count);
          shift = proj * mean - k * sumGrad / double(count);
        }
        const A ka = A(k), pa = A(proj), sa = A(shift);
        for (int64_t n = 0; n < l.n; ++n) {
          const T* xs = xp + (n * l.c + c) * l.s;
          const T* gs = gp + (n * l.c + c) * l.s;
          T* dst = gip + (n * l.c + c) * l.s;
          for (int64_t i = 0; i < l.s; ++i) dst[i] = T(ka * A(gs[i]) - pa * A(xs[i]) + sa);
        }
      });
    };
    constexpr bool wide = std::is_same_v<T, float> || std::is_same_v<T, double>;
    if constexpr (wide) {
      run.template operator()<T, T>();
    } else {
      auto withParams = [&]<typename S>() {
        if (pt == ScalarType::Float32) return run.template operator()<float, S>();
        run.template operator()<T, S>();
      };
      if (statType == ScalarType::Float32) return withParams.template operator()<float>();
      withParams.template operator()<T>();
    }
  });
  return {gi, gw, gb};
}

} // namespace kiln::kernels
