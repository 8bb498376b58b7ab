#include "userspace/session/plan_serialization.h"

#include <memory>
#include <optional>
#include <vector>

#include "symbolizer/aten/argument_kinds.h"
#include "userspace/session/plan_bytes.h"

namespace tprof {
namespace {

// The least bytes each kind of element takes, which bounds a count read back.
constexpr size_t kU64Bytes = 8;
constexpr size_t kU32Bytes = 4;
constexpr size_t kStringBytes = 4;
constexpr size_t kOperatorBytes = 2 * kStringBytes + 1;
constexpr size_t kArgumentPlanBytes = 8;
constexpr size_t kPlannedArgumentBytes = 3 * kStringBytes + kArgumentPlanBytes + 1;
constexpr size_t kOpArgumentPlanBytes = 4 * kStringBytes + 8 + OP_PLAN_ARGUMENTS_MAX * kArgumentPlanBytes;
constexpr size_t kApplySiteBytes = kStringBytes + 2 * kU64Bytes;
constexpr size_t kVtableObjectBytes = 2 * kU64Bytes + kStringBytes;

// One overload per field type, declared before the list and optional templates that call them.
void put(ByteWriter& out, uint32_t value) { out.u32(value); }
void put(ByteWriter& out, const std::string& value) { out.string(value); }
void get(ByteReader& in, uint32_t& value) { value = in.u32(); }
void get(ByteReader& in, std::string& value) { value = in.string(); }
void put(ByteWriter& out, const model::Operator& op);
void get(ByteReader& in, model::Operator& op);
void put(ByteWriter& out, const symbolizer::PlannedArgument& argument);
void get(ByteReader& in, symbolizer::PlannedArgument& argument);
void put(ByteWriter& out, const symbolizer::OpArgumentPlan& plan);
void get(ByteReader& in, symbolizer::OpArgumentPlan& plan);
void put(ByteWriter& out, const symbolizer::NodeApplySite& site);
void get(ByteReader& in, symbolizer::NodeApplySite& site);
void put(ByteWriter& out, const symbolizer::VtableNames::Object& object);
void get(ByteReader& in, symbolizer::VtableNames::Object& object);
void put(ByteWriter& out, const symbolizer::SequenceCounterLocation& location);
void get(ByteReader& in, symbolizer::SequenceCounterLocation& location);

template <typename T>
void put_list(ByteWriter& out, const std::vector<T>& items) {
  out.u32(static_cast<uint32_t>(items.size()));
  for (const T& item : items) put(out, item);
}

template <typename T>
void get_list(ByteReader& in, std::vector<T>& items, size_t min_element_bytes) {
  items.resize(in.count(min_element_bytes));
  for (T& item : items) get(in, item);
}

// Lists of offsets, addresses and ids, whatever unsigned type holds them in memory.
template <typename T>
void put_u64s(ByteWriter& out, const std::vector<T>& values) {
  out.u32(static_cast<uint32_t>(values.size()));
  for (const T value : values) out.u64(value);
}

template <typename T>
void get_u64s(ByteReader& in, std::vector<T>& values) {
  values.resize(in.count(kU64Bytes));
  for (T& value : values) value = static_cast<T>(in.u64());
}

template <typename T>
void put_optional(ByteWriter& out, const std::optional<T>& value) {
  out.boolean(value.has_value());
  if (value) put(out, *value);
}

template <typename T>
void get_optional(ByteReader& in, std::optional<T>& value) {
  value.reset();
  if (in.boolean()) get(in, value.emplace());
}

void put(ByteWriter& out, const UprobeSites& sites) {  // the path is the reader's
  put_u64s(out, sites.offsets);
  put_u64s(out, sites.cookies);
}

void get(ByteReader& in, UprobeSites& sites) {
  get_u64s(in, sites.offsets);
  get_u64s(in, sites.cookies);
}

void put(ByteWriter& out, const model::Operator& op) {
  out.string(op.name);
  out.string(op.schema);
  out.u8(static_cast<uint8_t>(op.kind));
}

void get(ByteReader& in, model::Operator& op) {
  op.name = in.string();
  op.schema = in.string();
  const uint8_t kind = in.u8();
  if (kind > static_cast<uint8_t>(model::RangeKind::kCudaDriver))
    throw MalformedBytes("an operator's kind is " + std::to_string(kind));
  op.kind = static_cast<model::RangeKind>(kind);
  op.writes_argument = symbolizer::written_arguments(op.schema);
}

void put(ByteWriter& out, const ProbePlan& plan) {
  put(out, plan.sites);
  put_u64s(out, plan.addresses);
  put_list(out, plan.operators);
  put_u64s(out, plan.catalog_entries);
  out.u64(plan.shared_address_skipped);
}

void get(ByteReader& in, ProbePlan& plan) {
  get(in, plan.sites);
  get_u64s(in, plan.addresses);
  get_list(in, plan.operators, kOperatorBytes);
  get_u64s(in, plan.catalog_entries);
  plan.shared_address_skipped = in.u64();
}

// The BPF side's plan structs (bpf/op_arguments.h), field by field.
void put(ByteWriter& out, const argument_location& location) {
  out.u8(location.kind);
  out.u8(location.index);
}

void get(ByteReader& in, argument_location& location) {
  location.kind = in.u8();
  location.index = in.u8();
}

void put(ByteWriter& out, const argument_plan& plan) {
  out.u8(plan.read);
  out.u8(plan.reserved);
  put(out, plan.word);
  put(out, plan.length);
  out.u16(static_cast<uint16_t>(plan.displacement));
}

void get(ByteReader& in, argument_plan& plan) {
  plan.read = in.u8();
  plan.reserved = in.u8();
  get(in, plan.word);
  get(in, plan.length);
  plan.displacement = static_cast<__s16>(in.u16());
}

void put(ByteWriter& out, const op_plan& plan) {
  out.u8(plan.argument_count);
  out.u8(plan.output_read);
  out.u8(plan.output_count);
  out.u8(plan.output_word_mask);
  for (const __u8 reserved : plan.reserved) out.u8(reserved);
  for (const argument_plan& argument : plan.arguments) put(out, argument);
}

void get(ByteReader& in, op_plan& plan) {
  plan.argument_count = in.u8();
  if (plan.argument_count > OP_PLAN_ARGUMENTS_MAX)
    throw MalformedBytes("an op plan has " + std::to_string(plan.argument_count) + " arguments");
  plan.output_read = in.u8();
  plan.output_count = in.u8();
  plan.output_word_mask = in.u8();
  for (__u8& reserved : plan.reserved) reserved = in.u8();
  for (argument_plan& argument : plan.arguments) get(in, argument);
}

void put(ByteWriter& out, const symbolizer::PlannedArgument& argument) {
  out.string(argument.name);
  out.string(argument.schema_type);
  out.string(argument.cxx_type);
  put(out, argument.bpf);
  std::optional<uint32_t> xmm_register;
  if (argument.xmm_register) xmm_register = *argument.xmm_register;
  put_optional(out, xmm_register);
}

void get(ByteReader& in, symbolizer::PlannedArgument& argument) {
  argument.name = in.string();
  argument.schema_type = in.string();
  argument.cxx_type = in.string();
  get(in, argument.bpf);
  std::optional<uint32_t> xmm_register;
  get_optional(in, xmm_register);
  argument.xmm_register.reset();
  if (xmm_register) argument.xmm_register = *xmm_register;
}

void put(ByteWriter& out, const symbolizer::OpArgumentPlan& plan) {
  put_list(out, plan.inputs);
  put_list(out, plan.return_types);
  put(out, plan.bpf);
  out.string(plan.unplanned_reason);
  out.string(plan.partial_reason);
}

void get(ByteReader& in, symbolizer::OpArgumentPlan& plan) {
  get_list(in, plan.inputs, kPlannedArgumentBytes);
  get_list(in, plan.return_types, kStringBytes);
  get(in, plan.bpf);
  plan.unplanned_reason = in.string();
  plan.partial_reason = in.string();
}

void put(ByteWriter& out, const SpillProbes& spills) {
  put(out, spills.sites);
  out.u64(spills.doubles_planned);
  put_list(out, spills.ops_with_unread_doubles);
}

void get(ByteReader& in, SpillProbes& spills) {
  get(in, spills.sites);
  spills.doubles_planned = in.u64();
  get_list(in, spills.ops_with_unread_doubles, kU32Bytes);
}

void put(ByteWriter& out, const symbolizer::RecordFunctionSites& sites) {
  put_u64s(out, sites.enter_functions);
  out.u64(sites.user_scope_constructor);
  out.u64(sites.end);
  out.string(sites.source);
}

void get(ByteReader& in, symbolizer::RecordFunctionSites& sites) {
  get_u64s(in, sites.enter_functions);
  sites.user_scope_constructor = in.u64();
  sites.end = in.u64();
  sites.source = in.string();
}

void put(ByteWriter& out, const symbolizer::NodeApplySite& site) {
  out.string(site.class_name);
  out.u64(site.file_offset);
  out.u64(site.address);
}

void get(ByteReader& in, symbolizer::NodeApplySite& site) {
  site.class_name = in.string();
  site.file_offset = in.u64();
  site.address = in.u64();
}

void put(ByteWriter& out, const symbolizer::AutogradSites& sites) {
  out.u64(sites.evaluate_function);
  out.u64(sites.evaluate_function_address);
  put_list(out, sites.apply_sites);
  put_optional(out, sites.sequence_nr_offset);
  put_optional(out, sites.thread_id_offset);
  out.string(sites.source);
}

void get(ByteReader& in, symbolizer::AutogradSites& sites) {
  sites.evaluate_function = in.u64();
  sites.evaluate_function_address = in.u64();
  get_list(in, sites.apply_sites, kApplySiteBytes);
  get_optional(in, sites.sequence_nr_offset);
  get_optional(in, sites.thread_id_offset);
  sites.source = in.string();
}

void put(ByteWriter& out, const symbolizer::VtableNames::Object& object) {
  out.u64(object.address);
  out.u64(object.size);
  out.string(object.vtable);
}

void get(ByteReader& in, symbolizer::VtableNames::Object& object) {
  object.address = in.u64();
  object.size = in.u64();
  object.vtable = in.string();
}

void put(ByteWriter& out, const symbolizer::SequenceCounterLocation& location) {
  out.u64(location.tls_index_address);
  out.u64(location.field_offset);
}

void get(ByteReader& in, symbolizer::SequenceCounterLocation& location) {
  location.tls_index_address = in.u64();
  location.field_offset = in.u64();
}

void put(ByteWriter& out, const RangeSites& sites) {
  put(out, sites.annotations);
  put(out, sites.autograd);
  out.boolean(sites.vtables.has_value());
  if (sites.vtables) put_list(out, sites.vtables->objects());
  put_optional(out, sites.sequence_counter);
  out.string(sites.no_sequence_counter_why);
}

void get(ByteReader& in, RangeSites& sites) {
  get(in, sites.annotations);
  get(in, sites.autograd);
  if (in.boolean()) {
    std::vector<symbolizer::VtableNames::Object> objects;
    get_list(in, objects, kVtableObjectBytes);
    sites.vtables.emplace(std::move(objects));
  }
  get_optional(in, sites.sequence_counter);
  sites.no_sequence_counter_why = in.string();
}

// What a fresh plan always satisfies and the recording relies on: an op id (a site's cookie)
// names an operator, and an argument plan, where there are plans.
void check_consistent(const TorchLibraryPlan& plan) {
  const ProbePlan& ops = plan.plan;
  const size_t op_count = ops.operators.size();
  if (ops.sites.offsets.size() != op_count || ops.sites.cookies.size() != op_count ||
      ops.addresses.size() != op_count || ops.catalog_entries.size() > op_count)
    throw MalformedBytes("its op sites, addresses and operators disagree in number");
  for (size_t op_id = 0; op_id < op_count; ++op_id)
    if (ops.sites.cookies[op_id] != op_id) throw MalformedBytes("an op site's cookie is not its op id");
  if (!plan.argument_plans.empty() && plan.argument_plans.size() != ops.catalog_entries.size())
    throw MalformedBytes("it has argument plans for some ops only");
  if (plan.spills.sites.offsets.size() != plan.spills.sites.cookies.size())
    throw MalformedBytes("its spill sites and their op ids disagree in number");
  for (const uint64_t op_id : plan.spills.sites.cookies)
    if (op_id >= plan.argument_plans.size()) throw MalformedBytes("a spill site names an op without a plan");
  for (const uint32_t op_id : plan.spills.ops_with_unread_doubles)
    if (op_id >= op_count) throw MalformedBytes("an op with unread doubles is out of range");
  if (plan.returns.offsets.size() != plan.returns.functions.size())
    throw MalformedBytes("its return sites and their functions disagree in number");
}

}  // namespace

std::string serialize_plan(const TorchLibraryPlan& plan) {
  ByteWriter out;
  put(out, plan.plan);
  put_list(out, plan.argument_plans);
  put(out, plan.spills);
  out.string(plan.no_arguments_why);
  put_u64s(out, plan.returns.offsets);
  put_u64s(out, plan.returns.functions);
  put(out, *plan.ranges);
  put_list(out, plan.notes);
  return out.bytes();
}

TorchLibraryPlan deserialize_plan(std::string_view bytes, const std::string& host_path) {
  ByteReader in(bytes);
  TorchLibraryPlan plan;
  get(in, plan.plan);
  get_list(in, plan.argument_plans, kOpArgumentPlanBytes);
  get(in, plan.spills);
  plan.no_arguments_why = in.string();
  get_u64s(in, plan.returns.offsets);
  get_u64s(in, plan.returns.functions);
  auto ranges = std::make_shared<RangeSites>();
  get(in, *ranges);
  plan.ranges = std::move(ranges);
  get_list(in, plan.notes, kStringBytes);
  if (in.left() != 0) throw MalformedBytes(std::to_string(in.left()) + " bytes follow the plan");
  check_consistent(plan);
  // As planning leaves them: spill sites are planned (and have a file) with argument plans only.
  plan.plan.sites.binary_path = host_path;
  if (!plan.argument_plans.empty()) plan.spills.sites.binary_path = host_path;
  return plan;
}

}  // namespace tprof
