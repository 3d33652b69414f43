"""Generates the Autograd dispatch key's kernels from the op table's `derivatives:` entries
(the derivatives.yaml analogue; format in docs/autograd.md). Called by gen_ops.py.

For each op with formulas: a Node subclass (saved arguments and outputs, `apply` evaluating the
formulas in kiln::ops) and a boxed Autograd kernel that records it; for each in-place op whose
functional twin exists, a kernel that runs the functional op under autograd and rebases self's
history; `derivatives: non_differentiable` ops get a kernel that records nothing. Everything else
reaches the Autograd fallback (runtime/autograd/AutogradKernels.cpp).
"""
import re

META_USES = r"\.(?:sizes|dtype|dim|numel|strides|size|stride)\("


def camel(name):
    return "".join(p[:1].upper() + p[1:] for p in name.split("_") if p)


def node_name(op):
    return camel(op.name) + "Backward0"


def node_class(op):
    return "Node_" + op.id


def uses(name, exprs):
    return any(re.search(rf"(?<![\w.]){name}\b", e) for e in exprs)


def metadata_only(name, exprs):
    found = False
    for e in exprs:
        for m in re.finditer(rf"(?<![\w.]){name}\b", e):
            found = True
            if not re.match(META_USES, e[m.end():]):
                return False
    return found


def tensor_args(op):
    return [a for a in op.args if a.base == "Tensor"]


def formulas_of(op):
    d = op.entry.get("derivatives")
    if not isinstance(d, dict):
        return None
    out = []
    for key, expr in d.items():
        names = [k.strip() for k in str(key).split(",")]
        out.append((names, str(expr).strip()))
    return out


def saved_members(op, formulas):
    exprs = [e for _, e in formulas]
    members = []  # (decl, capture lines, unpack lines, reset line)
    for i, a in enumerate(op.args):
        n = a.name
        if not uses(n, exprs):
            continue
        t = a.arg_type
        if a.base == "Tensor" and t == "Tensor":
            meta = "true" if metadata_only(n, exprs) else "false"
            if a.optional:
                members.append((f"SavedVariable {n}_; bool {n}_present_ = false;",
                                [f"if (!s[{i}].isNone()) {{ node->{n}_present_ = true; node->{n}_ = SavedVariable(s[{i}].toTensor(), false, {meta}); }}"],
                                [f"std::optional<Tensor> {n} = {n}_present_ ? std::optional<Tensor>({n}_.unpack(this)) : std::nullopt;"],
                                f"{n}_.reset();"))
            else:
                members.append((f"SavedVariable {n}_;",
                                [f"node->{n}_ = SavedVariable(s[{i}].toTensor(), false, {meta});"],
                                [f"Tensor {n} = {n}_.unpack(this);"], f"{n}_.reset();"))
        elif t == "TensorList":
            members.append((f"std::vector<SavedVariable> {n}_;",
                            [f"for (const Tensor& t : s[{i}].toTensorList()) node->{n}_.emplace_back(t, false);"],
                            [f"std::vector<Tensor> {n}; for (const auto& v : {n}_) {n}.push_back(v.unpack(this));"],
                            f"{n}_.clear();"))
        elif t == "OptionalTensorList":
            members.append((f"std::vector<std::optional<SavedVariable>> {n}_;",
                            [f"for (const auto& t : s[{i}].toOptionalTensorList()) node->{n}_.push_back(t ? std::optional<SavedVariable>(SavedVariable(*t, false)) : std::nullopt);"],
                            [f"std::vector<std::optional<Tensor>> {n}; for (const auto& v : {n}_) {n}.push_back(v ? std::optional<Tensor>(v->unpack(this)) : std::nullopt);"],
                            f"{n}_.clear();"))
        elif t == "IntList":
            if a.optional:
                members.append((f"std::optional<std::vector<int64_t>> {n}_;",
                                [f"if (!s[{i}].isNone()) node->{n}_ = s[{i}].toIntList();"],
                                [f"std::optional<IntArrayRef> {n} = {n}_ ? std::optional<IntArrayRef>(IntArrayRef(*{n}_)) : std::nullopt;"],
                                None))
            else:
                members.append((f"std::vector<int64_t> {n}_;", [f"node->{n}_ = s[{i}].toIntList();"],
                                [f"IntArrayRef {n}({n}_);"], None))
        else:
            cpp = a.cpp_type().replace("const ", "").replace("&", "").strip()
            members.append((f"{cpp} {n}_{{}};", [f"node->{n}_ = {a.unbox(i)};"],
                            [f"const {cpp}& {n} = {n}_;"], None))
    return members


def member_names(op, formulas):
    exprs = [e for _, e in formulas]
    return [a.name for a in op.args if uses(a.name, exprs)]


def save_conditions(op, formulas):
    """name -> C++ condition under which a saved value is needed: only the formulas of inputs
    that need a gradient run, so only their values are kept (fixed edge layouts only)."""
    if any(a.base == "Tensor" and a.arg_type != "Tensor" for a in op.args):
        return {}
    position = {a.name: i for i, a in enumerate(tensor_args(op))}
    conds = {}
    for name in member_names(op, formulas) + result_names(op):
        keys = []
        for names, expr in formulas:
            if uses(name, [expr]):
                keys += names
        if keys and all(k in position for k in keys):
            conds[name] = " || ".join(f"node->needsInputGrad({position[k]})" for k in dict.fromkeys(keys))
    return conds


def result_names(op):
    if len(op.returns) == 1:
        return ["result"]
    return [f"result{i}" for i in range(len(op.returns))]


def gen_node(op, formulas):
    cls = node_class(op)
    exprs = [e for _, e in formulas]
    members = saved_members(op, formulas)
    results = [(i, r) for i, r in enumerate(result_names(op)) if uses(r, exprs)]
    lines = [f"struct {cls} final : Node {{"]
    for decl, _, _, _ in members:
        lines.append(f"  {decl}")
    for i, r in results:
        if op.returns[i][1] == "TensorList":
            lines.append(f"  std::vector<SavedVariable> {r}_;")
        else:
            meta = "true" if metadata_only(r, exprs) else "false"
            lines.append(f"  SavedVariable {r}_; // metadata only: {meta}")
    for a in tensor_args(op):
        if a.arg_type != "Tensor":
            lines.append(f"  size_t {a.name}_count_ = 0;")
    lines.append(f'  std::string name() const override {{ return "{node_name(op)}"; }}')
    resets = [m[3] for m in members if m[3]] + [
        (f"{r}_.clear();" if op.returns[i][1] == "TensorList" else f"{r}_.reset();") for i, r in results]
    lines.append("  void releaseVariables() override { " + " ".join(resets) + " }")
    lines.append("  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {")
    lines.append("    std::vector<Tensor> out(nextEdges().size());")
    lines.append("    if (!anyDefined(grads)) return out;")
    if len(op.returns) > 1 or op.returns[0][1] == "TensorList":
        if uses("grad_defined", [e for _, e in formulas]):
            # Which outputs got a gradient, before the missing ones become zeros (a formula whose
            # undefined-gradient path differs: an SVD's, whose vector terms divide by gaps).
            lines.append("    std::vector<bool> grad_defined;")
            lines.append("    for (const Tensor& g : grads) grad_defined.push_back(g.defined());")
        lines.append("    materializeGrads(grads, inputMetadata());")
    lines.append("    const Tensor& grad = grads[0];")
    lines.append("    (void)grad;")
    for _, _, unpack, _ in members:
        lines += ["    " + u for u in unpack]
    for i, r in results:
        if op.returns[i][1] == "TensorList":
            lines.append(f"    std::vector<Tensor> {r}; for (const auto& v : {r}_) {r}.push_back(v.unpack(this));")
        else:
            lines.append(f"    Tensor {r} = {r}_.unpack(this);")
    lines.append("    size_t at = 0;")
    for a in tensor_args(op):
        count = "1" if a.arg_type == "Tensor" else f"{a.name}_count_"
        lines.append(f"    const size_t {a.name}_at = at; at += {count};")
    covered = set()
    for names, expr in formulas:
        for n in names:
            covered.add(n)
        if len(names) == 1:
            a = next((x for x in op.args if x.name == names[0]), None)
            if a is None or a.base != "Tensor":
                raise ValueError(f"{op.id}: derivative for '{names[0]}', which is not a Tensor argument")
            if a.arg_type == "Tensor":
                lines.append(f"    if (needsInputGrad({a.name}_at)) out[{a.name}_at] = {expr};")
            else:
                lines.append(f"    if (anyNeeded(*this, {a.name}_at, {a.name}_count_)) {{")
                lines.append(f"      std::vector<Tensor> parts = {expr};")
                lines.append(f"      for (size_t k = 0; k < parts.size() && k < {a.name}_count_; ++k) if (needsInputGrad({a.name}_at + k)) out[{a.name}_at + k] = std::move(parts[k]);")
                lines.append("    }")
        else:
            mask = ", ".join(f"needsInputGrad({n}_at)" for n in names)
            lines.append("    {")
            lines.append(f"      std::vector<bool> grad_input_mask{{{mask}}};")
            lines.append("      if (std::find(grad_input_mask.begin(), grad_input_mask.end(), true) != grad_input_mask.end()) {")
            lines.append(f"        std::vector<Tensor> parts = {expr};")
            for k, n in enumerate(names):
                lines.append(f"        if (grad_input_mask[{k}] && parts.size() > {k}) out[{n}_at] = std::move(parts[{k}]);")
            lines.append("      }")
            lines.append("    }")
    for a in tensor_args(op):
        if a.name not in covered:
            count = "1" if a.arg_type == "Tensor" else f"{a.name}_count_"
            lines.append(f"    if (anyNeeded(*this, {a.name}_at, {count})) throwNoDerivative(\"{op.name}\", \"{a.name}\");")
    lines.append("    return out;")
    lines.append("  }")
    lines.append("};")
    return lines, members, results


def requires_check(op):
    parts = []
    for i, a in enumerate(op.args):
        if a.base == "Tensor":
            parts.append(f"anyRequiresGrad(s[{i}])")
    return " || ".join(parts) or "false"


def gen_kernel(op, formulas, members, results, by_id):
    cls = node_class(op)
    is_view = "view" in op.tags
    lines = [f"void autograd_{op.id}(Stack& s) {{"]
    lines.append(f"  if (!GradMode::isEnabled() || !({requires_check(op)})) {{")
    if is_view:
        lines.append("    Tensor input = s[0].toTensor();")
        lines.append(f"    redispatchBelowAutograd(OpId::{op.id}, s);")
        lines.append("    markViews(s, input);")
    else:
        lines.append(f"    redispatchBelowAutograd(OpId::{op.id}, s);")
    lines.append("    return;")
    lines.append("  }")
    lines.append(f"  auto node = makeIntrusive<{cls}>();")
    lines.append("  std::vector<Edge> edges;")
    for i, a in enumerate(op.args):
        if a.base != "Tensor":
            continue
        if a.arg_type == "Tensor":
            lines.append(f"  edges.push_back(s[{i}].isNone() ? Edge() : gradientEdge(s[{i}].toTensor()));")
        elif a.arg_type == "TensorList":
            lines.append(f"  for (const Tensor& t : s[{i}].toTensorList()) edges.push_back(gradientEdge(t));")
            lines.append(f"  node->{a.name}_count_ = s[{i}].toTensorList().size();")
        else:
            lines.append(f"  for (const auto& t : s[{i}].toOptionalTensorList()) edges.push_back(t ? gradientEdge(*t) : Edge());")
            lines.append(f"  node->{a.name}_count_ = s[{i}].toOptionalTensorList().size();")
    lines.append("  node->setNextEdges(std::move(edges));")
    conds = save_conditions(op, formulas)
    # Arguments the op writes: `Tensor(a!)` ones, and those its entry lists under `writes:` (batch
    # norm updates its running statistics though PyTorch's schema does not mark them).
    mutated = {a.name for a in op.args if a.mutated} | set(op.entry.get("writes", []))
    after = []  # arguments the op writes (batch norm's running stats): saved at their new version
    for (decl, capture, _, _), name in zip(members, [m for m in member_names(op, formulas)]):
        if name in mutated:
            after += capture
            continue
        cond = conds.get(name)
        if cond:
            lines.append(f"  if ({cond}) {{")
            lines += ["    " + c for c in capture]
            lines.append("  }")
        else:
            lines += ["  " + c for c in capture]
    if is_view:
        lines.append("  Tensor input = s[0].toTensor();")
    if after:
        lines.append("  Stack saved = s;")
    lines.append(f"  redispatchBelowAutograd(OpId::{op.id}, s);")
    if is_view:
        lines.append("  markViews(s, input);")
    if after:
        lines += ["  " + c.replace("s[", "saved[") for c in after]
    diff = op.entry.get("output_differentiability")
    if diff:
        mask = ", ".join("true" if d else "false" for d in diff)
        lines.append(f"  recordOutputs(s, node, {{{mask}}});")
    else:
        lines.append("  recordOutputs(s, node);")
    exprs = [e for _, e in formulas]
    for i, r in results:
        if conds.get(r):
            lines.append(f"  if ({conds[r]})")
        if op.returns[i][1] == "TensorList":
            lines.append(f"  for (const Tensor& t : s[{i}].toTensorList()) node->{r}_.emplace_back(t, true);")
        else:
            meta = "true" if metadata_only(r, exprs) else "false"
            lines.append(f"  node->{r}_ = SavedVariable(s[{i}].toTensor(), true, {meta});")
    lines.append("}")
    return lines


def gen_autograd(ops, functional_twin):
    by_id = {op.id: op for op in ops}
    header = "// generated by tools/gen_autograd.py from ir/ops/*.yaml — do not edit\n"
    lines = [header, '#include <algorithm>', "", '#include "generated/Ops.h"',
             '#include "runtime/Dispatcher.h"', '#include "runtime/autograd/AutogradKernels.h"',
             '#include "runtime/autograd/FormulaHelpers.h"', '#include "runtime/autograd/SavedVariable.h"', "",
             "namespace kiln::autograd {", "", "namespace {", "", "using namespace kiln::ops;", ""]
    registrations = []
    for op in ops:
        d = op.entry.get("derivatives")
        if op.ns != "aten":
            continue
        formulas = formulas_of(op)
        if formulas is not None:
            node_lines, members, results = gen_node(op, formulas)
            lines += node_lines + [""]
            lines += gen_kernel(op, formulas, members, results, by_id) + [""]
            registrations.append((op.id, f"autograd_{op.id}"))
        elif d == "non_differentiable":
            lines.append(f"void autograd_{op.id}(Stack& s) {{ redispatchBelowAutograd(OpId::{op.id}, s); }}")
            registrations.append((op.id, f"autograd_{op.id}"))
        elif d is not None:
            raise ValueError(f"{op.id}: derivatives must be a mapping or 'non_differentiable'")
        elif "CompositeImplicit" not in op.kernels and ("inplace" in op.tags or op.inplace) and "view" in op.tags:
            twin = functional_twin(op, by_id)
            if twin is None or formulas_of(twin) is None:
                continue
            lines.append(f"void autograd_{op.id}(Stack& s) {{ autogradInplaceView(OpId::{op.id}, OpId::{twin.id}, s); }}")
            registrations.append((op.id, f"autograd_{op.id}"))
        elif "CompositeImplicit" not in op.kernels and ("inplace" in op.tags or op.inplace) and "view" not in op.tags:
            twin = functional_twin(op, by_id)
            if twin is None:
                continue
            # A composite twin may save self anywhere inside: clone to be safe.
            saves_self = "CompositeImplicit" in twin.kernels
            tf = formulas_of(twin)
            if tf:
                saves_self = uses("self", [e for _, e in tf]) and not metadata_only("self", [e for _, e in tf])
            lines.append(f"void autograd_{op.id}(Stack& s) {{ autogradInplace(OpId::{op.id}, OpId::{twin.id}, {'true' if saves_self else 'false'}, s); }}")
            registrations.append((op.id, f"autograd_{op.id}"))
    lines += ["", "} // namespace", "", "void registerGeneratedAutogradKernels(Dispatcher& d) {"]
    for op_id, fn in registrations:
        lines.append(f"  d.registerKernel(OpId::{op_id}, DispatchKey::Autograd, {fn});")
    lines += ["}", "", "} // namespace kiln::autograd", ""]
    return "\n".join(lines)


def derivative_kind(op, by_id, functional_twin):
    """For the schema table: "formula", "nondiff", "inplace", "composite" or "none"."""
    d = op.entry.get("derivatives")
    if isinstance(d, dict):
        return "Formula"
    if d == "non_differentiable":
        return "NonDifferentiable"
    if "CompositeImplicit" in op.kernels:
        return "Composite"
    if ("inplace" in op.tags or op.inplace) and functional_twin(op, by_id) is not None:
        return "Inplace"
    return "None"
