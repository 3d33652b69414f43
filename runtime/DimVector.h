// A small vector of int64 (sizes, strides) with inline room for 6 dims: no heap on the hot path.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace kiln {

// A non-owning view of int64s (sizes, strides, dims). Built from a braced list it lives until
// the end of the full expression, which is all a function argument needs.
class IntArrayRef {
public:
  constexpr IntArrayRef() = default;
  constexpr IntArrayRef(const int64_t* data, size_t size) : data_(data), size_(size) {}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
  IntArrayRef(std::initializer_list<int64_t> l) : data_(l.begin()), size_(l.size()) {}
#pragma GCC diagnostic pop
  IntArrayRef(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}
  IntArrayRef(std::span<const int64_t> s) : data_(s.data()), size_(s.size()) {}
  constexpr const int64_t* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const int64_t* begin() const { return data_; }
  constexpr const int64_t* end() const { return data_ + size_; }
  constexpr int64_t operator[](size_t i) const { return data_[i]; }
  int64_t front() const { return data_[0]; }
  int64_t back() const { return data_[size_ - 1]; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }
  bool operator==(const IntArrayRef& o) const { return std::equal(begin(), end(), o.begin(), o.end()); }

private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

class DimVector {
public:
  static constexpr size_t kInline = 6;
  DimVector() = default;
  explicit DimVector(size_t n, int64_t v = 0) { assign(n, v); }
  DimVector(IntArrayRef r) { assign(r.begin(), r.end()); }
  DimVector(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }
  DimVector(const DimVector& o) { assign(o.begin(), o.end()); }
  DimVector& operator=(const DimVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  ~DimVector() {
    if (heap_) delete[] heap_;
  }

  template <typename It> void assign(It first, It last) {
    resize(size_t(std::distance(first, last)));
    std::copy(first, last, data());
  }
  void assign(size_t n, int64_t v) {
    resize(n);
    std::fill(data(), data() + n, v);
  }
  void resize(size_t n, int64_t v = 0) {
    if (n > capacity()) grow(n);
    for (size_t i = size_; i < n; ++i) data()[i] = v;
    size_ = n;
  }
  void push_back(int64_t v) {
    if (size_ == capacity()) grow(size_ * 2);
    data()[size_++] = v;
  }
  void insert(size_t pos, int64_t v) {
    push_back(0);
    std::copy_backward(begin() + pos, end() - 1, end());
    data()[pos] = v;
  }
  void erase(size_t pos) {
    std::copy(begin() + pos + 1, end(), begin() + pos);
    --size_;
  }
  void clear() { size_ = 0; }

  int64_t* data() { return heap_ ? heap_ : inline_; }
  const int64_t* data() const { return heap_ ? heap_ : inline_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + size_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t back() const { return data()[size_ - 1]; }
  operator IntArrayRef() const { return IntArrayRef(data(), size_); }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }
  bool operator==(const DimVector& o) const { return std::equal(begin(), end(), o.begin(), o.end()); }

private:
  size_t capacity() const { return heap_ ? heapCapacity_ : kInline; }
  void grow(size_t n) {
    n = std::max(n, kInline * 2);
    int64_t* fresh = new int64_t[n];
    std::copy(begin(), end(), fresh);
    if (heap_) delete[] heap_;
    heap_ = fresh;
    heapCapacity_ = n;
  }

  int64_t inline_[kInline];
  int64_t* heap_ = nullptr;
  size_t heapCapacity_ = 0;
  size_t size_ = 0;
};

} // namespace kiln
