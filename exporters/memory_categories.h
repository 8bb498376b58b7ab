// What each CPU storage was while recording, told the way torch's MemoryProfile tells it
// (torch/profiler/_memory_profiler.py), for --memory-timeline: parameter, optimizer state,
// input, temporary, activation, gradient, autograd detail, or unknown.
//
// torch's method, followed step by step:
// - A data-flow graph of the topmost ATen ops and autograd nodes, each with the storages its
//   subtree reads, writes (model::Operator::writes_argument: its schema's `(a!)`), allocates and
//   frees. Storages carry versions: each write makes a new one.
// - Gradients: what an AccumulateGrad node detaches or add_s. Temporaries: storages allocated
//   and freed inside one node.
// - Inputs: storages feeding a gradient that no version of depends on one.
// - Parameters: storages a forward node reads that feed a gradient and depend on one.
// - Activations: what the forward pass makes from inputs and activations.
// - Autograd detail: what the backward pass makes that is not a gradient.
// Where torch reads its Python tracer (an nn.Module's parameters, an optimizer's state), tprof has
// the `Optimizer.step#` ranges instead: a storage written inside one and taken by some op outside
// every one is a parameter; one written inside, taken by no op outside and never freed inside is
// optimizer state.
//
// A storage is one allocation of a block (torch's allocation id): an address freed and allocated
// again is a new storage. torch also merges the storages one TensorImpl points to over its life;
// tprof does not (a tensor that changes its storage, by set_ or a resize, is several).
//
// Fed as the span closer hands things on: memory events as they happen, ranges as they close
// (what a range encloses first). What a range's subtree did is gathered into the topmost op
// that holds it. Everything is kept until finish(), as torch keeps it, up to kMaxNodes nodes,
// kMaxTensorUses tensor uses and kMaxEvents events; past a bound the rest is left out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/trace_sink.h"

namespace tprof::exporters::memory_categories_detail {
class Inference;
}

namespace tprof::exporters {

// torch's categories, in its order (_CATEGORY_TO_INDEX).
enum class MemoryCategory : uint8_t {
  kParameter, kOptimizerState, kInput, kTemporary, kActivation, kGradient, kAutogradDetail, kUnknown
};
constexpr size_t kMemoryCategoryCount = 8;

class MemoryCategories {
 public:
  static constexpr size_t kMaxEvents = 4'000'000;
  static constexpr size_t kMaxNodes = 1'000'000;
  static constexpr size_t kMaxTensorUses = 8'000'000;

  // One change of a category's bytes: torch's timeline actions, as the bytes they move.
  struct Change {
    int64_t time_ns;  // -1: there before the recording (torch's PREEXISTING)
    int64_t bytes;    // added to `category`; negative: taken away
    MemoryCategory category;
    uint32_t label;   // what the memory event's caller gave; 0: none
  };

  void op(const model::ClosedOp& closed);
  // `label`: handed back with the changes this event makes.
  void memory(const model::MemoryEvent& event, uint32_t label);

  // The changes in time order, each storage's bytes counted under its category.
  std::vector<Change> changes();

  // Memory events and ops left out for the bounds (0: none).
  uint64_t left_out() const { return left_out_; }

 private:
  friend class memory_categories_detail::Inference;
  using Key = uint32_t;  // a storage: one allocation of a block, or one there before recording
  static constexpr int8_t kReads = 0, kWrites = 1, kUnknownAccess = -1;
  struct TensorUse {
    Key key;
    int8_t access;
  };
  struct Event {
    uint64_t time_ns;
    int64_t bytes;
    Key key;
    uint32_t label;
  };
  struct Node {
    uint64_t start_ns = 0;
    bool backward = false;           // an autograd node: torch's BACKWARD_FUNCTION scope
    bool in_optimizer_step = false;  // inside an Optimizer.step# range
    std::optional<Key> accumulated_gradient;
    std::vector<TensorUse> tensors;
    std::vector<uint32_t> events;    // into events_
  };
  // What the ranges closed inside a still-open range did, waiting for it to close.
  struct Subtree {
    std::vector<Node> nodes;
    std::vector<uint32_t> events;    // memory events directly inside it
    // Its first child, for AccumulateGrad: when it began, and if an op, its name and first tensor.
    uint64_t first_child_ns = UINT64_MAX;
    std::string first_child_op;
    std::optional<Key> first_child_tensor;
  };
  struct Live {
    Key key;
    uint64_t since_ns;
  };
  struct Freed {
    Key key;
    uint64_t since_ns;
    uint64_t until_ns;
  };

  Key storage_at(uint64_t address, uint64_t at_ns);
  Key new_key();
  std::vector<TensorUse> tensor_uses(const model::ClosedOp& closed);
  void add_nodes(uint64_t parent, bool top_level, std::vector<Node> nodes);
  void gather_open_ranges();
  Node standalone_node(uint32_t event) const;
  bool full();

  std::vector<Event> events_;
  std::vector<Node> nodes_;  // the graph's, once their topmost range closed
  std::unordered_map<uint64_t, Subtree> open_;  // by the record id of the range they are inside
  std::unordered_map<uint64_t, Live> live_;     // by address
  std::unordered_map<uint64_t, Freed> freed_;   // by address: its last storage freed
  std::unordered_map<Key, int64_t> tensor_sizes_;    // the most any tensor on it reached
  std::unordered_map<Key, int64_t> allocated_bytes_;  // of storages allocated while recording
  std::vector<bool> seen_as_tensor_{false};     // by key (0: none)
  size_t tensor_uses_ = 0;
  uint64_t left_out_ = 0;
  Key next_key_ = 1;
};

}  // namespace tprof::exporters
