#include "exporters/memory_timeline_writer.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "exporters/json_writer.h"

namespace tprof::exporters {
namespace {

constexpr std::string_view kOptimizerStepPrefix = "Optimizer.step#";

// torch's storages: 0 is none, 1 a storage without data (model::TensorValue).
bool is_storage(uint64_t address) { return address > 1; }

// An op that writes its first argument in place: torch's trailing-underscore convention
// (aten::add_, aten::mul_, aten::addcmul_, aten::copy_).
bool writes_first_argument(const model::ClosedOp& closed) {
  const std::string& name = closed.op.name;
  return closed.op.kind == model::RangeKind::kOperator && name.size() > 1 && name.back() == '_' &&
         !closed.span.inputs.empty() && closed.span.inputs.front().kind == model::ValueKind::kTensor;
}

// The bytes of its storage a tensor reaches: up to the last element its sizes and strides
// address (a broadcast view, stride 0, reaches no further than its one row).
int64_t reached_bytes(const model::TensorValue& tensor) {
  int64_t last = 0;
  if (tensor.strides.size() == tensor.sizes.size()) {
    for (size_t dim = 0; dim < tensor.sizes.size(); ++dim) {
      if (tensor.sizes[dim] == 0) return 0;
      last += (tensor.sizes[dim] - 1) * tensor.strides[dim];
    }
  } else {
    last = tensor.numel - 1;
  }
  return (tensor.storage_offset + last + 1) * static_cast<int64_t>(tensor.itemsize);
}

template <typename Visit>
void for_each_tensor(const model::Value& value, Visit visit) {
  if (value.kind == model::ValueKind::kTensor) visit(value.tensor);
  if (value.kind == model::ValueKind::kTensorList)
    for (const model::TensorValue& tensor : value.tensors) visit(tensor);
}

}  // namespace

void MemoryTimelineWriter::note_sizes(const model::OpSpan& span) {
  const auto note = [&](const model::TensorValue& tensor) {
    if (!is_storage(tensor.storage_address) || tensor.device != "cpu") return;
    const int64_t bytes = reached_bytes(tensor);
    if (storage_bytes_.size() >= kMaxStorages && !storage_bytes_.contains(tensor.storage_address)) return;
    int64_t& known = storage_bytes_[tensor.storage_address];
    known = std::max(known, bytes);
  };
  for (const model::Value& value : span.inputs) for_each_tensor(value, note);
  for (const model::Value& value : span.outputs) for_each_tensor(value, note);
}

void MemoryTimelineWriter::op(const model::ClosedOp& closed) {
  const model::OpSpan& span = closed.span;
  OpFacts facts;
  if (span.arguments_recorded) {
    note_sizes(span);
    const bool writes = writes_first_argument(closed);
    for (size_t i = 0; i < span.inputs.size(); ++i)
      for_each_tensor(span.inputs[i], [&](const model::TensorValue& tensor) {
        if (is_storage(tensor.storage_address))
          ((writes && i == 0) ? facts.written : facts.read).push_back(tensor.storage_address);
      });
  }
  std::vector<OpFacts>& waiting = waiting_[closed.tid];
  if (span.depth > 0) {
    waiting.push_back(std::move(facts));
    return;
  }
  const bool optimizer_step =
      closed.op.kind == model::RangeKind::kUserAnnotation && closed.op.name.starts_with(kOptimizerStepPrefix);
  for (const OpFacts& inside : waiting) settle(inside, optimizer_step);
  settle(facts, false);
  waiting.clear();
}

void MemoryTimelineWriter::settle(const OpFacts& facts, bool in_optimizer_step) {
  const auto add = [&](std::unordered_set<uint64_t>& set, uint64_t storage) {
    if (set.size() < kMaxStorages) set.insert(storage);
  };
  for (const uint64_t storage : facts.written) add(in_optimizer_step ? written_in_step_ : used_outside_step_, storage);
  for (const uint64_t storage : facts.read) add(in_optimizer_step ? read_in_step_ : used_outside_step_, storage);
}

void MemoryTimelineWriter::memory(const model::MemoryEvent& event) {
  if (event.device_type != 0) return;
  if (events_.size() >= kMaxEvents) {
    ++events_left_out_;
    return;
  }
  events_.push_back({event.time_ns / 1000, event.address, event.bytes});
  if (event.bytes > 0 && allocated_.size() < kMaxStorages) allocated_.insert(event.address);
}

MemoryTimelineWriter::Category MemoryTimelineWriter::category_of(uint64_t storage) const {
  const bool used_outside = used_outside_step_.contains(storage);
  if (written_in_step_.contains(storage)) return used_outside ? kParameter : kOptimizerState;
  if (read_in_step_.contains(storage) && !used_outside) return kGradient;
  return kUnknown;
}

void MemoryTimelineWriter::finish(const model::RunSummary&) {
  using Row = std::array<int64_t, kCategoryCount + 1>;  // torch's leading 0, then the categories
  std::vector<uint64_t> times;
  std::vector<Row> rows;
  const auto row_at = [&](uint64_t time_us) -> Row& {
    if (rows.empty() || times.back() != time_us) {
      times.push_back(time_us);
      rows.push_back(rows.empty() ? Row{} : rows.back());
    }
    return rows.back();
  };
  if (!events_.empty() || !storage_bytes_.empty()) {
    // What was there before: at the first time, as torch counts its PREEXISTING tensors.
    Row& first = row_at(events_.empty() ? 0 : events_.front().time_us);
    for (const auto& [storage, bytes] : storage_bytes_)
      if (!allocated_.contains(storage)) first[1 + category_of(storage)] += bytes;
  }
  for (const Event& event : events_) row_at(event.time_us)[1 + category_of(event.address)] += event.bytes;

  std::string text = "[[";
  for (size_t i = 0; i < times.size(); ++i) {
    if (i > 0) text += ", ";
    append_json_integer(text, times[i]);
  }
  text += "], [";
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) text += ", ";
    append_json_integer_list(text, rows[i], ", ");
    if (text.size() > (1 << 20)) {
      out_.write(text);
      text.clear();
    }
  }
  text += "]]\n";
  out_.write(text);
}

}  // namespace tprof::exporters
