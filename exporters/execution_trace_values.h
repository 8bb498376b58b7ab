// An Execution Trace node's "inputs"/"outputs" object (formats.md §3.4): parallel "values",
// "shapes", "types" and "strides" arrays, tensors as [tensor_id, storage_id, offset, numel,
// itemsize, device].
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/trace_model.h"

namespace tprof::exporters {

// Tensor and storage ids drawn from a counter: one id per TensorImpl address and one per
// storage data pointer, reused whenever the address recurs, as torch's observer does. Memory
// is bounded: addresses are remembered in two generations of at most kGeneration each; one
// unseen for two generations gets a new id if it recurs (a tensor that long-lived and that
// rarely used is taken for a new one).
class TensorIds {
 public:
  static constexpr size_t kGeneration = 250'000;

  explicit TensorIds(uint64_t& next_id) : next_id_(next_id) {}
  uint64_t tensor(uint64_t impl_address) { return tensors_.id_of(impl_address, next_id_); }
  uint64_t storage(uint64_t data_address) { return storages_.id_of(data_address, next_id_); }

 private:
  struct Generations {
    std::unordered_map<uint64_t, uint64_t> current;
    std::unordered_map<uint64_t, uint64_t> previous;
    uint64_t id_of(uint64_t address, uint64_t& next_id);
  };

  uint64_t& next_id_;
  Generations tensors_;
  Generations storages_;
};

// Appends {"values": [...], "shapes": [...], "types": [...], "strides": [...]} for `values`.
void append_execution_trace_values(std::string& out, const std::vector<model::Value>& values, TensorIds& ids);
// The same in two parts: `{"values": [...]`, which names tensors, and `, "shapes": [...],
// "types": [...], "strides": [...]}`, which depends only on shapes, types and constants (and so
// can be remembered, exporters/value_text_cache.h).
void append_execution_trace_value_list(std::string& out, const std::vector<model::Value>& values, TensorIds& ids);
void append_execution_trace_shapes_types_strides(std::string& out, const std::vector<model::Value>& values);

}  // namespace tprof::exporters
