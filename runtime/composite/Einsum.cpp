// einsum, written in permute/unsqueeze/reshape/mul/sum/bmm (differentiable through them).
// Every operand is aligned to one label order (the output's labels, then the summed ones), a
// label an operand lacks being a size-1 dim; operands are then multiplied left to right, each
// summed label contracted (through bmm) as soon as no later operand uses it. A label repeated
// within an operand takes its diagonal.
#include <cstdint>
#include <algorithm>
#include <array>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"

namespace kiln::kernels {

namespace {

constexpr int kLetters = 52; // A-Z are labels 0-25, a-z 26-51; ellipsis dims come after
constexpr int kEllipsis = -1;

int labelOf(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' : c - 'a' + 26; }

char letterOf(int label) { return char(label < 26 ? 'A' + label : 'a' + label - 26); }

// One side of the equation: the labels of each term in order (kEllipsis for "...").
std::vector<std::vector<int>> parseTerms(const std::string& eq, size_t begin, size_t end,
                                         bool output) {
  std::vector<std::vector<int>> terms(1);
  for (size_t i = begin; i < end; ++i) {
    char c = eq[i];
    int operand = int(terms.size()) - 1;
    if (c == ' ') continue;
    if (c == ',' && !output) {
      terms.emplace_back();
    } else if (c == '.') {
      bool triple = i + 2 < end && eq[i + 1] == '.' && eq[i + 2] == '.';
      std::string where = output ? "in the output" : strCat("for operand ", operand);
      KILN_CHECK(triple, "einsum(): found '.' ", where, " that is not part of any ellipsis");
      for (int l : terms.back())
        KILN_CHECK(l != kEllipsis, "einsum(): found '.' ", where,
                   " for which an ellipsis was already found");
      terms.back().push_back(kEllipsis);
      i += 2;
    } else {
      KILN_CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'),
                 "einsum(): invalid subscript given at index ", i,
                 " in the equation string, subscripts must be in [a-zA-Z]");
      terms.back().push_back(labelOf(c));
    }
  }
  return terms;
}

// t with the dims of each repeated label replaced by their diagonal; labels updated to match.
Tensor takeDiagonals(Tensor t, std::vector<int>& labels, size_t operand) {
  for (size_t i = 0; i < labels.size(); ++i) {
    for (size_t j = i + 1; j < labels.size();) {
      if (labels[j] != labels[i]) {
        ++j;
        continue;
      }
      int64_t n = t.sizes()[i], m = t.sizes()[j];
      KILN_CHECK(n == m, "einsum(): subscript ", letterOf(labels[i]), " is repeated for operand ",
                 operand, " but the sizes don't match, ", m, " != ", n);
      DimVector maskShape(size_t(t.dim()), 1);
      maskShape[i] = n;
      maskShape[j] = n;
      Tensor mask = ops::reshape(ops::eye(n, t.dtype(), t.device()), maskShape);
      t = ops::sum(ops::mul(t, mask), IntArrayRef({int64_t(j)}), false, t.dtype());
      labels.erase(labels.begin() + long(j));
    }
  }
  return t;
}

// a * b summed over `sumDims`: both aligned to the same label order; contractions go to bmm.
Tensor sumProduct(Tensor a, Tensor b, const std::vector<bool>& summed) {
  size_t rank = summed.size();
  std::vector<int64_t> batch, left, right, contract, unit;
  for (size_t d = 0; d < rank; ++d) {
    int64_t sa = a.sizes()[d], sb = b.sizes()[d];
    if (summed[d] && sa != 1 && sb == 1) a = ops::sum(a, IntArrayRef({int64_t(d)}), true);
    else if (summed[d] && sa == 1 && sb != 1) b = ops::sum(b, IntArrayRef({int64_t(d)}), true);
    sa = a.sizes()[d];
    sb = b.sizes()[d];
    if (sa == 1 && sb == 1) unit.push_back(int64_t(d));
    else if (summed[d]) contract.push_back(int64_t(d));
    else if (sa != 1 && sb != 1) batch.push_back(int64_t(d));
    else if (sa != 1) left.push_back(int64_t(d));
    else right.push_back(int64_t(d));
  }
  if (!contract.empty() && a.dtype() == ScalarType::Bool)
    throw NotImplementedError("\"bmm\" not implemented for 'Bool'"); // as in PyTorch
  if (contract.empty() || !isFloatingType(a.dtype())) {
    Tensor p = ops::mul(a, b);
    // dtype= keeps integers as they are, as PyTorch's bmm does.
    return contract.empty() ? p : ops::sum(p, IntArrayRef(contract), true, p.dtype());
  }
  auto extent = [](const Tensor& t, const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= t.sizes()[size_t(d)];
    return n;
  };
  auto concat = [](std::initializer_list<const std::vector<int64_t>*> parts) {
    std::vector<int64_t> all;
    for (const auto* p : parts) all.insert(all.end(), p->begin(), p->end());
    return all;
  };
  int64_t nb = extent(a, batch), nm = extent(a, left), nk = extent(a, contract),
          nn = extent(b, right);
  Tensor a3 = ops::reshape(ops::permute(a, concat({&batch, &left, &contract, &right, &unit})),
                           {nb, nm, nk});
  Tensor b3 = ops::reshape(ops::permute(b, concat({&batch, &contract, &right, &left, &unit})),
                           {nb, nk, nn});
  Tensor out = ops::bmm(a3, b3);
  // Back to the label order: [batch, left, right] then size-1 dims for the rest.
  std::vector<int64_t> order = concat({&batch, &left, &right, &contract, &unit});
  DimVector sizes;
  for (int64_t d : batch) sizes.push_back(a.sizes()[size_t(d)]);
  for (int64_t d : left) sizes.push_back(a.sizes()[size_t(d)]);
  for (int64_t d : right) sizes.push_back(b.sizes()[size_t(d)]);
  while (sizes.size() < rank) sizes.push_back(1);
  std::vector<int64_t> perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[size_t(order[i])] = int64_t(i);
  return ops::permute(ops::reshape(out, sizes), perm);
}

} // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& tensors,
              std::optional<IntArrayRef> path) {
  (void)path; // operands are contracted left to right
  KILN_CHECK(!tensors.empty(), "einsum(): must provide at least one operand");
  size_t arrow = equation.find("->");
  size_t lhsEnd = arrow == std::string::npos ? equation.size() : arrow;
  std::vector<std::vector<int>> terms = parseTerms(equation, 0, lhsEnd, false);
  KILN_CHECK(terms.size() <= tensors.size(),
             "einsum(): fewer operands were provided than specified in the equation");
  KILN_CHECK(terms.size() >= tensors.size(),
             "einsum(): more operands were provided than specified in the equation");
  for (const Tensor& t : tensors)
    KILN_CHECK(t.dtype() == tensors[0].dtype(), "expected scalar type ",
               scalarTypeShortName(tensors[0].dtype()), " but found ",
               scalarTypeShortName(t.dtype()));

  // Expand each ellipsis into labels kLetters + k, aligned from the right across operands.
  int64_t ellipsisRank = 0;
  std::array<int, kLetters> uses{};
  std::vector<std::vector<int>> labels(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    bool ellipsis = std::find(terms[i].begin(), terms[i].end(), kEllipsis) != terms[i].end();
    int64_t named = int64_t(terms[i].size()) - (ellipsis ? 1 : 0);
    int64_t rank = tensors[i].dim();
    if (!ellipsis)
      KILN_CHECK(named == rank, "einsum(): the number of subscripts in the equation (", named,
                 ") does not match the number of dimensions (", rank, ") for operand ", i,
                 " and no ellipsis was given");
    else
      KILN_CHECK(named <= rank, "einsum(): the number of subscripts in the equation (", named,
                 ") is more than the number of dimensions (", rank, ") for operand ", i);
    ellipsisRank = std::max(ellipsisRank, rank - named);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    int64_t named = int64_t(std::count_if(terms[i].begin(), terms[i].end(),
                                          [](int l) { return l != kEllipsis; }));
    int64_t covered = tensors[i].dim() - named; // dims the ellipsis stands for
    for (int l : terms[i]) {
      if (l != kEllipsis) {
        labels[i].push_back(l);
        ++uses[size_t(l)];
        continue;
      }
      for (int64_t k = ellipsisRank - covered; k < ellipsisRank; ++k)
        labels[i].push_back(kLetters + int(k));
    }
  }
  bool anyEllipsis = false;
  for (const auto& term : terms)
    for (int l : term) anyEllipsis |= l == kEllipsis;

  // The output's labels: as written, or the ellipsis then the labels used once, in order.
  std::vector<int> out;
  if (arrow != std::string::npos) {
    std::vector<std::vector<int>> rhs = parseTerms(equation, arrow + 2, equation.size(), true);
    std::array<bool, kLetters> seen{};
    for (int l : rhs[0]) {
      if (l == kEllipsis) {
        for (int64_t k = 0; k < ellipsisRank; ++k) out.push_back(kLetters + int(k));
        continue;
      }
      KILN_CHECK(uses[size_t(l)] > 0, "einsum(): output subscript ", letterOf(l),
                 " does not appear in the equation for any input operand");
      KILN_CHECK(!seen[size_t(l)], "einsum(): output subscript ", letterOf(l),
                 " appears more than once in the output");
      seen[size_t(l)] = true;
      out.push_back(l);
    }
  } else {
    if (anyEllipsis)
      for (int64_t k = 0; k < ellipsisRank; ++k) out.push_back(kLetters + int(k));
    for (int l = 0; l < kLetters; ++l)
      if (uses[size_t(l)] == 1) out.push_back(l);
  }

  // The common order: output labels, then every other label (to be summed).
  std::vector<int> order = out;
  std::vector<int> position(size_t(kLetters + ellipsisRank), -1);
  for (size_t p = 0; p < order.size(); ++p) position[size_t(order[p])] = int(p);
  for (const auto& ls : labels)
    for (int l : ls)
      if (position[size_t(l)] < 0) {
        position[size_t(l)] = int(order.size());
        order.push_back(l);
      }
  size_t rank = order.size(), outRank = out.size();

  std::vector<Tensor> aligned;
  std::vector<int64_t> seenSize(rank, 1);
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::vector<int> ls = labels[i];
    Tensor t = takeDiagonals(tensors[i], ls, i);
    std::vector<int64_t> perm;
    for (int l : order)
      for (size_t d = 0; d < ls.size(); ++d)
        if (ls[d] == l) perm.push_back(int64_t(d));
    t = ops::permute(t, perm);
    for (size_t p = 0; p < rank; ++p) {
      bool present = std::find(ls.begin(), ls.end(), order[p]) != ls.end();
      if (!present) t = ops::unsqueeze(t, int64_t(p));
      int64_t s = t.sizes()[p];
      if (s == 1) continue;
      KILN_CHECK(seenSize[p] == 1 || seenSize[p] == s, "einsum(): ",
                 order[p] < kLetters ? strCat("subscript ", letterOf(order[p]))
                                     : std::string("ellipsis dimension"),
                 " has size ", s, " for operand ", i,
                 " which does not broadcast with previously seen size ", seenSize[p]);
      seenSize[p] = s;
    }
    aligned.push_back(t);
  }

  // Multiply left to right, summing each label as soon as no later operand has it.
  Tensor result = aligned[0];
  for (size_t i = 1; i < aligned.size(); ++i) {
    std::vector<bool> summed(rank, false);
    for (size_t p = outRank; p < rank; ++p) {
      bool later = false;
      for (size_t j = i + 1; j < aligned.size(); ++j) later |= aligned[j].sizes()[p] != 1;
      summed[p] = !later;
    }
    result = sumProduct(result, aligned[i], summed);
  }
  std::vector<int64_t> rest;
  for (size_t p = outRank; p < rank; ++p) rest.push_back(int64_t(p));
  if (rest.empty()) return result;
  // With two or more operands every summed label is contracted by now (size 1); a lone
  // operand's are summed as sum() does (integers to int64, as in PyTorch).
  if (aligned.size() > 1) return ops::squeeze(result, IntArrayRef(rest));
  return ops::sum(result, IntArrayRef(rest), false);
}

} // namespace kiln::kernels
