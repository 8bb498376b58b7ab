#include "symbolizer/python/python_frame_resolver.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace tprof {
namespace {

constexpr std::string_view kModuleFile = "torch/nn/modules/module.py";

// torch's Python tracer names the frame of `nn.Module.__call__` "nn.Module: <Class>_<k>".
// That code is Module._call_impl on torch 1.x and Module._wrapped_call_impl (which then calls
// _call_impl as an ordinary frame) on 2.x.
bool is_module_call(const symbolizer::CodeInfo& code) {
  return code.filename.ends_with(kModuleFile) &&
         (code.qualname == "Module._call_impl" || code.qualname == "Module._wrapped_call_impl");
}

}  // namespace

PythonFrameResolver::PythonFrameResolver(const symbolizer::PythonLayout& layout, pid_t pid, CodeObserver observe_code)
    : layout_(layout), memory_(pid), code_objects_(layout, memory_), observe_code_(std::move(observe_code)) {}

ResolvedStack PythonFrameResolver::resolve(const python_stack& raw) {
  ResolvedStack stack;
  const uint32_t depth = std::min<uint32_t>(raw.depth, PYTHON_STACK_MAX_FRAMES);
  stack.reserve(depth);
  for (uint32_t i = 0; i < depth; ++i) {
    const python_frame& frame = raw.frames[i];
    bool read_now = false;
    const symbolizer::CodeInfo* code = code_objects_.lookup(frame.code, &read_now);
    if (!code) continue;
    if (read_now && observe_code_) observe_code_(frame.code, *code);
    ResolvedFrame resolved;
    resolved.frame_address = frame.frame;
    resolved.code_address = frame.code;
    resolved.file = code->filename;
    resolved.function = code->name;
    resolved.qualified_name = code->qualname;
    resolved.instruction = frame.instruction;
    if (code->loops) resolved.loops = &*code->loops;
    resolved.line = std::max(symbolizer::line(*code, frame.instruction), 0);
    resolved.first_line = code->first_line;
    if (is_module_call(*code) && frame.first_local != 0) {
      // Only an nn.Module instance names a module call. Anything else in that slot leaves the
      // frame its function's name: a type that cannot be read, or a cell (3.11+: `self` moved
      // into a cell because a nested function captures it, as in 2.x's inner _call_impl). A
      // cell is not followed: it is read here, after the walk, and by then it may have been
      // freed and reused for another call's `self`; the outer _wrapped_call_impl names the
      // module anyway.
      if (is_module_instance(frame.first_local)) {
        resolved.module_class = class_name_of(frame.first_local);
        resolved.module_self = frame.first_local;
      }
    }
    stack.push_back(std::move(resolved));
  }
  // On 2.x, _call_impl runs inside _wrapped_call_impl of the same module: only the outer
  // frame is the module call.
  for (size_t i = 0; i + 1 < stack.size(); ++i) {
    ResolvedFrame& inner = stack[i];
    const ResolvedFrame& outer = stack[i + 1];
    if (inner.module_class && outer.module_class && inner.module_self == outer.module_self &&
        inner.qualified_name == "Module._call_impl" && outer.qualified_name == "Module._wrapped_call_impl")
      inner.module_class.reset();
  }
  return stack;
}

// Whether the object's class has torch.nn.Module in its MRO (a class named "Module"), read once
// per type.
bool PythonFrameResolver::is_module_instance(uint64_t object_address) {
  const auto type = object_address == 0 ? std::nullopt : memory_.read_value<uint64_t>(object_address + layout_.object_type);
  if (!type || *type == 0) return false;
  if (const auto known = module_types_.find(*type); known != module_types_.end()) return known->second;
  bool is_module = false;
  const auto mro = memory_.read_value<uint64_t>(*type + layout_.type_mro);
  const auto length = mro && *mro ? memory_.read_value<int64_t>(*mro + layout_.tuple_size) : std::nullopt;
  constexpr int64_t kMaxBases = 64;
  for (int64_t i = 0; length && i < std::min(*length, kMaxBases) && !is_module; ++i) {
    const auto base = memory_.read_value<uint64_t>(*mro + layout_.tuple_items + 8 * static_cast<uint64_t>(i));
    const auto base_name = base ? memory_.read_value<uint64_t>(*base + layout_.type_name) : std::nullopt;
    const auto text = base_name ? memory_.read_string(*base_name, 64) : std::nullopt;
    is_module = text && (*text == "Module" || text->ends_with(".Module"));
  }
  module_types_.emplace(*type, is_module);
  return is_module;
}

std::string PythonFrameResolver::class_name_of(uint64_t object_address) {
  if (object_address == 0) return "?";
  const auto type = memory_.read_value<uint64_t>(object_address + layout_.object_type);
  if (!type || *type == 0) return "?";
  auto cached = class_names_.find(*type);
  if (cached != class_names_.end()) return cached->second;
  std::string name = "?";
  if (const auto tp_name = memory_.read_value<uint64_t>(*type + layout_.type_name)) {
    if (auto text = memory_.read_string(*tp_name, 256)) {
      // tp_name of a static type is "module.Class"; torch shows __name__, the part after the dot.
      const auto dot = text->rfind('.');
      name = dot == std::string::npos ? *text : text->substr(dot + 1);
    }
  }
  class_names_.emplace(*type, name);
  return name;
}

}  // namespace tprof
