#include "symbolizer/aten/argument_plan.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "symbolizer/aten/argument_kinds.h"

namespace tprof::symbolizer {
namespace {

// How SysV passes one C++ parameter, from its classification by eightbytes. Types that are
// non-trivial for the purposes of calls (a user-provided copy or move constructor, or
// destructor: at::Tensor, c10::SymInt, optional<Generator>, c10::Storage) go by invisible
// reference, a pointer in one INTEGER eightbyte, as references themselves do.
enum class Passing {
  kOneInteger,     // one INTEGER eightbyte
  kTwoIntegers,    // two INTEGER eightbytes: both in registers, or both on the stack
  kSse,            // a double: an xmm register, which BPF does not see
  kIntegerAndSse,  // one eightbyte of each: both in registers, or both on the stack
  kMemory,         // over 16 bytes and trivially copyable: copied onto the stack
};

struct ParameterAbi {
  Passing passing;
  argument_read read = READ_NOTHING;
  // The schema types it may stand for ("int SymInt"; "[N]" sizes written "[]"), checked so that
  // a schema and a signature that do not line up are caught; empty: any.
  std::string_view schema_types = {};
  uint8_t memory_slots = 0;  // kMemory: 8-byte stack slots taken
};

// The sizes here were measured in the libraries' code (which registers and stack slots the
// call functions read at entry), not only derived from the class definitions.
struct KnownParameter {
  std::string_view cxx_type;
  ParameterAbi abi;
};
constexpr KnownParameter kKnownParameters[] = {
    {"at::Tensor const&", {Passing::kOneInteger, READ_TENSOR, "Tensor"}},
    {"at::Tensor&", {Passing::kOneInteger, READ_TENSOR, "Tensor"}},
    {"c10::optional<at::Tensor> const&", {Passing::kOneInteger, READ_OPTIONAL_TENSOR, "Tensor?"}},
    {"std::optional<at::Tensor> const&", {Passing::kOneInteger, READ_OPTIONAL_TENSOR, "Tensor?"}},
    {"c10::Scalar const&", {Passing::kOneInteger, READ_SCALAR, "Scalar"}},
    {"c10::ArrayRef<at::Tensor>", {Passing::kTwoIntegers, READ_TENSOR_LIST, "Tensor[]"}},
    {"c10::ArrayRef<c10::Scalar>", {Passing::kTwoIntegers, READ_SCALAR_LIST, "Scalar[]"}},
    // ITensorListRef: an ArrayRef, a boxed List or a vector of references, by its tag.
    {"c10::IListRef<at::Tensor> const&", {Passing::kOneInteger, READ_TENSOR_LIST_REF, "Tensor[]"}},
    {"c10::List<c10::optional<at::Tensor> > const&", {Passing::kOneInteger, READ_OPTIONAL_TENSOR_LIST, "Tensor?[]"}},
    {"c10::List<std::optional<at::Tensor> > const&", {Passing::kOneInteger, READ_OPTIONAL_TENSOR_LIST, "Tensor?[]"}},
    {"c10::optional<c10::Scalar> const&", {Passing::kOneInteger, READ_OPTIONAL_SCALAR, "Scalar?"}},
    {"std::optional<c10::Scalar> const&", {Passing::kOneInteger, READ_OPTIONAL_SCALAR, "Scalar?"}},
    {"c10::ArrayRef<long>", {Passing::kTwoIntegers, READ_INT_LIST, "int[]"}},
    {"c10::ArrayRef<c10::SymInt>", {Passing::kTwoIntegers, READ_INT_LIST, "SymInt[]"}},
    {"long", {Passing::kOneInteger, READ_WORD, "int SymInt"}},
    // Only the low byte of a bool register is defined; the schema type tells userspace so.
    {"bool", {Passing::kOneInteger, READ_WORD, "bool"}},
    // DeviceIndex (int8_t); torch 1.13's schema calls it "int", which would decode as 64 bits
    // of a register whose upper bytes are not defined.
    {"signed char", {Passing::kOneInteger, READ_NOTHING, "int DeviceIndex"}},
    // In an xmm register: read where the op's code saves it (read_where_saved).
    {"double", {Passing::kSse, READ_NOTHING, "float"}},
    {"c10::ScalarType", {Passing::kOneInteger, READ_WORD, "ScalarType"}},
    {"c10::Layout", {Passing::kOneInteger, READ_WORD, "Layout"}},
    {"c10::MemoryFormat", {Passing::kOneInteger, READ_WORD, "MemoryFormat"}},
    {"c10::Device", {Passing::kOneInteger, READ_WORD, "Device"}},
    // Optionals of 1-2 byte values fit one eightbyte; cxx_type tells userspace which layout.
    {"c10::optional<c10::ScalarType>", {Passing::kOneInteger, READ_WORD, "ScalarType?"}},
    {"std::optional<c10::ScalarType>", {Passing::kOneInteger, READ_WORD, "ScalarType?"}},
    {"c10::optional<bool>", {Passing::kOneInteger, READ_WORD, "bool?"}},
    {"std::optional<bool>", {Passing::kOneInteger, READ_WORD, "bool?"}},
    {"c10::optional<c10::Layout>", {Passing::kOneInteger, READ_WORD, "Layout?"}},
    {"std::optional<c10::Layout>", {Passing::kOneInteger, READ_WORD, "Layout?"}},
    {"c10::optional<c10::Device>", {Passing::kOneInteger, READ_WORD, "Device?"}},
    {"std::optional<c10::Device>", {Passing::kOneInteger, READ_WORD, "Device?"}},
    {"c10::optional<c10::MemoryFormat>", {Passing::kOneInteger, READ_WORD, "MemoryFormat?"}},
    {"std::optional<c10::MemoryFormat>", {Passing::kOneInteger, READ_WORD, "MemoryFormat?"}},
    {"std::array<bool, 2ul>", {Passing::kOneInteger, READ_WORD, "bool[]"}},
    {"std::array<bool, 3ul>", {Passing::kOneInteger, READ_WORD, "bool[]"}},
    {"std::array<bool, 4ul>", {Passing::kOneInteger, READ_WORD, "bool[]"}},
    // {Symbol (uint32_t), NameType (uint8_t)}: 8 bytes, trivially copyable.
    {"at::Dimname", {Passing::kOneInteger, READ_NOTHING, "Dimname"}},
    // Non-trivial (it may own a SymNode): by invisible reference to its one int64_t word.
    {"c10::SymInt", {Passing::kOneInteger, READ_POINTED_WORD, "SymInt"}},
    // Non-trivial too, and laid out as optional<at::Tensor>: an 8-byte payload and a flag.
    {"c10::optional<c10::SymInt>", {Passing::kOneInteger, READ_OPTIONAL_POINTED_WORD, "SymInt?"}},
    {"std::optional<c10::SymInt>", {Passing::kOneInteger, READ_OPTIONAL_POINTED_WORD, "SymInt?"}},
    // A Generator is an intrusive_ptr: its optional is laid out as optional<at::Tensor>'s.
    {"c10::optional<at::Generator>", {Passing::kOneInteger, READ_OPTIONAL_POINTED_WORD, "Generator?"}},
    {"std::optional<at::Generator>", {Passing::kOneInteger, READ_OPTIONAL_POINTED_WORD, "Generator?"}},
    {"c10::Storage", {Passing::kOneInteger, READ_NOTHING, "Storage"}},
    // {Device, StreamId (int64_t)}.
    {"c10::Stream", {Passing::kTwoIntegers, READ_NOTHING, "Stream"}},
    // 16 bytes, flag and value in one eightbyte each, in optional<at::Tensor>'s order.
    {"c10::optional<long>", {Passing::kTwoIntegers, READ_OPTIONAL_WORD_PAIR, "int? SymInt?"}},
    {"std::optional<long>", {Passing::kTwoIntegers, READ_OPTIONAL_WORD_PAIR, "int? SymInt?"}},
    // c10's optional keeps the value in a union with a char, which makes the double's eightbyte
    // INTEGER; libstdc++'s union has an empty member instead, so the double stays SSE.
    {"c10::optional<double>", {Passing::kTwoIntegers, READ_OPTIONAL_WORD_PAIR, "float?"}},
    // Its double in an xmm register and its flag in a general one (out of reach), unless both
    // went on the stack: then two words, the double's and then the flag's.
    {"std::optional<double>", {Passing::kIntegerAndSse, READ_OPTIONAL_WORD_PAIR, "float?"}},
    // c10's is {data, size}, libstdc++'s {size, data}: encode() swaps the latter's places.
    {"c10::basic_string_view<char>", {Passing::kTwoIntegers, READ_STRING, "str"}},
    {"std::basic_string_view<char, std::char_traits<char> >", {Passing::kTwoIntegers, READ_STRING, "str"}},
    // Measured as a pointer: c10::string_view is not trivially copyable (though trivial for
    // calls, above), so c10's optional falls back to a storage that is not trivial for calls.
    {"c10::optional<c10::basic_string_view<char> >", {Passing::kOneInteger, READ_NOTHING, "str?"}},
    // 24 bytes, trivially copyable: the string_view's {size, data}, then the flag.
    {"std::optional<std::basic_string_view<char, std::char_traits<char> > >",
     {Passing::kMemory, READ_STD_OPTIONAL_STRING, "str?", 3}},
};

// c10's own optional packs optional<ArrayRef<T>> into the ArrayRef's 16 bytes (an impossible
// {nullptr, 1} means nullopt); std::optional adds a flag, 24 bytes in memory. Lists of ints
// are read; lists of anything else only placed.
constexpr ParameterAbi kC10OptionalArrayRef{Passing::kTwoIntegers};
constexpr ParameterAbi kStdOptionalArrayRef{Passing::kMemory, READ_NOTHING, {}, 3};
constexpr ParameterAbi kC10OptionalIntArrayRef{Passing::kTwoIntegers, READ_OPTIONAL_INT_LIST, "int[]? SymInt[]?"};
constexpr ParameterAbi kStdOptionalIntArrayRef{Passing::kMemory, READ_STD_OPTIONAL_INT_LIST, "int[]? SymInt[]?", 3};

bool is_optional_int_array_ref(std::string_view cxx_type) {
  for (const std::string_view element :
       {"<long>", "<c10::SymInt>", "<c10::ArrayRef<long> >", "<c10::ArrayRef<c10::SymInt> >"})
    if (cxx_type.ends_with(element)) return true;
  return false;
}

std::optional<ParameterAbi> classify_parameter(std::string_view cxx_type,
                                               OptionalAbi optional_abi) {
  for (const KnownParameter& known : kKnownParameters) {
    if (known.cxx_type == cxx_type) return known.abi;
  }
  const bool of_ints = is_optional_int_array_ref(cxx_type);
  const bool c10_optional = cxx_type.starts_with("c10::optional<c10::ArrayRef<") ||
                            (cxx_type.starts_with("c10::OptionalArrayRef<") && optional_abi == OptionalAbi::kC10Optional);
  const bool std_optional = cxx_type.starts_with("std::optional<c10::ArrayRef<") ||
                            (cxx_type.starts_with("c10::OptionalArrayRef<") && optional_abi == OptionalAbi::kStdOptional);
  if (c10_optional) return of_ints ? kC10OptionalIntArrayRef : kC10OptionalArrayRef;
  if (std_optional) return of_ints ? kStdOptionalIntArrayRef : kStdOptionalArrayRef;
  // {T*, size_t} for any T: Scalar[], Dimname[], float[].
  if (cxx_type.starts_with("c10::ArrayRef<")) return ParameterAbi{Passing::kTwoIntegers};
  if (cxx_type.ends_with('&') || cxx_type.ends_with('*')) return ParameterAbi{Passing::kOneInteger};
  return std::nullopt;  // by value, of a size and class not known here
}

// "Tensor(a!)[]" -> "Tensor[]", "Tensor(a -> *)" -> "Tensor".
std::string without_alias_annotations(std::string_view type) {
  std::string bare;
  int depth = 0;
  for (char c : type) {
    if (c == '(') ++depth;
    if (depth == 0) bare += c;
    if (c == ')') --depth;
  }
  return bare;
}

// "int[2]" -> "int[]", "bool[3]" -> "bool[]", "int[1]?" -> "int[]?".
std::string without_list_sizes(std::string_view type) {
  std::string unsized;
  bool in_brackets = false;
  for (char c : type) {
    if (c == '[') in_brackets = true;
    if (c == ']') in_brackets = false;
    if (!in_brackets || c == '[') unsized += c;
  }
  return unsized;
}

bool fits_schema_type(const ParameterAbi& abi, std::string_view schema_type) {
  if (abi.schema_types.empty()) return true;
  std::string unsized = without_list_sizes(schema_type);
  std::string_view accepted = abi.schema_types;
  while (!accepted.empty()) {
    size_t space = accepted.find(' ');
    if (accepted.substr(0, space) == unsized) return true;
    accepted.remove_prefix(space == std::string_view::npos ? accepted.size() : space + 1);
  }
  return false;
}

// Where the returns are, and whether they take the hidden pointer in rdi.
struct ReturnAbi {
  bool hidden_return_pointer = false;
  output_read read = OUTPUT_NOTHING;
  uint8_t count = 0;
  uint8_t word_mask = 0;  // OUTPUT_TENSOR_TUPLE: the int64_t elements
};

// torchgen's C++ return types: a mutable alias "Tensor(a!)" returns at::Tensor& (or const&), in
// rax; any other Tensor returns at::Tensor by value, which is non-trivial, so through memory.
std::optional<ReturnAbi> classify_returns(const std::vector<SchemaArgument>& returns) {
  auto is_mutable_tensor = [](const SchemaArgument& r) {
    return without_alias_annotations(r.type) == "Tensor" && r.type.find('!') != r.type.npos;
  };
  auto is_value_tensor = [](const SchemaArgument& r) {
    return without_alias_annotations(r.type) == "Tensor" && r.type.find('!') == r.type.npos;
  };
  if (returns.empty()) return ReturnAbi{};  // void
  if (returns.size() > 1) {
    // std::tuple: libstdc++'s _Tuple_impl has a user-provided move constructor, so every tuple
    // (even std::tuple<at::Tensor&, at::Tensor&>) is non-trivial and returned through memory.
    auto count = static_cast<uint8_t>(returns.size());
    // Tensors and int64_ts are 8 bytes each, so element i sits at 8 * (count - 1 - i)
    // (_batch_norm_impl_index returns (Tensor, Tensor, Tensor, Tensor, int)).
    auto is_int = [](const SchemaArgument& r) { return r.type == "int"; };
    if (count <= 8 && std::all_of(returns.begin(), returns.end(),
                                  [&](const SchemaArgument& r) { return is_value_tensor(r) || is_int(r); })) {
      uint8_t word_mask = 0;
      for (uint8_t i = 0; i < count; ++i)
        if (is_int(returns[i])) word_mask |= static_cast<uint8_t>(1u << i);
      return ReturnAbi{true, OUTPUT_TENSOR_TUPLE, count, word_mask};
    }
    if (std::all_of(returns.begin(), returns.end(), is_mutable_tensor)) {
      return ReturnAbi{true, OUTPUT_TENSOR_REF_TUPLE, count};
    }
    return ReturnAbi{true};
  }
  const SchemaArgument& only = returns.front();
  if (is_mutable_tensor(only)) return ReturnAbi{false, OUTPUT_TENSOR};
  if (is_value_tensor(only)) return ReturnAbi{true, OUTPUT_TENSOR};
  if (only.type.find('!') != only.type.npos) return std::nullopt;  // torchgen returns none
  std::string type = without_alias_annotations(only.type);
  if (type == "Tensor[]") return ReturnAbi{true, OUTPUT_TENSOR_VECTOR};
  if (type == "Scalar") return ReturnAbi{true, OUTPUT_SCALAR};  // item(), _local_scalar_dense()
  // std::vector<T>; c10::SymInt and optional<at::Tensor> (non-trivial).
  if (type.ends_with("[]") || type == "SymInt" || type == "Tensor?") {
    return ReturnAbi{true};
  }
  // int64_t, bool and enums in rax, double in xmm0.
  for (std::string_view in_registers : {"int", "bool", "float", "ScalarType", "QScheme"}) {
    if (type == in_registers) return ReturnAbi{};
  }
  return std::nullopt;
}

// Hands out SysV's argument places in parameter order: rdi, rsi, rdx, rcx, r8, r9, then 8-byte
// stack slots; doubles take xmm0-7, then stack slots too.
class ArgumentPlacer {
 public:
  explicit ArgumentPlacer(bool hidden_return_pointer)
      : integer_registers_used_(hidden_return_pointer ? 1 : 0) {}

  // The locations of the parameter's first two eightbytes; LOCATION_NONE for those in xmm
  // registers and those a read never needs.
  std::array<argument_location, 2> place(const ParameterAbi& abi) {
    last_sse_register_.reset();
    switch (abi.passing) {
      case Passing::kOneInteger:
        if (integer_registers_left() >= 1) return {take_integer_register(), kNowhere};
        return {take_stack_slots(1), kNowhere};
      case Passing::kTwoIntegers:
        // An aggregate goes to the stack whole when its eightbytes do not all fit in registers;
        // a register left over still goes to a later parameter.
        if (integer_registers_left() >= 2) {
          argument_location first = take_integer_register();
          return {first, take_integer_register()};
        }
        {
          argument_location first = take_stack_slots(2);
          return {first, {LOCATION_STACK, static_cast<uint8_t>(first.index + 1)}};
        }
      case Passing::kSse:
        if (sse_registers_used_ < kSseRegisters) {
          last_sse_register_ = static_cast<unsigned>(sse_registers_used_++);
          return {kNowhere, kNowhere};
        }
        return {take_stack_slots(1), kNowhere};
      case Passing::kIntegerAndSse:
        if (integer_registers_left() >= 1 && sse_registers_used_ < kSseRegisters) {
          ++sse_registers_used_;
          take_integer_register();
          return {kNowhere, kNowhere};  // the SSE half is out of reach
        }
        {
          argument_location first = take_stack_slots(2);
          return {first, {LOCATION_STACK, static_cast<uint8_t>(first.index + 1)}};
        }
      case Passing::kMemory: {
        argument_location first = take_stack_slots(abi.memory_slots);
        return {first, {LOCATION_STACK, static_cast<uint8_t>(first.index + 1)}};
      }
    }
    return {kNowhere, kNowhere};
  }

  // The xmm register the last parameter placed arrived in, if it came in one alone.
  std::optional<unsigned> last_sse_register() const { return last_sse_register_; }

 private:
  static constexpr int kIntegerRegisters = 6;
  static constexpr int kSseRegisters = 8;
  static constexpr argument_location kNowhere{LOCATION_NONE, 0};

  int integer_registers_left() const { return kIntegerRegisters - integer_registers_used_; }

  argument_location take_integer_register() {
    return {LOCATION_REGISTER, static_cast<uint8_t>(integer_registers_used_++)};
  }

  argument_location take_stack_slots(int count) {
    argument_location first{LOCATION_STACK, static_cast<uint8_t>(stack_slots_used_)};
    stack_slots_used_ += count;
    return first;
  }

  int integer_registers_used_;
  int sse_registers_used_ = 0;
  std::optional<unsigned> last_sse_register_;
  int stack_slots_used_ = 0;
};

argument_plan encode(argument_read read, std::string_view cxx_type, const std::array<argument_location, 2>& places) {
  argument_plan encoded{};
  if (read == READ_NOTHING || places[0].kind == LOCATION_NONE) return encoded;
  encoded.read = read;
  encoded.word = places[0];
  if (read == READ_STRING || read == READ_STD_OPTIONAL_STRING) {
    const bool size_first = cxx_type.starts_with("std::");
    encoded.word = places[size_first ? 1 : 0];
    encoded.length = places[size_first ? 0 : 1];
    return encoded;
  }
  if (read == READ_TENSOR_LIST || read == READ_INT_LIST || read == READ_SCALAR_LIST || read == READ_OPTIONAL_INT_LIST ||
      read == READ_STD_OPTIONAL_INT_LIST || read == READ_OPTIONAL_WORD_PAIR)
    encoded.length = places[1];
  return encoded;
}

std::string describe(size_t index, const PlannedArgument& argument) {
  return "argument " + std::to_string(index) + " '" + argument.name + "' (" + argument.schema_type +
         " / " + argument.cxx_type + ")";
}

}  // namespace

std::optional<OptionalAbi> optional_abi_of(const OpCatalog& catalog) {
  bool names_c10 = false;
  bool names_std = false;
  for (const OpCatalogEntry& entry : catalog.entries) {
    std::optional<std::vector<std::string>> types =
        call_parameter_types(entry.site.mangled_symbol.c_str());
    if (!types) continue;
    for (const std::string& type : *types) {
      names_c10 |= type.find("c10::optional<") != std::string::npos;
      names_std |= type.find("std::optional<") != std::string::npos;
    }
  }
  if (names_c10 == names_std) return std::nullopt;
  return names_c10 ? OptionalAbi::kC10Optional : OptionalAbi::kStdOptional;
}

OpArgumentPlan plan_op_arguments(std::string_view schema, const char* mangled_call_symbol,
                                 OptionalAbi optional_abi) {
  OpArgumentPlan plan;
  std::optional<std::vector<SchemaArgument>> arguments = schema_arguments(schema);
  std::optional<std::vector<SchemaArgument>> returns = schema_returns(schema);
  if (!arguments || !returns) {
    plan.unplanned_reason = "the schema does not parse: " + std::string(schema);
    return plan;
  }
  for (const SchemaArgument& argument : *arguments) {
    plan.inputs.push_back(
        {std::string(argument.name), without_alias_annotations(argument.type), {}, {}, {}});
  }
  for (const SchemaArgument& r : *returns)
    plan.return_types.push_back(without_alias_annotations(r.type));

  std::optional<std::vector<std::string>> parameter_types =
      call_parameter_types(mangled_call_symbol);
  if (!parameter_types) {
    plan.unplanned_reason =
        std::string("the call symbol does not demangle: ") + mangled_call_symbol;
    return plan;
  }
  if (parameter_types->size() != plan.inputs.size()) {
    plan.unplanned_reason = std::to_string(plan.inputs.size()) + " schema arguments but " +
                            std::to_string(parameter_types->size()) + " C++ parameters";
    return plan;
  }
  std::vector<std::optional<ParameterAbi>> parameters;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    PlannedArgument& input = plan.inputs[i];
    input.cxx_type = (*parameter_types)[i];
    parameters.push_back(classify_parameter(input.cxx_type, optional_abi));
    if (parameters.back() && !fits_schema_type(*parameters.back(), input.schema_type)) {
      plan.unplanned_reason = describe(i, input) + ": the schema and C++ types do not match";
      return plan;
    }
  }
  std::optional<ReturnAbi> return_abi = classify_returns(*returns);
  if (!return_abi) {
    std::string listed;
    for (const std::string& type : plan.return_types) listed += (listed.empty() ? "" : ", ") + type;
    plan.unplanned_reason = "not known whether the returns (" + listed + ") come back in memory";
    return plan;
  }

  ArgumentPlacer placer(return_abi->hidden_return_pointer);
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (!parameters[i]) {
      // Its size and class decide where everything after it goes: leave those unread.
      plan.partial_reason = describe(i, plan.inputs[i]) +
                            ": passing of this by-value type is not known; it and later "
                            "arguments are not read";
      break;
    }
    plan.inputs[i].bpf = encode(parameters[i]->read, plan.inputs[i].cxx_type, placer.place(*parameters[i]));
    if (parameters[i]->passing == Passing::kSse) plan.inputs[i].xmm_register = placer.last_sse_register();
  }

  plan.bpf.argument_count =
      static_cast<uint8_t>(std::min<size_t>(plan.inputs.size(), OP_PLAN_ARGUMENTS_MAX));
  for (size_t i = 0; i < plan.bpf.argument_count; ++i) plan.bpf.arguments[i] = plan.inputs[i].bpf;
  plan.bpf.output_read = return_abi->read;
  plan.bpf.output_count = return_abi->count;
  plan.bpf.output_word_mask = return_abi->word_mask;
  return plan;
}

bool read_where_saved(OpArgumentPlan& plan, size_t input, const SpilledRegister& spill) {
  // The spill record holds the words of the first OP_ARGUMENTS_MAX arguments.
  if (input >= plan.bpf.argument_count || input >= OP_ARGUMENTS_MAX || spill.displacement < INT16_MIN ||
      spill.displacement > INT16_MAX)
    return false;
  argument_plan& encoded = plan.inputs[input].bpf;
  encoded = {};
  encoded.read = READ_WORD;
  switch (spill.base) {
    case SpillBase::kFramePointer: encoded.word.kind = LOCATION_FRAME_POINTER_SLOT; break;
    case SpillBase::kStackPointer: encoded.word.kind = LOCATION_STACK_POINTER_SLOT; break;
    case SpillBase::kGeneralRegister:
      encoded.word.kind = LOCATION_SAVED_REGISTER;
      encoded.word.index = static_cast<uint8_t>(spill.general_register);
      break;
  }
  encoded.displacement = static_cast<int16_t>(spill.displacement);
  plan.bpf.arguments[input] = encoded;
  return true;
}

}  // namespace tprof::symbolizer
