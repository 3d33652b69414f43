// Fused optimizer updates: one pass over a parameter and its state instead of the nine
// pointwise ops of torch.optim.Adam's single-tensor step (the three to five of SGD's). Each element is rounded as those ops
// round it (FMA where PyTorch's kernels use one, a rounding to the parameter dtype after each
// op), so the results are torch's bit for bit; this file is compiled with -ffp-contract=off so
// that the compiler adds no FMA of its own.
#include <cstdint>
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
  // (wd is add's alpha: rounded to T first, as torch's add kernel rounds it.)
  const M decay = M(s.decay), wd = M(T(M(s.weightDecay))), w = M(s.lerpWeight), b2 = M(s.beta2),
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

// run(begin, count) over the whole tensor in runs of kRun elements, in parallel when it is
// large.
template <typename Run>
void inRuns(int64_t n, const Run& run) {
  constexpr int64_t kRun = 16384;
  const int64_t runs = (n + kRun - 1) / kRun;
  const int threads = omp_in_parallel() || n < 2 * kRun ? 1 : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t r = 0; r < runs; ++r) run(r * kRun, std::min(kRun, n - r * kRun));
}

template <typename T, WeightDecay Decay, bool AmsGrad>
void adamLoop(T* param, const T* grad, T* expAvg, T* expAvgSq, T* maxExpAvgSq, int64_t n,
              const AdamScalars& s) {
  inRuns(n, [&](int64_t b, int64_t count) {
    adamRun<T, Decay, AmsGrad>(param + b, grad + b, expAvg + b, expAvgSq + b,
                               AmsGrad ? maxExpAvgSq + b : nullptr, count, s);
  });
}

// torch.optim.SGD's single-tensor step for one run of elements:
//   g = grad (negated: maximize); g = g + weight_decay * param
//   buf = g (first step) or buf * momentum + (1 - dampening) * g; g = g + momentum * buf
//   (nesterov) or buf; param = param - lr * g
// each op rounded to T, the additions with a factor FMAs as torch's add(alpha=) kernels.
struct SgdScalars {
  double lr, momentum, dampening, weightDecay;
  bool maximize;
};

template <typename T, bool Decay, bool Momentum, bool Nesterov, bool First>
void sgdRun(T* __restrict param, const T* __restrict gradIn, T* __restrict buf, int64_t n,
            const SgdScalars& s) {
  using M = opmath_t<T>;
  // The factors of add(alpha=) are rounded to T first, as torch's add kernels round alpha (a
  // 16-bit float tensor's); mul_'s scalar is not.
  auto alpha = [](double v) { return M(T(M(v))); };
  const M negLr = alpha(-s.lr), wd = alpha(s.weightDecay), momentum = M(s.momentum),
          momentumAlpha = alpha(s.momentum), keep = alpha(1 - s.dampening);
  const M gradSign = s.maximize ? M(-1) : M(1); // * -1 is negation, exactly
  for (int64_t i = 0; i < n; ++i) {
    M g = M(gradIn[i]) * gradSign;
    M p = M(param[i]);
    if constexpr (Decay) g = M(T(std::fma(wd, p, g)));        // grad.add(param, alpha=wd)
    if constexpr (Momentum) {
      M b = g;                                                // clone(grad)
      if constexpr (!First) {
        b = M(T(M(buf[i]) * momentum));                       // buf.mul_(momentum)
        b = M(T(std::fma(keep, g, b)));                       // .add_(grad, alpha=1 - dampening)
      }
      buf[i] = T(b);
      if constexpr (Nesterov)
        g = M(T(std::fma(momentumAlpha, b, g)));              // grad.add(buf, alpha=momentum)
      else
        g = b;
    }
    param[i] = T(std::fma(negLr, g, p));                      // param.add_(grad, alpha=-lr)
  }
}

void checkOperand(const char* op, const Tensor& self, const Tensor& t, const char* name) {
  KILN_CHECK(t.sizes() == self.sizes() && t.dtype() == self.dtype() && t.device() == self.device(),
             op, ": expected ", name, " of the parameter's shape ", self.shapeString(),
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
  checkOperand("_fused_adam_", self, grad, "grad");
  checkOperand("_fused_adam_", self, exp_avg, "exp_avg");
  checkOperand("_fused_adam_", self, exp_avg_sq, "exp_avg_sq");
  if (max_exp_avg_sq) checkOperand("_fused_adam_", self, *max_exp_avg_sq, "max_exp_avg_sq");
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

Tensor fusedSgd_(const Tensor& self, const Tensor& grad, const std::optional<Tensor>& momentum_buffer,
                 double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                 bool maximize, bool first_step) {
  checkOperand("_fused_sgd_", self, grad, "grad");
  KILN_CHECK(momentum == 0 || momentum_buffer,
             "_fused_sgd_: momentum ", momentum, " needs a momentum_buffer");
  if (momentum_buffer) checkOperand("_fused_sgd_", self, *momentum_buffer, "momentum_buffer");
  if (!isFloatingType(self.dtype())) cpu::throwNotImplemented("_fused_sgd_", self.dtype());
  if (self.isMeta()) return self;
  SgdScalars s{lr, momentum, dampening, weight_decay, maximize};
  Operand p(self);
  Tensor g = grad.isContiguous() ? grad : ops::contiguous(grad);
  std::optional<Operand> buf;
  if (momentum != 0) buf.emplace(*momentum_buffer);
  KILN_DISPATCH_FLOATING(self.dtype(), "_fused_sgd_", [&]<typename T>() {
    T* b = buf ? buf->data.data<T>() : nullptr;
    auto run = [&]<bool Decay, bool Momentum, bool Nesterov, bool First>() {
      inRuns(self.numel(), [&](int64_t at, int64_t count) {
        sgdRun<T, Decay, Momentum, Nesterov, First>(p.data.data<T>() + at, g.data<T>() + at,
                                                    b ? b + at : nullptr, count, s);
      });
    };
    auto withMomentum = [&]<bool Decay>() {
      if (momentum == 0) run.template operator()<Decay, false, false, false>();
      else if (first_step && nesterov) run.template operator()<Decay, true, true, true>();
      else if (first_step) run.template operator()<Decay, true, false, true>();
      else if (nesterov) run.template operator()<Decay, true, true, false>();
      else run.template operator()<Decay, true, false, false>();
    };
    if (weight_decay != 0) withMomentum.template operator()<true>();
    else withMomentum.template operator()<false>();
  });
  p.finish();
  if (buf) buf->finish();
  return self;
}

} // namespace kiln::kernels
