// Fused optimizer updates: one pass over a parameter and its state instead of the nine
// pointwise ops of torch.optim.Adam's single-tensor step. Each element is rounded as those ops
// round it (FMA where PyTorch's kernels use one, a rounding to the parameter dtype after each
// op), so the results are torch's bit for bit; this file is compiled with -ffp-contract=off so
// that the compiler adds no FMA of its own.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/cpu/PointwiseOps.h"

namespace kiln::kernels {

namespace {

enum class WeightDecay { None, Coupled, Decoupled };

// The numbers torch.optim computes in Python (double) before its tensor ops, from the step
// after its increment.
struct AdamScalars {
  double decay;         // 1 - lr * weight_decay: the decoupled decay factor
  double weightDecay;   // coupled: grad += weight_decay * param
  double lerpWeight;    // 1 - beta1
  double beta2, oneMinusBeta2;
  double biasCorrection2Sqrt;
  double eps;
  double negStepSize;   // -lr / (1 - beta1 ** step)
  WeightDecay mode;
  bool maximize;
};

AdamScalars adamScalars(double lr, double beta1, double beta2, double weightDecay, double eps,
                        double step, bool maximize, bool decoupled) {
  AdamScalars s;
  s.decay = 1 - lr * weightDecay;
  s.weightDecay = weightDecay;
  s.lerpWeight = 1 - beta1;
  s.beta2 = beta2;
  s.oneMinusBeta2 = 1 - beta2;
  s.biasCorrection2Sqrt = std::pow(1 - std::pow(beta2, step), 0.5);
  s.eps = eps;
  s.negStepSize = -(lr / (1 - std::pow(beta1, step)));
  s.mode = weightDecay == 0 ? WeightDecay::None
           : decoupled       ? WeightDecay::Decoupled
                             : WeightDecay::Coupled;
  s.maximize = maximize;
  return s;
}

// One contiguous run of elements. The weight-decay mode and amsgrad are template parameters
// and maximize a multiplication by -1: GCC does not vectorize the loop with them as selects.
template <typename T, WeightDecay Decay, bool AmsGrad>
void adamRun(T* __restrict param, const T* __restrict gradIn, T* __restrict expAvg,
             T* __restrict expAvgSq, T* __restrict maxExpAvgSq, int64_t n, const AdamScalars& s) {
  using M = opmath_t<T>;
  const M decay = M(s.decay), wd = M(s.weightDecay), w = M(s.lerpWeight), b2 = M(s.beta2),
          v2 = M(s.oneMinusBeta2), bc2 = M(s.biasCorrection2Sqrt), eps = M(s.eps),
          value = M(s.negStepSize);
  const bool lowWeight = std::abs(w) < M(0.5);
  const M gradSign = s.maximize ? M(-1) : M(1); // * -1 is negation, exactly
  const M oneMinusW = M(1) - w;
  for (int64_t i = 0; i < n; ++i) {
    M g = M(gradIn[i]);
    g = g * gradSign;                                    // maximize: -grad
    M p = M(param[i]);
    if constexpr (Decay == WeightDecay::Decoupled)
      p = M(T(p * decay));                               // param.mul_(1 - lr * wd)
    if constexpr (Decay == WeightDecay::Coupled)
      g = M(T(std::fma(wd, p, g)));                      // grad.add(param, alpha=wd)
    M m = M(expAvg[i]);                                  // exp_avg.lerp_(grad, 1 - beta1)
    M d = g - m;
    m = M(T(lowWeight ? std::fma(w, d, m) : std::fma(-d, oneMinusW, g)));
    M v = M(T(M(expAvgSq[i]) * b2));                     // exp_avg_sq.mul_(beta2)
    v = M(T(std::fma(v2 * g, g, v)));                    // .addcmul_(grad, grad, 1 - beta2)
    M second = v;
    if constexpr (AmsGrad) {                             // torch.maximum(max, exp_avg_sq)
      M old = M(maxExpAvgSq[i]);
      second = (old != old || old > v) ? old : v;
      maxExpAvgSq[i] = T(second);
    }
    M denom = M(T(std::sqrt(second)));                   // .sqrt()
    denom = M(T(denom / bc2));                           // / bias_correction2_sqrt
    denom = M(T(denom + eps));                           // .add_(eps)
    param[i] = T(p + value * m / denom);                 // param.addcdiv_(exp_avg, denom, -lr/bc1)
    expAvg[i] = T(m);
    expAvgSq[i] = T(v);
  }
}

// The whole tensor in runs of kRun elements, in parallel when it is large.
template <typename T, WeightDecay Decay, bool AmsGrad>
void adamLoop(T* param, const T* grad, T* expAvg, T* expAvgSq, T* maxExpAvgSq, int64_t n,
              const AdamScalars& s) {
  constexpr int64_t kRun = 16384;
  const int64_t runs = (n + kRun - 1) / kRun;
  const int threads = omp_in_parallel() || n < 2 * kRun ? 1 : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t r = 0; r < runs; ++r) {
    const int64_t b = r * kRun;
    adamRun<T, Decay, AmsGrad>(param + b, grad + b, expAvg + b, expAvgSq + b,
                               AmsGrad ? maxExpAvgSq + b : nullptr, std::min(kRun, n - b), s);
  }
}

void checkAdamOperand(const Tensor& self, const Tensor& t, const char* name) {
  KILN_CHECK(t.sizes() == self.sizes() && t.dtype() == self.dtype() && t.device() == self.device(),
             "_fused_adam_: expected ", name, " of the parameter's shape ", self.shapeString(),
             ", dtype ", scalarTypeShortName(self.dtype()), " and device ", self.device().str(),
             ", got shape ", t.shapeString(), ", dtype ", scalarTypeShortName(t.dtype()), " on ",
             t.device().str());
}

// A contiguous tensor to update in place: `t` itself, or a copy written back by finish().
struct Operand {
  Tensor original, data;
  explicit Operand(const Tensor& t)
      : original(t), data(t.isContiguous() ? t : ops::contiguous(t)) {}
  void finish() const {
    if (original.isContiguous())
      original.bumpVersion();
    else
      ops::copy_(original, data);
  }
};

} // namespace

Tensor fusedAdam_(const Tensor& self, const Tensor& grad, const Tensor& exp_avg,
                  const Tensor& exp_avg_sq, const std::optional<Tensor>& max_exp_avg_sq,
                  const Tensor& state_step, double lr, double beta1, double beta2,
                  double weight_decay, double eps, bool maximize, bool decoupled_weight_decay) {
  checkAdamOperand(self, grad, "grad");
  checkAdamOperand(self, exp_avg, "exp_avg");
  checkAdamOperand(self, exp_avg_sq, "exp_avg_sq");
  if (max_exp_avg_sq) checkAdamOperand(self, *max_exp_avg_sq, "max_exp_avg_sq");
  KILN_CHECK(state_step.numel() == 1 && state_step.dtype() == ScalarType::Float32,
             "_fused_adam_: expected state_step to be a one-element float32 tensor, got shape ",
             state_step.shapeString(), " and dtype ", scalarTypeShortName(state_step.dtype()));
  if (!isFloatingType(self.dtype())) cpu::throwNotImplemented("_fused_adam_", self.dtype());
  if (self.isMeta()) return self;
  // step_t += 1, then step = step_t.item(): the step as float32 counts it.
  float& step = *state_step.data<float>();
  step += 1.0f;
  state_step.bumpVersion();
  AdamScalars s = adamScalars(lr, beta1, beta2, weight_decay, eps, double(step), maximize,
                              decoupled_weight_decay);
  Operand p(self), m(exp_avg), v(exp_avg_sq);
  Tensor g = grad.isContiguous() ? grad : ops::contiguous(grad);
  std::optional<Operand> mx;
  if (max_exp_avg_sq) mx.emplace(*max_exp_avg_sq);
  KILN_DISPATCH_FLOATING(self.dtype(), "_fused_adam_", [&]<typename T>() {
    T* max = mx ? mx->data.data<T>() : nullptr;
    auto run = [&]<WeightDecay Decay>() {
      if (max)
        adamLoop<T, Decay, true>(p.data.data<T>(), g.data<T>(), m.data.data<T>(),
                                 v.data.data<T>(), max, self.numel(), s);
      else
        adamLoop<T, Decay, false>(p.data.data<T>(), g.data<T>(), m.data.data<T>(),
                                  v.data.data<T>(), nullptr, self.numel(), s);
    };
    if (s.mode == WeightDecay::None) run.template operator()<WeightDecay::None>();
    if (s.mode == WeightDecay::Coupled) run.template operator()<WeightDecay::Coupled>();
    if (s.mode == WeightDecay::Decoupled) run.template operator()<WeightDecay::Decoupled>();
  });
  p.finish();
  m.finish();
  v.finish();
  if (mx) mx->finish();
  return self;
}

} // namespace kiln::kernels
