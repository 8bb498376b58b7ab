#include "userspace/session/attach_plan.h"

#include <exception>

#include "symbolizer/aten/boxed_call_site.h"
#include "symbolizer/aten/op_call_guards.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/section_map.h"
#include "symbolizer/dynamo/compiled_region_sites.h"
#include "symbolizer/dynamo/wait_counter_sites.h"
#include "userspace/cli/error.h"

namespace tprof {
namespace {

constexpr const char* kTorchLibraryPrefix = "libtorch_cpu.so";
constexpr const char* kTensorLibraryPrefix = "libc10.so";
constexpr const char* kTorchPythonLibraryPrefix = "libtorch_python.so";

// The TensorImpl layout of the target's libc10 (and where its undefined tensor is), or none
// (said on the console) when shapes cannot be read: better no shapes than wrong ones.
void calibrate_tensors(const TargetProcess& target, OpProbes& probes, Console& console) {
  const auto libc10 = target.find_mapped_library(kTensorLibraryPrefix);
  std::string why_not = "no libc10 is mapped in the target";
  try {
    if (libc10) probes.tensor_layout = symbolizer::calibrate_tensor_impl_layout(libc10->host_path, &why_not);
  } catch (const std::exception& error) {
    why_not = error.what();
  }
  if (!probes.tensor_layout) {
    console.line("warning: recording without shapes: " + why_not);
    return;
  }
  if (probes.tensor_layout->undefined_tensor_symbol)
    probes.undefined_tensor_impl = libc10->load_address + probes.tensor_layout->undefined_tensor_symbol;
}

// The target's ops, from the plan of its libtorch_cpu file (worked out by the first target that
// maps it), with its own TensorImpl calibration.
std::optional<OpProbes> plan_torch_probes(const TargetProcess& target, bool record_shapes,
                                          const OpSelection& selection, TorchLibraryPlans& library_plans,
                                          Console& console) {
  const auto torch_library = target.find_mapped_library(kTorchLibraryPrefix);
  if (!torch_library) return std::nullopt;
  const auto [library_plan, plan_source] = library_plans.plan_for(*torch_library, record_shapes, console);
  OpProbes probes;
  probes.library = *torch_library;
  probes.library_plan = library_plan;
  probes.plan = library_plan->plan;
  probes.plan_source = plan_source;
  probes.plan.sites.binary_path = torch_library->host_path;
  probes.selected = select_op_sites(probes.plan, selection);
  probes.plan.sites = probes.selected.sites;
  probes.left_out_by = selection.describe();
  if (record_shapes) calibrate_tensors(target, probes, console);
  if (probes.tensor_layout && !library_plan->no_arguments_why.empty()) {
    console.line("warning: recording without shapes: " + library_plan->no_arguments_why);
    probes.tensor_layout.reset();
  }
  if (probes.tensor_layout) probes.argument_plans = library_plan->argument_plans;
  return probes;
}

// Where the ranges of the ops and autograd functions end: their `ret`s and the catch.
ExitProbes plan_range_exits(const OpProbes& ops, const TargetProcess& target, Console& console) {
  // Function i < the op count is op i; the autograd functions after them are always probed.
  const auto returns = probed_return_offsets(ops.library_plan->returns, [&](uint32_t function) {
    return function >= ops.library_plan->plan.operators.size() || ops.selected.probes(function);
  });
  ExitProbes exits = plan_exit_probes(ops.library.host_path, returns, target);
  if (exits.catches.offsets.empty())
    console.line("warning: the target maps no libstdc++ with __cxa_begin_catch: ops ended by a C++ exception "
                 "are closed at their thread's next op, flagged 'tprof: return missing'");
  return exits;
}

// GPU timing comes from libtprof_cupti.so, which CUDA loads only into a process started with
// CUDA_INJECTION64_PATH naming it. Without it, the CUDA API calls are still seen through uprobes
// on libcudart and libcuda, where the target maps them (said on the console).
void plan_gpu_activity(AttachPlan& plan, const TargetProcess& target, Console& console) {
  plan.cupti_library = target.find_mapped_library(kCuptiLibraryPrefix);
  if (plan.cupti_library) {
    plan.gpu = "CUPTI activity through " + plan.cupti_library->path_in_target;
    return;
  }
  if (target.environment_variable("CUDA_INJECTION64_PATH"))
    plan.gpu = "unavailable until CUDA loads libtprof_cupti.so (CUDA_INJECTION64_PATH) at cuInit: kernels, copies "
               "and CUDA calls are recorded from then on";
  else
    plan.gpu = "unavailable: the target has not loaded libtprof_cupti.so, which CUDA loads at cuInit in a "
               "process started with CUDA_INJECTION64_PATH naming it (see tprof env, tprof record)";
  if (plan.ops) plan.cuda_api = plan_cuda_api_probes(target, plan.ops->plan.operators);
  if (plan.cuda_api.functions == 0) return;
  plan.gpu += "; CUDA API calls are recorded from their uprobes";
  console.line("GPU timing " + plan.gpu);
}

constexpr const char* kNoRegions = "warning: torch.compile's regions are not recorded: ";
constexpr const char* kNoBoxedOps = "warning: ops called through torch.ops.<ns>.<op> are not recorded: ";

// torch.compile's regions open and close through record_function()'s constructor and end()
// probes, so they need those. torch 1.13, which has no dynamo, has no site: nothing to say.
UprobeSites compiled_region_sites(const MappedLibrary& torch_python, const symbolizer::CompiledRegionSite& site) {
  return UprobeSites{torch_python.host_path, {site.file_offset}, {site.name_argument}};
}

// Ops called from Python through the boxed dispatcher skip the op probes; without this site
// they are missing, said on the console.
std::optional<AttachPlan::BoxedOps> plan_boxed_ops(const MappedLibrary& torch_python,
                                                   const symbolizer::LibraryIndex& index, Console& console) {
  const auto site = symbolizer::find_boxed_call_site(index);
  const auto entry = site ? index.sections.file_offset_of(site->address) : std::nullopt;
  if (!entry) {
    console.line(std::string(kNoBoxedOps) + "its libtorch_python defines no torch::jit::invokeOperatorFromPython");
    return std::nullopt;
  }
  const ReturnSites returns = plan_return_sites(index, {site->address});
  return AttachPlan::BoxedOps{UprobeSites{torch_python.host_path, {*entry}, {static_cast<uint64_t>(site->operators)}},
                              exit_sites(torch_python.host_path, returns.offsets)};
}

// The probes tprof adds in the target's libtorch_python, which is read once for all of them.
void plan_torch_python_sites(AttachPlan& plan, const TargetProcess& target, Console& console) {
  const auto torch_python = target.find_mapped_library(kTorchPythonLibraryPrefix);
  if (!torch_python) return;
  const bool regions = plan.range_probes->records_annotations();
  try {
    const symbolizer::ElfFile elf(torch_python->host_path);
    const symbolizer::LibraryIndex index(elf);
    const auto region_site = symbolizer::find_compiled_region_site(index);
    plan.has_dynamo = region_site.has_value();
    if (regions && region_site) plan.compiled_regions = compiled_region_sites(*torch_python, *region_site);
    plan.boxed_ops = plan_boxed_ops(*torch_python, index, console);
  } catch (const std::exception& error) {
    if (regions && !plan.compiled_regions) console.line(kNoRegions + std::string(error.what()));
    if (!plan.boxed_ops) console.line(kNoBoxedOps + std::string(error.what()));
  }
}

constexpr const char* kNoCompileTime = "warning: torch.compile's compile time is not recorded: ";

// torch 1.13's libc10 has none, and no dynamo to time: said only where dynamo's regions were
// found (`has_dynamo`).
std::optional<AttachPlan::WaitCounters> plan_wait_counters(const TargetProcess& target, bool has_dynamo,
                                                           Console& console) {
  const auto libc10 = target.find_mapped_library(kTensorLibraryPrefix);
  if (!libc10) return std::nullopt;
  try {
    const symbolizer::ElfFile elf(libc10->host_path);
    const symbolizer::LibraryIndex index(elf);
    const auto sites = symbolizer::find_wait_counter_sites(index);
    if (!sites) {
      if (has_dynamo) console.line(std::string(kNoCompileTime) + "its libc10 defines no c10::monitor::WaitCounterHandle");
      return std::nullopt;
    }
    const auto at = [&](uint64_t offset) { return UprobeSites{libc10->host_path, {offset}, {0}}; };
    const ReturnSites returns = plan_return_sites(index, {sites->constructor_address});
    if (returns.offsets.empty()) return std::nullopt;  // nothing would name the counters
    return AttachPlan::WaitCounters{at(sites->constructor), exit_sites(libc10->host_path, returns.offsets),
                                    at(sites->start), at(sites->stop)};
  } catch (const std::exception& error) {
    console.line(kNoCompileTime + std::string(error.what()));
    return std::nullopt;
  }
}

}  // namespace

AttachPlan plan_attach(const AttachOptions& options, const TargetProcess& target, TorchLibraryPlans& library_plans,
                       Console& console) {
  AttachPlan plan;
  std::string no_python_reason = "--no-python";
  if (options.python_stacks) plan.python = symbolizer::discover_python(target.pid(), &no_python_reason);
  plan.ops = plan_torch_probes(target, options.record_shapes, options.op_selection, library_plans, console);
  if (!plan.ops && !plan.python)
    throw Error("process " + std::to_string(target.pid()) + " (" + target.name() +
                ") has not loaded libtorch_cpu and has no Python stacks to record (" + no_python_reason + ")");
  if (!plan.ops) console.line("no libtorch_cpu in the target: recording Python stacks only");
  if (!plan.python && options.python_stacks) console.line("no Python stacks: " + no_python_reason);
  if (plan.python)
    for (const std::string& warning : plan.python->warnings) console.line("warning: " + warning);
  plan_gpu_activity(plan, target, console);
  if (options.memory) {
    std::string why;
    plan.memory = plan_memory_probes(target, &why);
    if (!plan.memory) throw Error("--memory: " + why);
    console.line("memory: CPU allocations and frees from c10::ProfiledCPUMemoryReporter" +
                 std::string(plan.memory->device_reports.offsets.empty()
                                 ? ""
                                 : ", CUDA's from c10::reportMemoryUsageToProfiler,") +
                 " in " + plan.memory->library);
  }
  return plan;
}

void plan_range_probes(AttachPlan& plan, const TargetProcess& target, Console& console) {
  if (!plan.ops) return;
  const TorchLibraryPlan& library_plan = *plan.ops->library_plan;
  plan.range_probes.emplace(library_plan.ranges, plan.ops->library, console);
  plan_torch_python_sites(plan, target, console);
  plan.wait_counters = plan_wait_counters(target, plan.compiled_regions.has_value(), console);
  plan.exits = plan_range_exits(*plan.ops, target, console);
  if (plan.ops->tensor_layout) {
    plan.spills = library_plan.spills;
    plan.spills.sites.binary_path = plan.ops->library.host_path;
    plan.spills.sites = sites_of_probed_ops(plan.spills.sites, plan.ops->selected);  // a left-out op's doubles too
  }
}

TargetProbes::WindowSites sites_called_so_far(const AttachPlan& plan, const std::vector<bool>& called,
                                              bool every_node_class,
                                              const std::unordered_set<uint64_t>& node_vtables,
                                              const symbolizer::ProcessMemory& memory) {
  TargetProbes::WindowSites sites;
  if (!plan.ops) return sites;
  const OpProbes& ops = *plan.ops;
  const SelectedOps kept = called_ops(ops.selected, called);
  sites.op_entries = kept.sites;
  if (!plan.spills.sites.offsets.empty()) sites.spilled_arguments = sites_of_probed_ops(plan.spills.sites, kept);
  std::unordered_set<uint64_t> applies;  // file offsets
  if (!every_node_class && plan.range_probes) {
    sites.node_applies = plan.range_probes->node_apply_sites(node_vtables, memory);
    applies.insert(sites.node_applies->offsets.begin(), sites.node_applies->offsets.end());
  }
  if (!plan.exits) return sites;
  // Function i < the op count is op i, then evaluate_function, then each node class's apply().
  const size_t op_count = ops.library_plan->plan.operators.size();
  const auto& apply_sites = ops.library_plan->ranges->autograd.apply_sites;
  const auto returns = probed_return_offsets(ops.library_plan->returns, [&](uint32_t function) {
    if (function <= op_count) return function == op_count || kept.probes(function);
    const size_t apply = function - op_count - 1;
    return every_node_class || (apply < apply_sites.size() && applies.contains(apply_sites[apply].file_offset));
  });
  sites.returns = exit_sites(plan.exits->returns.binary_path, returns);
  return sites;
}

std::vector<uint64_t> find_op_call_guards(const OpProbes& ops) {
  const symbolizer::ElfFile elf(ops.library.host_path);
  return symbolizer::find_op_call_guards(symbolizer::SectionMap(elf), ops.library_plan->plan.addresses);
}

void attach_probes(TargetProbes& probes, OpTracer& tracer, AttachPlan& plan, uint32_t sample_hz) {
  if (plan.exits) probes.attach_exits(plan.exits->returns, plan.exits->catches);
  probes.attach_spilled_arguments(plan.spills.sites);
  if (plan.ops) probes.attach_ops(plan.ops->plan.sites);
  for (size_t library = 0; library < plan.cuda_api.entries.size(); ++library)
    probes.attach_api_calls(plan.cuda_api.entries[library], plan.cuda_api.returns[library]);
  if (plan.range_probes) plan.range_probes->attach(probes);
  if (plan.compiled_regions) probes.attach_compiled_regions(*plan.compiled_regions);
  if (plan.boxed_ops) probes.attach_boxed_ops(plan.boxed_ops->entry, plan.boxed_ops->returns);
  if (plan.wait_counters)
    probes.attach_wait_counters(plan.wait_counters->constructor, plan.wait_counters->constructed,
                                plan.wait_counters->start, plan.wait_counters->stop);
  if (plan.memory) probes.attach_memory(plan.memory->allocations, plan.memory->frees, plan.memory->device_reports);
  if (plan.python && sample_hz > 0) tracer.attach_python_sampler(sample_hz);
}

void start_recording(TargetProbes& probes, AttachPlan& plan, Console& console) {
  probes.start_recording();
  if (!plan.cupti_library) return;
  // The library wakes within 200 ms of this and asks CUPTI for activity from then on.
  try {
    probes.attach_device_activity(plan.cupti_library->host_path);
  } catch (const Error& error) {
    plan.gpu = std::string("unavailable: ") + error.what();
    console.line("warning: GPU timing " + plan.gpu);
    plan.cupti_library.reset();
  }
}

}  // namespace tprof
