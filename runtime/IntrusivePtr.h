// An intrusive refcounted pointer: one allocation per object, atomic counts.
#pragma once
#include <atomic>
#include <utility>

namespace kiln {

class RefCounted {
public:
  virtual ~RefCounted() = default;
  void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() const {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  int refCount() const { return refs_.load(std::memory_order_relaxed); }

private:
  mutable std::atomic<int> refs_{0};
};

template <typename T> class IntrusivePtr {
public:
  IntrusivePtr() = default;
  IntrusivePtr(T* p) : p_(p) {
    if (p_) p_->retain();
  }
  IntrusivePtr(const IntrusivePtr& o) : p_(o.p_) {
    if (p_) p_->retain();
  }
  IntrusivePtr(IntrusivePtr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <typename U> IntrusivePtr(const IntrusivePtr<U>& o) : IntrusivePtr(o.get()) {}
  ~IntrusivePtr() {
    if (p_) p_->release();
  }
  IntrusivePtr& operator=(IntrusivePtr o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  bool operator==(const IntrusivePtr& o) const { return p_ == o.p_; }

private:
  T* p_ = nullptr;
};

template <typename T, typename... Args> IntrusivePtr<T> makeIntrusive(Args&&... args) {
  return IntrusivePtr<T>(new T(std::forward<Args>(args)...));
}

} // namespace kiln
