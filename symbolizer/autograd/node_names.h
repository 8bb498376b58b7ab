// The names torch's profiler gives autograd nodes, derived from the symbols of the nodes'
// classes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tprof::symbolizer {

// The class a vtable (_ZTV...) or typeinfo (_ZTI...) symbol belongs to, as the C++ runtime
// demangles it: "torch::autograd::generated::MmBackward0" for
// "_ZTVN5torch8autograd9generated11MmBackward0E". nullopt for any other symbol.
std::optional<std::string> class_of_rtti_symbol(std::string_view mangled);

// What torch's profiler calls a node of class `class_name` (as above): the name() the
// generated nodes override with their bare class name ("MmBackward0"), else Node::name()'s
// default, the demangled class name ("torch::autograd::AccumulateGrad").
std::string profiler_node_name(std::string_view class_name);

}  // namespace tprof::symbolizer
