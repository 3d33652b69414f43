// Dispatch keys in priority order, key sets, and the thread-local include/exclude sets that
// implement modes (no_grad, tracing) without touching tensors.
#pragma once
#include <cstdint>

namespace kiln {

// Highest priority first. Backend keys come last; exactly one applies per call. CUDA ranks
// above CPU so that a call mixing the two (copy_ between devices) reaches the CUDA kernel.
enum class DispatchKey : uint8_t {
  Autocast,       // casts the arguments of some ops to another dtype (kiln.autocast)
  Tracing,        // records ops into a graph (AOT tracing, export); below Autocast, so a
                  // graph traced under autocast holds its casts as ops

  Autograd,       // records the backward graph
  Functionalize,  // rewrites mutations and views
  CompositeImplicit, // alias slot: kernels written in other ops, valid for every backend
  Meta,
  CUDA,
  CPU,
  NumKeys,
};
constexpr int kNumDispatchKeys = static_cast<int>(DispatchKey::NumKeys);

const char* dispatchKeyName(DispatchKey k);
inline bool isBackendKey(DispatchKey k) { return k >= DispatchKey::Meta; }

class DispatchKeySet {
public:
  constexpr DispatchKeySet() = default;
  constexpr explicit DispatchKeySet(DispatchKey k) : bits_(uint16_t(1u << int(k))) {}
  constexpr static DispatchKeySet fromBits(uint16_t b) {
    DispatchKeySet s;
    s.bits_ = b;
    return s;
  }
  constexpr DispatchKeySet operator|(DispatchKeySet o) const { return fromBits(bits_ | o.bits_); }
  constexpr DispatchKeySet operator-(DispatchKeySet o) const { return fromBits(bits_ & ~o.bits_); }
  constexpr bool has(DispatchKey k) const { return bits_ & (1u << int(k)); }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr uint16_t bits() const { return bits_; }
  // Keys strictly lower in priority than k.
  constexpr DispatchKeySet below(DispatchKey k) const {
    return fromBits(uint16_t(bits_ & ~((2u << int(k)) - 1)));
  }
  // The highest-priority key in the set (NumKeys when empty).
  DispatchKey highest() const {
    return bits_ ? DispatchKey(__builtin_ctz(bits_)) : DispatchKey::NumKeys;
  }

private:
  uint16_t bits_ = 0;
};

struct LocalDispatchKeySet {
  DispatchKeySet included;
  DispatchKeySet excluded;
};
LocalDispatchKeySet& localDispatchKeySet();

// RAII: keys added to / removed from every dispatch on this thread while alive.
class IncludeDispatchKeyGuard {
public:
  explicit IncludeDispatchKeyGuard(DispatchKey k);
  ~IncludeDispatchKeyGuard();

private:
  DispatchKeySet saved_;
};
class ExcludeDispatchKeyGuard {
public:
  explicit ExcludeDispatchKeyGuard(DispatchKey k);
  ~ExcludeDispatchKeyGuard();

private:
  DispatchKeySet saved_;
};

// Grad mode (torch.is_grad_enabled) and inference mode, per thread.
struct GradMode {
  static bool isEnabled();
  static void setEnabled(bool on);
};
struct InferenceMode {
  static bool isEnabled();
  static void setEnabled(bool on);
};

} // namespace kiln
