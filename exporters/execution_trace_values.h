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

// Tensor and storage ids drawn from the node-id counter, as torch's observer does: one id per
// TensorImpl address and one per storage data pointer, reused whenever the address recurs.
class TensorIds {
 public:
  explicit TensorIds(uint64_t& next_id) : next_id_(next_id) {}
  uint64_t tensor(uint64_t impl_address) { return id_of(tensors_, impl_address); }
  uint64_t storage(uint64_t data_address) { return id_of(storages_, data_address); }

 private:
  uint64_t id_of(std::unordered_map<uint64_t, uint64_t>& ids, uint64_t address);

  uint64_t& next_id_;
  std::unordered_map<uint64_t, uint64_t> tensors_;
  std::unordered_map<uint64_t, uint64_t> storages_;
};

// Appends {"values": [...], "shapes": [...], "types": [...], "strides": [...]} for `values`.
void append_execution_trace_values(std::string& out, const std::vector<model::Value>& values, TensorIds& ids);

}  // namespace tprof::exporters
