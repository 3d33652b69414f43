// The loop-level IR: a LoopProgram computes buffers from inputs, each buffer by a pointwise
// loop nest, a reduction or an extern kernel; loop bodies are small expression DAGs over
// loads, constants and index expressions. Text form and grammar: docs/loop-ir.md.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/Diagnostic.h"
#include "ir/IndexExpr.h"
#include "runtime/ScalarType.h"

namespace kiln {

enum class ReductionKind : uint8_t {
  Sum,
  Prod,
  Max,
  Min,
  ArgMax,      // the first position (flat over the reduction ranges, row-major) of the maximum
  ArgMin,      // ... of the minimum
  Any,         // some value is nonzero
  All,         // every value is nonzero
  WelfordMean, // the mean, accumulated with Welford's update
  WelfordVar,  // the population variance (M2 / n); scale by n / (n - correction) for others
};

// "sum", "argmax", "welford_mean", ...
const char* reductionKindName(ReductionKind k);
std::optional<ReductionKind> reductionKindFromName(std::string_view name);

// The ops of a loop body. Math ops are named as the prims they implement.
enum class LoopOpCode : uint8_t {
  Load,      // load %buf[index]: the element at a flat offset of a buffer or input
  Constant,  // constant 1.5 : f32
  IndexExpr, // index_expr 16*i0 + i1 : i64 (the integer value of an index expression)
  Cast,      // cast %v : f16
  Reduce,    // reduce %v: the value a reduction accumulates (last op of a reduction body)
  Indirect,  // indirect %v size 64 [wrap] as t0 error "...": an integer value checked against
             // a size (negatives wrapped first when `wrap`) and bound to the index variable t0
  Store,     // store %v: the value a pointwise computation writes (last op of a pointwise body)
  // unary, the operand's dtype
  Neg, Abs, Sign, Floor, Ceil, Trunc, Round, Reciprocal,
  Exp, Exp2, Expm1, Log, Log2, Log1p, Sqrt, Rsqrt,
  Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Tanh, Erf,
  BitwiseNot,
  IsFinite, // -> b8
  // binary, both operands of one dtype
  Add, Sub, Mul, Div, Maximum, Minimum, Pow, Fmod, Remainder, Atan2,
  BitwiseAnd, BitwiseOr, BitwiseXor,
  Eq, Ne, Lt, Le, Gt, Ge, // -> b8
  Where,                  // where %cond, %a, %b
};

// "load", "index_expr", "add", "bitwise_and", ...
const char* loopOpName(LoopOpCode c);
std::optional<LoopOpCode> loopOpFromName(std::string_view name);
// Operand count of an op (load, constant and index_expr take none).
int loopOpArity(LoopOpCode c);
// True for the ops that define a value (all but store and reduce).
bool definesValue(LoopOpCode c);

struct LoopOp {
  LoopOpCode code = LoopOpCode::Constant;
  // The value's dtype; for store and reduce, the dtype of their operand.
  ScalarType dtype = ScalarType::Float32;
  std::vector<int> operands; // indices of earlier ops in the same body
  std::string buffer;        // load: the buffer or input read
  kiln::IndexExpr index;     // load: the flat element offset; index_expr: the value;
                             // indirect: the size the value indexes (valid values [0, size))
  // constant: integral and b8 constants in intValue, floating ones in floatValue.
  int64_t intValue = 0;
  double floatValue = 0;
  TextPos parsedAt; // not part of equality
  // indirect: the index variable it defines (later loads and the in-place index use it), whether
  // a negative value v stands for v + size (as eager indexing wraps), and the error an
  // out-of-range value raises: "IndexError: index {index} is out of bounds ... {size}" (the
  // exception type, ": ", the message with {index} and {size} filled in by the caller).
  // Last, with defaults, so aggregate initializations ending at parsedAt stay complete.
  std::string var = {};
  bool wrap = false;
  std::string error = {};
};

// The expression DAG of one computation, in definition order. Builders return op indices.
struct LoopBody {
  std::vector<LoopOp> ops;

  int load(std::string buffer, kiln::IndexExpr index, ScalarType dtype);
  int constantInt(int64_t value, ScalarType dtype);
  int constantFloat(double value, ScalarType dtype);
  int indexExpr(kiln::IndexExpr value, ScalarType dtype = ScalarType::Int64);
  int cast(int value, ScalarType dtype);
  // Binds `var` to the integer value `value`, checked against `size` (see LoopOpCode::Indirect).
  int indirect(int value, kiln::IndexExpr size, std::string var, bool wrap, std::string error);
  // A unary, binary or where op; the dtype follows inferLoopOpDtype.
  int math(LoopOpCode code, std::vector<int> operands);
  void store(int value);
  void reduce(int value);
};

// The dtype a math op produces from its operands' dtypes (b8 for comparisons and isfinite,
// the second operand's for where, the first operand's otherwise).
ScalarType inferLoopOpDtype(LoopOpCode code, const std::vector<ScalarType>& operands);
// Why the operands' dtypes do not fit the op, or nullopt when they do.
std::optional<std::string> checkLoopOpDtypes(LoopOpCode code,
                                             const std::vector<ScalarType>& operands);
// The dtype a reduction of values of `value` produces (i64 for argmax/argmin, b8 for any/all).
ScalarType reductionResultDtype(ReductionKind kind, ScalarType value);

struct IterVar {
  std::string name;
  kiln::IndexExpr extent;
  bool operator==(const IterVar& o) const = default;
};

// A pointwise computation either fills a fresh buffer or, with `into` set, writes in place:
// the element of loop point p goes to flat offset `intoIndex(p)` of the storage of `into` (an
// input, a buffer or an earlier in-place buffer: a version of the same storage). The buffer
// then names the storage's new version (see LoopProgram::storageRoot).
//
// The in-place index may use index variables bound by the body's `indirect` ops (a scatter:
// the element goes where an index tensor says), and with `accumulate` the stored value is
// added to the element there instead of replacing it (index_put(accumulate=True), scatter_add,
// embedding backward). Such a computation runs serially in loop order, so duplicate indices
// are correct (accumulated, or the last write wins as eager's serial loops do).
struct Pointwise {
  std::vector<IterVar> ranges;
  LoopBody body;
  std::string into;          // the version written over; empty for a fresh buffer
  kiln::IndexExpr intoIndex; // the flat storage offset written, over `ranges`
  bool accumulate = false;   // into only: add the stored value to the element
};

// The index variables the body's indirect ops bind, in order.
std::vector<std::string> indirectVars(const LoopBody& body);

struct Reduction {
  ReductionKind kind = ReductionKind::Sum;
  std::vector<IterVar> ranges;          // one output element per point
  std::vector<IterVar> reductionRanges; // reduced over
  LoopBody body;
};

// A scalar argument of an extern kernel: int, float, bool or a list of ints.
using ExternArg = std::variant<int64_t, double, bool, std::vector<int64_t>>;

// A strided window onto an extern input's storage: the kernel reads a view of an input or
// buffer (a transposed weight, a batch reshaped) in place instead of from a realized copy.
// Element offset, sizes and strides in elements, all static.
struct StridedView {
  int64_t offset = 0;
  // Sizes and strides may be expressions over size symbols (the offset is a constant).
  std::vector<IndexExpr> sizes, strides;
  bool operator==(const StridedView&) const = default;
};

struct Extern {
  std::string kernel;                                      // "mm", "addmm", "convolution"
  std::vector<std::string> inputs;                         // buffers and inputs, in order
  std::vector<std::pair<std::string, ExternArg>> args;     // keyword scalar arguments
  // Per input (empty: none has one): the view of the input's storage the kernel reads, or none
  // for the whole input with its own layout.
  std::vector<std::optional<StridedView>> views;

  const std::optional<StridedView>& viewOf(size_t input) const;
};

// A buffer: contiguous, row-major over `sizes`. A pointwise or reduction computation writes
// element k at flat offset k of its (output) ranges in row-major order, so the product of the
// ranges' extents equals the buffer's element count.
struct Buffer {
  std::string name;
  ScalarType dtype = ScalarType::Float32;
  std::vector<kiln::IndexExpr> sizes;
  std::variant<Pointwise, Reduction, Extern> computation;
  std::string kernel; // the kernel it is grouped into; empty when none
  TextPos parsedAt;
  // The buffer whose storage this one takes over (the memory plan, passes/loop/PlanMemory.h):
  // that buffer's last reader has run before this one is written. Empty: its own storage.
  // Last, with a default, so aggregate initializations ending at parsedAt stay complete.
  std::string reuses = {};

  bool isPointwise() const { return std::holds_alternative<Pointwise>(computation); }
  bool isReduction() const { return std::holds_alternative<Reduction>(computation); }
  bool isExtern() const { return std::holds_alternative<Extern>(computation); }
  // The version it writes over in place, or nullptr for a buffer with storage of its own.
  const std::string* writesInto() const;
};

struct LoopInput {
  std::string name;
  ScalarType dtype = ScalarType::Float32;
  std::vector<kiln::IndexExpr> sizes;
  std::vector<kiln::IndexExpr> strides; // always filled; contiguous when the text omits them
  TextPos parsedAt;
};

struct LoopProgram {
  std::string name;
  std::vector<LoopInput> inputs;
  std::vector<Buffer> buffers; // in execution order; a kernel's buffers are adjacent
  std::vector<std::string> outputs;
  TextPos parsedAt;

  const LoopInput* findInput(std::string_view name) const;
  const Buffer* findBuffer(std::string_view name) const;
  // The dtype and sizes of a buffer or input, or nullopt for an unknown name.
  std::optional<ScalarType> dtypeOf(std::string_view name) const;
  // The input or buffer owning the storage `name` is a version of: `name` itself unless it
  // writes in place (then its base's root). Loads of a version address the root's storage
  // (its strides for an input); as an output or extern input a version stands for the whole
  // storage, with the root's dtype and sizes.
  std::string storageRoot(std::string_view name) const;
  // The size symbols: every variable in the inputs' sizes and strides.
  std::vector<std::string> sizeSymbols() const;
};

// Size symbols take values of at least 2: sizes 0 and 1 are specialized (made static), as in
// PyTorch, so a symbolic dim is never empty and never broadcast. The verifier and code
// generators rely on it; callers binding symbols check it.
inline constexpr int64_t kMinSizeSymbol = 2;

// Row-major strides of `sizes`.
std::vector<kiln::IndexExpr> contiguousStrides(const std::vector<kiln::IndexExpr>& sizes);

// Structural equality: same names, inputs, buffers, computations, bodies and outputs (text
// positions ignored; float constants compared bit for bit).
bool operator==(const LoopBody& a, const LoopBody& b);
bool operator==(const Pointwise& a, const Pointwise& b);
bool operator==(const Reduction& a, const Reduction& b);
bool operator==(const Extern& a, const Extern& b);
bool operator==(const Buffer& a, const Buffer& b);
bool operator==(const LoopProgram& a, const LoopProgram& b);

} // namespace kiln
