// Where each argument of an at::_ops::<op>::call is at the function's entry, and where its
// returns are at its exit, under the x86-64 SysV ABI (Itanium C++ ABI, libstdc++): the op_plan
// that tells the BPF op tracer what to read (bpf/op_arguments.h).
//
// It is worked out from the op's schema (argument names and types, and the returns, which the
// mangled name of a non-template function does not encode) and from its demangled call symbol
// (the C++ parameter types, authoritative for how each one is passed). Where a detail of the ABI
// is not known for sure, the plan says "unknown" rather than guess: a wrong location would be
// read as garbage and reported as a shape.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bpf/op_arguments.h"
#include "symbolizer/aten/op_catalog.h"
#include "symbolizer/binary/register_spills.h"

namespace tprof::symbolizer {

// What c10::optional is in the library, which decides the size of c10::OptionalArrayRef: the
// call symbols' mangled names say it per library, not always per op.
enum class OptionalAbi {
  kC10Optional,  // c10's own class (torch 1.x, early 2.x): optional<ArrayRef<T>> packs into 16
                 // bytes, passed in two registers
  kStdOptional,  // an alias of std::optional (torch 2.4+): optional<ArrayRef<T>> is 24 bytes,
                 // passed in memory on the stack
};

// Which of the two the catalog's call symbols spell ("c10::optional<" or "std::optional<");
// nullopt when they name neither, or both.
std::optional<OptionalAbi> optional_abi_of(const OpCatalog& catalog);

struct PlannedArgument {
  std::string name;         // schema argument name: "self", "other", "alpha"
  std::string schema_type;  // without alias annotations: "Tensor", "Tensor?", "int[2]", "Scalar"
  std::string cxx_type;     // the call's C++ parameter type: "at::Tensor const&"; how a
                            // READ_WORD value is laid out ("c10::optional<c10::ScalarType>")
  argument_plan bpf{};      // how BPF reads it (READ_NOTHING when it cannot)
  // A double that arrives in this xmm register, which the entry probe cannot read: where the
  // op's code saves it, read_where_saved plans its read.
  std::optional<unsigned> xmm_register;
};

struct OpArgumentPlan {
  std::vector<PlannedArgument> inputs;    // every schema argument, schema order (may exceed
                                          // OP_PLAN_ARGUMENTS_MAX; only the first ones go to BPF)
  std::vector<std::string> return_types;  // without alias annotations: {"Tensor"}, {} for "()"
  op_plan bpf{};                          // the encoded map value
  std::string unplanned_reason;  // empty when the plan was derived; else one line why not (and
                                 // bpf is all zero)
  std::string partial_reason;    // empty when every argument's place is known; else one line
                                 // naming the argument from which on they are not
};

// From an op's schema text ("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) ->
// Tensor") and its mangled call symbol, whose parameters are the schema's arguments in order.
OpArgumentPlan plan_op_arguments(std::string_view schema, const char* mangled_call_symbol,
                                 OptionalAbi optional_abi);

// Reads input `input` (a double that came in an xmm register) where the op's entry block saved
// it, at the op's spill probe (LOCATION_*_POINTER_SLOT, LOCATION_SAVED_REGISTER). False when the
// input is past what BPF is told about or the slot is out of the plan's reach.
bool read_where_saved(OpArgumentPlan& plan, size_t input, const SpilledRegister& spill);

}  // namespace tprof::symbolizer
