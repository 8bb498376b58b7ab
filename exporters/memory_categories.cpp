#include "exporters/memory_categories.h"

#include <algorithm>
#include <string_view>
#include <unordered_set>

namespace tprof::exporters {
namespace {

constexpr std::string_view kOptimizerStepPrefix = "Optimizer.step#";

// torch's storages: 0 is none, 1 a storage without data (model::TensorValue).
bool is_storage(uint64_t address) { return address > 1; }

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

uint64_t version_of(uint32_t key, uint32_t version) { return (uint64_t{key} << 32) | version; }

}  // namespace

MemoryCategories::Key MemoryCategories::new_key() {
  seen_as_tensor_.push_back(false);
  return next_key_++;
}

// The storage at `address` when an op that began at `at_ns` saw it: the block allocated there
// then, or one freed since, or else one there before recording (torch's calculateUniqueTensorIDs).
MemoryCategories::Key MemoryCategories::storage_at(uint64_t address, uint64_t at_ns) {
  const auto live = live_.find(address);
  if (live != live_.end() && live->second.since_ns <= at_ns) return live->second.key;
  const auto freed = freed_.find(address);
  if (freed != freed_.end() && freed->second.since_ns <= at_ns && at_ns < freed->second.until_ns)
    return freed->second.key;
  const Key key = new_key();
  if (live == live_.end()) live_.emplace(address, Live{key, 0});
  return key;
}

std::vector<MemoryCategories::TensorUse> MemoryCategories::tensor_uses(const model::ClosedOp& closed) {
  std::vector<TensorUse> uses;
  const model::OpSpan& span = closed.span;
  if (!span.arguments_recorded) return uses;
  // An argument of an op whose schema is unknown may have been written: torch counts it so
  // (SchemaMatcher.inputs_are_mutable).
  const std::vector<bool>& writes = closed.op.writes_argument;
  for (size_t i = 0; i < span.inputs.size(); ++i)
    for_each_tensor(span.inputs[i], [&](const model::TensorValue& tensor) {
      if (!is_storage(tensor.storage_address) || tensor.device != "cpu") return;
      const Key key = storage_at(tensor.storage_address, span.start_ns);
      seen_as_tensor_[key] = true;
      int64_t& size = tensor_sizes_[key];
      size = std::max(size, reached_bytes(tensor));
      uses.push_back({key, i >= writes.size() ? kUnknownAccess : writes[i] ? kWrites : kReads});
    });
  return uses;
}

bool MemoryCategories::full() {
  return events_.size() >= kMaxEvents || nodes_.size() >= kMaxNodes || tensor_uses_ >= kMaxTensorUses;
}

void MemoryCategories::add_nodes(uint64_t parent, bool top_level, std::vector<Node> nodes) {
  std::vector<Node>& into = top_level ? nodes_ : open_[parent].nodes;
  into.insert(into.end(), std::make_move_iterator(nodes.begin()), std::make_move_iterator(nodes.end()));
}

// A memory event outside every op: a node of its own, as torch takes an allocation outside a
// kernel.
MemoryCategories::Node MemoryCategories::standalone_node(uint32_t event) const {
  Node node;
  node.start_ns = events_[event].time_ns;
  node.events = {event};
  return node;
}

void MemoryCategories::op(const model::ClosedOp& closed) {
  const model::OpSpan& span = closed.span;
  Subtree inside;
  if (const auto open = open_.find(span.record_id); open != open_.end()) {
    inside = std::move(open->second);
    open_.erase(open);
  }
  if (full()) {
    ++left_out_;
    return;
  }
  const model::RangeKind kind = closed.op.kind;
  std::vector<TensorUse> own = tensor_uses(closed);
  tensor_uses_ += own.size();
  const bool top_level = span.depth == 0;
  if (!top_level) {
    Subtree& parent = open_[span.parent_record_id];
    if (span.start_ns < parent.first_child_ns) {
      parent.first_child_ns = span.start_ns;
      parent.first_child_op = kind == model::RangeKind::kOperator ? closed.op.name : "";
      parent.first_child_tensor.reset();
      const bool first_is_storage = !span.inputs.empty() && span.inputs.front().kind == model::ValueKind::kTensor &&
                                    is_storage(span.inputs.front().tensor.storage_address) &&
                                    span.inputs.front().tensor.device == "cpu";
      if (first_is_storage && !own.empty()) parent.first_child_tensor = own.front().key;
    }
  }
  std::vector<Node> nodes;
  if (kind == model::RangeKind::kOperator || kind == model::RangeKind::kBackwardNode) {
    // torch's data-flow nodes are the topmost ops and autograd nodes: this one takes in all
    // that its subtree did.
    Node node;
    node.start_ns = span.start_ns;
    node.backward = kind == model::RangeKind::kBackwardNode;
    node.tensors = std::move(own);
    for (Node& child : inside.nodes) {
      node.tensors.insert(node.tensors.end(), child.tensors.begin(), child.tensors.end());
      node.events.insert(node.events.end(), child.events.begin(), child.events.end());
    }
    node.events.insert(node.events.end(), inside.events.begin(), inside.events.end());
    std::sort(node.events.begin(), node.events.end());
    // A new gradient is detached into .grad, an existing one accumulated with add_.
    if (node.backward && closed.op.name == "torch::autograd::AccumulateGrad" &&
        (inside.first_child_op == "aten::detach" || inside.first_child_op == "aten::add_"))
      node.accumulated_gradient = inside.first_child_tensor;
    nodes.push_back(std::move(node));
  } else {
    nodes = std::move(inside.nodes);
    for (const uint32_t event : inside.events) nodes.push_back(standalone_node(event));
  }
  if (kind == model::RangeKind::kUserAnnotation && closed.op.name.starts_with(kOptimizerStepPrefix))
    for (Node& node : nodes) node.in_optimizer_step = true;
  add_nodes(span.parent_record_id, top_level, std::move(nodes));
}

void MemoryCategories::memory(const model::MemoryEvent& event, uint32_t label) {
  if (event.device_type != 0) return;
  if (full()) {
    ++left_out_;
    return;
  }
  Key key = 0;
  const auto live = live_.find(event.address);
  if (event.bytes > 0) {
    // A block still live here was freed unseen: it was there before recording.
    if (live != live_.end()) freed_[event.address] = {live->second.key, live->second.since_ns, event.time_ns};
    key = new_key();
    live_[event.address] = {key, event.time_ns};
    allocated_bytes_[key] = event.bytes;
  } else if (live != live_.end()) {
    key = live->second.key;
    freed_[event.address] = {key, live->second.since_ns, event.time_ns};
    live_.erase(live);
  }
  const auto index = static_cast<uint32_t>(events_.size());
  events_.push_back({event.time_ns, event.bytes, key, label});
  if (event.external_id == 0) {
    nodes_.push_back(standalone_node(index));
    return;
  }
  Subtree& range = open_[event.external_id];
  range.events.push_back(index);
  if (event.time_ns < range.first_child_ns) {
    range.first_child_ns = event.time_ns;
    range.first_child_op.clear();
    range.first_child_tensor.reset();
  }
}

}  // namespace tprof::exporters

namespace tprof::exporters::memory_categories_detail {

// torch's MemoryProfile over the gathered nodes: the data-flow graph, then the categories, then
// the timeline's actions.
class Inference {
 public:
  using Key = MemoryCategories::Key;
  using Category = MemoryCategory;
  using Change = MemoryCategories::Change;

  explicit Inference(const MemoryCategories& gathered) : gathered_(gathered) { build_graph(); }

  void categorize() {
    set_gradients_and_temporaries();
    set_parameters_from_optimizer_steps();
    set_inputs();
    set_parameters_using_data_flow();
    set_activations();
    set_optimizer_state_from_optimizer_steps();
    set_autograd_detail();
  }

  std::vector<Change> changes() const;

 private:
  static constexpr int64_t kAllocation = -1;  // an edge's input_version: the node allocated it
  static constexpr int8_t kDeletion = -1;     // an edge's mutated: the node freed it
  struct Edge {
    Key key;
    int64_t input_version = kAllocation;
    int8_t mutated = 0;
    bool is_allocation() const { return input_version == kAllocation; }
    bool is_deletion() const { return mutated == kDeletion; }
    bool is_output() const { return (is_allocation() && !is_deletion()) || mutated == 1; }
    uint32_t output_version() const { return is_allocation() ? 0 : static_cast<uint32_t>(input_version + 1); }
  };
  struct FlowNode {
    const MemoryCategories::Node* node;
    std::vector<Edge> edges;  // by key
  };
  enum class Action : uint8_t { kPreexisting = 1, kCreate, kIncrementVersion, kDestroy };  // torch's order

  bool keyed(Key key) const { return key != 0 && gathered_.seen_as_tensor_[key]; }
  void build_graph();
  std::vector<Edge> edges_of(const MemoryCategories::Node& node);

  std::optional<Category> get(Key key, uint32_t version) const {
    if (const auto found = by_id_.find(key); found != by_id_.end()) return found->second;
    if (const auto found = by_key_.find(key); found != by_key_.end()) return found->second;
    if (const auto found = by_version_.find(version_of(key, version)); found != by_version_.end()) return found->second;
    return std::nullopt;
  }
  bool is(Key key, uint32_t version, Category category) const { return get(key, version) == category; }
  void set_by_id(Key key, Category category) {
    by_id_[key] = category;
    by_id_keys_.insert(key);
  }
  void setdefault_by_version(Key key, uint32_t version, Category category) {
    by_version_.try_emplace(version_of(key, version), category);
  }
  template <typename Visit>
  static void for_each_input(const FlowNode& node, Visit visit) {
    for (const Edge& edge : node.edges)
      if (!edge.is_allocation()) visit(edge.key, static_cast<uint32_t>(edge.input_version));
  }
  template <typename Visit>
  static void for_each_output(const FlowNode& node, Visit visit) {
    for (const Edge& edge : node.edges)
      if (edge.is_output()) visit(edge.key, edge.output_version());
  }
  std::unordered_set<uint64_t> snapshot_versions() const;
  std::unordered_set<Key> any_version_depends_on_gradient() const;
  void set_gradients_and_temporaries();
  void set_parameters_from_optimizer_steps();
  void set_inputs();
  void set_parameters_using_data_flow();
  void set_activations();
  void set_optimizer_state_from_optimizer_steps();
  void set_autograd_detail();
  int64_t size_of(Key key) const;

  const MemoryCategories& gathered_;
  std::vector<FlowNode> flow_;
  std::unordered_map<Key, uint32_t> active_version_;
  std::unordered_map<Key, Category> by_id_, by_key_;
  std::unordered_map<uint64_t, Category> by_version_;
  std::unordered_set<Key> by_id_keys_;
};

// DataFlowNode._determine_edges: the storages the subtree's ops took (written where a schema says
// so, or where no schema says anything), then those it freed, then those it allocated.
std::vector<Inference::Edge> Inference::edges_of(const MemoryCategories::Node& node) {
  constexpr uint8_t kSeenWritten = 1, kSeenRead = 2, kSeenUnknown = 4;
  std::unordered_map<Key, uint8_t> access;
  for (const MemoryCategories::TensorUse& use : node.tensors)
    access[use.key] |= use.access == MemoryCategories::kWrites  ? kSeenWritten
                       : use.access == MemoryCategories::kReads ? kSeenRead
                                                                : kSeenUnknown;
  const auto lookup = [&](Key key) { return active_version_.try_emplace(key, 0).first->second; };
  std::unordered_map<Key, Edge> edges;
  for (const auto& [key, seen] : access)
    edges[key] = Edge{key, lookup(key), static_cast<int8_t>((seen & kSeenWritten) || seen == kSeenUnknown)};
  for (const uint32_t index : node.events) {
    const MemoryCategories::Event& event = gathered_.events_[index];
    if (event.bytes >= 0 || !keyed(event.key)) continue;
    Edge& edge = edges.try_emplace(event.key, Edge{event.key}).first->second;
    edge.mutated = kDeletion;
    edge.input_version = lookup(event.key);
  }
  for (const uint32_t index : node.events) {
    const MemoryCategories::Event& event = gathered_.events_[index];
    if (event.bytes > 0 && keyed(event.key)) edges.try_emplace(event.key, Edge{event.key}).first->second.input_version = kAllocation;
  }
  std::vector<Edge> sorted;
  for (const auto& [key, edge] : edges) sorted.push_back(edge);
  std::sort(sorted.begin(), sorted.end(), [](const Edge& a, const Edge& b) { return a.key < b.key; });
  return sorted;
}

void Inference::build_graph() {
  std::vector<const MemoryCategories::Node*> nodes;
  for (const MemoryCategories::Node& node : gathered_.nodes_) nodes.push_back(&node);
  std::stable_sort(nodes.begin(), nodes.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
  for (const MemoryCategories::Node* node : nodes) {
    FlowNode flow{node, edges_of(*node)};
    for (const Edge& edge : flow.edges)
      if (edge.mutated == 1 && !edge.is_allocation()) ++active_version_[edge.key];
    flow_.push_back(std::move(flow));
  }
}

// _category_snapshot's keys: every version a node took, made or held, and those set by id.
std::unordered_set<uint64_t> Inference::snapshot_versions() const {
  std::unordered_set<uint64_t> versions;
  for (const FlowNode& node : flow_) {
    for (const Edge& edge : node.edges) {
      if (!edge.is_allocation()) versions.insert(version_of(edge.key, static_cast<uint32_t>(edge.input_version)));
      if (edge.is_allocation() && edge.is_deletion()) versions.insert(version_of(edge.key, 0));
      if (edge.is_output()) versions.insert(version_of(edge.key, edge.output_version()));
    }
  }
  for (const Key key : by_id_keys_) versions.insert(version_of(key, 0));
  return versions;
}

// Storages of which some version depends, or will depend, on a gradient: flooded through the
// nodes until nothing more joins, as edges carry it both ways.
std::unordered_set<Inference::Key> Inference::any_version_depends_on_gradient() const {
  std::unordered_set<Key> depends;
  for (size_t before = SIZE_MAX; before != depends.size();) {
    before = depends.size();
    for (const FlowNode& node : flow_) {
      bool any = false;
      for_each_input(node, [&](Key key, uint32_t version) {
        if (is(key, version, Category::kGradient) || is(key, version, Category::kParameter) || depends.contains(key)) {
          depends.insert(key);
          any = true;
        }
      });
      if (any)
        for (const Edge& edge : node.edges)
          if (edge.is_output()) depends.insert(edge.key);
    }
  }
  return depends;
}

void Inference::set_gradients_and_temporaries() {
  for (const FlowNode& node : flow_) {
    if (node.node->accumulated_gradient) set_by_id(*node.node->accumulated_gradient, Category::kGradient);
    for (const Edge& edge : node.edges)
      if (edge.is_allocation() && edge.is_deletion()) by_key_[edge.key] = Category::kTemporary;
  }
}

// torch reads an nn.Module's parameters from its Python tracer; tprof's evidence is the optimizer:
// a storage written inside an Optimizer.step and taken by some op outside every one is a
// parameter (a free at the end is no use).
void Inference::set_parameters_from_optimizer_steps() {
  std::unordered_set<Key> written_in_step, used_outside_step;
  for (const FlowNode& node : flow_)
    for (const Edge& edge : node.edges) {
      if (edge.is_allocation() || edge.is_deletion()) continue;
      if (node.node->in_optimizer_step && edge.mutated == 1) written_in_step.insert(edge.key);
      if (!node.node->in_optimizer_step) used_outside_step.insert(edge.key);
    }
  for (const Key key : written_in_step)
    if (used_outside_step.contains(key) && !is(key, 0, Category::kGradient)) set_by_id(key, Category::kParameter);
}

// _set_inputs: what feeds a gradient, made outside the backward pass, no version of which
// depends on one.
void Inference::set_inputs() {
  const std::unordered_set<Key> depends = any_version_depends_on_gradient();
  std::unordered_set<uint64_t> produces_gradient;
  for (auto node = flow_.rbegin(); node != flow_.rend(); ++node) {
    std::vector<uint64_t> tensors;
    bool any = false;
    const auto note = [&](Key key, uint32_t version) {
      tensors.push_back(version_of(key, version));
      any = any || is(key, version, Category::kGradient) || is(key, version, Category::kParameter) ||
            produces_gradient.contains(tensors.back());
    };
    for_each_input(*node, note);
    for_each_output(*node, note);
    if (any) produces_gradient.insert(tensors.begin(), tensors.end());
  }
  for (const FlowNode& node : flow_)
    if (node.node->backward)
      for_each_output(node, [&](Key key, uint32_t version) { produces_gradient.erase(version_of(key, version)); });
  for (const uint64_t candidate : produces_gradient) {
    const auto key = static_cast<Key>(candidate >> 32);
    if (!depends.contains(key)) setdefault_by_version(key, static_cast<uint32_t>(candidate), Category::kInput);
  }
}

// _set_parameters_using_data_flow: read by a forward node that depends on an input, used to
// compute a gradient, and depending on one.
void Inference::set_parameters_using_data_flow() {
  const std::unordered_set<uint64_t> snapshot = snapshot_versions();
  std::unordered_set<uint64_t> forward_tensors, candidates;
  for (const uint64_t version : snapshot)
    if (is(static_cast<Key>(version >> 32), static_cast<uint32_t>(version), Category::kInput)) forward_tensors.insert(version);
  for (const FlowNode& node : flow_) {
    if (node.node->backward) continue;
    std::vector<uint64_t> inputs;
    bool gradient = false, from_input = false;
    for_each_input(node, [&](Key key, uint32_t version) {
      inputs.push_back(version_of(key, version));
      gradient = gradient || is(key, version, Category::kGradient);
      from_input = from_input || forward_tensors.contains(inputs.back());
    });
    for_each_output(node, [&](Key key, uint32_t version) { gradient = gradient || is(key, version, Category::kGradient); });
    if (gradient || !from_input) continue;
    for_each_output(node, [&](Key key, uint32_t version) { forward_tensors.insert(version_of(key, version)); });
    for (const uint64_t input : inputs)
      if (!forward_tensors.contains(input)) candidates.insert(input);
  }
  std::unordered_set<uint64_t> used_for_gradient;
  for (auto node = flow_.rbegin(); node != flow_.rend(); ++node) {
    bool feeds = false;
    for_each_output(*node, [&](Key key, uint32_t version) {
      feeds = feeds || is(key, version, Category::kGradient) || used_for_gradient.contains(version_of(key, version));
    });
    if (feeds) for_each_input(*node, [&](Key key, uint32_t version) { used_for_gradient.insert(version_of(key, version)); });
  }
  std::unordered_set<Key> parameters;
  for (const uint64_t candidate : candidates)
    if (used_for_gradient.contains(candidate)) parameters.insert(static_cast<Key>(candidate >> 32));
  const std::unordered_set<Key> depends = any_version_depends_on_gradient();
  std::erase_if(parameters, [&](Key key) { return !depends.contains(key); });
  for (const uint64_t version : snapshot)
    if (parameters.contains(static_cast<Key>(version >> 32))) set_by_id(static_cast<Key>(version >> 32), Category::kParameter);
}

// _set_activations: flooded forward from inputs and activations, through parameters and
// temporaries, up to the backward pass.
void Inference::set_activations() {
  for (const FlowNode& node : flow_) {
    if (node.node->backward) continue;
    bool required = false, other = false;
    for_each_input(node, [&](Key key, uint32_t version) {
      const std::optional<Category> category = get(key, version);
      if (category == Category::kInput || category == Category::kActivation) required = true;
      else if (category != Category::kParameter && category != Category::kTemporary) other = true;
    });
    if (required && !other)
      for_each_output(node, [&](Key key, uint32_t version) { setdefault_by_version(key, version, Category::kActivation); });
  }
}

// torch reads an optimizer's state from its Python tracer; tprof's evidence: a storage written
// inside an Optimizer.step, taken by no op outside every one, and never freed inside one (what a
// step makes and frees is its own working storage).
void Inference::set_optimizer_state_from_optimizer_steps() {
  std::unordered_set<Key> written_in_step, outside_or_freed;
  for (const FlowNode& node : flow_)
    for (const Edge& edge : node.edges) {
      if (edge.is_allocation()) continue;
      const bool in_step = node.node->in_optimizer_step;
      if (in_step && edge.mutated == 1) written_in_step.insert(edge.key);
      if (in_step ? edge.is_deletion() : !edge.is_deletion()) outside_or_freed.insert(edge.key);
    }
  for (const Key key : written_in_step)
    if (!outside_or_freed.contains(key) && !is(key, 0, Category::kGradient)) set_by_id(key, Category::kOptimizerState);
}

// _set_autograd_detail: what the backward pass makes, first versions or rewrites of its own.
void Inference::set_autograd_detail() {
  for (const FlowNode& node : flow_) {
    if (!node.node->backward) continue;
    for_each_output(node, [&](Key key, uint32_t version) {
      const std::optional<Category> prior = version == 0 ? std::nullopt : get(key, version - 1);
      if (version == 0 || !prior || prior == Category::kAutogradDetail)
        setdefault_by_version(key, version, Category::kAutogradDetail);
    });
  }
}

// SizeMap: the bytes allocated for a storage; for one there before recording, the most any
// tensor on it reached.
int64_t Inference::size_of(Key key) const {
  if (const auto allocated = gathered_.allocated_bytes_.find(key); allocated != gathered_.allocated_bytes_.end())
    return allocated->second;
  const auto seen = gathered_.tensor_sizes_.find(key);
  return seen == gathered_.tensor_sizes_.end() ? 0 : seen->second;
}

// MemoryProfile.timeline, as the bytes each action moves between categories.
std::vector<Inference::Change> Inference::changes() const {
  struct Entry {
    int64_t time_ns;
    Action action;
    Key key;
    uint32_t version;
    int64_t bytes;
    uint32_t label;
  };
  std::vector<Entry> entries;
  std::unordered_map<uint64_t, const MemoryCategories::Event*> event_of;  // (key, allocated?) → event
  for (const MemoryCategories::Event& event : gathered_.events_) {
    if (keyed(event.key)) {
      event_of[(uint64_t{event.key} << 1) | (event.bytes > 0)] = &event;
      continue;
    }
    // A block never seen as a tensor's storage: unknown, counted as it comes and goes.
    entries.push_back({static_cast<int64_t>(event.time_ns), event.bytes > 0 ? Action::kCreate : Action::kDestroy, 0, 0,
                       event.bytes, event.label});
    if (event.bytes < 0 && event.key == 0)
      entries.push_back({-1, Action::kPreexisting, 0, 0, -event.bytes, 0});
  }
  const std::unordered_set<uint64_t> snapshot = snapshot_versions();
  std::unordered_map<Key, uint32_t> last_version;
  for (const uint64_t version : snapshot) {
    uint32_t& last = last_version[static_cast<Key>(version >> 32)];
    last = std::max(last, static_cast<uint32_t>(version));
  }
  for (const uint64_t version : snapshot) {
    const auto key = static_cast<Key>(version >> 32);
    if (static_cast<uint32_t>(version) == 0 && !event_of.contains((uint64_t{key} << 1) | 1))
      entries.push_back({-1, Action::kPreexisting, key, 0, size_of(key), 0});
  }
  for (const FlowNode& node : flow_)
    for (const Edge& edge : node.edges) {
      if (edge.is_allocation()) {
        const MemoryCategories::Event& event = *event_of.at((uint64_t{edge.key} << 1) | 1);
        entries.push_back({static_cast<int64_t>(event.time_ns), Action::kCreate, edge.key, 0, size_of(edge.key), event.label});
      } else if (edge.mutated == 1) {
        entries.push_back({static_cast<int64_t>(node.node->start_ns), Action::kIncrementVersion, edge.key,
                           static_cast<uint32_t>(edge.input_version), size_of(edge.key), 0});
      }
      if (edge.is_deletion()) {
        const MemoryCategories::Event& event = *event_of.at(uint64_t{edge.key} << 1);
        entries.push_back({static_cast<int64_t>(event.time_ns), Action::kDestroy, edge.key, last_version[edge.key],
                           size_of(edge.key), event.label});
      }
    }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::pair{a.time_ns, a.action} < std::pair{b.time_ns, b.action};
  });
  std::vector<Change> changes;
  const auto category = [&](Key key, uint32_t version) {
    return key == 0 ? Category::kUnknown : get(key, version).value_or(Category::kUnknown);
  };
  for (const Entry& entry : entries) {
    const int64_t bytes = std::abs(entry.bytes);
    switch (entry.action) {
      case Action::kPreexisting:
      case Action::kCreate: changes.push_back({entry.time_ns, bytes, category(entry.key, entry.version), entry.label}); break;
      case Action::kIncrementVersion:
        changes.push_back({entry.time_ns, -bytes, category(entry.key, entry.version), entry.label});
        changes.push_back({entry.time_ns, bytes, category(entry.key, entry.version + 1), entry.label});
        break;
      case Action::kDestroy: changes.push_back({entry.time_ns, -bytes, category(entry.key, entry.version), entry.label}); break;
    }
  }
  return changes;
}

}  // namespace tprof::exporters::memory_categories_detail

namespace tprof::exporters {

// Ranges that never closed hold what ran inside them: their nodes join the graph as they are.
void MemoryCategories::gather_open_ranges() {
  for (auto& [record_id, range] : open_) {
    for (Node& node : range.nodes) nodes_.push_back(std::move(node));
    for (const uint32_t event : range.events) nodes_.push_back(standalone_node(event));
  }
  open_.clear();
}

std::vector<MemoryCategories::Change> MemoryCategories::changes() {
  gather_open_ranges();
  memory_categories_detail::Inference inference(*this);
  inference.categorize();
  return inference.changes();
}

}  // namespace tprof::exporters
