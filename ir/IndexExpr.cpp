// Canonical index expressions: construction (sums of products, like terms combined, constant
// folding), the floor-div/mod rules, interval bounds under range facts, printing, evaluation.
#include "ir/IndexExpr.h"

#include <cstdint>
#include <algorithm>
#include <functional>
#include <numeric>

#include "ir/Identifier.h"
#include "runtime/Error.h"

namespace kiln {

struct IndexExpr::Node {
  Kind kind;
  int64_t scalar;                // Const: value; Add: constant; Mul: coefficient
  std::string name;              // Var
  std::vector<IndexExpr> ops;    // Add: terms; Mul: factors; FloorDiv/Mod: dividend, divisor;
                                 // Min/Max: both operands
  size_t hash;
};

std::optional<int64_t> pyFloorDiv(int64_t a, int64_t b) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::optional<int64_t> pyMod(int64_t a, int64_t b) {
  if (b == 0) return std::nullopt;
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

namespace {

[[noreturn]] void overflow() { throw Error("integer overflow in an index expression"); }

int64_t checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
int64_t checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}
int64_t checkedNeg(int64_t a) {
  if (a == INT64_MIN) overflow();
  return -a;
}

uint64_t absU(int64_t v) { return v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v); }

// Names compare with runs of digits as numbers, so i2 sorts before i10.
int compareNames(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    bool da = a[i] >= '0' && a[i] <= '9', db = b[j] >= '0' && b[j] <= '9';
    if (da && db) {
      size_t ie = i, je = j;
      while (ie < a.size() && a[ie] >= '0' && a[ie] <= '9') ++ie;
      while (je < b.size() && b[je] >= '0' && b[je] <= '9') ++je;
      size_t is = i, js = j;
      while (is + 1 < ie && a[is] == '0') ++is;
      while (js + 1 < je && b[js] == '0') ++js;
      if (ie - is != je - js) return ie - is < je - js ? -1 : 1;
      int c = a.compare(is, ie - is, b, js, je - js);
      if (c) return c < 0 ? -1 : 1;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return (unsigned char)a[i] < (unsigned char)b[j] ? -1 : 1;
      ++i;
      ++j;
    }
  }
  if (i < a.size() || j < b.size()) return i < a.size() ? 1 : -1;
  return a < b ? -1 : a > b ? 1 : 0;
}

int kindRank(IndexExpr::Kind k) {
  switch (k) {
  case IndexExpr::Kind::Const:
    return 0;
  case IndexExpr::Kind::Var:
    return 1;
  case IndexExpr::Kind::FloorDiv:
    return 2;
  case IndexExpr::Kind::Mod:
    return 3;
  case IndexExpr::Kind::Min:
    return 4;
  case IndexExpr::Kind::Max:
    return 5;
  case IndexExpr::Kind::Mul:
    return 6;
  case IndexExpr::Kind::Add:
    return 7;
  }
  return 8;
}

int compareLists(const std::vector<IndexExpr>& a, const std::vector<IndexExpr>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (int c = IndexExpr::compare(a[i], b[i])) return c;
  return a.size() == b.size() ? 0 : a.size() < b.size() ? -1 : 1;
}

bool less(const IndexExpr& a, const IndexExpr& b) { return IndexExpr::compare(a, b) < 0; }

// Interval arithmetic over int64 extended with infinities; __int128 holds every product of two
// int64 values, and results outside int64 widen to infinity (sound, just less precise).
struct Ext {
  int inf = 0; // -1: -infinity, 1: +infinity
  __int128 v = 0;
};

Ext fromLo(std::optional<int64_t> v) { return v ? Ext{0, *v} : Ext{-1, 0}; }
std::optional<int64_t> toBound(Ext e) {
  if (e.inf || e.v > INT64_MAX || e.v < INT64_MIN) return std::nullopt;
  return int64_t(e.v);
}
int signOf(Ext e) { return e.inf ? e.inf : e.v > 0 ? 1 : e.v < 0 ? -1 : 0; }
Ext mulExt(Ext a, Ext b) {
  int s = signOf(a) * signOf(b);
  if (s == 0) return {};
  if (a.inf || b.inf) return {s, 0};
  return {0, a.v * b.v};
}
bool lessExt(Ext a, Ext b) {
  if (a.inf != b.inf) return a.inf < b.inf;
  return a.inf == 0 && a.v < b.v;
}
// Values outside int64 become infinite in the direction that keeps the interval sound.
Ext clampLo(Ext e) { return !e.inf && (e.v < INT64_MIN || e.v > INT64_MAX) ? Ext{-1, 0} : e; }
Ext clampHi(Ext e) { return !e.inf && (e.v < INT64_MIN || e.v > INT64_MAX) ? Ext{1, 0} : e; }

struct Interval {
  Ext lo, hi;
};

Interval mulInterval(Interval a, Interval b) {
  Ext c[4] = {mulExt(a.lo, b.lo), mulExt(a.lo, b.hi), mulExt(a.hi, b.lo), mulExt(a.hi, b.hi)};
  Interval r{c[0], c[0]};
  for (Ext e : c) {
    if (lessExt(e, r.lo)) r.lo = e;
    if (lessExt(r.hi, e)) r.hi = e;
  }
  return {clampLo(r.lo), clampHi(r.hi)};
}

Ext addExt(Ext a, Ext b) {
  if (a.inf || b.inf) return {a.inf ? a.inf : b.inf, 0};
  return {0, a.v + b.v};
}

__int128 floorDiv128(__int128 a, __int128 b) {
  __int128 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Interval intervalOf(const IndexExpr& e, const RangeFacts& facts) {
  using K = IndexExpr::Kind;
  switch (e.kind()) {
  case K::Const:
    return {{0, *e.constant()}, {0, *e.constant()}};
  case K::Var: {
    auto it = facts.find(e.name());
    if (it == facts.end()) return {{-1, 0}, {1, 0}};
    Ext hi = it->second.hi ? Ext{0, __int128(*it->second.hi) - 1} : Ext{1, 0};
    return {fromLo(it->second.lo), hi};
  }
  case K::Mul: {
    Interval r{{0, e.scalar()}, {0, e.scalar()}};
    for (const IndexExpr& f : e.operands())
      r = mulInterval(r, intervalOf(f, facts));
    return r;
  }
  case K::Add: {
    Interval r{{0, e.scalar()}, {0, e.scalar()}};
    for (const IndexExpr& t : e.operands()) {
      Interval ti = intervalOf(t, facts);
      r = {clampLo(addExt(r.lo, ti.lo)), clampHi(addExt(r.hi, ti.hi))};
    }
    return r;
  }
  case K::FloorDiv: {
    Interval a = intervalOf(e.operands()[0], facts);
    auto c = e.operands()[1].constant();
    if (!c || *c <= 0) return {{-1, 0}, {1, 0}};
    Ext lo = a.lo.inf ? a.lo : Ext{0, floorDiv128(a.lo.v, *c)};
    Ext hi = a.hi.inf ? a.hi : Ext{0, floorDiv128(a.hi.v, *c)};
    return {lo, hi};
  }
  case K::Mod: {
    const IndexExpr& divisor = e.operands()[1];
    Interval d = intervalOf(divisor, facts);
    if (d.lo.inf || d.lo.v <= 0) return {{-1, 0}, {1, 0}};
    Interval r{{0, 0}, d.hi.inf ? d.hi : Ext{0, d.hi.v - 1}};
    // A dividend already inside [0, divisor) is its own remainder: keep its tighter bounds.
    Interval a = intervalOf(e.operands()[0], facts);
    if (!a.lo.inf && a.lo.v >= 0 && !a.hi.inf && a.hi.v < d.lo.v) return a;
    return r;
  }
  case K::Min:
  case K::Max: {
    Interval a = intervalOf(e.operands()[0], facts), b = intervalOf(e.operands()[1], facts);
    bool isMin = e.kind() == K::Min;
    auto pick = [isMin](Ext x, Ext y) { return lessExt(x, y) == isMin ? x : y; };
    return {pick(a.lo, b.lo), pick(a.hi, b.hi)};
  }
  }
  return {{-1, 0}, {1, 0}};
}

constexpr size_t kMaxTerms = 4096;

// A sum as terms (coefficient, sorted factors) plus a constant.
struct Term {
  int64_t k;
  std::vector<IndexExpr> factors;
};

} // namespace

// The smart constructors, optionally with range facts. Every rule that holds for all values is
// applied with or without facts; facts only make the bounds tighter.
struct IndexBuilder {
  const RangeFacts& facts;

  static IndexExpr termExpr(const Term& t) {
    if (t.k == 0) return IndexExpr(int64_t(0));
    if (t.factors.empty()) return IndexExpr(t.k);
    if (t.k == 1 && t.factors.size() == 1) return t.factors[0];
    return IndexExpr::make(IndexExpr::Kind::Mul, t.k, {}, t.factors);
  }

  static Term asTerm(const IndexExpr& e) {
    if (e.kind() == IndexExpr::Kind::Mul) return {e.scalar(), e.operands()};
    return {1, {e}};
  }

  static void decompose(const IndexExpr& e, std::vector<Term>& terms, int64_t& constant) {
    switch (e.kind()) {
    case IndexExpr::Kind::Const:
      constant = checkedAdd(constant, *e.constant());
      return;
    case IndexExpr::Kind::Add:
      constant = checkedAdd(constant, e.scalar());
      for (const IndexExpr& t : e.operands())
        terms.push_back(asTerm(t));
      return;
    default:
      terms.push_back(asTerm(e));
    }
  }

  static bool isAtom(const IndexExpr& e) {
    return e.kind() == IndexExpr::Kind::Var || e.kind() == IndexExpr::Kind::FloorDiv ||
           e.kind() == IndexExpr::Kind::Mod || e.kind() == IndexExpr::Kind::Min ||
           e.kind() == IndexExpr::Kind::Max;
  }

  IndexExpr sum(std::vector<Term> terms, int64_t constant) const {
    std::sort(terms.begin(), terms.end(), [](const Term& a, const Term& b) {
      return compareLists(a.factors, b.factors) < 0;
    });
    std::vector<Term> merged;
    for (Term& t : terms) {
      if (!merged.empty() && compareLists(merged.back().factors, t.factors) == 0)
        merged.back().k = checkedAdd(merged.back().k, t.k);
      else
        merged.push_back(std::move(t));
    }
    std::erase_if(merged, [](const Term& t) { return t.k == 0; });
    if (std::optional<IndexExpr> combined = recombine(merged, constant)) return *combined;
    if (merged.empty()) return IndexExpr(constant);
    if (merged.size() == 1 && constant == 0) return termExpr(merged[0]);
    std::vector<IndexExpr> ops;
    for (const Term& t : merged)
      ops.push_back(termExpr(t));
    return IndexExpr::make(IndexExpr::Kind::Add, constant, {}, std::move(ops));
  }

  // k*c*rest*floordiv(y, c) + k*rest*mod(y, c) -> k*rest*y (Python's divmod identity), for a
  // divisor c that is one term: a constant, or a product of size symbols (a reshape merging
  // [2, s0] into [2*s0] reads 64*s0*floordiv(i, s0) + 64*mod(i, s0), which is 64*i).
  std::optional<IndexExpr> recombine(const std::vector<Term>& terms, int64_t constant) const {
    for (size_t i = 0; i < terms.size(); ++i) {
      for (size_t p = 0; p < terms[i].factors.size(); ++p) {
        const IndexExpr& m = terms[i].factors[p];
        if (m.kind() != IndexExpr::Kind::Mod) continue;
        const IndexExpr& divisor = m.operands()[1];
        Term c{1, {}};
        if (std::optional<int64_t> value = divisor.constant()) {
          c.k = *value;
        } else {
          std::vector<Term> dTerms;
          int64_t dConst = 0;
          decompose(divisor, dTerms, dConst);
          if (dTerms.size() != 1 || dConst != 0) continue;
          c = dTerms[0];
        }
        IndexExpr q = floorDiv(m.operands()[0], divisor);
        int64_t kc;
        if (!isAtom(q) || __builtin_mul_overflow(terms[i].k, c.k, &kc)) continue;
        std::vector<IndexExpr> rest = terms[i].factors;
        rest.erase(rest.begin() + p);
        std::vector<IndexExpr> partner = rest;
        for (const IndexExpr& f : c.factors)
          partner.insert(std::upper_bound(partner.begin(), partner.end(), f, less), f);
        partner.insert(std::upper_bound(partner.begin(), partner.end(), q, less), q);
        for (size_t j = 0; j < terms.size(); ++j) {
          if (j == i || terms[j].k != kc || compareLists(terms[j].factors, partner) != 0)
            continue;
          std::vector<Term> others;
          for (size_t t = 0; t < terms.size(); ++t)
            if (t != i && t != j) others.push_back(terms[t]);
          IndexExpr y = product(termExpr({terms[i].k, rest}), m.operands()[0]);
          std::vector<Term> yTerms;
          int64_t yConst = 0;
          decompose(y, yTerms, yConst);
          others.insert(others.end(), yTerms.begin(), yTerms.end());
          return sum(std::move(others), checkedAdd(constant, yConst));
        }
      }
    }
    return std::nullopt;
  }

  IndexExpr add(const IndexExpr& a, const IndexExpr& b) const {
    if (a.isConstant() && b.isConstant()) return checkedAdd(*a.constant(), *b.constant());
    std::vector<Term> terms;
    int64_t constant = 0;
    decompose(a, terms, constant);
    decompose(b, terms, constant);
    return sum(std::move(terms), constant);
  }

  IndexExpr product(const IndexExpr& a, const IndexExpr& b) const {
    if (a.isConstant() && b.isConstant()) return checkedMul(*a.constant(), *b.constant());
    std::vector<Term> ta, tb, out;
    int64_t ca = 0, cb = 0;
    decompose(a, ta, ca);
    decompose(b, tb, cb);
    ta.push_back({ca, {}});
    tb.push_back({cb, {}});
    // Distributing multiplies term counts; refuse what would blow up rather than hang.
    if (ta.size() * tb.size() > kMaxTerms)
      throw Error("index expression too large (a product of sums with more than " +
                  std::to_string(kMaxTerms) + " terms)");
    int64_t constant = 0;
    for (const Term& x : ta) {
      for (const Term& y : tb) {
        if (x.k == 0 || y.k == 0) continue;
        Term t{checkedMul(x.k, y.k), {}};
        std::merge(x.factors.begin(), x.factors.end(), y.factors.begin(), y.factors.end(),
                   std::back_inserter(t.factors), less);
        if (t.factors.empty())
          constant = checkedAdd(constant, t.k);
        else
          out.push_back(std::move(t));
      }
    }
    return sum(std::move(out), constant);
  }

  IndexExpr negate(const IndexExpr& a) const { return product(IndexExpr(int64_t(-1)), a); }

  // The gcd of c and every coefficient and the constant of `a`.
  static int64_t commonDivisor(const std::vector<Term>& terms, int64_t constant, int64_t c) {
    uint64_t g = absU(c);
    g = std::gcd(g, absU(constant));
    for (const Term& t : terms)
      g = std::gcd(g, absU(t.k));
    return int64_t(g);
  }

  static IndexExpr divideExact(const std::vector<Term>& terms, int64_t constant, int64_t g) {
    std::vector<Term> out = terms;
    for (Term& t : out)
      t.k /= g;
    IndexBuilder none{noFacts()};
    return none.sum(std::move(out), constant / g);
  }

  static const RangeFacts& noFacts() {
    static const RangeFacts empty;
    return empty;
  }

  // floor(lo / c) == floor(hi / c): the quotient is that constant everywhere.
  std::optional<int64_t> constantQuotient(const IndexExpr& a, int64_t c) const {
    Interval iv = intervalOf(a, facts);
    if (iv.lo.inf || iv.hi.inf) return std::nullopt;
    __int128 q = floorDiv128(iv.lo.v, c);
    if (q != floorDiv128(iv.hi.v, c) || q > INT64_MAX || q < INT64_MIN) return std::nullopt;
    return int64_t(q);
  }

  IndexExpr floorDiv(const IndexExpr& a, const IndexExpr& b) const {
    auto cb = b.constant();
    if (!cb) {
      if (a.constant() == 0) return a;
      return IndexExpr::make(IndexExpr::Kind::FloorDiv, 0, {}, {a, b});
    }
    int64_t c = *cb;
    if (c == 0) throw Error("division by zero in an index expression");
    if (auto ca = a.constant()) {
      auto q = pyFloorDiv(*ca, c);
      if (!q) overflow();
      return *q;
    }
    if (c == 1) return a;
    if (c < 0) return floorDiv(negate(a), checkedNeg(c));
    std::vector<Term> terms;
    int64_t constant = 0;
    decompose(a, terms, constant);
    if (int64_t g = commonDivisor(terms, constant, c); g > 1)
      return floorDiv(divideExact(terms, constant, g), c / g);
    // (q*c + r) // c -> q + r // c
    std::vector<Term> quotient, rest;
    for (const Term& t : terms)
      (t.k % c == 0 ? quotient : rest).push_back(t.k % c == 0 ? Term{t.k / c, t.factors} : t);
    int64_t cq = *pyFloorDiv(constant, c), cr = *pyMod(constant, c);
    if (!quotient.empty() || cq != 0)
      return add(sum(std::move(quotient), cq), floorDiv(sum(std::move(rest), cr), c));
    if (a.kind() == IndexExpr::Kind::FloorDiv) {
      auto d = a.operands()[1].constant();
      int64_t dc;
      if (d && !__builtin_mul_overflow(*d, c, &dc)) return floorDiv(a.operands()[0], dc);
    }
    if (a.kind() == IndexExpr::Kind::Mod) {
      auto m = a.operands()[1].constant();
      if (m && *m % c == 0) return mod(floorDiv(a.operands()[0], c), *m / c);
    }
    if (auto q = constantQuotient(a, c)) return *q;
    return IndexExpr::make(IndexExpr::Kind::FloorDiv, 0, {}, {a, IndexExpr(c)});
  }

  IndexExpr mod(const IndexExpr& a, const IndexExpr& b) const {
    auto cb = b.constant();
    if (!cb) {
      if (a.constant() == 0) return a;
      return IndexExpr::make(IndexExpr::Kind::Mod, 0, {}, {a, b});
    }
    int64_t c = *cb;
    if (c == 0) throw Error("division by zero in an index expression");
    if (auto ca = a.constant()) return *pyMod(*ca, c);
    if (c == 1 || c == -1) return int64_t(0);
    if (c < 0) return negate(mod(negate(a), checkedNeg(c)));
    std::vector<Term> terms;
    int64_t constant = 0;
    decompose(a, terms, constant);
    if (int64_t g = commonDivisor(terms, constant, c); g > 1)
      return product(IndexExpr(g), mod(divideExact(terms, constant, g), c / g));
    // (q*c + r) % c -> r % c
    size_t before = terms.size();
    std::erase_if(terms, [c](const Term& t) { return t.k % c == 0; });
    int64_t cr = *pyMod(constant, c);
    if (terms.size() != before || cr != constant) return mod(sum(std::move(terms), cr), c);
    if (a.kind() == IndexExpr::Kind::Mod) {
      auto m = a.operands()[1].constant();
      if (m && *m % c == 0) return mod(a.operands()[0], c);
    }
    if (auto q = constantQuotient(a, c)) return add(a, IndexExpr(checkedMul(-*q, c)));
    return IndexExpr::make(IndexExpr::Kind::Mod, 0, {}, {a, IndexExpr(c)});
  }

  // min(a, b) (isMin) or max(a, b): the operand that is always the answer when their difference
  // is a constant or the range facts order them, else the pair in canonical order.
  IndexExpr minMax(const IndexExpr& a, const IndexExpr& b, bool isMin) const {
    IndexExpr diff = add(a, negate(b));
    Bounds d = kiln::bounds(diff, facts);
    if (d.hi && *d.hi <= 0) return isMin ? a : b; // a <= b everywhere
    if (d.lo && *d.lo >= 0) return isMin ? b : a; // a >= b everywhere
    // A constant goes last (min(s0, 8)), else the canonical order.
    bool ordered = b.isConstant() || (!a.isConstant() && IndexExpr::compare(a, b) < 0);
    return IndexExpr::make(isMin ? IndexExpr::Kind::Min : IndexExpr::Kind::Max, 0, {},
                           {ordered ? a : b, ordered ? b : a});
  }

  // Rebuilds `e` bottom-up, replacing variables found in `replacements`.
  IndexExpr rebuild(const IndexExpr& e,
                    const std::map<std::string, IndexExpr>* replacements) const {
    switch (e.kind()) {
    case IndexExpr::Kind::Const:
      return e;
    case IndexExpr::Kind::Var: {
      if (!replacements) return e;
      auto it = replacements->find(e.name());
      return it == replacements->end() ? e : it->second;
    }
    case IndexExpr::Kind::Add: {
      IndexExpr r(e.scalar());
      for (const IndexExpr& t : e.operands())
        r = add(r, rebuild(t, replacements));
      return r;
    }
    case IndexExpr::Kind::Mul: {
      IndexExpr r(e.scalar());
      for (const IndexExpr& f : e.operands())
        r = product(r, rebuild(f, replacements));
      return r;
    }
    case IndexExpr::Kind::FloorDiv:
      return floorDiv(rebuild(e.operands()[0], replacements),
                      rebuild(e.operands()[1], replacements));
    case IndexExpr::Kind::Mod:
      return mod(rebuild(e.operands()[0], replacements), rebuild(e.operands()[1], replacements));
    case IndexExpr::Kind::Min:
    case IndexExpr::Kind::Max:
      return minMax(rebuild(e.operands()[0], replacements), rebuild(e.operands()[1], replacements),
                    e.kind() == IndexExpr::Kind::Min);
    }
    return e;
  }
};

IndexExpr IndexExpr::make(Kind k, int64_t scalar, std::string name, std::vector<IndexExpr> ops) {
  size_t h = std::hash<int>()(int(k)) * 0x9e3779b97f4a7c15ull;
  h ^= std::hash<int64_t>()(scalar) + 0x9e3779b9 + (h << 6) + (h >> 2);
  if (!name.empty()) h ^= std::hash<std::string>()(name) + 0x9e3779b9 + (h << 6) + (h >> 2);
  for (const IndexExpr& o : ops)
    h ^= o.hash() + 0x9e3779b9 + (h << 6) + (h >> 2);
  return IndexExpr(std::make_shared<const Node>(Node{k, scalar, std::move(name), std::move(ops), h}));
}

IndexExpr::IndexExpr(int64_t value) : IndexExpr(make(Kind::Const, value, {}, {})) {}

IndexExpr IndexExpr::var(const std::string& name) {
  if (!isIdentifier(name))
    throw Error("invalid index variable name '" + name + "': use letters, digits and _");
  return make(Kind::Var, 0, name, {});
}

IndexExpr::Kind IndexExpr::kind() const { return node_->kind; }
std::optional<int64_t> IndexExpr::constant() const {
  if (node_->kind != Kind::Const) return std::nullopt;
  return node_->scalar;
}
const std::string& IndexExpr::name() const { return node_->name; }
int64_t IndexExpr::scalar() const { return node_->scalar; }
const std::vector<IndexExpr>& IndexExpr::operands() const { return node_->ops; }
size_t IndexExpr::hash() const { return node_->hash; }

bool IndexExpr::operator==(const IndexExpr& o) const {
  if (node_ == o.node_) return true;
  if (node_->hash != o.node_->hash) return false;
  return compare(*this, o) == 0;
}

int IndexExpr::compare(const IndexExpr& a, const IndexExpr& b) {
  if (a.node_ == b.node_) return 0;
  if (a.kind() != b.kind()) return kindRank(a.kind()) < kindRank(b.kind()) ? -1 : 1;
  switch (a.kind()) {
  case Kind::Const:
    break;
  case Kind::Var:
    return compareNames(a.name(), b.name());
  case Kind::FloorDiv:
  case Kind::Mod:
  case Kind::Min:
  case Kind::Max:
  case Kind::Mul:
  case Kind::Add:
    if (int c = compareLists(a.operands(), b.operands())) return c;
    break;
  }
  return a.scalar() == b.scalar() ? 0 : a.scalar() < b.scalar() ? -1 : 1;
}

IndexExpr operator+(const IndexExpr& a, const IndexExpr& b) {
  return IndexBuilder{IndexBuilder::noFacts()}.add(a, b);
}
IndexExpr operator-(const IndexExpr& a, const IndexExpr& b) {
  IndexBuilder ib{IndexBuilder::noFacts()};
  return ib.add(a, ib.negate(b));
}
IndexExpr operator-(const IndexExpr& a) { return IndexBuilder{IndexBuilder::noFacts()}.negate(a); }
IndexExpr operator*(const IndexExpr& a, const IndexExpr& b) {
  return IndexBuilder{IndexBuilder::noFacts()}.product(a, b);
}
IndexExpr floorDiv(const IndexExpr& a, const IndexExpr& b) {
  return IndexBuilder{IndexBuilder::noFacts()}.floorDiv(a, b);
}
IndexExpr mod(const IndexExpr& a, const IndexExpr& b) {
  return IndexBuilder{IndexBuilder::noFacts()}.mod(a, b);
}
IndexExpr min(const IndexExpr& a, const IndexExpr& b) {
  return IndexBuilder{IndexBuilder::noFacts()}.minMax(a, b, true);
}
IndexExpr max(const IndexExpr& a, const IndexExpr& b) {
  return IndexBuilder{IndexBuilder::noFacts()}.minMax(a, b, false);
}

std::string IndexExpr::str() const {
  switch (kind()) {
  case Kind::Const:
    return std::to_string(scalar());
  case Kind::Var:
    return name();
  case Kind::FloorDiv:
  case Kind::Mod:
  case Kind::Min:
  case Kind::Max: {
    const char* fn = kind() == Kind::FloorDiv ? "floordiv(" : kind() == Kind::Mod ? "mod("
                     : kind() == Kind::Min    ? "min("
                                              : "max(";
    return std::string(fn) + operands()[0].str() + ", " + operands()[1].str() + ")";
  }
  case Kind::Mul: {
    std::string s = scalar() == 1 ? "" : scalar() == -1 ? "-" : std::to_string(scalar()) + "*";
    for (size_t i = 0; i < operands().size(); ++i)
      s += (i ? "*" : "") + operands()[i].str();
    return s;
  }
  case Kind::Add: {
    std::string s;
    for (size_t i = 0; i < operands().size(); ++i) {
      const IndexExpr& t = operands()[i];
      // A later negative term prints as a subtraction of its negation (INT64_MIN cannot be
      // negated and stays an added negative number).
      if (i && t.kind() == Kind::Mul && t.scalar() < 0 && t.scalar() != INT64_MIN)
        s += " - " + IndexBuilder::termExpr({-t.scalar(), t.operands()}).str();
      else
        s += (i ? " + " : "") + t.str();
    }
    if (scalar() > 0) s += " + " + std::to_string(scalar());
    if (scalar() < 0 && scalar() != INT64_MIN) s += " - " + std::to_string(-scalar());
    if (scalar() == INT64_MIN) s += " + " + std::to_string(scalar());
    return s;
  }
  }
  return "";
}

IndexExpr IndexExpr::substitute(const std::map<std::string, IndexExpr>& replacements) const {
  return IndexBuilder{IndexBuilder::noFacts()}.rebuild(*this, &replacements);
}

int64_t IndexExpr::evaluate(const std::map<std::string, int64_t>& bindings) const {
  switch (kind()) {
  case Kind::Const:
    return scalar();
  case Kind::Var: {
    auto it = bindings.find(name());
    if (it == bindings.end()) throw Error("unbound variable '" + name() + "' in index expression");
    return it->second;
  }
  case Kind::Add: {
    int64_t r = scalar();
    for (const IndexExpr& t : operands())
      r = checkedAdd(r, t.evaluate(bindings));
    return r;
  }
  case Kind::Mul: {
    int64_t r = scalar();
    for (const IndexExpr& f : operands())
      r = checkedMul(r, f.evaluate(bindings));
    return r;
  }
  case Kind::FloorDiv:
  case Kind::Mod: {
    int64_t a = operands()[0].evaluate(bindings), b = operands()[1].evaluate(bindings);
    if (b == 0) throw Error("division by zero in an index expression");
    auto r = kind() == Kind::FloorDiv ? pyFloorDiv(a, b) : pyMod(a, b);
    if (!r) overflow();
    return *r;
  }
  case Kind::Min:
  case Kind::Max: {
    int64_t a = operands()[0].evaluate(bindings), b = operands()[1].evaluate(bindings);
    return kind() == Kind::Min ? std::min(a, b) : std::max(a, b);
  }
  }
  return 0;
}

std::vector<std::string> IndexExpr::variables() const {
  std::vector<std::string> out;
  std::function<void(const IndexExpr&)> walk = [&](const IndexExpr& e) {
    if (e.kind() == Kind::Var) out.push_back(e.name());
    for (const IndexExpr& o : e.operands())
      walk(o);
  };
  walk(*this);
  std::sort(out.begin(), out.end(),
            [](const std::string& a, const std::string& b) { return compareNames(a, b) < 0; });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Bounds bounds(const IndexExpr& e, const RangeFacts& facts) {
  Interval iv = intervalOf(e, facts);
  return {toBound(iv.lo), toBound(iv.hi)};
}

IndexExpr simplify(const IndexExpr& e, const RangeFacts& facts) {
  IndexBuilder ib{facts};
  // Each rebuild applies the rules bottom-up; a rewrite can expose another at a parent, so
  // repeat to a fixpoint (a handful of rounds in practice; the cap keeps it bounded).
  IndexExpr cur = e;
  for (int round = 0; round < 16; ++round) {
    IndexExpr next = ib.rebuild(cur, nullptr);
    if (next == cur) return cur;
    cur = next;
  }
  return cur;
}

} // namespace kiln
