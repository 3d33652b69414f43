// Sorting and order statistics along a dim: sort (stable), topk, kthvalue, median, mode. Each row
// along dim is read into a buffer of (value, index) pairs and ordered there; rows run in
// parallel. NaN orders above every number (PyTorch's order). Ties in topk and kthvalue resolve
// as torch's CPU algorithms resolve them (replayed), in median by the lower index first.
#include <cstdint>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/cpu/RowLoops.h"

namespace kiln::kernels {

namespace {

template <typename T> struct Entry {
  T value;
  int64_t index;
};

template <typename T> bool isNan(T v) {
  if constexpr (std::is_integral_v<T>)
    return false;
  else
    return std::isnan(static_cast<opmath_t<T>>(v));
}

// a < b with NaN above every number (NaNs equal to each other).
template <typename T> bool lessNanLast(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return a < b;
  } else {
    using M = opmath_t<T>;
    M x = M(a), y = M(b);
    return x < y || (!std::isnan(x) && std::isnan(y));
  }
}

// A strict total order on entries: by value (ascending or descending), then by index.
template <typename T> struct EntryOrder {
  bool descending;
  bool operator()(const Entry<T>& a, const Entry<T>& b) const {
    if (descending ? lessNanLast(b.value, a.value) : lessNanLast(a.value, b.value)) return true;
    if (descending ? lessNanLast(a.value, b.value) : lessNanLast(b.value, a.value)) return false;
    return a.index < b.index;
  }
};

// Rows of a contiguous tensor along dim: row r starts at rowBase(r) and steps by inner.
struct Rows {
  cpu::RowLayout layout;
  int64_t count() const { return layout.outer * layout.inner; }
  int64_t base(int64_t r, int64_t n) const {
    return r / layout.inner * n * layout.inner + r % layout.inner;
  }
};

// Calls f(row, buffer) for every row, in parallel when the work is large; each thread has its
// own buffer of n entries.
template <typename T, typename F> void forEachRow(const Rows& rows, const F& f) {
  int64_t count = rows.count(), n = rows.layout.n;
  if (count == 0) return;
  int threads = omp_in_parallel() || count * n < 32768 ? 1 : omp_get_max_threads();
  threads = int(std::min<int64_t>(threads, count));
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::vector<Entry<T>> buffer(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < count; ++r)
      f(r, buffer);
  }
}

template <typename T> void readRow(const T* in, int64_t base, int64_t n, int64_t stride,
                                   std::vector<Entry<T>>& buffer) {
  for (int64_t j = 0; j < n; ++j)
    buffer[size_t(j)] = {in[base + j * stride], j};
}

struct Prepared {
  Tensor input; // contiguous
  int64_t dim;
  Rows rows;
};

Prepared prepare(const Tensor& self, int64_t dim) {
  Prepared p;
  p.dim = wrapDim(dim, self.dim());
  p.input = cpu::contiguousInput(self);
  p.rows.layout = cpu::rowLayout(self.sizes(), p.dim);
  return p;
}

// The shape of a reduction along dim, keeping it as size `keep` (or dropping it).
DimVector reducedShape(IntArrayRef sizes, int64_t dim, bool keepdim, int64_t keep = 1) {
  DimVector s(sizes);
  if (s.empty()) return s;
  if (keepdim) s[size_t(dim)] = keep;
  else s.erase(size_t(dim));
  return s;
}

// --- radix sort of long rows ---
// Each value maps to an unsigned key whose order is the sort order (NaN above everything, -0 equal
// to 0); an LSD radix sort of (key, index) by bytes is stable and linear in the row length.

template <typename T> using RadixKey = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;

template <typename T> RadixKey<T> radixKey(T v) {
  using K = RadixKey<T>;
  constexpr K top = K(1) << (sizeof(K) * 8 - 1);
  if constexpr (std::is_same_v<T, bool>) {
    return K(v);
  } else if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_unsigned_v<T>) return K(v);
    else return K(std::make_signed_t<K>(v)) ^ top;
  } else {
    using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
    F f = F(v);
    if (std::isnan(f)) return ~K(0);
    if (f == 0) f = 0; // -0 sorts with 0
    K bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits & top ? ~bits : bits | top;
  }
}

// Sorts keys (with their indices) in place; scratch holds n of each.
template <typename K>
void radixSort(std::vector<K>& keys, std::vector<int64_t>& index, std::vector<K>& keyScratch,
               std::vector<int64_t>& indexScratch) {
  const size_t n = keys.size();
  for (size_t shift = 0; shift < sizeof(K) * 8; shift += 8) {
    size_t count[257] = {};
    for (size_t i = 0; i < n; ++i)
      ++count[((keys[i] >> shift) & 0xFF) + 1];
    if (std::any_of(count + 1, count + 257, [n](size_t c) { return c == n; })) continue;
    for (size_t b = 1; b < 257; ++b)
      count[b] += count[b - 1];
    for (size_t i = 0; i < n; ++i) {
      size_t at = count[(keys[i] >> shift) & 0xFF]++;
      keyScratch[at] = keys[i];
      indexScratch[at] = index[i];
    }
    keys.swap(keyScratch);
    index.swap(indexScratch);
  }
}

// Rows at least this long are radix sorted (below it std::sort on entries is as fast).
constexpr int64_t kRadixRow = 512;

template <typename T>
void radixSortRows(const T* in, T* values, int64_t* indices, const Rows& rows, bool descending) {
  using K = RadixKey<T>;
  const int64_t count = rows.count(), n = rows.layout.n, stride = rows.layout.inner;
  int threads = omp_in_parallel() || count * n < 32768 ? 1 : omp_get_max_threads();
  threads = int(std::min<int64_t>(threads, count));
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::vector<K> keys(static_cast<size_t>(n)), keyScratch(static_cast<size_t>(n));
    std::vector<int64_t> order(static_cast<size_t>(n)), orderScratch(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < count; ++r) {
      int64_t base = rows.base(r, n);
      for (int64_t j = 0; j < n; ++j) {
        K k = radixKey(in[base + j * stride]);
        keys[size_t(j)] = descending ? K(~k) : k;
        order[size_t(j)] = j;
      }
      radixSort(keys, order, keyScratch, orderScratch);
      for (int64_t j = 0; j < n; ++j) {
        int64_t from = order[size_t(j)];
        values[base + j * stride] = in[base + from * stride];
        indices[base + j * stride] = from;
      }
    }
  }
}

} // namespace

// --- sort ---

std::tuple<Tensor, Tensor> sortStable(const Tensor& self, std::optional<bool> stable, int64_t dim,
                                      bool descending) {
  (void)stable; // every sort is stable
  Prepared p = prepare(self, dim);
  Tensor values = Tensor::empty(self.sizes(), self.dtype(), self.device());
  Tensor indices = Tensor::empty(self.sizes(), ScalarType::Int64, self.device());
  if (self.isMeta() || self.numel() == 0) return {values, indices};
  const int64_t n = p.rows.layout.n, stride = p.rows.layout.inner;
  KILN_DISPATCH_ALL(self.dtype(), "sort", [&]<typename T>() {
    const T* in = p.input.data<T>();
    T* v = values.data<T>();
    int64_t* ix = indices.data<int64_t>();
    if (n >= kRadixRow) return radixSortRows(in, v, ix, p.rows, descending);
    forEachRow<T>(p.rows, [&](int64_t r, std::vector<Entry<T>>& buf) {
      int64_t base = p.rows.base(r, n);
      readRow(in, base, n, stride, buf);
      // Entries start in index order, so the index tie-break makes std::sort stable.
      std::sort(buf.begin(), buf.end(), EntryOrder<T>{descending});
      for (int64_t j = 0; j < n; ++j) {
        v[base + j * stride] = buf[size_t(j)].value;
        ix[base + j * stride] = buf[size_t(j)].index;
      }
    });
  });
  return {values, indices};
}

std::tuple<Tensor, Tensor> sort(const Tensor& self, int64_t dim, bool descending) {
  return sortStable(self, false, dim, descending);
}

// --- topk ---

namespace {

// By value only, NaN first when largest (last otherwise): torch's topk comparator.
template <typename T> struct ValueOrder {
  bool largest;
  bool operator()(const Entry<T>& a, const Entry<T>& b) const {
    return largest ? lessNanLast(b.value, a.value) : lessNanLast(a.value, b.value);
  }
};

// The k first entries of a row, as torch's topk_impl_loop (TopKImpl.h) selects them: the same
// libstdc++ calls on the row's (value, index) pairs in row order, so that equal values come out
// with torch's indices: partial_sort when k * 64 <= n, else nth_element and (when sorted) a sort
// of the k - 1 first.
template <typename T>
void selectRow(const T* in, int64_t base, int64_t n, int64_t stride, int64_t k, bool largest,
               bool sorted, std::vector<Entry<T>>& buf) {
  if (k == 0) return;
  readRow(in, base, n, stride, buf);
  auto end = buf.begin() + n;
  ValueOrder<T> order{largest};
  if (k * 64 <= n) {
    std::partial_sort(buf.begin(), buf.begin() + k, end, order);
  } else {
    std::nth_element(buf.begin(), buf.begin() + k - 1, end, order);
    if (sorted) std::sort(buf.begin(), buf.begin() + k - 1, order);
  }
}

// torch's kthvalue selection (Sorting.cpp's quick_select_template, after Sedgewick 1978):
// quickselect with a median-of-three pivot swapping (value, index) pairs, NaN above numbers.
// Replayed step by step, so that among equal values the entry at k is torch's.
template <typename T> void quickSelect(std::vector<Entry<T>>& a, int64_t n, int64_t k) {
  auto gt = [](T x, T y) { return lessNanLast(y, x); };
  auto at = [&a](int64_t i) -> Entry<T>& { return a[size_t(i)]; };
  int64_t lo = 0, hi = n - 1;
  while (hi > lo) {
    if (hi == lo + 1) {
      if (gt(at(lo).value, at(hi).value)) std::swap(at(lo), at(hi));
      return;
    }
    std::swap(at((lo + hi) >> 1), at(lo + 1));
    if (gt(at(lo + 1).value, at(hi).value)) std::swap(at(lo + 1), at(hi));
    if (gt(at(lo).value, at(hi).value)) std::swap(at(lo), at(hi));
    if (gt(at(lo + 1).value, at(lo).value)) std::swap(at(lo + 1), at(lo));
    int64_t i = lo + 1, j = hi;
    T pivot = at(lo).value;
    while (true) {
      do ++i;
      while (gt(pivot, at(i).value));
      do --j;
      while (gt(at(j).value, pivot));
      if (j < i) break;
      std::swap(at(i), at(j));
    }
    std::swap(at(lo), at(j));
    if (j <= k) lo = i;
    if (j >= k) hi = j - 1;
  }
}

} // namespace

std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim, bool largest,
                                bool sorted) {
  Prepared p = prepare(self, dim);
  const int64_t n = p.rows.layout.n;
  KILN_CHECK(k >= 0 && k <= n, "selected index k out of range");
  KILN_CHECK(self.dtype() != ScalarType::Bool, "topk does not support bool dtypes on CPU");
  DimVector shape = reducedShape(self.sizes(), p.dim, true, k);
  Tensor values = Tensor::empty(shape, self.dtype(), self.device());
  Tensor indices = Tensor::empty(shape, ScalarType::Int64, self.device());
  if (self.isMeta() || values.numel() == 0) return {values, indices};
  // A 0-d tensor has nothing to select among: PyTorch returns it for k = 0 as for k = 1.
  if (self.dim() == 0) return {ops::clone(self), ops::zeros({}, ScalarType::Int64, self.device())};
  const int64_t stride = p.rows.layout.inner;
  KILN_DISPATCH_NUMERIC(self.dtype(), "topk", [&]<typename T>() {
    const T* in = p.input.data<T>();
    T* v = values.data<T>();
    int64_t* ix = indices.data<int64_t>();
    forEachRow<T>(p.rows, [&](int64_t r, std::vector<Entry<T>>& buf) {
      selectRow(in, p.rows.base(r, n), n, stride, k, largest, sorted, buf);
      int64_t out = p.rows.base(r, k);
      for (int64_t j = 0; j < k; ++j) {
        v[out + j * stride] = buf[size_t(j)].value;
        ix[out + j * stride] = buf[size_t(j)].index;
      }
    });
  });
  return {values, indices};
}

// --- kthvalue / median / mode: one value per row ---

namespace {

enum class RowStatistic { Kth, Median, Mode };

std::tuple<Tensor, Tensor> rowStatistic(const char* op, const Tensor& self, int64_t dim,
                                        bool keepdim, RowStatistic what, int64_t k) {
  Prepared p = prepare(self, dim);
  const int64_t n = p.rows.layout.n;
  if (what == RowStatistic::Kth)
    KILN_CHECK(k >= 1 && k <= n, "kthvalue(): selected number k out of range for dimension ",
               p.dim);
  else
    KILN_CHECK_INDEX(n > 0, op, "(): Expected reduction dim ", p.dim, " to have non-zero size.");
  if (self.dtype() == ScalarType::Bool && what != RowStatistic::Mode)
    throw NotImplementedError(strCat("\"", op, "_cpu\" not implemented for 'Bool'"));
  DimVector shape = reducedShape(self.sizes(), p.dim, keepdim);
  Tensor values = Tensor::empty(shape, self.dtype(), self.device());
  Tensor indices = Tensor::empty(shape, ScalarType::Int64, self.device());
  if (self.isMeta() || values.numel() == 0) return {values, indices};
  const int64_t stride = p.rows.layout.inner;
  KILN_DISPATCH_ALL(self.dtype(), op, [&]<typename T>() {
    const T* in = p.input.data<T>();
    T* v = values.data<T>();
    int64_t* ix = indices.data<int64_t>();
    EntryOrder<T> order{false};
    forEachRow<T>(p.rows, [&](int64_t r, std::vector<Entry<T>>& buf) {
      int64_t base = p.rows.base(r, n);
      readRow(in, base, n, stride, buf);
      Entry<T> pick;
      if (what == RowStatistic::Mode) {
        // The most frequent value (the smallest among equally frequent ones), at its last index.
        std::sort(buf.begin(), buf.end(), order);
        int64_t best = 0, bestEnd = 0;
        for (int64_t s = 0; s < n;) {
          int64_t e = s + 1;
          while (e < n && !lessNanLast(buf[size_t(s)].value, buf[size_t(e)].value))
            ++e; // sorted: equal to buf[s] unless greater
          if (e - s > best) {
            best = e - s;
            bestEnd = e - 1;
          }
          s = e;
        }
        pick = buf[size_t(bestEnd)];
      } else {
        int64_t at = what == RowStatistic::Kth ? k - 1 : (n - 1) / 2;
        auto firstNan = std::find_if(buf.begin(), buf.begin() + n,
                                     [](const Entry<T>& e) { return isNan(e.value); });
        // median propagates NaN (the first one); kthvalue orders NaN last.
        if (what == RowStatistic::Median && firstNan != buf.begin() + n) {
          pick = *firstNan;
        } else if (what == RowStatistic::Kth) {
          quickSelect(buf, n, at);
          pick = buf[size_t(at)];
        } else {
          std::nth_element(buf.begin(), buf.begin() + at, buf.begin() + n, order);
          pick = buf[size_t(at)];
        }
      }
      int64_t out = r; // the output is [outer, inner] in row order
      v[out] = pick.value;
      ix[out] = pick.index;
    });
  });
  return {values, indices};
}

} // namespace

std::tuple<Tensor, Tensor> kthvalue(const Tensor& self, int64_t k, int64_t dim, bool keepdim) {
  return rowStatistic("kthvalue", self, dim, keepdim, RowStatistic::Kth, k);
}

std::tuple<Tensor, Tensor> medianDim(const Tensor& self, int64_t dim, bool keepdim) {
  return rowStatistic("median", self, dim, keepdim, RowStatistic::Median, 0);
}

std::tuple<Tensor, Tensor> mode(const Tensor& self, int64_t dim, bool keepdim) {
  return rowStatistic("mode", self, dim, keepdim, RowStatistic::Mode, 0);
}

Tensor median(const Tensor& self) {
  if (self.dtype() == ScalarType::Bool)
    throw NotImplementedError("\"median_cpu\" not implemented for 'Bool'");
  if (self.numel() == 0) {
    Tensor out = Tensor::empty({}, self.dtype(), self.device());
    if (!self.isMeta()) ops::fill_(out, Scalar(std::nan("")));
    return out;
  }
  Tensor flat = ops::reshape(self, {self.numel()});
  return std::get<0>(medianDim(flat, 0, false));
}

// --- unique (by sorting) ---

std::tuple<Tensor, Tensor, Tensor> unique2(const Tensor& self, bool sorted, bool returnInverse,
                                           bool returnCounts) {
  (void)sorted; // the result is always sorted, one of the orders PyTorch allows
  KILN_CHECK(!self.isMeta(), "unique(): the result's shape is data-dependent; it cannot run on "
             "the meta device");
  Tensor flat = ops::contiguous(ops::reshape(self, {self.numel()}));
  const int64_t n = flat.numel();
  Tensor inverse = Tensor::empty(returnInverse ? self.sizes() : IntArrayRef({0}),
                                 ScalarType::Int64, self.device());
  Tensor values, counts;
  KILN_DISPATCH_ALL(self.dtype(), "unique", [&]<typename T>() {
    std::vector<Entry<T>> buf(static_cast<size_t>(n));
    readRow(flat.data<T>(), 0, n, 1, buf);
    std::sort(buf.begin(), buf.end(), EntryOrder<T>{false});
    // Runs of equal values (NaNs are never equal, so each is its own run, as in PyTorch).
    std::vector<int64_t> runStart;
    for (int64_t i = 0; i < n; ++i) {
      bool same = i > 0 && !isNan(buf[size_t(i)].value) &&
                  !lessNanLast(buf[size_t(i - 1)].value, buf[size_t(i)].value);
      if (!same) runStart.push_back(i);
    }
    int64_t m = int64_t(runStart.size());
    values = Tensor::empty({m}, self.dtype(), self.device());
    counts = Tensor::empty({returnCounts ? m : 0}, ScalarType::Int64, self.device());
    T* v = values.data<T>();
    for (int64_t r = 0; r < m; ++r) {
      int64_t end = r + 1 < m ? runStart[size_t(r + 1)] : n;
      v[r] = buf[size_t(runStart[size_t(r)])].value;
      if (returnCounts) counts.data<int64_t>()[r] = end - runStart[size_t(r)];
      if (returnInverse)
        for (int64_t i = runStart[size_t(r)]; i < end; ++i)
          inverse.data<int64_t>()[buf[size_t(i)].index] = r;
    }
  });
  return {values, inverse, counts};
}

} // namespace kiln::kernels
