// Connectionist temporal classification loss (Graves et al. 2006) and its gradient, as PyTorch
// computes them on the CPU: the forward variables alpha and the backward variables beta in log
// space over the extended target l' (blanks around and between the labels), per sample.
#include <cstdint>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/cpu/RowLoops.h"

namespace kiln::kernels {

namespace {

constexpr int64_t kParallelGrain = 1 << 14;

// The checked shape of one call: log_probs (T, N, C), where each sample's labels start in
// the int64 copy of targets, and the width of log_alpha's last dim (2 * maxTarget + 1).
struct CtcProblem {
  int64_t T = 0, N = 0, C = 0;
  std::vector<int64_t> inputLengths, targetLengths, targetStart;
  int64_t targetStride = 1; // between one sample's consecutive labels
  int64_t maxTarget = 0;
};

// lengths given as a tensor: any integral dtype, one value per sample.
std::vector<int64_t> readLengths(const Tensor& lengths, const char* name) {
  KILN_CHECK(isIntegralType(lengths.dtype(), false), "ctc_loss: ", name,
             " must be an integral tensor, got kiln.", scalarTypeShortName(lengths.dtype()),
             "Tensor");
  KILN_CHECK(lengths.dim() <= 1, "ctc_loss: ", name, " must be 1-d, got shape ",
             lengths.shapeString());
  Tensor l = ops::contiguous(ops::_to_copy(lengths, ScalarType::Int64, std::nullopt));
  const int64_t* p = l.data<int64_t>();
  return std::vector<int64_t>(p, p + l.numel());
}

// Checks what the shapes and dtypes alone decide; `lengthsKnown` is false when the lengths are
// tensors of a meta call (their values are checked when the op runs on data). log_alpha is as
// wide as the longest target (PyTorch's), except with tensor lengths and padded targets, where
// it is as wide as the padding: a meta call cannot read the lengths, and the op must give the
// shape its meta call gives.
CtcProblem describe(const Tensor& logProbs, const Tensor& targets, std::vector<int64_t> inputLengths,
                    std::vector<int64_t> targetLengths, int64_t blank, bool lengthsKnown,
                    bool tensorLengths) {
  KILN_CHECK(logProbs.dim() == 3, "ctc_loss: log_probs must be 3-d (T, N, C), got shape ",
             logProbs.shapeString());
  KILN_CHECK(logProbs.dtype() == ScalarType::Float32 || logProbs.dtype() == ScalarType::Float64,
             "ctc_loss: log_probs must be float32 or float64, got kiln.",
             scalarTypeShortName(logProbs.dtype()), "Tensor");
  KILN_CHECK(targets.dtype() == ScalarType::Int64 || targets.dtype() == ScalarType::Int32,
             "Expected tensor for argument #2 'targets' to have one of the following scalar types: "
             "Int, Long; but got kiln.",
             scalarTypeShortName(targets.dtype()), "Tensor instead (while checking arguments for ctc_loss)");
  KILN_CHECK(targets.dim() == 1 || targets.dim() == 2,
             "ctc_loss: targets must be 1-d (concatenated) or 2-d (N, S), got shape ",
             targets.shapeString());
  KILN_CHECK(logProbs.numel() > 0, "log_probs tensor must not be empty (shape ", logProbs.shapeString(), ")");
  CtcProblem p;
  p.T = logProbs.size(0);
  p.N = logProbs.size(1);
  p.C = logProbs.size(2);
  KILN_CHECK(blank >= 0 && blank < p.C, "blank must be in label range (blank = ", blank,
             ", C = ", p.C, ")");
  if (targets.dim() == 2) {
    KILN_CHECK(targets.size(0) == p.N, "ctc_loss: targets of shape ", targets.shapeString(),
               " for a batch of ", p.N, " (log_probs ", logProbs.shapeString(), ")");
    p.maxTarget = targets.size(1);
  }
  if (!lengthsKnown) {
    KILN_CHECK(targets.dim() == 2,
               "ctc_loss: with concatenated (1-d) targets and tensor target_lengths, log_alpha's "
               "width (the longest target) is data-dependent; pass target_lengths as a list or "
               "tuple, or targets padded to (N, S)");
    return p;
  }
  KILN_CHECK(int64_t(inputLengths.size()) == p.N, "ctc_loss: input_lengths must have ", p.N,
             " values (the batch size of log_probs ", logProbs.shapeString(), "), got ",
             inputLengths.size());
  KILN_CHECK(int64_t(targetLengths.size()) == p.N, "ctc_loss: target_lengths must have ", p.N,
             " values (the batch size of log_probs ", logProbs.shapeString(), "), got ",
             targetLengths.size());
  int64_t offset = 0;
  for (int64_t b = 0; b < p.N; ++b) {
    int64_t in = inputLengths[size_t(b)], tl = targetLengths[size_t(b)];
    KILN_CHECK(in >= 0 && in <= p.T, "ctc_loss: input_lengths[", b, "] = ", in,
               " is outside [0, ", p.T, "] (log_probs ", logProbs.shapeString(), ")");
    KILN_CHECK(tl >= 0, "ctc_loss: target_lengths[", b, "] = ", tl, " is negative");
    if (targets.dim() == 2) {
      KILN_CHECK(tl <= targets.size(1), "Expected tensor to have size at least ", tl,
                 " at dimension 1, but got size ", targets.size(1),
                 " for argument #2 'targets' (while checking arguments for ctc_loss)");
      p.targetStart.push_back(b * targets.size(1));
    } else {
      p.targetStart.push_back(offset);
    }
    offset += tl;
  }
  if (targets.dim() == 1 || !tensorLengths)
    p.maxTarget = targetLengths.empty() ? 0 : *std::max_element(targetLengths.begin(), targetLengths.end());
  if (targets.dim() == 1)
    KILN_CHECK(offset == targets.size(0), "Expected tensor to have size ", offset,
               " at dimension 0, but got size ", targets.size(0),
               " for argument #2 'targets' (while checking arguments for ctc_loss): concatenated "
               "targets hold sum(target_lengths) labels");
  p.inputLengths = std::move(inputLengths);
  p.targetLengths = std::move(targetLengths);
  return p;
}

// The labels as contiguous int64, each checked to be a class index in [0, C) (PyTorch's CPU
// kernel reads them unchecked).
Tensor readTargets(const Tensor& targets, const CtcProblem& p) {
  Tensor t = ops::contiguous(ops::_to_copy(targets, ScalarType::Int64, std::nullopt));
  const int64_t* data = t.data<int64_t>();
  for (int64_t b = 0; b < p.N; ++b)
    for (int64_t i = 0; i < p.targetLengths[size_t(b)]; ++i) {
      int64_t label = data[p.targetStart[size_t(b)] + i];
      KILN_CHECK_INDEX(label >= 0 && label < p.C, "ctc_loss: target ", label, " (sample ", b,
                       ", position ", i, ") is not a class index in [0, ", p.C, ")");
    }
  return t;
}

// l'(s): blank at even positions, the (s / 2)-th label at odd ones.
struct ExtendedTarget {
  const int64_t* labels;
  int64_t blank;
  int64_t operator()(int64_t s) const { return s % 2 == 0 ? blank : labels[s / 2]; }
};

// log(exp(a) + exp(b) + exp(c)) as PyTorch writes it (a max of -inf counts as 0).
template <typename T> T logSumExp3(T a, T b, T c) {
  constexpr T negInf = -std::numeric_limits<T>::infinity();
  T m = std::max(a, std::max(b, c));
  if (m == negInf) m = 0;
  return std::log(std::exp(a - m) + std::exp(b - m) + std::exp(c - m)) + m;
}

template <typename T>
void forward(const CtcProblem& p, const T* lp, const int64_t* targets, int64_t blank, T* nll, T* alpha) {
  constexpr T negInf = -std::numeric_limits<T>::infinity();
  const int64_t W = 2 * p.maxTarget + 1;
  const int64_t work = p.T * W * p.N;
#pragma omp parallel for schedule(static) if (work > kParallelGrain && !omp_in_parallel())
  for (int64_t b = 0; b < p.N; ++b) {
    T* la = alpha + b * p.T * W;
    std::fill(la, la + p.T * W, negInf);
    const int64_t inLen = p.inputLengths[size_t(b)], L = p.targetLengths[size_t(b)];
    if (inLen == 0) { // no frames: only the empty target has probability 1
      nll[b] = -(L == 0 ? T(0) : negInf);
      continue;
    }
    ExtendedTarget l{targets + p.targetStart[size_t(b)], blank};
    auto logProb = [&](int64_t t, int64_t c) { return lp[(t * p.N + b) * p.C + c]; };
    la[0] = logProb(0, blank);
    if (L > 0) la[1] = logProb(0, l(1));
    for (int64_t t = 1; t < inLen; ++t) {
      const T* prev = la + (t - 1) * W;
      T* cur = la + t * W;
      for (int64_t s = 0; s <= 2 * L; ++s) {
        T a2 = s > 0 ? prev[s - 1] : negInf;
        T a3 = s > 1 && l(s - 2) != l(s) ? prev[s - 2] : negInf;
        cur[s] = logSumExp3(prev[s], a2, a3) + logProb(t, l(s));
      }
    }
    const T* last = la + (inLen - 1) * W;
    T l1 = last[2 * L], l2 = L > 0 ? last[2 * L - 1] : negInf;
    nll[b] = -logSumExp3(l1, l2, negInf);
  }
}

// d(nll * grad) / d log_probs: exp(lp) - exp(log(sum over s with l'(s) = c of alpha * beta) +
// nll - lp), times the sample's incoming gradient; zero past the input length, and for the whole
// sample when zero_infinity and its loss is infinite.
template <typename T>
void backward(const CtcProblem& p, const T* gradOut, const T* lp, const int64_t* targets, const T* nll,
              const T* alpha, int64_t blank, bool zeroInfinity, T* out) {
  constexpr T negInf = -std::numeric_limits<T>::infinity();
  const int64_t W = 2 * p.maxTarget + 1;
  const int64_t work = p.T * W * p.N;
#pragma omp parallel for schedule(static) if (work > kParallelGrain && !omp_in_parallel())
  for (int64_t b = 0; b < p.N; ++b) {
    auto at = [&](int64_t t, int64_t c) { return (t * p.N + b) * p.C + c; };
    const int64_t inLen = p.inputLengths[size_t(b)], L = p.targetLengths[size_t(b)];
    for (int64_t t = 0; t < p.T; ++t)
      for (int64_t c = 0; c < p.C; ++c)
        out[at(t, c)] = 0;
    if (inLen == 0 || (zeroInfinity && nll[b] == std::numeric_limits<T>::infinity())) continue;
    ExtendedTarget l{targets + p.targetStart[size_t(b)], blank};
    const T* la = alpha + b * p.T * W;
    const int64_t S = 2 * L + 1;
    std::vector<T> beta(size_t(inLen * S), negInf), collected(size_t(inLen * p.C), negInf);
    auto logAdd = [](T& acc, T v) {
      if (acc == negInf) {
        acc = v;
      } else {
        T m = std::max(acc, v);
        acc = std::log(std::exp(acc - m) + std::exp(v - m)) + m;
      }
    };
    const int64_t tl = inLen - 1;
    beta[size_t(tl * S + 2 * L)] = lp[at(tl, blank)];
    collected[size_t(tl * p.C + blank)] = la[tl * W + 2 * L] + beta[size_t(tl * S + 2 * L)];
    if (L > 0) {
      int64_t c = l(2 * L - 1);
      beta[size_t(tl * S + 2 * L - 1)] = lp[at(tl, c)];
      collected[size_t(tl * p.C + c)] = la[tl * W + 2 * L - 1] + beta[size_t(tl * S + 2 * L - 1)];
    }
    for (int64_t t = inLen - 2; t >= 0; --t) {
      const T* next = beta.data() + (t + 1) * S;
      T* cur = beta.data() + t * S;
      for (int64_t s = 2 * L; s >= 0; --s) {
        T b2 = s < 2 * L ? next[s + 1] : negInf;
        T b3 = s < 2 * L - 1 && l(s + 2) != l(s) ? next[s + 2] : negInf;
        cur[s] = logSumExp3(next[s], b2, b3) + lp[at(t, l(s))];
        logAdd(collected[size_t(t * p.C + l(s))], la[t * W + s] + cur[s]);
      }
    }
    const T g = gradOut[b], loss = nll[b];
    for (int64_t t = 0; t < inLen; ++t)
      for (int64_t c = 0; c < p.C; ++c) {
        T x = lp[at(t, c)];
        out[at(t, c)] = (std::exp(x) - std::exp(collected[size_t(t * p.C + c)] + loss - x)) * g;
      }
  }
}

std::tuple<Tensor, Tensor> ctcForward(const Tensor& logProbs, const Tensor& targets, const CtcProblem& p,
                                      int64_t blank, bool known) {
  Tensor nll = Tensor::empty({p.N}, logProbs.dtype(), logProbs.device());
  Tensor alpha = Tensor::empty({p.N, p.T, 2 * p.maxTarget + 1}, logProbs.dtype(), logProbs.device());
  if (logProbs.isMeta() || !known) return {nll, alpha};
  Tensor labels = readTargets(targets, p);
  Tensor lp = ops::contiguous(logProbs);
  KILN_DISPATCH_FLOATING(logProbs.dtype(), "ctc_loss", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      forward<T>(p, lp.data<T>(), labels.data<int64_t>(), blank, nll.data<T>(), alpha.data<T>());
  });
  return {nll, alpha};
}

Tensor ctcBackward(const Tensor& grad, const Tensor& logProbs, const Tensor& targets, const CtcProblem& p,
                   const Tensor& nll, const Tensor& alpha, int64_t blank, bool zeroInfinity, bool known) {
  KILN_CHECK(grad.numel() == p.N && nll.numel() == p.N, "_ctc_loss_backward: grad of shape ",
             grad.shapeString(), " and neg_log_likelihood of shape ", nll.shapeString(),
             " for a batch of ", p.N);
  KILN_CHECK(alpha.dim() == 3 && alpha.size(0) == p.N && alpha.size(1) == p.T &&
                 alpha.size(2) == 2 * p.maxTarget + 1,
             "_ctc_loss_backward: log_alpha of shape ", alpha.shapeString(), " does not match log_probs ",
             logProbs.shapeString(), " and targets ", targets.shapeString());
  for (const Tensor* t : {&grad, &nll, &alpha})
    KILN_CHECK(t->dtype() == logProbs.dtype(), "_ctc_loss_backward: expected kiln.",
               scalarTypeShortName(logProbs.dtype()), "Tensor arguments, got kiln.",
               scalarTypeShortName(t->dtype()), "Tensor");
  Tensor out = Tensor::empty(logProbs.sizes(), logProbs.dtype(), logProbs.device());
  if (logProbs.isMeta() || !known) return out;
  Tensor labels = readTargets(targets, p);
  Tensor lp = ops::contiguous(logProbs), g = ops::contiguous(grad), n = ops::contiguous(nll),
         a = ops::contiguous(alpha);
  KILN_DISPATCH_FLOATING(logProbs.dtype(), "ctc_loss_backward", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      backward<T>(p, g.data<T>(), lp.data<T>(), labels.data<int64_t>(), n.data<T>(), a.data<T>(), blank,
                  zeroInfinity, out.data<T>());
  });
  return out;
}

// Tensor lengths are read on data; a meta call sizes log_alpha from the padded targets.
CtcProblem describeTensorLengths(const Tensor& logProbs, const Tensor& targets, const Tensor& inputLengths,
                                 const Tensor& targetLengths, int64_t blank, bool& known) {
  known = !(logProbs.isMeta() || inputLengths.isMeta() || targetLengths.isMeta());
  if (!known) return describe(logProbs, targets, {}, {}, blank, false, true);
  return describe(logProbs, targets, readLengths(inputLengths, "input_lengths"),
                  readLengths(targetLengths, "target_lengths"), blank, true, true);
}

} // namespace

std::tuple<Tensor, Tensor> ctcLoss(const Tensor& log_probs, const Tensor& targets, IntArrayRef input_lengths,
                                   IntArrayRef target_lengths, int64_t blank, bool zero_infinity) {
  (void)zero_infinity; // the forward's masking is nn.functional.ctc_loss's; the backward's is below
  CtcProblem p = describe(log_probs, targets, std::vector<int64_t>(input_lengths.begin(), input_lengths.end()),
                          std::vector<int64_t>(target_lengths.begin(), target_lengths.end()), blank, true, false);
  return ctcForward(log_probs, targets, p, blank, true);
}

std::tuple<Tensor, Tensor> ctcLossTensor(const Tensor& log_probs, const Tensor& targets,
                                         const Tensor& input_lengths, const Tensor& target_lengths,
                                         int64_t blank, bool zero_infinity) {
  (void)zero_infinity;
  bool known = false;
  CtcProblem p = describeTensorLengths(log_probs, targets, input_lengths, target_lengths, blank, known);
  return ctcForward(log_probs, targets, p, blank, known);
}

Tensor ctcLossBackward(const Tensor& grad, const Tensor& log_probs, const Tensor& targets,
                       IntArrayRef input_lengths, IntArrayRef target_lengths, const Tensor& neg_log_likelihood,
                       const Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  CtcProblem p = describe(log_probs, targets, std::vector<int64_t>(input_lengths.begin(), input_lengths.end()),
                          std::vector<int64_t>(target_lengths.begin(), target_lengths.end()), blank, true, false);
  return ctcBackward(grad, log_probs, targets, p, neg_log_likelihood, log_alpha, blank, zero_infinity, true);
}

Tensor ctcLossBackwardTensor(const Tensor& grad, const Tensor& log_probs, const Tensor& targets,
                             const Tensor& input_lengths, const Tensor& target_lengths,
                             const Tensor& neg_log_likelihood, const Tensor& log_alpha, int64_t blank,
                             bool zero_infinity) {
  bool known = false;
  CtcProblem p = describeTensorLengths(log_probs, targets, input_lengths, target_lengths, blank, known);
  return ctcBackward(grad, log_probs, targets, p, neg_log_likelihood, log_alpha, blank, zero_infinity, known);
}

} // namespace kiln::kernels
