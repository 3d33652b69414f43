#!/usr/bin/env python3
"""Generates kiln's op declarations from the op table (ir/ops/*.yaml).

Outputs (into OUT_DIR/generated/):
  OpId.h          enum OpId, one entry per op overload
  Ops.h, Ops.cpp  the typed C++ API: kiln::ops::add(self, other, alpha) -> dispatcher
  KernelDecls.h   declarations of the kernels the table names (kiln::kernels::...)
  Registration.cpp  schemas as data, boxed wrappers, kernel registration
  AutogradFunctions.cpp the Autograd key's kernels from `derivatives:` (tools/gen_autograd.py)
  DecompositionDecls.h  declarations of the decompositions the table names (kiln::decompositions::...)
  Decompositions.cpp    their boxed wrappers and compiler::decompositionOf (compiler/Decompositions.h)

A table entry:
  - func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
    variants: function, method        # default: function
    tags: [core, pointwise]
    promotion: default                # none | default | int_to_float | always_bool | no_opmath
    kernel: add                       # CPU and Meta kernel (must not touch data of meta tensors)
    cpu: / meta:                      # per-backend kernels instead of `kernel`
    composite: softmax                # written in other ops; valid for every backend
    complex: mul                      # the op on complex dtypes, in real ops (runtime/complex/)
    inplace: true                     # generic in-place: run the functional op, copy into self
    python: add                       # Python name (default: the op name; "" hides it)
    decompose: gelu                   # kiln::decompositions::gelu, the op in other ops (compiler/decompositions/)

An op's decomposition (what tracing to core ATen or prims runs instead of recording the op) is
the function `decompose:` names, with the op's typed signature; else, for a `composite:` op, its
composite kernel; else, for an `inplace: true` op or an op tagged inplace (not view) whose
functional twin (the name without `_`, same overload) is in the table, the functional op followed
by copy_ into self. Other ops have none.

A schema may name a namespace: `func: prims::add(Tensor self, Tensor other) -> Tensor`. Ops of
the default namespace `aten` keep their plain names; others get the namespace in their OpId
(`prims_add`), their typed C++ API (`kiln::ops::prims::add`) and graph target (`prims.add`),
and are hidden from Python's `kiln.*` and Tensor methods (graph code reaches them through
`kiln.fx.prims`).
"""
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_autograd  # noqa: E402

TENSOR_TYPES = {"Tensor", "Tensor[]", "Tensor?[]"}


class Arg:
    def __init__(self, text, kwarg_only):
        m = re.fullmatch(r"\s*([A-Za-z]+)(\([a-z]!?\))?(\[\d*\])?(\?)?\s+(\w+)\s*(?:=\s*(.+?))?\s*", text)
        if not m:
            raise ValueError(f"cannot parse argument '{text}'")
        base, alias, lst, opt, self.name, self.default = m.groups()
        if base == "SymInt":
            base = "int"
        self.base = base
        self.mutated = bool(alias and "!" in alias)
        self.is_list = lst is not None
        self.fixed = int(lst[1:-1]) if lst and len(lst) > 2 else 0
        self.optional = opt is not None
        self.kwarg_only = kwarg_only
        # Tensor?[] (optional elements) is written "Tensor?[]": handled by the regex order below.
        self.optional_elems = False

    @property
    def arg_type(self):
        if self.base == "Tensor":
            if self.optional_elems:
                return "OptionalTensorList"
            return "TensorList" if self.is_list else "Tensor"
        if self.base == "int":
            return "IntList" if self.is_list else "Int"
        if self.base == "float":
            return "FloatList" if self.is_list else "Float"
        return {"bool": "Bool", "Scalar": "Scalar", "ScalarType": "ScalarType", "Device": "Device",
                "Layout": "Layout", "MemoryFormat": "MemoryFormat", "str": "String",
                "Generator": "Generator"}[self.base]

    def cpp_type(self):
        t = self.arg_type
        base = {
            "Tensor": "Tensor", "TensorList": "std::vector<Tensor>",
            "OptionalTensorList": "std::vector<std::optional<Tensor>>", "Int": "int64_t",
            "IntList": "IntArrayRef", "Float": "double", "FloatList": "std::vector<double>",
            "Bool": "bool", "Scalar": "Scalar", "ScalarType": "ScalarType", "Device": "Device",
            "String": "std::string",
        }[t]
        if self.optional:
            if t in ("Tensor", "String", "Scalar"):
                return f"const std::optional<{base}>&"
            return f"std::optional<{base}>"
        if t in ("Tensor", "TensorList", "OptionalTensorList", "Scalar", "String", "FloatList"):
            return f"const {base}&"
        return base

    def unbox(self, i):
        t = self.arg_type
        v = f"s[{i}]"
        if self.optional:
            if t == "IntList":
                return f"({v}.isNone() ? std::optional<IntArrayRef>() : std::optional<IntArrayRef>({v}.toIntList()))"
            inner = {"Tensor": "Tensor", "Int": "int64_t", "Float": "double", "Bool": "bool",
                     "Scalar": "Scalar", "ScalarType": "ScalarType", "Device": "Device",
                     "String": "std::string"}[t]
            return f"{v}.toOptional<{inner}>()"
        return {
            "Tensor": f"{v}.toTensor()", "TensorList": f"{v}.toTensorList()",
            "OptionalTensorList": f"{v}.toOptionalTensorList()", "Int": f"{v}.toInt()",
            "IntList": f"IntArrayRef({v}.toIntList())", "Float": f"{v}.toDouble()",
            "FloatList": f"{v}.toDoubleList()", "Bool": f"{v}.toBool()", "Scalar": f"{v}.toScalar()",
            "ScalarType": f"{v}.toScalarType()", "Device": f"{v}.toDevice()",
            "String": f"{v}.toStringRef()",
        }[t]

    def box(self):
        if self.arg_type == "IntList" and self.optional:
            return f"Value({self.name} ? Value(std::vector<int64_t>({self.name}->begin(), {self.name}->end())) : Value())"
        return f"Value({self.name})"

    def cpp_string_default(self):
        """The default with a single-quoted string ('none', as PyTorch writes it) double-quoted for C++."""
        d = self.default
        if d is not None and len(d) >= 2 and d[0] == d[-1] == "'":
            return '"' + d[1:-1] + '"'
        return d

    def default_value(self):
        """The default as a C++ Value expression."""
        d = self.cpp_string_default()
        if d is None:
            return "Value()"
        if d == "None":
            return "Value()"
        t = self.arg_type
        if t in ("IntList", "FloatList"):
            if d.startswith("["):
                items = [x.strip() for x in d[1:-1].split(",") if x.strip()]
            else:
                items = [d] * max(self.fixed, 1)
            if t == "IntList":
                return "Value(std::vector<int64_t>{" + ", ".join(f"int64_t({x})" for x in items) + "})"
            return "Value(std::vector<double>{" + ", ".join(items) + "})"
        if t == "Bool":
            return f"Value({'true' if d == 'True' else 'false'})"
        if t == "Int":
            return f"Value(int64_t({d}))"
        if t == "Float":
            return f"Value(double({d}))"
        if t == "Scalar":
            if d in ("True", "False"):
                return f"Value(Scalar({'true' if d == 'True' else 'false'}))"
            if re.fullmatch(r"-?\d+", d):
                return f"Value(Scalar(int64_t({d})))"
            return f"Value(Scalar(double({d})))"
        if t == "String":
            return f"Value(std::string({cpp_string(unquote(d))}))"
        raise ValueError(f"unsupported default {d} for {self.name}")

    def cpp_default(self):
        """The default as a C++ default-argument expression, or None when not expressible."""
        d = self.cpp_string_default()
        if d is None:
            return None
        if d == "None":
            return "std::nullopt"
        t = self.arg_type
        if t == "IntList":
            return "{}" if d == "[]" else None
        if t == "FloatList":
            return None
        if t == "Bool" or (t == "Scalar" and d in ("True", "False")):
            return "true" if d == "True" else "false"
        if t == "String":
            return cpp_string(unquote(d))
        return d


def cpp_string(text):
    """text as a C++ string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unquote(default):
    """A schema string default ('none' or "fro", as native_functions.yaml writes them) unquoted."""
    if len(default) >= 2 and default[0] == default[-1] and default[0] in "'\"":
        return default[1:-1]
    return default


class Op:
    def __init__(self, entry, source):
        self.entry = entry
        func = entry["func"]
        m = re.fullmatch(r"(?:(\w+)::)?([\w]+)(?:\.(\w+))?\((.*)\)\s*->\s*(.+)", func.strip())
        if not m:
            raise ValueError(f"{source}: cannot parse schema '{func}'")
        ns, self.name, overload, args, rets = m.groups()
        self.ns = ns or "aten"
        self.overload = overload or ""
        self.text = func.strip()
        self.args = []
        kwarg_only = False
        for a in split_top(args):
            a = a.strip()
            if not a:
                continue
            if a == "*":
                kwarg_only = True
                continue
            optional_elems = "Tensor?[]" in a
            arg = Arg(a.replace("Tensor?[]", "Tensor[]"), kwarg_only)
            arg.optional_elems = optional_elems
            self.args.append(arg)
        self.returns = parse_returns(rets, self.args)
        variants = entry.get("variants", "function")
        self.variants = {v.strip() for v in variants.split(",")}
        self.tags = entry.get("tags", [])
        self.promotion = entry.get("promotion", "none")
        self.python = entry.get("python", self.name if self.ns == "aten" else "")
        if self.ns != "aten":
            self.variants = set()
        self.id = ("" if self.ns == "aten" else self.ns + "_") + self.name + (
            "_" + self.overload if self.overload else "")
        self.cpp_name = entry.get("cpp", self.name)
        self.kernels = {}
        if "kernel" in entry:
            self.kernels["CPU"] = self.kernels["Meta"] = entry["kernel"]
        if "cpu" in entry:
            self.kernels["CPU"] = entry["cpu"]
        if "meta" in entry:
            self.kernels["Meta"] = entry["meta"]
        if "composite" in entry:
            self.kernels["CompositeImplicit"] = entry["composite"]
        if "complex" in entry:
            self.kernels["Complex"] = entry["complex"]
        self.inplace = bool(entry.get("inplace", False))
        self.decompose = entry.get("decompose")
        if not self.kernels and not self.inplace:
            raise ValueError(f"{source}: op {self.id} names no kernel")

    def cpp_return_type(self):
        if not self.returns:
            return "void"
        if len(self.returns) == 1:
            return RET_CPP[self.returns[0][1]]
        return "std::tuple<" + ", ".join(RET_CPP[r[1]] for r in self.returns) + ">"

    def cpp_params(self, with_defaults):
        params = [f"{a.cpp_type()} {a.name}" for a in self.args]
        if with_defaults:
            defaults = []
            for a in reversed(self.args):
                d = a.cpp_default()
                if d is None:
                    break
                defaults.append(d)
            defaults.reverse()
            start = len(params) - len(defaults)
            for i, d in enumerate(defaults):
                params[start + i] += f" = {d}"
        return ", ".join(params)


RET_CPP = {"Tensor": "Tensor", "TensorList": "std::vector<Tensor>", "Bool": "bool", "Int": "int64_t",
           "Float": "double", "Scalar": "Scalar"}


def split_top(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def parse_returns(text, args):
    text = text.strip()
    if text == "()":
        return []
    if text.startswith("("):
        parts = split_top(text[1:-1])
    else:
        parts = [text]
    rets = []
    for p in parts:
        m = re.fullmatch(r"\s*([A-Za-z]+)(\(([a-z])!?\))?(\[\])?\s*(\w+)?\s*", p)
        if not m:
            raise ValueError(f"cannot parse return '{p}'")
        base, _, alias, lst, name = m.groups()
        kind = {"Tensor": "TensorList" if lst else "Tensor", "bool": "Bool", "int": "Int",
                "float": "Float", "Scalar": "Scalar"}[base]
        alias_of = -1
        if alias:
            # The return aliases the first argument with the same alias letter ("Tensor(a) self").
            alias_of = 0
        rets.append((name or "", kind, alias_of))
    return rets


def load_ops(table_dir):
    ops = []
    for fname in sorted(os.listdir(table_dir)):
        if not fname.endswith(".yaml"):
            continue
        path = os.path.join(table_dir, fname)
        with open(path) as fh:
            entries = yaml.safe_load(fh) or []
        for e in entries:
            ops.append(Op(e, path))
    seen = set()
    for op in ops:
        if op.id in seen:
            raise ValueError(f"duplicate op {op.id}")
        seen.add(op.id)
    return ops


HEADER = "// generated by tools/gen_ops.py from ir/ops/*.yaml — do not edit\n"


def gen_opid(ops):
    lines = [HEADER, "#pragma once", "#include <cstdint>", "", "namespace kiln {", "",
             "enum class OpId : uint16_t {"]
    lines += [f"  {op.id}," for op in ops]
    lines += ["  NumOps,", "};", "", "} // namespace kiln", ""]
    return "\n".join(lines)


def gen_ops_h(ops):
    lines = [HEADER, "// The typed C++ API: each function boxes its arguments and calls the dispatcher.",
             "#pragma once", "#include <optional>", "#include <tuple>", "#include <vector>", "",
             '#include "runtime/Value.h"', "", "namespace kiln::ops {", ""]
    for ns, group in by_namespace(ops):
        lines.extend(open_namespace(ns))
        for op in group:
            lines.append(f"// {op.text}")
            lines.append(f"{op.cpp_return_type()} {op.cpp_name}({op.cpp_params(True)});")
        lines.extend(close_namespace(ns))
    lines += ["", "} // namespace kiln::ops", ""]
    return "\n".join(lines)


def by_namespace(ops):
    """The ops grouped by namespace, aten first, each group in table order."""
    names = sorted({op.ns for op in ops}, key=lambda n: (n != "aten", n))
    return [(n, [op for op in ops if op.ns == n]) for n in names]


def open_namespace(ns):
    return [] if ns == "aten" else ["", f"namespace {ns} {{", ""]


def close_namespace(ns):
    return [] if ns == "aten" else ["", f"}} // namespace {ns}"]


def gen_ops_cpp(ops):
    lines = [HEADER, '#include "generated/Ops.h"', "", '#include "runtime/Dispatcher.h"', "",
             "namespace kiln::ops {", ""]
    for ns, group in by_namespace(ops):
        lines.extend(open_namespace(ns))
        for op in group:
            lines.extend(gen_op_function(op))
        lines.extend(close_namespace(ns))
    lines += ["} // namespace kiln::ops", ""]
    return "\n".join(lines)


def gen_op_function(op):
    """The typed C++ API function of one op: box the arguments, call the dispatcher, unbox."""
    # The local is not called `s`: a schema may name an argument so (scalar_tensor's Scalar s).
    lines = [f"{op.cpp_return_type()} {op.cpp_name}({op.cpp_params(False)}) {{", "  Stack stack;",
             f"  stack.reserve({max(len(op.args), len(op.returns))});"]
    for a in op.args:
        lines.append(f"  stack.emplace_back({a.box()});")
    lines.append(f"  Dispatcher::instance().call(OpId::{op.id}, stack);")
    lines.extend(unbox_returns(op, "  "))
    lines += ["}", ""]
    return lines


def unbox_returns(op, ind):
    if not op.returns:
        return []
    getters = {"Tensor": "toTensor()", "TensorList": "toTensorList()", "Bool": "toBool()",
               "Int": "toInt()", "Float": "toDouble()", "Scalar": "toScalar()"}
    if len(op.returns) == 1:
        return [f"{ind}return std::move(stack[0].{getters[op.returns[0][1]]});"]
    parts = ", ".join(f"std::move(stack[{i}].{getters[r[1]]})" for i, r in enumerate(op.returns))
    return [f"{ind}return {{{parts}}};"]


def gen_kernel_decls(ops):
    lines = [HEADER, "// Kernels named by the op table; each is defined in runtime/ (cpu/, meta, composite).",
             "#pragma once", "#include <optional>", "#include <tuple>", "#include <vector>", "",
             '#include "runtime/Value.h"', "", "namespace kiln::kernels {", ""]
    declared = set()
    for op in ops:
        for kname in sorted(set(op.kernels.values())):
            sig = f"{op.cpp_return_type()} {kname}({op.cpp_params(False)});"
            if sig in declared:
                continue
            declared.add(sig)
            lines.append(sig)
    lines += ["", "} // namespace kiln::kernels", ""]
    return "\n".join(lines)


def gen_registration(ops):
    by_id = {op.id: op for op in ops}
    lines = [HEADER, '#include "generated/KernelDecls.h"', '#include "runtime/Dispatcher.h"',
             '#include "runtime/InplaceFromFunctional.h"', "", "namespace kiln {", "", "namespace {", ""]
    for op in ops:
        for kname in sorted(set(op.kernels.values())):
            lines.append(f"void boxed_{op.id}__{kname}(Stack& s) {{")
            call = f"kernels::{kname}(" + ", ".join(a.unbox(i) for i, a in enumerate(op.args)) + ")"
            if not op.returns:
                lines.append(f"  {call};")
                lines.append("  s.clear();")
            elif len(op.returns) == 1:
                lines.append(f"  auto r = {call};")
                lines.append("  s.clear();")
                lines.append("  s.emplace_back(std::move(r));")
            else:
                lines.append(f"  auto r = {call};")
                lines.append("  s.clear();")
                for i in range(len(op.returns)):
                    lines.append(f"  s.emplace_back(std::move(std::get<{i}>(r)));")
            lines.append("}")
        if op.inplace:
            functional = ("" if op.ns == "aten" else op.ns + "_") + op.name[:-1] + (
                "_" + op.overload if op.overload else "")
            if functional not in by_id:
                raise ValueError(f"in-place op {op.id} has no functional op {functional}")
            lines.append(f"void boxed_{op.id}__inplace(Stack& s) {{")
            lines.append(f"  inplaceFromFunctional(OpId::{op.id}, OpId::{functional}, s);")
            lines.append("}")
    lines += ["", "} // namespace", "", "std::vector<OpSchema> generatedSchemas() {",
              "  std::vector<OpSchema> all;", f"  all.reserve({len(ops)});"]
    for op in ops:
        lines.append("  {")
        lines.append("    OpSchema o;")
        lines.append(f'    o.ns = "{op.ns}";')
        lines.append(f'    o.name = "{op.name}";')
        lines.append(f'    o.overload = "{op.overload}";')
        lines.append(f'    o.text = {cpp_string(op.text)};')
        lines.append(f'    o.pythonName = "{op.python}";')
        lines.append(f"    o.isFunction = {'true' if 'function' in op.variants else 'false'};")
        lines.append(f"    o.isMethod = {'true' if 'method' in op.variants else 'false'};")
        tag_bits = " | ".join(f"kTag{t.capitalize()}" for t in op.tags) or "0"
        lines.append(f"    o.tags = {tag_bits};")
        prom = {"none": "None", "default": "Default", "int_to_float": "IntToFloat",
                "always_bool": "AlwaysBool", "no_opmath": "NoOpMath"}[op.promotion]
        lines.append(f"    o.promotion = PromotionKind::{prom};")
        kind = gen_autograd.derivative_kind(op, by_id, functional_twin)
        lines.append(f"    o.derivative = DerivativeKind::{kind};")
        for a in op.args:
            lines.append("    {")
            lines.append("      ArgSpec a;")
            lines.append(f'      a.name = "{a.name}";')
            lines.append(f"      a.type = ArgType::{a.arg_type};")
            if a.optional:
                lines.append("      a.optional = true;")
            if a.kwarg_only:
                lines.append("      a.kwargOnly = true;")
            if a.mutated:
                lines.append("      a.mutated = true;")
            if a.fixed:
                lines.append(f"      a.fixedLength = {a.fixed};")
            if a.default is not None:
                lines.append("      a.hasDefault = true;")
                lines.append(f"      a.defaultValue = {a.default_value()};")
            lines.append("      o.args.push_back(std::move(a));")
            lines.append("    }")
        for name, kind, alias in op.returns:
            lines.append(f'    o.returns.push_back(ReturnSpec{{"{name}", ArgType::{kind if kind in ("Tensor", "TensorList", "Bool", "Int", "Scalar") else "Float"}, {alias}}});')
        lines.append("    all.push_back(std::move(o));")
        lines.append("  }")
    lines += ["  return all;", "}", "", "void registerGeneratedKernels(Dispatcher& d) {"]
    for op in ops:
        for key, kname in sorted(op.kernels.items()):
            lines.append(f"  d.registerKernel(OpId::{op.id}, DispatchKey::{key}, boxed_{op.id}__{kname});")
        if op.inplace:
            lines.append(f"  d.registerKernel(OpId::{op.id}, DispatchKey::CompositeImplicit, boxed_{op.id}__inplace);")
    lines += ["}", "", "} // namespace kiln", ""]
    return "\n".join(lines)


def functional_twin(op, by_id):
    """The functional op an in-place op (name ending in `_`) mutates self with, or None: the
    overload of the same name when its arguments have the same types, else the first overload
    of the functional name that takes the in-place op's argument types (pow_.Scalar(Tensor,
    Scalar) is pow.Tensor_Scalar, not pow.Scalar(Scalar, Tensor))."""
    if not op.name.endswith("_") or op.name.endswith("__"):
        return None
    signature = [(a.arg_type, a.optional) for a in op.args]
    same = by_id.get(op.name[:-1] + ("_" + op.overload if op.overload else ""))
    if same is not None and [(a.arg_type, a.optional) for a in same.args] == signature:
        return same
    for other in by_id.values():
        if other.ns == op.ns and other.name == op.name[:-1] and \
                [(a.arg_type, a.optional) for a in other.args] == signature:
            return other
    return same


def decomposition_kind(op, by_id):
    """How `op` decomposes: "named", "composite", "inplace" or None (see the module docstring)."""
    if op.decompose:
        return "named"
    if "CompositeImplicit" in op.kernels:
        return "composite"
    if op.inplace or ("inplace" in op.tags and "view" not in op.tags and functional_twin(op, by_id)):
        return "inplace"
    return None


def gen_decomposition_decls(ops):
    lines = [HEADER, "// Decompositions named by the op table (`decompose:`), defined in compiler/decompositions/.",
             "#pragma once", "#include <optional>", "#include <tuple>", "#include <vector>", "",
             '#include "runtime/Value.h"', "", "namespace kiln::decompositions {", ""]
    declared = set()
    for op in ops:
        if not op.decompose:
            continue
        sig = f"{op.cpp_return_type()} {op.decompose}({op.cpp_params(False)});"
        if sig not in declared:
            declared.add(sig)
            lines.append(sig)
    lines += ["", "} // namespace kiln::decompositions", ""]
    return "\n".join(lines)


def boxed_call(op, call, ind="  "):
    """Lines running `call` (a C++ call over unboxed s[i]) and leaving its returns on the stack s."""
    if not op.returns:
        return [f"{ind}{call};", f"{ind}s.clear();"]
    lines = [f"{ind}auto r = {call};", f"{ind}s.clear();"]
    if len(op.returns) == 1:
        lines.append(f"{ind}s.emplace_back(std::move(r));")
    else:
        lines += [f"{ind}s.emplace_back(std::move(std::get<{i}>(r)));" for i in range(len(op.returns))]
    return lines


def gen_decompositions(ops):
    by_id = {op.id: op for op in ops}
    lines = [HEADER, '#include "compiler/Decompositions.h"', '#include "generated/DecompositionDecls.h"',
             '#include "generated/KernelDecls.h"', '#include "runtime/InplaceFromFunctional.h"', "",
             "namespace kiln::compiler {", "", "namespace {", ""]
    table = []
    for op in ops:
        kind = decomposition_kind(op, by_id)
        if kind is None:
            continue
        lines.append(f"void decompose_{op.id}(Stack& s) {{")
        unboxed = ", ".join(a.unbox(i) for i, a in enumerate(op.args))
        if kind == "named":
            lines += boxed_call(op, f"decompositions::{op.decompose}({unboxed})")
        elif kind == "composite":
            lines += boxed_call(op, f"kernels::{op.kernels['CompositeImplicit']}({unboxed})")
        else:
            functional = functional_twin(op, by_id)
            if functional is None:
                raise ValueError(f"in-place op {op.id} has no functional op")
            lines.append(f"  inplaceFromFunctional(OpId::{op.id}, OpId::{functional.id}, s);")
        lines.append("}")
        table.append(op.id)
    lines += ["", "} // namespace", "", "BoxedDecomposition decompositionOf(OpId op) {",
              "  switch (op) {"]
    for op_id in table:
        lines.append(f"  case OpId::{op_id}:")
        lines.append(f"    return decompose_{op_id};")
    lines += ["  default:", "    return nullptr;", "  }", "}", "", "} // namespace kiln::compiler", ""]
    return "\n".join(lines)


def write_if_changed(path, text):
    if os.path.exists(path) and open(path).read() == text:
        return
    with open(path, "w") as fh:
        fh.write(text)


def main():
    table_dir, out_dir = sys.argv[1], sys.argv[2]
    ops = load_ops(table_dir)
    gen = os.path.join(out_dir, "generated")
    os.makedirs(gen, exist_ok=True)
    write_if_changed(os.path.join(gen, "OpId.h"), gen_opid(ops))
    write_if_changed(os.path.join(gen, "Ops.h"), gen_ops_h(ops))
    write_if_changed(os.path.join(gen, "Ops.cpp"), gen_ops_cpp(ops))
    write_if_changed(os.path.join(gen, "KernelDecls.h"), gen_kernel_decls(ops))
    write_if_changed(os.path.join(gen, "Registration.cpp"), gen_registration(ops))
    write_if_changed(os.path.join(gen, "DecompositionDecls.h"), gen_decomposition_decls(ops))
    write_if_changed(os.path.join(gen, "Decompositions.cpp"), gen_decompositions(ops))
    write_if_changed(os.path.join(gen, "AutogradFunctions.cpp"),
                     gen_autograd.gen_autograd(ops, functional_twin))


if __name__ == "__main__":
    main()
