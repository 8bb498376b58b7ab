// The BPF argument readers (bpf/argument_reader.bpf.h, bpf/list_elements.bpf.h) on memory laid
// out as libtorch lays it out. This process stands in for a torch target: it defines functions
// named and typed like at::_ops::<op>::call, plans each from a schema and its own mangled symbol
// as tprof plans libtorch's ops (plan_op_arguments), probes them with the real op tracer, calls
// them with crafted arguments, and decodes the records with the real consumer and
// ArgumentDecoder. Every value checked is one the probe read from the crafted bytes.
#include <gtest/gtest.h>

#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "symbolizer/aten/argument_plan.h"
#include "symbolizer/aten/tensor_impl_layout.h"
#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/section_map.h"
#include "tests/support/int_lists.h"
#include "tests/support/recording_sink.h"
#include "tests/support/test_environment.h"
#include "userspace/assemble/span_closer.h"
#include "userspace/assemble/wall_clock.h"
#include "userspace/ingest/argument_decoder.h"
#include "userspace/ingest/record_consumer.h"
#include "userspace/loader/op_tracer.h"

// Stand-ins for the libtorch types the readers know, laid out as torch 2.3+ lays them out
// (std::optional, a two-uint32 intrusive_ptr_target; docs/runtime-layouts.md), in the
// namespaces that make their mangled names demangle as libtorch's do: the planner takes each
// parameter's C++ type from the call symbol.
namespace c10 {

// intrusive_ptr_target since torch 2.3: a vtable pointer and two uint32 counts.
struct IntrusivePtrTarget {
  const void* vtable = nullptr;
  uint32_t refcount = 1;
  uint32_t weakcount = 1;
};

struct StorageImpl {
  IntrusivePtrTarget base;
  const void* data = nullptr;  // data_ptr_'s first word
  uint64_t data_context[2] = {};
};

struct TensorImpl {
  IntrusivePtrTarget base;
  StorageImpl* storage = nullptr;  // storage_: TensorImpl's first member
  uint64_t other_fields[5] = {};
  // c10::impl::SizesAndStrides: past 5 dims, the inline storage's first word points at a heap
  // array of the sizes, then the strides.
  uint64_t dims = 0;
  union {
    int64_t* out_of_line;
    int64_t inline_storage[10] = {};  // 5 sizes, then 5 strides
  };
  int64_t storage_offset = 0;
  int64_t numel = 0;
  uint16_t dtype = 0;  // data_type_: the ScalarType's index
  struct {
    int8_t type = 0;
    int8_t index = 0;
    bool has_value = false;  // std::optional<Device>: the payload, then the flag
  } device_opt;
};

template <typename T>
struct ArrayRef {
  const T* data;
  size_t length;
};

// A std::optional<ArrayRef<T>>: 24 bytes, trivially copyable, so passed in memory.
template <typename T>
struct OptionalArrayRef {
  std::optional<ArrayRef<T>> wrapped;
};

struct SymInt {
  int64_t data = 0;
};

struct Scalar {
  enum class Tag : uint32_t { HAS_d, HAS_i } tag = Tag::HAS_i;
  union {
    double d;
    int64_t i = 0;
    alignas(16) double z[2];  // c10::complex<double> aligns the union to 16
  } v;
};

struct IValue {
  enum class Tag : uint32_t { None, Tensor };
  const void* payload = nullptr;  // a Tensor's TensorImpl*
  Tag tag = Tag::None;
  bool is_intrusive_ptr = false;
};

// ListImpl: its std::vector<IValue> right after its intrusive_ptr_target base.
struct ListImpl {
  IntrusivePtrTarget base;
  std::vector<IValue> list;
  const void* element_type = nullptr;
};

// An intrusive_ptr<ListImpl>.
template <typename T>
struct List {
  ListImpl* impl = nullptr;
};

// The 16-byte payload, then the tag (IListRefTag: Unboxed, Boxed, Materialized).
template <typename T>
struct IListRef {
  enum class Tag : uint32_t { Unboxed, Boxed, Materialized };
  union {
    const List<T>* boxed;
    ArrayRef<T> unboxed;
    const std::vector<std::reference_wrapper<const T>>* materialized;
  };
  Tag tag;
};

}  // namespace c10

namespace at {

class Tensor {
 public:
  c10::TensorImpl* impl = nullptr;  // intrusive_ptr<TensorImpl>: one pointer
};

}  // namespace at

static_assert(offsetof(c10::TensorImpl, storage) == 16);
static_assert(offsetof(c10::ListImpl, list) == offsetof(c10::TensorImpl, storage),
              "the reader finds a ListImpl's vector at TensorImpl::storage_'s offset");
static_assert(sizeof(c10::Scalar) == 32 && offsetof(c10::Scalar, v) == 16);
static_assert(sizeof(c10::IValue) == 16 && sizeof(c10::IListRef<at::Tensor>) == 24);
static_assert(sizeof(c10::OptionalArrayRef<int64_t>) == 24 &&
              std::is_trivially_copyable_v<c10::OptionalArrayRef<int64_t>>);
static_assert(sizeof(std::optional<std::string_view>) == 24 &&
              std::is_trivially_copyable_v<std::optional<std::string_view>>);

// The stand-in ops, one struct per op as torchgen writes them. noipa: each keeps its own body,
// its symbol and the SysV calling convention, and every call stays.
namespace at::_ops {

struct tensor_list {
  [[gnu::noipa]] static void call(c10::ArrayRef<at::Tensor>, int64_t) {}
};
struct tensor_list_ref {
  [[gnu::noipa]] static void call(const c10::IListRef<at::Tensor>&, int64_t) {}
};
struct optional_tensor_list {
  [[gnu::noipa]] static void call(const at::Tensor&, const c10::List<std::optional<at::Tensor>>&) {}
};
struct optional_scalars {
  [[gnu::noipa]] static void call(const std::optional<c10::Scalar>&, const std::optional<c10::Scalar>&,
                                  const std::optional<c10::Scalar>&) {}
};
struct optional_words {
  [[gnu::noipa]] static void call(std::optional<int64_t>, std::optional<int64_t>, int64_t, int64_t,
                                  std::optional<double>, std::optional<int64_t>, std::optional<double>) {}
};
struct optional_strings {
  [[gnu::noipa]] static void call(const at::Tensor&, std::optional<std::string_view>,
                                  std::optional<std::string_view>) {}
};
struct optional_int_lists {
  [[gnu::noipa]] static void call(c10::OptionalArrayRef<int64_t>, c10::OptionalArrayRef<int64_t>) {}
};
struct scalar_list {
  [[gnu::noipa]] static void call(c10::ArrayRef<c10::Scalar>) {}
};
struct int_lists {
  [[gnu::noipa]] static void call(c10::ArrayRef<int64_t>, c10::ArrayRef<int64_t>, c10::ArrayRef<c10::SymInt>) {}
};
struct tensors {
  [[gnu::noipa]] static void call(const at::Tensor&, const at::Tensor&) {}
};

}  // namespace at::_ops

namespace tprof {
namespace {

using model::Value;
using model::ValueKind;
using testing::as_vector;

// Op ids: the attach cookies, and indices into kOps and the decoder's plans.
enum Op : uint32_t {
  kTensorList,
  kTensorListRef,
  kOptionalTensorList,
  kOptionalScalars,
  kOptionalWords,
  kOptionalStrings,
  kOptionalIntLists,
  kScalarList,
  kIntLists,
  kTensors,
};

struct StandInOp {
  const char* schema;
  uintptr_t function;
};

template <typename Function>
uintptr_t address_of(Function* function) {
  return reinterpret_cast<uintptr_t>(function);
}

const StandInOp kOps[] = {
    {"test::tensor_list(Tensor[] tensors, int dim) -> ()", address_of(&at::_ops::tensor_list::call)},
    {"test::tensor_list_ref(Tensor[] tensors, int dim) -> ()", address_of(&at::_ops::tensor_list_ref::call)},
    {"test::optional_tensor_list(Tensor self, Tensor?[] indices) -> ()",
     address_of(&at::_ops::optional_tensor_list::call)},
    {"test::optional_scalars(Scalar? int_scalar, Scalar? real_scalar, Scalar? none) -> ()",
     address_of(&at::_ops::optional_scalars::call)},
    {"test::optional_words(int? count, int? no_count, int a, int b, float? real, int? stacked, float? no_real) -> ()",
     address_of(&at::_ops::optional_words::call)},
    {"test::optional_strings(Tensor self, str? mode, str? no_mode) -> ()",
     address_of(&at::_ops::optional_strings::call)},
    {"test::optional_int_lists(int[]? dims, int[]? no_dims) -> ()", address_of(&at::_ops::optional_int_lists::call)},
    {"test::scalar_list(Scalar[] scalars) -> ()", address_of(&at::_ops::scalar_list::call)},
    {"test::int_lists(int[] first, int[] second, SymInt[] symbolic) -> ()", address_of(&at::_ops::int_lists::call)},
    {"test::tensors(Tensor self, Tensor other) -> ()", address_of(&at::_ops::tensors::call)},
};

constexpr size_t kRingBufferBytes = 4 << 20;

struct DType {
  uint16_t index;
  std::string_view name;  // caffe2's, as the decoder spells it
};
constexpr DType kFloat{6, "float"};
constexpr DType kLong{4, "long int"};

struct Device {
  int8_t type;
  int8_t index;
  std::string_view name;
};
constexpr Device kCpu{0, -1, "cpu"};
constexpr Device kCuda0{1, 0, "cuda:0"};

// A contiguous tensor's TensorImpl and storage. Not movable: at::Tensors point at it.
class FakeTensor {
 public:
  explicit FakeTensor(std::vector<int64_t> sizes, DType dtype = kFloat, Device device = kCpu,
                      int64_t storage_offset = 0)
      : sizes_(std::move(sizes)), strides_(sizes_.size()), dtype_(dtype), device_(device) {
    int64_t numel = 1;
    for (size_t dim = sizes_.size(); dim-- > 0;) {
      strides_[dim] = numel;
      numel *= sizes_[dim];
    }
    storage_.data = &data_;
    impl_.storage = &storage_;
    impl_.dims = sizes_.size();
    if (sizes_.size() > 5) {
      out_of_line_ = sizes_;
      out_of_line_.insert(out_of_line_.end(), strides_.begin(), strides_.end());
      impl_.out_of_line = out_of_line_.data();
    } else {
      std::copy(sizes_.begin(), sizes_.end(), impl_.inline_storage);
      std::copy(strides_.begin(), strides_.end(), impl_.inline_storage + 5);
    }
    impl_.storage_offset = storage_offset;
    impl_.numel = numel;
    impl_.dtype = dtype.index;
    impl_.device_opt = {device.type, device.index, true};
  }
  FakeTensor(const FakeTensor&) = delete;
  FakeTensor& operator=(const FakeTensor&) = delete;

  const at::Tensor& tensor() const { return tensor_; }
  uint64_t impl_address() const { return reinterpret_cast<uint64_t>(&impl_); }

  // What the decoder must have made of the bytes BPF copied.
  void expect_decoded(const model::TensorValue& decoded) const {
    EXPECT_EQ(decoded.impl_address, impl_address());
    EXPECT_EQ(decoded.storage_address, reinterpret_cast<uint64_t>(&data_));
    EXPECT_EQ(as_vector(decoded.sizes), sizes_);
    EXPECT_EQ(as_vector(decoded.strides), strides_);
    EXPECT_EQ(decoded.storage_offset, impl_.storage_offset);
    EXPECT_EQ(decoded.numel, impl_.numel);
    EXPECT_EQ(decoded.dtype, dtype_.name);
    EXPECT_EQ(decoded.device, device_.name);
  }

 private:
  std::vector<int64_t> sizes_, strides_, out_of_line_;
  DType dtype_;
  Device device_;
  float data_ = 0;
  c10::StorageImpl storage_;
  c10::TensorImpl impl_;
  at::Tensor tensor_{&impl_};
};

using FakeTensors = std::vector<std::unique_ptr<FakeTensor>>;

// `count` tensors of distinct shapes: {1, 2}, {2, 3}, ... so that a misplaced one shows.
FakeTensors make_tensors(int64_t count) {
  FakeTensors tensors;
  for (int64_t i = 0; i < count; ++i)
    tensors.push_back(std::make_unique<FakeTensor>(std::vector<int64_t>{i + 1, i + 2}));
  return tensors;
}

std::vector<at::Tensor> at_tensors(const FakeTensors& tensors) {
  std::vector<at::Tensor> list;
  for (const auto& tensor : tensors) list.push_back(tensor->tensor());
  return list;
}

void expect_tensor_list(const Value& value, const FakeTensors& crafted) {
  ASSERT_EQ(value.kind, ValueKind::kTensorList);
  EXPECT_EQ(value.list_length, crafted.size());
  ASSERT_EQ(value.tensors.size(), crafted.size()) << "elements lost between records";
  for (size_t i = 0; i < crafted.size(); ++i) {
    SCOPED_TRACE("element " + std::to_string(i));
    crafted[i]->expect_decoded(value.tensors[i]);
  }
}

void expect_int(const Value& value, int64_t expected) {
  ASSERT_EQ(value.kind, ValueKind::kInt);
  ASSERT_EQ(value.ints.size(), 1u);
  EXPECT_EQ(value.ints[0], expected);
}

void expect_double(const Value& value, double expected) {
  ASSERT_EQ(value.kind, ValueKind::kDouble);
  EXPECT_EQ(value.real, expected);
}

void expect_int_list(const Value& value, const std::vector<int64_t>& expected) {
  ASSERT_EQ(value.kind, ValueKind::kIntList);
  EXPECT_EQ(value.list_length, expected.size());
  EXPECT_EQ(as_vector(value.ints), expected);
}

std::vector<int64_t> iota_list(size_t count, int64_t first) {
  std::vector<int64_t> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = first + static_cast<int64_t>(i);
  return values;
}

c10::Scalar int_scalar(int64_t value) {
  c10::Scalar scalar;
  scalar.tag = c10::Scalar::Tag::HAS_i;
  scalar.v.i = value;
  return scalar;
}

c10::Scalar double_scalar(double value) {
  c10::Scalar scalar;
  scalar.tag = c10::Scalar::Tag::HAS_d;
  scalar.v.d = value;
  return scalar;
}

// The TensorImplLayout calibration would derive from a libc10 built with these stand-ins.
symbolizer::TensorImplLayout stand_in_layout() {
  symbolizer::TensorImplLayout layout;
  layout.dims = offsetof(c10::TensorImpl, dims);
  layout.inline_sizes = offsetof(c10::TensorImpl, inline_storage);
  layout.inline_strides = layout.inline_sizes + 5 * sizeof(int64_t);
  layout.storage_offset = offsetof(c10::TensorImpl, storage_offset);
  layout.numel = offsetof(c10::TensorImpl, numel);
  layout.dtype = offsetof(c10::TensorImpl, dtype);
  layout.device_type = offsetof(c10::TensorImpl, device_opt) + 0;
  layout.device_index = offsetof(c10::TensorImpl, device_opt) + 1;
  layout.device_has_value = offsetof(c10::TensorImpl, device_opt) + 2;
  layout.storage = offsetof(c10::TensorImpl, storage);
  layout.storage_data = offsetof(c10::StorageImpl, data);
  layout.optional_payload_first = true;
  layout.source = "the test's stand-in TensorImpl";
  return layout;
}

// Where this executable's link-time addresses are mapped (0 unless it is PIE): the first object
// dl_iterate_phdr reports is the executable.
uint64_t executable_load_bias() {
  uint64_t bias = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* found) {
        *static_cast<uint64_t*>(found) = info->dlpi_addr;
        return 1;
      },
      &bias);
  return bias;
}

struct PlannedOps {
  UprobeSites sites;  // cookie i: kOps[i]
  std::vector<symbolizer::OpArgumentPlan> plans;
  std::vector<model::Operator> operators;
};

// Each stand-in op's probe site in this executable, and its plan from its schema and mangled
// symbol, as tprof plans libtorch's ops.
PlannedOps plan_stand_in_ops() {
  const std::string executable = std::filesystem::read_symlink("/proc/self/exe");
  const symbolizer::ElfFile elf(executable);
  const symbolizer::DefinedSymbols symbols(elf);
  const symbolizer::SectionMap sections(elf);
  const uint64_t bias = executable_load_bias();
  PlannedOps planned{{executable, {}, {}}, {}, {}};
  for (const StandInOp& op : kOps) {
    const symbolizer::DefinedSymbol* symbol = symbols.function_containing(op.function - bias);
    if (!symbol || symbol->address != op.function - bias)
      testing::fail_harness(std::string("no symbol for ") + op.schema);
    auto plan = symbolizer::plan_op_arguments(op.schema, std::string(symbol->name).c_str(),
                                              symbolizer::OptionalAbi::kStdOptional);
    if (!plan.unplanned_reason.empty() || !plan.partial_reason.empty())
      testing::fail_harness(std::string(op.schema) + ": " + plan.unplanned_reason + plan.partial_reason);
    planned.sites.offsets.push_back(symbolizer::probe_offset(symbol, sections));
    planned.sites.cookies.push_back(planned.plans.size());
    planned.plans.push_back(std::move(plan));
    planned.operators.push_back({op.schema, op.schema});
  }
  return planned;
}

// The stand-in ops probed in this process by the real op tracer, recording.
class ProbedOps {
 public:
  ProbedOps() : tracer_(kRingBufferBytes) {
    PlannedOps planned = plan_stand_in_ops();
    const symbolizer::TensorImplLayout layout = stand_in_layout();
    probes_ = tracer_.add_target({.pid = ::getpid(), .tensors = layout.to_bpf()});
    for (uint32_t op_id = 0; op_id < planned.plans.size(); ++op_id)
      probes_->set_op_plan(op_id, planned.plans[op_id].bpf);
    probes_->attach_ops(planned.sites);
    probes_->start_recording();
    operators_ = std::move(planned.operators);
    decoder_.emplace(layout, std::move(planned.plans), undefined_tensor_impl());
  }

  // The inputs of op `op` as recorded while `call` calls it once; none on a failure.
  std::vector<Value> inputs_of(Op op, const std::function<void()>& call) {
    std::vector<test::RecordingSink::Op> recorded;
    for (auto& closed : ranges_recorded(call))
      if (closed.span.operator_index == op) recorded.push_back(std::move(closed));
    if (recorded.size() != 1) {
      ADD_FAILURE() << recorded.size() << " ranges of " << kOps[op].schema << " recorded, expected 1";
      return {};
    }
    return recorded.front().span.inputs;
  }

  uint64_t undefined_tensor_impl() const { return reinterpret_cast<uint64_t>(&undefined_tensor_impl_); }

 private:
  // Every range recorded while `call` runs, through the real consumer, decoder and span closer.
  std::vector<test::RecordingSink::Op> ranges_recorded(const std::function<void()>& call) {
    test::RecordingSink sink;
    SpanCloser closer(operators_, {}, MonotonicToUnix(0), [](uint32_t) { return std::string(); }, sink);
    RecordDecoder records(
        closer, {.on_new_thread = [](uint32_t) {},
                 .on_stack_id = [](uint64_t) {},
                 .decode_arguments = [this](uint32_t id, bool returns,
                                            const op_arguments& raw) { return decoder_->decode(id, returns, raw); },
                 .append_list_elements = [this](const list_elements& elements, std::vector<Value>& values) {
                   return decoder_->append_list_elements(elements, values);
                 }});
    RecordRouter router;
    router.route(static_cast<uint32_t>(::getpid()), records);
    RecordConsumer consumer(tracer_.ring_buffer_fd(), router);
    call();
    while (consumer.drain(1024)) {
    }
    closer.finish(monotonic_now_ns());
    EXPECT_EQ(records.malformed_records(), 0u);
    EXPECT_EQ(records.unmatched_list_elements(), 0u) << "continuation records that continued no list";
    EXPECT_EQ(probes_->losses().ring_buffer_full, 0u);
    return sink.ops;
  }

  OpTracer tracer_;
  std::unique_ptr<TargetProbes> probes_;
  std::vector<model::Operator> operators_;
  std::optional<ArgumentDecoder> decoder_;
  c10::TensorImpl undefined_tensor_impl_;  // what the target's UndefinedTensorImpl singleton is
};

class BpfArgumentReaders : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { ops_.reset(); }

  void SetUp() override {
    if (!testing::has_tracing_capabilities())
      GTEST_SKIP() << "\n*** SKIPPED LOUDLY: loading the op tracer and attaching uprobes needs root (CAP_SYS_ADMIN, "
                      "or CAP_BPF + CAP_PERFMON); the BPF argument readers are NOT tested ***";
    if (!ops_) ops_ = std::make_unique<ProbedOps>();  // loads the tracer once for the suite
  }

  static std::vector<Value> inputs_of(Op op, const std::function<void()>& call) { return ops_->inputs_of(op, call); }

  static inline std::unique_ptr<ProbedOps> ops_;
};

// ArrayRef<Tensor> (READ_TENSOR_LIST): 4 tensors in the op's record, 8 and then 1 in two
// OP_RECORD_LIST_ELEMENTS records.
TEST_F(BpfArgumentReaders, TensorArrayRefLongerThanItsRecord) {
  const FakeTensors crafted = make_tensors(13);
  const std::vector<at::Tensor> list = at_tensors(crafted);
  const auto inputs = inputs_of(kTensorList, [&] { at::_ops::tensor_list::call({list.data(), list.size()}, -2); });
  ASSERT_EQ(inputs.size(), 2u);
  expect_tensor_list(inputs[0], crafted);
  expect_int(inputs[1], -2);
}

// ITensorListRef tagged Unboxed: an ArrayRef<Tensor> inside the 24-byte IListRef.
TEST_F(BpfArgumentReaders, TensorListRefUnboxed) {
  const FakeTensors crafted = make_tensors(6);
  const std::vector<at::Tensor> list = at_tensors(crafted);
  c10::IListRef<at::Tensor> ref{.unboxed = {list.data(), list.size()}, .tag = c10::IListRef<at::Tensor>::Tag::Unboxed};
  const auto inputs = inputs_of(kTensorListRef, [&] { at::_ops::tensor_list_ref::call(ref, 1); });
  ASSERT_EQ(inputs.size(), 2u);
  expect_tensor_list(inputs[0], crafted);
  expect_int(inputs[1], 1);
}

// ITensorListRef tagged Boxed: a c10::List<Tensor>, IValues of 16 bytes, past its record too.
TEST_F(BpfArgumentReaders, TensorListRefBoxed) {
  const FakeTensors crafted = make_tensors(10);
  c10::ListImpl impl;
  for (const auto& tensor : crafted)
    impl.list.push_back({reinterpret_cast<const void*>(tensor->impl_address()), c10::IValue::Tag::Tensor, true});
  const c10::List<at::Tensor> boxed{&impl};
  c10::IListRef<at::Tensor> ref{.boxed = &boxed, .tag = c10::IListRef<at::Tensor>::Tag::Boxed};
  const auto inputs = inputs_of(kTensorListRef, [&] { at::_ops::tensor_list_ref::call(ref, 0); });
  ASSERT_EQ(inputs.size(), 2u);
  expect_tensor_list(inputs[0], crafted);
}

// ITensorListRef tagged Materialized: a vector of reference_wrappers, each a pointer to a Tensor.
TEST_F(BpfArgumentReaders, TensorListRefMaterialized) {
  const FakeTensors crafted = make_tensors(5);
  const std::vector<at::Tensor> list = at_tensors(crafted);
  const std::vector<std::reference_wrapper<const at::Tensor>> materialized(list.begin(), list.end());
  c10::IListRef<at::Tensor> ref{.materialized = &materialized,
                                .tag = c10::IListRef<at::Tensor>::Tag::Materialized};
  const auto inputs = inputs_of(kTensorListRef, [&] { at::_ops::tensor_list_ref::call(ref, 0); });
  ASSERT_EQ(inputs.size(), 2u);
  expect_tensor_list(inputs[0], crafted);
}

// Tensor?[] (READ_OPTIONAL_TENSOR_LIST): a ListImpl's IValues, Nones among the tensors; a None
// is written as the undefined tensor.
TEST_F(BpfArgumentReaders, OptionalTensorListWithNones) {
  const FakeTensor self({4});
  const FakeTensors crafted = make_tensors(3);
  c10::ListImpl impl;
  for (const auto& tensor : crafted) {
    impl.list.push_back({reinterpret_cast<const void*>(tensor->impl_address()), c10::IValue::Tag::Tensor, true});
    impl.list.push_back({});  // None
  }
  const c10::List<std::optional<at::Tensor>> indices{&impl};
  const auto inputs =
      inputs_of(kOptionalTensorList, [&] { at::_ops::optional_tensor_list::call(self.tensor(), indices); });
  ASSERT_EQ(inputs.size(), 2u);
  ASSERT_EQ(inputs[0].kind, ValueKind::kTensor);
  self.expect_decoded(inputs[0].tensor);
  const Value& list = inputs[1];
  ASSERT_EQ(list.kind, ValueKind::kTensorList);
  EXPECT_EQ(list.list_length, 6u);
  ASSERT_EQ(list.tensors.size(), 6u);
  for (size_t i = 0; i < crafted.size(); ++i) {
    SCOPED_TRACE("tensor " + std::to_string(i));
    crafted[i]->expect_decoded(list.tensors[2 * i]);
    EXPECT_EQ(list.tensors[2 * i + 1].impl_address, ops_->undefined_tensor_impl());
    EXPECT_EQ(list.tensors[2 * i + 1].dtype, "nullptr (uninitialized)");
  }
}

// Scalar? (READ_OPTIONAL_SCALAR) of std::optional: the Scalar at 0, its flag at 32.
TEST_F(BpfArgumentReaders, OptionalScalarsEngagedAndNot) {
  const std::optional<c10::Scalar> integer = int_scalar(-7);
  const std::optional<c10::Scalar> real = double_scalar(2.5);
  const std::optional<c10::Scalar> none;
  const auto inputs = inputs_of(kOptionalScalars, [&] { at::_ops::optional_scalars::call(integer, real, none); });
  ASSERT_EQ(inputs.size(), 3u);
  expect_int(inputs[0], -7);
  expect_double(inputs[1], 2.5);
  EXPECT_EQ(inputs[2].kind, ValueKind::kNone);
}

// int? and float? (READ_OPTIONAL_WORD_PAIR): two eightbytes, the payload's then the flag's, in
// registers for the first two, on the stack once the six integer registers are taken (a
// float? is only reachable there).
TEST_F(BpfArgumentReaders, OptionalWordPairsInRegistersAndOnTheStack) {
  const auto inputs = inputs_of(kOptionalWords, [] {
    at::_ops::optional_words::call(int64_t{42}, std::nullopt, 5, 6, 0.125, int64_t{-3}, std::nullopt);
  });
  ASSERT_EQ(inputs.size(), 7u);
  expect_int(inputs[0], 42);
  EXPECT_EQ(inputs[1].kind, ValueKind::kNone);
  expect_int(inputs[2], 5);
  expect_int(inputs[3], 6);
  expect_double(inputs[4], 0.125);
  expect_int(inputs[5], -3);
  EXPECT_EQ(inputs[6].kind, ValueKind::kNone);
}

// str? (READ_STD_OPTIONAL_STRING): 24 bytes on the stack, libstdc++'s {size, data}, then the flag.
TEST_F(BpfArgumentReaders, StdOptionalStringsOnTheStack) {
  const FakeTensor self({2, 2});
  const std::string mode = "floor_divide_mode";  // in the heap, not next to anything the probe reads
  const auto inputs = inputs_of(
      kOptionalStrings, [&] { at::_ops::optional_strings::call(self.tensor(), std::string_view(mode), std::nullopt); });
  ASSERT_EQ(inputs.size(), 3u);
  self.expect_decoded(inputs[0].tensor);
  ASSERT_EQ(inputs[1].kind, ValueKind::kString);
  EXPECT_EQ(inputs[1].text, mode);
  EXPECT_EQ(inputs[2].kind, ValueKind::kNone);
}

// int[]? over std::optional (READ_STD_OPTIONAL_INT_LIST): 24 bytes on the stack, {data, length},
// then the flag; 10 elements, so 2 follow in a continuation record.
TEST_F(BpfArgumentReaders, StdOptionalIntListsOnTheStack) {
  const std::vector<int64_t> dims = iota_list(10, -4);
  const c10::OptionalArrayRef<int64_t> engaged{c10::ArrayRef<int64_t>{dims.data(), dims.size()}};
  const auto inputs = inputs_of(kOptionalIntLists, [&] { at::_ops::optional_int_lists::call(engaged, {}); });
  ASSERT_EQ(inputs.size(), 2u);
  expect_int_list(inputs[0], dims);
  EXPECT_EQ(inputs[1].kind, ValueKind::kNone);
}

// Scalar[] (READ_SCALAR_LIST): every Scalar in continuation records, 16 to a record.
TEST_F(BpfArgumentReaders, ScalarListAcrossRecords) {
  std::vector<double> expected;
  std::vector<c10::Scalar> scalars;
  for (int i = 0; i < 20; ++i) {
    expected.push_back(0.5 * i - 3);
    scalars.push_back(double_scalar(expected.back()));
  }
  const auto inputs = inputs_of(kScalarList, [&] { at::_ops::scalar_list::call({scalars.data(), scalars.size()}); });
  ASSERT_EQ(inputs.size(), 1u);
  ASSERT_EQ(inputs[0].kind, ValueKind::kDoubleList);
  EXPECT_EQ(inputs[0].list_length, expected.size());
  EXPECT_EQ(inputs[0].reals, expected);
}

// int[] and SymInt[] (READ_INT_LIST): the record holds 8 ints of a list and 16 in all, so the
// first list has 1 in a continuation, the second 142 in three, the SymInt list all of its 12.
TEST_F(BpfArgumentReaders, IntListsPastTheirRecord) {
  const std::vector<int64_t> first = iota_list(9, 100);
  const std::vector<int64_t> second = iota_list(150, -75);
  const std::vector<int64_t> symbolic_values = iota_list(12, 1'000'000'000'000);
  std::vector<c10::SymInt> symbolic;
  for (const int64_t value : symbolic_values) symbolic.push_back({value});
  const auto inputs = inputs_of(kIntLists, [&] {
    at::_ops::int_lists::call({first.data(), first.size()}, {second.data(), second.size()},
                              {symbolic.data(), symbolic.size()});
  });
  ASSERT_EQ(inputs.size(), 3u);
  expect_int_list(inputs[0], first);
  expect_int_list(inputs[1], second);
  expect_int_list(inputs[2], symbolic_values);
}

// Past LIST_ELEMENTS_MAX (1,024) elements a list is read no further: partial, so unknown.
TEST_F(BpfArgumentReaders, IntListPastTheElementBoundIsPartial) {
  const std::vector<int64_t> huge = iota_list(1100, 0);
  const std::vector<int64_t> small = {3};
  const auto inputs = inputs_of(kIntLists, [&] {
    at::_ops::int_lists::call({huge.data(), huge.size()}, {small.data(), small.size()}, {});
  });
  ASSERT_EQ(inputs.size(), 3u);
  ASSERT_EQ(inputs[0].kind, ValueKind::kIntList);
  EXPECT_EQ(inputs[0].list_length, 1100u);
  EXPECT_EQ(as_vector(inputs[0].ints), iota_list(1024, 0));
  EXPECT_FALSE(model::is_known(inputs[0]));
  expect_int_list(inputs[1], small);
  expect_int_list(inputs[2], {});
}

// A tensor of more than 5 dims: its sizes and strides out of line, copied into the record;
// another tensor of the same op stays inline.
TEST_F(BpfArgumentReaders, TensorOfMoreThanFiveDims) {
  const FakeTensor high({2, 1, 3, 1, 2, 2, 5}, kLong, kCuda0, 7);
  const FakeTensor plain({3, 4});
  const auto inputs = inputs_of(kTensors, [&] { at::_ops::tensors::call(high.tensor(), plain.tensor()); });
  ASSERT_EQ(inputs.size(), 2u);
  ASSERT_EQ(inputs[0].kind, ValueKind::kTensor);
  high.expect_decoded(inputs[0].tensor);
  ASSERT_EQ(inputs[1].kind, ValueKind::kTensor);
  plain.expect_decoded(inputs[1].tensor);
}

}  // namespace
}  // namespace tprof
