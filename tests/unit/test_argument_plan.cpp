#include "symbolizer/aten/argument_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "symbolizer/aten/op_catalog.h"
#include "tests/support/test_environment.h"

namespace tprof::symbolizer {
namespace {

namespace fs = std::filesystem;
using Texts = std::vector<std::string>;

// Debian trixie's torch 2.6, unpacked by the project's setup into a separate root; the marker file
// appears once the unpacking has finished.
const fs::path kTrixieRoot = testing::trixie_root();
const fs::path kTrixieFinishedMarker = kTrixieRoot / ".tprof-complete";
const fs::path kTrixieLibtorchCpu = kTrixieRoot / "usr/lib/x86_64-linux-gnu/libtorch_cpu.so.2.6";

// ---- reading plans as text --------------------------------------------------------------------

std::string location_text(argument_location location) {
  constexpr const char* kRegisters[] = {"rdi", "rsi", "rdx", "rcx", "r8", "r9"};
  switch (location.kind) {
    case LOCATION_REGISTER:
      return location.index < 6 ? kRegisters[location.index] : "r?";
    case LOCATION_STACK:
      return "stack" + std::to_string(location.index);
    default:
      return "none";
  }
}

std::string read_text(uint8_t read) {
  switch (read) {
    case READ_NOTHING: return "-";
    case READ_WORD: return "word";
    case READ_POINTED_WORD: return "pointed_word";
    case READ_TENSOR: return "tensor";
    case READ_OPTIONAL_TENSOR: return "optional_tensor";
    case READ_TENSOR_LIST: return "tensor_list";
    case READ_INT_LIST: return "int_list";
    case READ_SCALAR: return "scalar";
    case READ_OPTIONAL_POINTED_WORD: return "optional_pointed_word";
    case READ_OPTIONAL_INT_LIST: return "optional_int_list";
    case READ_STD_OPTIONAL_INT_LIST: return "std_optional_int_list";
    case READ_STRING: return "string";
    case READ_OPTIONAL_WORD_PAIR: return "optional_word_pair";
    case READ_TENSOR_LIST_REF: return "tensor_list_ref";
    case READ_OPTIONAL_SCALAR: return "optional_scalar";
    case READ_OPTIONAL_TENSOR_LIST: return "optional_tensor_list";
    case READ_SCALAR_LIST: return "scalar_list";
    case READ_STD_OPTIONAL_STRING: return "std_optional_string";
    default: return "read?" + std::to_string(read);
  }
}

// "self tensor rsi", "stride int_list r8,r9", "p -": one line per argument, from the encoded
// op_plan (what BPF gets), named after the planned inputs.
Texts argument_lines(const OpArgumentPlan& plan) {
  Texts lines;
  for (size_t i = 0; i < plan.bpf.argument_count; ++i) {
    const argument_plan& argument = plan.bpf.arguments[i];
    std::string line = plan.inputs.at(i).name + " " + read_text(argument.read);
    if (argument.read != READ_NOTHING) line += " " + location_text(argument.word);
    if (argument.length.kind != LOCATION_NONE) line += "," + location_text(argument.length);
    lines.push_back(line);
  }
  return lines;
}

// ---- the libraries ----------------------------------------------------------------------------

struct Library {
  OpCatalog catalog;
  OptionalAbi optional_abi;
};

Library load_library(const std::string& path) {
  Library library{build_op_catalog(path), {}};
  std::optional<OptionalAbi> optional_abi = optional_abi_of(library.catalog);
  if (!optional_abi) testing::fail_harness("no single optional ABI in " + path);
  library.optional_abi = *optional_abi;
  return library;
}

const Library& torch_1_13() {
  static const Library library = load_library(testing::debian_libtorch_cpu());
  return library;
}

bool torch_2_6_present() {
  return fs::exists(kTrixieFinishedMarker) && fs::exists(kTrixieLibtorchCpu);
}

const Library& torch_2_6() {
  static const Library library = load_library(kTrixieLibtorchCpu);
  return library;
}

#define SKIP_WITHOUT_TORCH_2_6()                                                          \
  if (!torch_2_6_present()) {                                                             \
    GTEST_SKIP() << "\n\n*** torch 2.6 is missing: no " << kTrixieFinishedMarker << " or " \
                 << kTrixieLibtorchCpu << " (scripts/make-torch-root.sh trixie builds it) ***\n\n"; \
  }

OpArgumentPlan plan_of(const Library& library, std::string_view unambiguous_name) {
  auto found = std::find_if(library.catalog.entries.begin(), library.catalog.entries.end(),
                            [&](const OpCatalogEntry& entry) {
                              return entry.site.unambiguous_name == unambiguous_name;
                            });
  if (found == library.catalog.entries.end()) {
    testing::fail_harness("no op " + std::string(unambiguous_name) + " in the catalog");
  }
  OpArgumentPlan plan =
      plan_op_arguments(found->schema, found->site.mangled_symbol.c_str(), library.optional_abi);
  EXPECT_EQ(plan.unplanned_reason, "") << found->schema;
  EXPECT_EQ(plan.partial_reason, "") << found->schema;
  return plan;
}

// ---- which optional ---------------------------------------------------------------------------

TEST(OptionalAbiOf, TellsC10OptionalFromStdOptional) {
  EXPECT_EQ(torch_1_13().optional_abi, OptionalAbi::kC10Optional);
  SKIP_WITHOUT_TORCH_2_6();
  EXPECT_EQ(torch_2_6().optional_abi, OptionalAbi::kStdOptional);
}

// ---- torch 1.13 -------------------------------------------------------------------------------

TEST(ArgumentPlan113, TensorReturnTakesRdiForItsSlot) {
  OpArgumentPlan plan = plan_of(torch_1_13(), "add_Tensor");
  EXPECT_EQ(argument_lines(plan),
            (Texts{"self tensor rsi", "other tensor rdx", "alpha scalar rcx"}));
  EXPECT_EQ(plan.bpf.argument_count, 3);
  EXPECT_EQ(plan.bpf.output_read, OUTPUT_TENSOR);
  EXPECT_EQ(plan.return_types, Texts{"Tensor"});
  EXPECT_EQ(plan.inputs.at(2).schema_type, "Scalar");
  EXPECT_EQ(plan.inputs.at(2).cxx_type, "c10::Scalar const&");
}

TEST(ArgumentPlan113, InPlaceAndOutVariantsReturnAReferenceInRax) {
  OpArgumentPlan in_place = plan_of(torch_1_13(), "add__Tensor");
  EXPECT_EQ(argument_lines(in_place),
            (Texts{"self tensor rdi", "other tensor rsi", "alpha scalar rdx"}));
  EXPECT_EQ(in_place.bpf.output_read, OUTPUT_TENSOR);

  OpArgumentPlan out = plan_of(torch_1_13(), "add_out");
  EXPECT_EQ(argument_lines(out),
            (Texts{"self tensor rdi", "other tensor rsi", "alpha scalar rdx", "out tensor rcx"}));
  EXPECT_EQ(out.bpf.output_read, OUTPUT_TENSOR);
  EXPECT_EQ(out.inputs.at(3).schema_type, "Tensor");  // "Tensor(a!)" without its annotation
  EXPECT_EQ(out.return_types, Texts{"Tensor"});
}

TEST(ArgumentPlan113, Mm) {
  OpArgumentPlan plan = plan_of(torch_1_13(), "mm");
  EXPECT_EQ(argument_lines(plan), (Texts{"self tensor rsi", "mat2 tensor rdx"}));
  EXPECT_EQ(plan.bpf.output_read, OUTPUT_TENSOR);
}

TEST(ArgumentPlan113, IntListsTakeTwoRegistersThenTwoStackSlots) {
  // rdi is the result slot; stride fills r8 and r9, so padding, dilation and groups follow on
  // the stack.
  OpArgumentPlan plan = plan_of(torch_1_13(), "conv2d");
  EXPECT_EQ(argument_lines(plan),
            (Texts{"input tensor rsi", "weight tensor rdx", "bias optional_tensor rcx",
                   "stride int_list r8,r9", "padding int_list stack0,stack1",
                   "dilation int_list stack2,stack3", "groups word stack4"}));
  EXPECT_EQ(plan.inputs.at(3).schema_type, "int[2]");
}

TEST(ArgumentPlan113, AListThatMissesTheLastRegisterLeavesItToTheNextArgument) {
  // tensor2 needs two registers when only r9 is left: it goes to the stack whole, and value
  // still gets r9 (the function's code reads r9 and stack slots 0 and 1).
  OpArgumentPlan plan = plan_of(torch_1_13(), "_foreach_addcdiv_Scalar");
  EXPECT_EQ(argument_lines(plan),
            (Texts{"self tensor_list rsi,rdx", "tensor1 tensor_list rcx,r8",
                   "tensor2 tensor_list stack0,stack1", "value scalar r9"}));
  EXPECT_EQ(plan.bpf.output_read, OUTPUT_TENSOR_VECTOR);
}

TEST(ArgumentPlan113, CatTakesAnIListRefByReference) {
  OpArgumentPlan plan = plan_of(torch_1_13(), "cat");
  EXPECT_EQ(plan.inputs.at(0).cxx_type, "c10::IListRef<at::Tensor> const&");
  EXPECT_EQ(argument_lines(plan), (Texts{"tensors tensor_list_ref rsi", "dim word rdx"}));
}

TEST(ArgumentPlan113, OptionalScalarsGoByReference) {
  EXPECT_EQ(argument_lines(plan_of(torch_1_13(), "clamp")),
            (Texts{"self tensor rsi", "min optional_scalar rdx", "max optional_scalar rcx"}));
}

TEST(ArgumentPlan113, TuplesOfTensorsComeBackThroughMemory) {
  OpArgumentPlan pool = plan_of(torch_1_13(), "max_pool2d_with_indices");
  EXPECT_EQ(argument_lines(pool),
            (Texts{"self tensor rsi", "kernel_size int_list rdx,rcx", "stride int_list r8,r9",
                   "padding int_list stack0,stack1", "dilation int_list stack2,stack3",
                   "ceil_mode word stack4"}));
  EXPECT_EQ(pool.bpf.output_read, OUTPUT_TENSOR_TUPLE);
  EXPECT_EQ(pool.bpf.output_count, 2);
  EXPECT_EQ(pool.return_types, (Texts{"Tensor", "Tensor"}));

  // Doubles go to xmm registers: they take no integer register and are not read.
  OpArgumentPlan batch_norm = plan_of(torch_1_13(), "native_batch_norm");
  EXPECT_EQ(argument_lines(batch_norm),
            (Texts{"input tensor rsi", "weight optional_tensor rdx", "bias optional_tensor rcx",
                   "running_mean optional_tensor r8", "running_var optional_tensor r9",
                   "training word stack0", "momentum -", "eps -"}));
  EXPECT_EQ(batch_norm.bpf.output_read, OUTPUT_TENSOR_TUPLE);
  EXPECT_EQ(batch_norm.bpf.output_count, 3);
  EXPECT_EQ(batch_norm.bpf.output_word_mask, 0);
}

TEST(ArgumentPlan113, TuplesMixingTensorsAndIntsAreReadElementByElement) {
  // -> (Tensor, Tensor, Tensor, Tensor, int): every BatchNorm forward runs it (issue 13,
  // defect 3: its outputs were missing).
  OpArgumentPlan plan = plan_of(torch_1_13(), "_batch_norm_impl_index");
  EXPECT_EQ(plan.bpf.output_read, OUTPUT_TENSOR_TUPLE);
  EXPECT_EQ(plan.bpf.output_count, 5);
  EXPECT_EQ(plan.bpf.output_word_mask, 1u << 4);
  EXPECT_EQ(plan.return_types, (Texts{"Tensor", "Tensor", "Tensor", "Tensor", "int"}));
}

TEST(ArgumentPlan113, TuplesOfTensorReferencesComeBackThroughMemoryToo) {
  // std::tuple<Tensor&, Tensor&> is non-trivial in libstdc++: rdi is its slot, and keepdim is
  // in rcx (the function saves ecx as a bool).
  OpArgumentPlan plan = plan_of(torch_1_13(), "max_dim_max");
  EXPECT_EQ(argument_lines(plan), (Texts{"self tensor rsi", "dim word rdx", "keepdim word rcx",
                                         "max tensor r8", "max_values tensor r9"}));
  EXPECT_EQ(plan.bpf.output_read, OUTPUT_TENSOR_REF_TUPLE);
  EXPECT_EQ(plan.bpf.output_count, 2);
}

TEST(ArgumentPlan113, TensorListReturnIsAVector) {
  OpArgumentPlan plan = plan_of(torch_1_13(), "split_Tensor");
  EXPECT_EQ(argument_lines(plan),
            (Texts{"self tensor rsi", "split_size word rdx", "dim word rcx"}));
  EXPECT_EQ(plan.bpf.output_read, OUTPUT_TENSOR_VECTOR);
  EXPECT_EQ(plan.return_types, Texts{"Tensor[]"});
}

TEST(ArgumentPlan113, OptionalIntListPacksIntoTwoRegisters) {
  OpArgumentPlan plan = plan_of(torch_1_13(), "sum_dim_IntList");
  EXPECT_EQ(argument_lines(plan),
            (Texts{"self tensor rsi", "dim optional_int_list rdx,rcx", "keepdim word r8", "dtype word r9"}));
}

TEST(ArgumentPlan113, ScalarReturnsAreReadThroughTheirSlot) {
  // et_replay builds aten::item from its output's type: torch writes the Scalar as a Double.
  for (const char* op : {"item", "_local_scalar_dense"}) {
    const OpArgumentPlan plan = plan_of(torch_1_13(), op);
    EXPECT_EQ(plan.bpf.output_read, OUTPUT_SCALAR) << op;
    EXPECT_EQ(argument_lines(plan), (Texts{"self tensor rsi"})) << op;  // rdi: the Scalar's slot
  }
}

TEST(ArgumentPlan113, StringViewsAreDataThenSize) {
  EXPECT_EQ(argument_lines(plan_of(torch_1_13(), "gelu")), (Texts{"self tensor rsi", "approximate string rdx,rcx"}));
}

TEST(ArgumentPlan113, DoublesAreLeftToTheSpillProbeWithTheirXmmRegister) {
  OpArgumentPlan plan = plan_of(torch_1_13(), "batch_norm");
  EXPECT_EQ(argument_lines(plan), (Texts{"input tensor rsi", "weight optional_tensor rdx", "bias optional_tensor rcx",
                                         "running_mean optional_tensor r8", "running_var optional_tensor r9",
                                         "training word stack0", "momentum -", "eps -", "cudnn_enabled word stack1"}));
  EXPECT_EQ(plan.inputs.at(6).xmm_register, 0u);
  EXPECT_EQ(plan.inputs.at(7).xmm_register, 1u);
  EXPECT_FALSE(plan.inputs.at(5).xmm_register.has_value());
  // Where the entry block saved them: read there, at the spill probe.
  ASSERT_TRUE(read_where_saved(plan, 6, {0, SpillBase::kFramePointer, -0x110, 0}));
  ASSERT_TRUE(read_where_saved(plan, 7, {1, SpillBase::kGeneralRegister, 0, 15}));
  EXPECT_EQ(plan.bpf.arguments[6].read, READ_WORD);
  EXPECT_EQ(plan.bpf.arguments[6].word.kind, LOCATION_FRAME_POINTER_SLOT);
  EXPECT_EQ(plan.bpf.arguments[6].displacement, -0x110);
  EXPECT_EQ(plan.bpf.arguments[7].word.kind, LOCATION_SAVED_REGISTER);
  EXPECT_EQ(plan.bpf.arguments[7].word.index, 15);
  EXPECT_FALSE(read_where_saved(plan, 7, {1, SpillBase::kStackPointer, 0x10000, 0}));  // out of an int16's reach
}

TEST(ArgumentPlan113, FactoryOptionalsAreWords) {
  OpArgumentPlan plan = plan_of(torch_1_13(), "empty_memory_format");
  EXPECT_EQ(argument_lines(plan),
            (Texts{"size int_list rsi,rdx", "dtype word rcx", "layout word r8", "device word r9",
                   "pin_memory word stack0", "memory_format word stack1"}));
  EXPECT_EQ(plan.inputs.at(1).cxx_type, "c10::optional<c10::ScalarType>");
  EXPECT_EQ(argument_lines(plan_of(torch_1_13(), "zeros")),
            (Texts{"size int_list rsi,rdx", "dtype word rcx", "layout word r8", "device word r9",
                   "pin_memory word stack0"}));
}

TEST(ArgumentPlan113, FloatsTakeNoIntegerRegister) {
  EXPECT_EQ(argument_lines(plan_of(torch_1_13(), "dropout")),
            (Texts{"input tensor rsi", "p -", "train word rdx"}));
  EXPECT_EQ(argument_lines(plan_of(torch_1_13(), "leaky_relu")),
            (Texts{"self tensor rsi", "negative_slope scalar rdx"}));
}

TEST(ArgumentPlan113, C10OptionalDoubleTakesTwoIntegerRegisters) {
  // c10::optional<double> is all INTEGER: the first two fill rsi..r8, the third misses r9 and
  // goes to the stack, and out takes r9.
  OpArgumentPlan plan = plan_of(torch_1_13(), "nan_to_num_out");
  EXPECT_EQ(argument_lines(plan),
            (Texts{"self tensor rdi", "nan optional_word_pair rsi,rdx", "posinf optional_word_pair rcx,r8",
                   "neginf optional_word_pair stack0,stack1", "out tensor r9"}));
}

TEST(ArgumentPlan113, C10OptionalStringViewGoesByReference) {
  // One register for driver, so U is in r9 and S, Vh on the stack.
  OpArgumentPlan plan = plan_of(torch_1_13(), "_linalg_svd_U");
  EXPECT_EQ(argument_lines(plan),
            (Texts{"A tensor rsi", "full_matrices word rdx", "compute_uv word rcx", "driver -",
                   "U tensor r9", "S tensor stack0", "Vh tensor stack1"}));
  EXPECT_EQ(plan.bpf.output_read, OUTPUT_TENSOR_REF_TUPLE);
  EXPECT_EQ(plan.bpf.output_count, 3);
}

TEST(ArgumentPlan113, ScalarReturnsInRaxTakeNoSlot) {
  OpArgumentPlan plan = plan_of(torch_1_13(), "is_nonzero");
  EXPECT_EQ(argument_lines(plan), Texts{"self tensor rdi"});
  EXPECT_EQ(plan.bpf.output_read, OUTPUT_NOTHING);
  EXPECT_EQ(plan.return_types, Texts{"bool"});
}

TEST(ArgumentPlan113, SymIntGoesByReference) {
  EXPECT_EQ(argument_lines(plan_of(torch_1_13(), "narrow_copy")),
            (Texts{"self tensor rsi", "dim word rdx", "start pointed_word rcx",
                   "length pointed_word r8"}));
}

// ---- torch 2.6 --------------------------------------------------------------------------------

TEST(ArgumentPlan26, SymIntsGoByReference) {
  SKIP_WITHOUT_TORCH_2_6();
  EXPECT_EQ(argument_lines(plan_of(torch_2_6(), "conv2d")),
            (Texts{"input tensor rsi", "weight tensor rdx", "bias optional_tensor rcx",
                   "stride int_list r8,r9", "padding int_list stack0,stack1",
                   "dilation int_list stack2,stack3", "groups pointed_word stack4"}));
  EXPECT_EQ(argument_lines(plan_of(torch_2_6(), "narrow")),
            (Texts{"self tensor rsi", "dim word rdx", "start pointed_word rcx",
                   "length pointed_word r8"}));
  OpArgumentPlan slice = plan_of(torch_2_6(), "slice_Tensor");
  EXPECT_EQ(slice.inputs.at(2).cxx_type, "std::optional<c10::SymInt>");
  EXPECT_EQ(argument_lines(slice), (Texts{"self tensor rsi", "dim word rdx", "start optional_pointed_word rcx",
                                          "end optional_pointed_word r8", "step pointed_word r9"}));
}

TEST(ArgumentPlan26, OptionalIntListGoesToTheStackInMemory) {
  SKIP_WITHOUT_TORCH_2_6();
  // std::optional<ArrayRef> is 24 bytes: dim takes stack slots 0-2 (data, size, flag) and no register.
  EXPECT_EQ(argument_lines(plan_of(torch_2_6(), "sum_dim_IntList")),
            (Texts{"self tensor rsi", "dim std_optional_int_list stack0,stack1", "keepdim word rdx", "dtype word rcx"}));
  EXPECT_EQ(argument_lines(plan_of(torch_2_6(), "convolution_backward")),
            (Texts{"grad_output tensor rsi", "input tensor rdx", "weight tensor rcx",
                   "bias_sizes std_optional_int_list stack0,stack1", "stride int_list r8,r9", "padding int_list stack3,stack4",
                   "dilation int_list stack5,stack6", "transposed word stack7",
                   "output_padding int_list stack8,stack9", "groups pointed_word stack10",
                   "output_mask word stack11"}));
}

TEST(ArgumentPlan26, StdOptionalDoubleTakesOneIntegerRegister) {
  SKIP_WITHOUT_TORCH_2_6();
  // Its flag's eightbyte is INTEGER, its value's SSE: out of reach in registers.
  EXPECT_EQ(argument_lines(plan_of(torch_2_6(), "nan_to_num_out")),
            (Texts{"self tensor rdi", "nan -", "posinf -", "neginf -", "out tensor r8"}));
}

TEST(ArgumentPlan26, StdOptionalDoubleOnTheStackIsReadWhole) {
  SKIP_WITHOUT_TORCH_2_6();
  // No integer register is left for scale's flag, so both its eightbytes go to the stack: the
  // double first, then the flag.
  EXPECT_EQ(argument_lines(plan_of(torch_2_6(), "scaled_dot_product_attention")),
            (Texts{"query tensor rsi", "key tensor rdx", "value tensor rcx", "attn_mask optional_tensor r8",
                   "dropout_p -", "is_causal word r9", "scale optional_word_pair stack0,stack1",
                   "enable_gqa word stack2"}));
}

TEST(ArgumentPlan26, CatAndDropout) {
  SKIP_WITHOUT_TORCH_2_6();
  EXPECT_EQ(argument_lines(plan_of(torch_2_6(), "cat")), (Texts{"tensors tensor_list_ref rsi", "dim word rdx"}));
  EXPECT_EQ(argument_lines(plan_of(torch_2_6(), "dropout")),
            (Texts{"input tensor rsi", "p -", "train word rdx"}));
}

TEST(ArgumentPlan26, SymIntReturnComesBackThroughMemory) {
  SKIP_WITHOUT_TORCH_2_6();
  OpArgumentPlan plan = plan_of(torch_2_6(), "sym_size_int");
  EXPECT_EQ(argument_lines(plan), (Texts{"self tensor rsi", "dim word rdx"}));
  EXPECT_EQ(plan.bpf.output_read, OUTPUT_NOTHING);
}

TEST(ArgumentPlan26, StdOptionalStringViewGoesToTheStackInMemory) {
  SKIP_WITHOUT_TORCH_2_6();
  EXPECT_EQ(argument_lines(plan_of(torch_2_6(), "fft_ihfft2")),
            (Texts{"self tensor rsi", "s std_optional_int_list stack0,stack1", "dim int_list rdx,rcx",
                   "norm std_optional_string stack4,stack3"}));
}

// ---- what cannot be planned -------------------------------------------------------------------

constexpr const char* kAddTensorSymbol =
    "_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE";

TEST(ArgumentPlanLimits, MismatchedArgumentCountIsUnplanned) {
  OpArgumentPlan plan = plan_op_arguments("aten::add.Tensor(Tensor self, Tensor other) -> Tensor",
                                          kAddTensorSymbol, OptionalAbi::kC10Optional);
  EXPECT_EQ(plan.unplanned_reason, "2 schema arguments but 3 C++ parameters");
  EXPECT_EQ(plan.bpf.argument_count, 0);
  EXPECT_EQ(plan.bpf.output_read, OUTPUT_NOTHING);
  EXPECT_EQ(plan.inputs.size(), 2u);
}

TEST(ArgumentPlanLimits, MismatchedArgumentTypesAreUnplanned) {
  OpArgumentPlan plan = plan_op_arguments(
      "aten::add.Tensor(int self, Tensor other, *, Scalar alpha=1) -> Tensor", kAddTensorSymbol,
      OptionalAbi::kC10Optional);
  EXPECT_NE(plan.unplanned_reason.find("argument 0 'self'"), std::string::npos)
      << plan.unplanned_reason;
  EXPECT_EQ(plan.bpf.argument_count, 0);
  EXPECT_EQ(plan.inputs.at(0).bpf.read, READ_NOTHING);
}

TEST(ArgumentPlanLimits, UnknownReturnTypeIsUnplanned) {
  OpArgumentPlan plan = plan_op_arguments(
      "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Generator",
      kAddTensorSymbol, OptionalAbi::kC10Optional);
  EXPECT_NE(plan.unplanned_reason.find("Generator"), std::string::npos) << plan.unplanned_reason;
  EXPECT_EQ(plan.bpf.argument_count, 0);
}

TEST(ArgumentPlanLimits, UnknownByValueTypeLeavesLaterArgumentsUnread) {
  OpArgumentPlan plan = plan_op_arguments(
      "aten::foo(Tensor self, Unknown u, int n) -> Tensor",
      "_ZN2at4_ops3foo4callERKNS_6TensorEN3c107UnknownEl", OptionalAbi::kC10Optional);
  EXPECT_EQ(plan.unplanned_reason, "");
  EXPECT_NE(plan.partial_reason.find("argument 1 'u'"), std::string::npos) << plan.partial_reason;
  EXPECT_EQ(argument_lines(plan), (Texts{"self tensor rsi", "u -", "n -"}));
}

TEST(ArgumentPlanLimits, DoublesBeyondTheEighthXmmRegisterTakeStackSlots) {
  // foo(double x9, Tensor x7) -> (): six tensors in registers; the ninth double took stack
  // slot 0 before the seventh tensor came.
  OpArgumentPlan plan = plan_op_arguments(
      "aten::foo(float a, float b, float c, float d, float e, float f, float g, float h, "
      "float i, Tensor t0, Tensor t1, Tensor t2, Tensor t3, Tensor t4, Tensor t5, Tensor t6) -> ()",
      "_ZN2at4_ops3foo4callEdddddddddRKNS_6TensorES4_S4_S4_S4_S4_S4_", OptionalAbi::kC10Optional);
  EXPECT_EQ(argument_lines(plan),
            (Texts{"a -", "b -", "c -", "d -", "e -", "f -", "g -", "h -", "i -", "t0 tensor rdi",
                   "t1 tensor rsi", "t2 tensor rdx", "t3 tensor rcx", "t4 tensor r8",
                   "t5 tensor r9", "t6 tensor stack1"}));
  EXPECT_EQ(plan.return_types, Texts{});
}

// ---- whole catalogs ---------------------------------------------------------------------------

struct CatalogFigures {
  size_t ops = 0;
  size_t planned = 0;        // no unplanned_reason
  size_t fully_located = 0;  // planned, and no partial_reason
  size_t tensors_read = 0;   // planned, and every Tensor / Tensor? / Tensor[] argument read
  size_t all_read = 0;       // planned, and every argument read (none READ_NOTHING)
};

CatalogFigures plan_catalog(const Library& library, const std::string& label) {
  CatalogFigures figures;
  for (const OpCatalogEntry& entry : library.catalog.entries) {
    OpArgumentPlan plan =
        plan_op_arguments(entry.schema, entry.site.mangled_symbol.c_str(), library.optional_abi);
    ++figures.ops;
    // Either a plan or a reason, never an encoded plan with a reason.
    if (!plan.unplanned_reason.empty()) {
      EXPECT_EQ(plan.bpf.argument_count, 0) << entry.schema;
      continue;
    }
    EXPECT_EQ(plan.bpf.argument_count, std::min<size_t>(plan.inputs.size(), OP_PLAN_ARGUMENTS_MAX));
    ++figures.planned;
    if (plan.partial_reason.empty()) ++figures.fully_located;
    size_t described = std::min<size_t>(plan.inputs.size(), OP_PLAN_ARGUMENTS_MAX);
    bool tensors_read = true;
    bool all_read = true;
    for (size_t i = 0; i < described; ++i) {
      const PlannedArgument& input = plan.inputs[i];
      bool read = input.bpf.read != READ_NOTHING;
      all_read &= read;
      if (input.schema_type == "Tensor" || input.schema_type == "Tensor?" ||
          input.schema_type == "Tensor[]") {
        tensors_read &= read;
      }
    }
    figures.tensors_read += tensors_read;
    figures.all_read += all_read;
  }
  std::cout << label << ": " << figures.ops << " ops, " << figures.planned << " planned, "
            << figures.fully_located << " with every argument located, " << figures.tensors_read
            << " with every tensor argument read, " << figures.all_read
            << " with every argument read\n";
  return figures;
}

// Measured: every op planned with every argument located in both libraries; all tensor
// arguments read in all but cat and cat.out (an IListRef); every argument read in 75% (1.13:
// 2226 of 2952) and 74% (2.6: 2334 of 3144), the rest taking floats, optional ints and the like.
void expect_measured_figures(const CatalogFigures& figures, size_t at_least_ops) {
  EXPECT_GE(figures.ops, at_least_ops);
  EXPECT_EQ(figures.planned, figures.ops);
  EXPECT_EQ(figures.fully_located, figures.ops);
  EXPECT_GE(figures.tensors_read, figures.ops * 99 / 100);
  EXPECT_GE(figures.all_read, figures.ops * 72 / 100);
}

TEST(ArgumentPlanCatalog, Torch113) {
  expect_measured_figures(plan_catalog(torch_1_13(), "torch 1.13"), 2900);
}

TEST(ArgumentPlanCatalog, Torch26) {
  SKIP_WITHOUT_TORCH_2_6();
  expect_measured_figures(plan_catalog(torch_2_6(), "torch 2.6"), 3100);
}

}  // namespace
}  // namespace tprof::symbolizer
