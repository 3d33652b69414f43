// call_function targets that name an op of the table: "<namespace>.<name>.<overload>" <-> OpId,
// for the namespaces "aten" (the ATen-level ops) and "prims" (the Prims IR).
#pragma once
#include <string>
#include <string_view>

#include "generated/OpId.h"
#include "runtime/OpSchema.h"

namespace kiln {

// True for "aten.*" and "prims.*" targets (which must name an op of the table).
bool isOpTarget(std::string_view target);
// "aten.add.Tensor" -> OpId::add_Tensor; "aten.clone" and "aten.clone.default" -> OpId::clone;
// "prims.add" -> OpId::prims_add; OpId::NumOps when the table has no such op.
OpId resolveOpTarget(std::string_view target);
// The canonical target text of an op: "aten.add.Tensor", "aten.clone", "prims.add".
std::string opTarget(OpId op);
const OpSchema& opSchema(OpId op);
// "unknown op 'aten.add'; overloads of add: aten.add.Tensor" (or just "unknown op '...'").
std::string unknownOpMessage(std::string_view target);

} // namespace kiln
