// The Autocast dispatch key: per-thread state, PyTorch's op lists, and the fallback that casts.
#include "runtime/Autocast.h"

#include <initializer_list>
#include <unordered_map>
#include <vector>

#include "generated/Ops.h"
#include "runtime/Dispatcher.h"
#include "runtime/Error.h"
#include "runtime/autograd/AutogradMeta.h"

namespace kiln::autocast {

namespace {

// What autocast does to an op's arguments (PyTorch's cast policies).
enum class Policy : uint8_t {
  None,           // nothing: the op runs on its arguments as they are
  LowerPrecision, // eligible tensors cast to the autocast dtype (bfloat16 / float16)
  Fp32,           // eligible tensors cast to float32
  Fp32SetOptDtype, // an unset `dtype=` becomes float32 (softmax, sum: accumulate in float32)
  Promote,        // eligible tensors cast to the widest dtype among them and the autocast dtype
  Banned,         // refused: unsafe in reduced precision (binary_cross_entropy on CUDA)
};

constexpr int kCpu = 0, kCuda = 1;

struct State {
  bool enabled[2] = {false, false};
  ScalarType dtype[2] = {ScalarType::BFloat16, ScalarType::Float16};
  bool cacheEnabled = true;
  int nesting = 0;
};

State& state() {
  thread_local State s;
  return s;
}

int slot(DeviceType d) { return d == DeviceType::CUDA ? kCuda : kCpu; }

// The Autocast key is in the thread's included set while autocast is on for any device type.
void updateKey() {
  const State& s = state();
  DispatchKeySet key(DispatchKey::Autocast);
  LocalDispatchKeySet& local = localDispatchKeySet();
  local.included = (s.enabled[kCpu] || s.enabled[kCuda]) ? local.included | key : local.included - key;
}

// PyTorch's lists (aten/src/ATen/autocast_mode.cpp; by op name, every overload). kiln's own
// names join them where kiln spells an op differently (convolution for conv1d/2d/3d).
const std::initializer_list<const char*> kCpuLowerPrecision = {
    "conv1d", "conv2d", "conv3d", "convolution", "_convolution", "bmm", "mm", "linalg_vecdot",
    "baddbmm", "addmm", "_addmm_activation", "addbmm", "linear", "matmul", "conv_tbc",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "prelu",
    "scaled_dot_product_attention", "_native_multi_head_attention"};
const std::initializer_list<const char*> kCpuFp32 = {
    "avg_pool3d", "binary_cross_entropy", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d",
    "polar", "prod", "quantile", "nanquantile", "stft", "cdist", "trace", "view_as_complex",
    "cholesky", "cholesky_inverse", "cholesky_solve", "inverse", "lu_solve", "orgqr", "ormqr",
    "pinverse", "max_pool3d", "max_unpool2d", "max_unpool3d", "adaptive_avg_pool3d",
    "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d",
    "replication_pad3d", "mse_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
    "hinge_embedding_loss", "poisson_nll_loss", "smooth_l1_loss", "cross_entropy_loss", "l1_loss",
    "huber_loss", "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "ctc_loss", "kl_div", "multilabel_margin_loss",
    "binary_cross_entropy_with_logits", "fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2", "fft_fftn",
    "fft_ifftn", "fft_rfft", "fft_irfft", "fft_rfft2", "fft_irfft2", "fft_rfftn", "fft_irfftn",
    "fft_hfft", "fft_ihfft", "linalg_cond", "linalg_matrix_rank", "linalg_solve", "linalg_cholesky",
    "linalg_svdvals", "linalg_eigvals", "linalg_eigvalsh", "linalg_inv", "linalg_householder_product",
    "linalg_tensorinv", "linalg_tensorsolve", "geqrf", "_lu_with_info", "qr", "svd",
    "triangular_solve", "fractional_max_pool2d", "fractional_max_pool3d", "adaptive_max_pool3d",
    "linalg_qr", "linalg_cholesky_ex", "linalg_svd", "linalg_eig", "linalg_eigh", "linalg_lstsq",
    "linalg_inv_ex"};
const std::initializer_list<const char*> kCpuPromote = {"stack", "cat", "index_copy"};

const std::initializer_list<const char*> kCudaLowerPrecision = {
    "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "convolution", "prelu", "addmm", "addmv", "addr",
    "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm",
    "chain_matmul", "linalg_multi_dot", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    "scaled_dot_product_attention"};
const std::initializer_list<const char*> kCudaFp32 = {
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm",
    "group_norm", "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss",
    "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss", "multilabel_margin_loss",
    "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact1d",
    "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", "upsample_linear1d",
    "upsample_bilinear2d", "upsample_trilinear3d", "upsample_bicubic2d"};
const std::initializer_list<const char*> kCudaFp32SetOptDtype = {
    "prod", "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm",
    "linalg_matrix_norm", "sum"};
const std::initializer_list<const char*> kCudaPromote = {
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put",
    "tensordot", "scatter_add"};

// policies[device slot][op]
std::vector<Policy> gPolicies[2];

void fill(const Dispatcher& d, int device, std::initializer_list<const char*> names, Policy p) {
  for (const char* name : names)
    for (OpId op : d.overloadsOf(name))
      gPolicies[device][size_t(op)] = p;
}

FakeDeviceResolver gFakeDevice = nullptr;

// Autocast follows the device of the op's first tensor argument. A meta tensor (a fake of a
// traced program) stands for the tensor the tracer knows it for, else for a tensor of the
// device autocast is on for.
int slotOf(const Tensor& t) {
  DeviceType d = t.device().type;
  if (d == DeviceType::Meta) {
    DeviceType real;
    if (gFakeDevice && gFakeDevice(t, real) && real != DeviceType::Meta) return slot(real);
    return state().enabled[kCpu] ? kCpu : kCuda;
  }
  return slot(d);
}

template <typename F> void forEachTensor(const OpSchema& s, Stack& stack, F&& f) {
  for (size_t i = 0; i < s.args.size(); ++i) {
    Value& v = stack[i];
    if (v.isTensor()) {
      f(v.toTensor());
    } else if (v.isTensorList()) {
      for (Tensor& t : v.toTensorList()) f(t);
    } else if (v.isOptionalTensorList()) {
      std::vector<std::optional<Tensor>> ts = v.toOptionalTensorList();
      for (auto& t : ts)
        if (t) f(*t);
      v = Value(std::move(ts));
    }
  }
}

const Tensor* firstTensor(const OpSchema& s, const Stack& stack) {
  for (size_t i = 0; i < s.args.size(); ++i) {
    const Value& v = stack[i];
    if (v.isTensor() && v.toTensor().defined()) return &v.toTensor();
    if (v.isTensorList() && !v.toTensorList().empty()) return &v.toTensorList()[0];
  }
  return nullptr;
}

// PyTorch's is_eligible: a floating tensor of autocast's device other than float64 (doubles
// are never cast), and no Python number.
bool eligible(const Tensor& t, int device) {
  return t.defined() && !t.isWrappedNumber() && isFloatingType(t.dtype()) &&
         t.dtype() != ScalarType::Float64 && slotOf(t) == device;
}

// The cast cache, keyed by the source's impl; the entry holds the source too, so that the key
// cannot be reused by another tensor while the entry lives.
struct CachedCast {
  Tensor source, cast;
};
std::unordered_map<const void*, CachedCast>& cache() {
  thread_local std::unordered_map<const void*, CachedCast> c;
  return c;
}

bool cacheable(const Tensor& t, ScalarType to, int device) {
  const State& s = state();
  if (!s.cacheEnabled || to != s.dtype[device] || t.dtype() != ScalarType::Float32) return false;
  if (!t.requiresGrad() || t.isMeta() || !autograd::isLeaf(t)) return false;
  if (localDispatchKeySet().included.has(DispatchKey::Tracing)) return false; // fakes of a trace
  const autograd::AutogradMeta* m = autograd::metaIfAny(t);
  return !(m && m->isView());
}

Tensor castTo(const Tensor& t, ScalarType to, int device) {
  if (!eligible(t, device) || t.dtype() == to) return t;
  if (!cacheable(t, to, device)) return ops::_to_copy(t, to);
  auto& c = cache();
  auto it = c.find(t.impl());
  if (it != c.end()) return it->second.cast;
  Tensor cast = ops::_to_copy(t, to);
  c.emplace(t.impl(), CachedCast{t, cast});
  return cast;
}

void fallback(OpId op, DispatchKeySet remaining, Stack& stack) {
  const Dispatcher& d = Dispatcher::instance();
  const OpSchema& s = d.schema(op);
  const Tensor* first = firstTensor(s, stack);
  if (!first) return d.redispatch(op, remaining, stack);
  const int device = slotOf(*first);
  const State& st = state();
  Policy p = st.enabled[device] ? gPolicies[device][size_t(op)] : Policy::None;
  // Ops not listed run as they are, and the ops a composite one calls are autocast in turn.
  if (p == Policy::None) return d.redispatch(op, remaining, stack);
  // A listed op runs with autocast off inside (its own decomposition is not cast again).
  ExcludeDispatchKeyGuard off(DispatchKey::Autocast);
  switch (p) {
  case Policy::LowerPrecision:
  case Policy::Fp32: {
    ScalarType to = p == Policy::Fp32 ? ScalarType::Float32 : st.dtype[device];
    forEachTensor(s, stack, [&](Tensor& t) { t = castTo(t, to, device); });
    break;
  }
  case Policy::Promote: {
    ScalarType widest = st.dtype[device];
    forEachTensor(s, stack, [&](Tensor& t) {
      if (eligible(t, device)) widest = promoteTypes(widest, t.dtype());
    });
    forEachTensor(s, stack, [&](Tensor& t) { t = castTo(t, widest, device); });
    break;
  }
  case Policy::Fp32SetOptDtype:
    if (eligible(*first, device))
      for (size_t i = 0; i < s.args.size(); ++i)
        if (s.args[i].name == "dtype" && s.args[i].type == ArgType::ScalarType && stack[i].isNone())
          stack[i] = Value(ScalarType::Float32);
    break;
  case Policy::Banned:
    throw Error(strCat(
        "kiln.nn.functional.binary_cross_entropy and kiln.nn.BCELoss are unsafe to autocast.\n"
        "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
        "In this case, combine the two layers using kiln.nn.functional.binary_cross_entropy_with_logits\n"
        "or kiln.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
        "safe to autocast. (aten.", s.qualifiedName(), ")"));
  case Policy::None:
    break;
  }
  d.redispatch(op, remaining, stack);
}

} // namespace

bool isEnabled(DeviceType device) { return state().enabled[slot(device)]; }

void setFakeDeviceResolver(FakeDeviceResolver resolver) { gFakeDevice = resolver; }

void setEnabled(DeviceType device, bool on) {
  state().enabled[slot(device)] = on;
  updateKey();
}

ScalarType dtype(DeviceType device) { return state().dtype[slot(device)]; }

void setDtype(DeviceType device, ScalarType dtype) { state().dtype[slot(device)] = dtype; }

bool isCacheEnabled() { return state().cacheEnabled; }
void setCacheEnabled(bool on) { state().cacheEnabled = on; }
void clearCache() { cache().clear(); }
int incrementNesting() { return ++state().nesting; }
int decrementNesting() { return --state().nesting; }

uint32_t packedState() {
  const State& s = state();
  return uint32_t(s.enabled[kCpu]) | uint32_t(s.enabled[kCuda]) << 1 | uint32_t(s.cacheEnabled) << 2 |
         uint32_t(s.dtype[kCpu]) << 8 | uint32_t(s.dtype[kCuda]) << 16;
}

void setPackedState(uint32_t packed) {
  State& s = state();
  s.enabled[kCpu] = packed & 1;
  s.enabled[kCuda] = packed >> 1 & 1;
  s.cacheEnabled = packed >> 2 & 1;
  s.dtype[kCpu] = ScalarType(packed >> 8 & 0xff);
  s.dtype[kCuda] = ScalarType(packed >> 16 & 0xff);
  updateKey();
}

void registerAutocast(Dispatcher& d) {
  for (auto& p : gPolicies)
    p.assign(d.numOps(), Policy::None);
  fill(d, kCpu, kCpuLowerPrecision, Policy::LowerPrecision);
  fill(d, kCpu, kCpuFp32, Policy::Fp32);
  fill(d, kCpu, kCpuPromote, Policy::Promote);
  fill(d, kCuda, kCudaLowerPrecision, Policy::LowerPrecision);
  fill(d, kCuda, kCudaFp32, Policy::Fp32);
  fill(d, kCuda, kCudaFp32SetOptDtype, Policy::Fp32SetOptDtype);
  fill(d, kCuda, kCudaPromote, Policy::Promote);
  fill(d, kCuda, {"binary_cross_entropy"}, Policy::Banned);
  d.registerFallback(DispatchKey::Autocast, fallback);
}

} // namespace kiln::autocast
