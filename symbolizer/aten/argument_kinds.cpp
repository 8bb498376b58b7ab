#include "symbolizer/aten/argument_kinds.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

#include "symbolizer/aten/identifier_chars.h"

namespace tprof::symbolizer {
namespace {

// Brackets that nest: schema text has no "<>" pairs ("Tensor(a -> *)" has a lone ">"), and C++
// types have template arguments.
struct Brackets {
  std::string_view openers;
  std::string_view closers;
};
constexpr Brackets kSchemaBrackets{"([", ")]"};
constexpr Brackets kCxxBrackets{"([<", ")]>"};

std::string_view trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

// The text between the "(" at `open` and its ")", or nullopt if it never closes.
std::optional<std::string_view> parenthesized(std::string_view text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')' && --depth == 0) return text.substr(open + 1, i - open - 1);
  }
  return std::nullopt;
}

// "a, f(b, c), d<e, g>" -> {"a", "f(b, c)", "d<e, g>"}; nothing for blank text.
std::vector<std::string_view> split_top_level_commas(std::string_view list,
                                                     const Brackets& brackets) {
  std::vector<std::string_view> items;
  if (trim(list).empty()) return items;
  int depth = 0;
  size_t item_begin = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (brackets.openers.find(list[i]) != std::string_view::npos) ++depth;
    if (brackets.closers.find(list[i]) != std::string_view::npos) --depth;
    if (list[i] == ',' && depth == 0) {
      items.push_back(trim(list.substr(item_begin, i - item_begin)));
      item_begin = i + 1;
    }
  }
  items.push_back(trim(list.substr(item_begin)));
  return items;
}

// "Tensor(a!)" from "Tensor(a!) out": the type ends at the first space outside parentheses
// (alias annotations such as "Tensor(a -> *)" contain spaces).
std::string_view schema_argument_type(std::string_view argument) {
  int depth = 0;
  for (size_t i = 0; i < argument.size(); ++i) {
    if (argument[i] == '(') ++depth;
    if (argument[i] == ')') --depth;
    if (argument[i] == ' ' && depth == 0) return argument.substr(0, i);
  }
  return argument;
}

// "Tensor(a!) out=None" -> {"Tensor(a!)", "out"}.
SchemaArgument parse_schema_argument(std::string_view argument) {
  std::string_view type = schema_argument_type(argument);
  std::string_view name = argument.substr(type.size());
  name = trim(name.substr(0, name.find('=')));
  return {type, name};
}

// The position of the ")" that closes the argument list, or npos if it never closes.
size_t argument_list_end(std::string_view schema) {
  size_t open = schema.find('(');
  if (open == std::string_view::npos) return std::string_view::npos;
  std::optional<std::string_view> arguments = parenthesized(schema, open);
  if (!arguments) return std::string_view::npos;
  return open + 1 + arguments->size();
}

std::string demangle(const char* mangled_symbol) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(mangled_symbol, nullptr, nullptr, &status), &std::free);
  if (status != 0 || !demangled) return {};
  return demangled.get();
}

ArgumentKind schema_type_kind(std::string_view type) {
  constexpr std::string_view kTensor = "Tensor";
  // "Tensor", "Tensor?", "Tensor(a!)", "Tensor[]", "Tensor?[]", "Tensor(a!)[]"; not "TensorList"-
  // like names of other types.
  if (!type.starts_with(kTensor) ||
      (type.size() > kTensor.size() && is_identifier_char(type[kTensor.size()]))) {
    return ArgumentKind::kOther;
  }
  return type.find("[]") == std::string_view::npos ? ArgumentKind::kTensor
                                                   : ArgumentKind::kTensorList;
}

bool mentions_at_tensor(std::string_view type) {
  constexpr std::string_view kAtTensor = "at::Tensor";
  for (size_t at = type.find(kAtTensor); at != std::string_view::npos;
       at = type.find(kAtTensor, at + 1)) {
    size_t after = at + kAtTensor.size();
    if (after == type.size() || !is_identifier_char(type[after])) return true;  // not TensorOptions
  }
  return false;
}

// "at::Tensor const&", "c10::optional<at::Tensor> const&" -> kTensor;
// "c10::ArrayRef<at::Tensor>", "c10::IListRef<at::Tensor> const&",
// "c10::List<c10::optional<at::Tensor> > const&" -> kTensorList.
ArgumentKind cxx_type_kind(std::string_view type) {
  if (!mentions_at_tensor(type)) return ArgumentKind::kOther;
  for (std::string_view container : {"ArrayRef<", "List<", "IListRef<"}) {
    if (type.find(container) != std::string_view::npos) return ArgumentKind::kTensorList;
  }
  return ArgumentKind::kTensor;
}

}  // namespace

std::optional<std::vector<SchemaArgument>> schema_arguments(std::string_view schema) {
  size_t end = argument_list_end(schema);
  if (end == std::string_view::npos) return std::nullopt;
  size_t open = schema.find('(');
  std::vector<SchemaArgument> arguments;
  for (std::string_view argument :
       split_top_level_commas(schema.substr(open + 1, end - open - 1), kSchemaBrackets)) {
    if (argument == "*") continue;  // marks the keyword-only arguments that follow
    arguments.push_back(parse_schema_argument(argument));
  }
  return arguments;
}

std::vector<bool> written_arguments(std::string_view schema) {
  std::vector<bool> written;
  if (const auto arguments = schema_arguments(schema))
    for (const SchemaArgument& argument : *arguments) written.push_back(argument.type.find('!') != std::string_view::npos);
  return written;
}

std::optional<std::vector<SchemaArgument>> schema_returns(std::string_view schema) {
  size_t end = argument_list_end(schema);
  if (end == std::string_view::npos) return std::nullopt;
  constexpr std::string_view kArrow = "->";
  size_t arrow = schema.find(kArrow, end);
  if (arrow == std::string_view::npos) return std::nullopt;
  std::string_view returns = trim(schema.substr(arrow + kArrow.size()));
  // "(Tensor a, Tensor b)" or "()"; a single return is never parenthesized as a whole (its alias
  // annotation, "Tensor(a!)", follows a type name).
  if (!returns.starts_with('(')) return std::vector<SchemaArgument>{parse_schema_argument(returns)};
  std::optional<std::string_view> listed = parenthesized(returns, 0);
  if (!listed) return std::nullopt;
  std::vector<SchemaArgument> parsed;
  for (std::string_view item : split_top_level_commas(*listed, kSchemaBrackets)) {
    parsed.push_back(parse_schema_argument(item));
  }
  return parsed;
}

std::optional<std::vector<std::string>> call_parameter_types(const char* mangled_symbol) {
  // "at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)"
  std::string signature = demangle(mangled_symbol);
  constexpr std::string_view kCall = "::call(";
  size_t call = signature.find(kCall);
  if (call == std::string::npos) return std::nullopt;
  std::optional<std::string_view> parameters = parenthesized(signature, call + kCall.size() - 1);
  if (!parameters) return std::nullopt;
  std::vector<std::string> types;
  for (std::string_view parameter : split_top_level_commas(*parameters, kCxxBrackets)) {
    types.emplace_back(parameter);
  }
  return types;
}

std::optional<std::vector<ArgumentKind>> schema_argument_kinds(std::string_view schema) {
  std::optional<std::vector<SchemaArgument>> arguments = schema_arguments(schema);
  if (!arguments) return std::nullopt;
  std::vector<ArgumentKind> kinds;
  for (const SchemaArgument& argument : *arguments)
    kinds.push_back(schema_type_kind(argument.type));
  return kinds;
}

std::optional<std::vector<ArgumentKind>> call_parameter_kinds(const char* mangled_symbol) {
  std::optional<std::vector<std::string>> types = call_parameter_types(mangled_symbol);
  if (!types) return std::nullopt;
  std::vector<ArgumentKind> kinds;
  for (const std::string& type : *types) kinds.push_back(cxx_type_kind(type));
  return kinds;
}

}  // namespace tprof::symbolizer
