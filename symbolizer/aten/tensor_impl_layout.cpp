#include "symbolizer/aten/tensor_impl_layout.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/member_function_tracer.h"
#include "symbolizer/binary/relocations.h"

namespace tprof::symbolizer {

namespace {

constexpr std::string_view kDimCustom = "_ZNK3c1010TensorImpl10dim_customEv";
constexpr std::string_view kSizesCustom = "_ZNK3c1010TensorImpl12sizes_customEv";
constexpr std::string_view kStridesCustom = "_ZNK3c1010TensorImpl14strides_customEv";
constexpr std::string_view kStorageOffsetCustom = "_ZNK3c1010TensorImpl21storage_offset_customEv";
constexpr std::string_view kNumelCustom = "_ZNK3c1010TensorImpl12numel_customEv";
constexpr std::string_view kDeviceCustom = "_ZNK3c1010TensorImpl13device_customEv";
constexpr std::string_view kHasStorage = "_ZNK3c1010TensorImpl11has_storageEv";
constexpr std::string_view kStorageImplVtable = "_ZTVN3c1011StorageImplE";
constexpr std::string_view kUndefinedTensorSingleton = "_ZN3c1019UndefinedTensorImpl10_singletonE";

// StorageImpl::release_resources in StorageImpl's vtable: after the offset to top, the
// typeinfo and the two destructors intrusive_ptr_target declares first.
constexpr uint64_t kReleaseResourcesSlot = 4 * sizeof(uint64_t);

constexpr uint32_t kWord = sizeof(uint64_t);
// c10::impl::SizesAndStrides: {size_t size_; int64_t inline sizes[5], strides[5]} (or, past
// 5 dims, a pointer to them on the heap in place of the inline sizes).
constexpr uint32_t kInlineArrayBytes = INLINE_DIMS_MAX * kWord;
// c10::DataPtr starts with UniqueVoidPtr {void* data_; unique_ptr<void, DeleterFnPtr> ctx_},
// and libstdc++'s unique_ptr keeps the deleter before the pointer: clearing a DataPtr zeroes
// data_ and, 16 bytes on, the context pointer.
constexpr uint32_t kDataToContextPointer = 2 * kWord;

// The layouts PyTorch's headers give (runtime-layouts.md §5), as the two free parameters the
// consistency checks leave: where storage_ sits (right after intrusive_ptr_target) and where
// sizes_and_strides_ starts (everything up to device_opt_ follows it at fixed distances).
struct KnownLayout {
  std::string_view name;
  uint32_t storage;
  uint32_t dims;
  bool optional_payload_first;
};
constexpr KnownLayout kKnownLayouts[] = {
    {"torch 1.13-2.1 (3-word intrusive_ptr_target, c10::optional)", 24, 72, false},
    {"torch 2.2 (3-word intrusive_ptr_target, std::optional)", 24, 72, true},
    {"torch 2.3+ (2-word intrusive_ptr_target, std::optional)", 16, 64, true},
    {"torch 2.14 (2-word intrusive_ptr_target, 1-word PyObjectSlot, std::optional)", 16, 56, true},
};

// Calibration failed; the message is the one-line reason.
class Inconsistent : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string readable_name(std::string_view symbol) {
  static const std::map<std::string_view, std::string_view> kNames = {
      {kDimCustom, "TensorImpl::dim_custom"},
      {kSizesCustom, "TensorImpl::sizes_custom"},
      {kStridesCustom, "TensorImpl::strides_custom"},
      {kStorageOffsetCustom, "TensorImpl::storage_offset_custom"},
      {kNumelCustom, "TensorImpl::numel_custom"},
      {kDeviceCustom, "TensorImpl::device_custom"},
      {kHasStorage, "TensorImpl::has_storage"},
      {kStorageImplVtable, "StorageImpl's vtable"},
  };
  auto found = kNames.find(symbol);
  return found == kNames.end() ? std::string(symbol) : std::string(found->second);
}

template <typename Value>
Value the_only(const std::set<Value>& found, std::string_view accessor, std::string_view what) {
  if (found.size() == 1) return *found.begin();
  if (found.empty())
    throw Inconsistent("no call-free path of " + readable_name(accessor) + " " + std::string(what));
  throw Inconsistent("the call-free paths of " + readable_name(accessor) + " " + std::string(what) +
                     " in " + std::to_string(found.size()) + " different ways");
}

// The field a getter returns in rax, `width` bytes wide.
uint32_t returned_field(const MemberFunctionTracer& tracer, uint64_t function,
                        std::string_view accessor, unsigned width) {
  std::set<uint64_t> offsets;
  for (const ReturningPath& path : tracer.returning_paths(function)) {
    if (path.rax.kind == TracedValue::Kind::kThisField && path.rax.width == width) {
      offsets.insert(path.rax.offset);
    }
  }
  return static_cast<uint32_t>(
      the_only(offsets, accessor, "returns a " + std::to_string(width) + "-byte field"));
}

// sizes_custom and strides_custom return an IntArrayRef {data: rax, length: rdx}. With at most
// 5 dims the data is inside the TensorImpl; past that it is the heap pointer kept where the
// inline sizes would be.
struct InlineArray {
  uint32_t data = 0;    // the inline array
  uint32_t length = 0;  // the field the length comes from
};

InlineArray returned_inline_array(const MemberFunctionTracer& tracer, uint64_t function,
                                  std::string_view accessor, uint32_t* out_of_line_pointer) {
  std::set<std::pair<uint64_t, uint64_t>> inline_returns;
  std::set<uint64_t> heap_pointer_fields;
  for (const ReturningPath& path : tracer.returning_paths(function)) {
    if (path.rdx.kind != TracedValue::Kind::kThisField || path.rdx.width != kWord) continue;
    if (path.rax.kind == TracedValue::Kind::kThisAddress) {
      inline_returns.insert({path.rax.offset, path.rdx.offset});
    } else if (path.rax.kind == TracedValue::Kind::kThisField && path.rax.width == kWord) {
      heap_pointer_fields.insert(path.rax.offset);
    }
  }
  const auto [data, length] =
      the_only(inline_returns, accessor, "returns an array inside the TensorImpl");
  if (out_of_line_pointer && !heap_pointer_fields.empty()) {
    *out_of_line_pointer = static_cast<uint32_t>(
        the_only(heap_pointer_fields, accessor, "returns the out-of-line array"));
  }
  return {static_cast<uint32_t>(data), static_cast<uint32_t>(length)};
}

// device_custom returns the 2-byte Device {DeviceType, DeviceIndex} from device_opt_ after
// checking the optional's engaged flag against zero.
struct DeviceFields {
  uint32_t device = 0;
  uint32_t has_value = 0;
};

DeviceFields decode_device(const MemberFunctionTracer& tracer, uint64_t function) {
  std::set<std::pair<uint64_t, uint64_t>> found;
  for (const ReturningPath& path : tracer.returning_paths(function)) {
    if (path.rax.kind != TracedValue::Kind::kThisField || path.rax.width != 2) continue;
    for (const FieldTouch& tested : path.compared_with_zero) {
      if (tested.width == 1) found.insert({path.rax.offset, tested.offset});
    }
  }
  const auto [device, has_value] =
      the_only(found, kDeviceCustom, "returns a 2-byte Device after testing a 1-byte flag");
  return {static_cast<uint32_t>(device), static_cast<uint32_t>(has_value)};
}

// has_storage is `return storage_;` as a bool: the one 8-byte field compared with zero.
uint32_t decode_storage(const MemberFunctionTracer& tracer, uint64_t function) {
  std::set<uint64_t> found;
  for (const ReturningPath& path : tracer.returning_paths(function)) {
    for (const FieldTouch& tested : path.compared_with_zero) {
      if (tested.width == kWord) found.insert(tested.offset);
    }
  }
  return static_cast<uint32_t>(the_only(found, kHasStorage, "tests an 8-byte field"));
}

// StorageImpl::release_resources is `data_ptr_.clear()`: it zeroes the data pointer and the
// context pointer 16 bytes after it. nullopt (with why) if the code does not show that.
std::optional<uint32_t> decode_storage_data(const Relocations& relocations,
                                            const MemberFunctionTracer& tracer, uint64_t vtable,
                                            std::string* why_not) {
  const std::optional<RelocatedPointer> release_resources =
      relocations.pointer_at(vtable + kReleaseResourcesSlot);
  if (!release_resources || !release_resources->address) {
    *why_not = "StorageImpl's vtable has no release_resources slot";
    return std::nullopt;
  }
  std::set<uint64_t> found;
  for (const ReturningPath& path : tracer.returning_paths(*release_resources->address)) {
    std::set<uint64_t> zeroed;
    for (const FieldTouch& stored : path.set_to_zero) {
      if (stored.width == kWord) zeroed.insert(stored.offset);
    }
    for (uint64_t offset : zeroed) {
      if (zeroed.contains(offset + kDataToContextPointer)) {
        found.insert(offset);
        break;
      }
    }
  }
  if (found.size() != 1) {
    *why_not = "StorageImpl::release_resources does not clear one DataPtr";
    return std::nullopt;
  }
  return static_cast<uint32_t>(*found.begin());
}

void require(bool holds, const std::string& what) {
  if (!holds) throw Inconsistent(what);
}

std::string offset_text(uint32_t value) { return std::to_string(value); }

// The relations every TensorImpl since 1.13 keeps, whatever shifts its members as a whole.
void check_consistency(const TensorImplLayout& layout) {
  require(layout.inline_sizes == layout.dims + kWord,
          "inline sizes at " + offset_text(layout.inline_sizes) + " do not follow the dims at " +
              offset_text(layout.dims));
  require(layout.inline_strides == layout.inline_sizes + kInlineArrayBytes,
          "inline strides at " + offset_text(layout.inline_strides) +
              " are not 5 words after the inline sizes at " + offset_text(layout.inline_sizes));
  require(layout.storage_offset == layout.inline_strides + kInlineArrayBytes,
          "storage_offset_ at " + offset_text(layout.storage_offset) +
              " does not follow the inline strides at " + offset_text(layout.inline_strides));
  require(layout.numel == layout.storage_offset + kWord,
          "numel_ at " + offset_text(layout.numel) + " does not follow storage_offset_ at " +
              offset_text(layout.storage_offset));
  const uint32_t device_opt = layout.dtype + 2;
  if (layout.optional_payload_first) {
    require(layout.device_type == device_opt && layout.device_has_value == device_opt + 2,
            "device_opt_ (Device at " + offset_text(layout.device_type) + ", flag at " +
                offset_text(layout.device_has_value) + ") does not follow data_type_ at " +
                offset_text(layout.dtype));
  } else {
    require(layout.device_has_value == device_opt && layout.device_type == device_opt + 1,
            "device_opt_ (flag at " + offset_text(layout.device_has_value) + ", Device at " +
                offset_text(layout.device_type) + ") does not follow data_type_ at " +
                offset_text(layout.dtype));
  }
  require(layout.storage < layout.dims, "storage_ at " + offset_text(layout.storage) +
                                            " is not before sizes_and_strides_ at " +
                                            offset_text(layout.dims));
  require(layout.to_bpf().window_bytes <= TENSOR_WINDOW_BYTES,
          "sizes_and_strides_ to device_opt_ spans more than " +
              std::to_string(TENSOR_WINDOW_BYTES) + " bytes");
}

// How the derived layout relates to the ones PyTorch's headers have given. Informational only:
// the accessors' code is the authority, so a layout never seen before is used as derived (its
// consistency checked above, and each decoded tensor's plausibility at run time).
std::string known_layout_match(const TensorImplLayout& layout) {
  for (const KnownLayout& known : kKnownLayouts) {
    if (known.optional_payload_first != layout.optional_payload_first) continue;
    if (known.storage == layout.storage && known.dims == layout.dims) {
      return "matches the " + std::string(known.name) + " layout";
    }
  }
  for (const KnownLayout& known : kKnownLayouts) {
    if (known.optional_payload_first != layout.optional_payload_first) continue;
    if (known.dims - known.storage == layout.dims - layout.storage) {
      const int64_t shift = int64_t{layout.dims} - int64_t{known.dims};
      return "the " + std::string(known.name) + " layout shifted by " + (shift > 0 ? "+" : "") +
             std::to_string(shift) + " bytes";
    }
  }
  return "a layout not seen before (storage_ at " + offset_text(layout.storage) + ", sizes_and_strides_ at " +
         offset_text(layout.dims) + ", " + (layout.optional_payload_first ? "std::optional" : "c10::optional") +
         "), used as its accessors give it";
}

TensorImplLayout calibrate(const std::string& libc10_path) {
  const ElfFile elf(libc10_path);
  const DefinedSymbols symbols(elf);
  auto address_of = [&](std::string_view symbol) {
    const DefinedSymbol* found = symbols.find(symbol);
    if (found == nullptr) throw Inconsistent(readable_name(symbol) + " is not exported");
    return found->address;
  };
  const MemberFunctionTracer tracer(elf);

  TensorImplLayout layout;
  layout.dims = returned_field(tracer, address_of(kDimCustom), kDimCustom, kWord);
  uint32_t out_of_line_pointer = 0;
  const InlineArray sizes =
      returned_inline_array(tracer, address_of(kSizesCustom), kSizesCustom, &out_of_line_pointer);
  const InlineArray strides =
      returned_inline_array(tracer, address_of(kStridesCustom), kStridesCustom, nullptr);
  layout.inline_sizes = sizes.data;
  layout.inline_strides = strides.data;
  require(sizes.length == layout.dims && strides.length == layout.dims,
          "sizes_custom and strides_custom take the dims from " + offset_text(sizes.length) +
              " and " + offset_text(strides.length) + ", dim_custom from " +
              offset_text(layout.dims));
  require(out_of_line_pointer == 0 || out_of_line_pointer == layout.inline_sizes,
          "sizes_custom finds more than 5 sizes at " + offset_text(out_of_line_pointer) +
              ", not in place of the inline sizes at " + offset_text(layout.inline_sizes));
  layout.storage_offset =
      returned_field(tracer, address_of(kStorageOffsetCustom), kStorageOffsetCustom, kWord);
  layout.numel = returned_field(tracer, address_of(kNumelCustom), kNumelCustom, kWord);
  // data_type_ (a 2-byte TypeMeta) has directly followed numel_ in every version; no exported
  // accessor reads it.
  layout.dtype = layout.numel + kWord;

  const DeviceFields device = decode_device(tracer, address_of(kDeviceCustom));
  layout.optional_payload_first = device.has_value > device.device;
  layout.device_type = device.device;
  layout.device_index = device.device + 1;
  layout.device_has_value = device.has_value;

  layout.storage = decode_storage(tracer, address_of(kHasStorage));
  // Both TensorImpl and StorageImpl derive from intrusive_ptr_target and start their own
  // members right after it (storage_, and DataPtr's data pointer), so the two offsets agree;
  // release_resources confirms it where its code shows a DataPtr being cleared.
  std::string storage_data_evidence;
  std::string why_not;
  if (auto decoded =
          decode_storage_data(Relocations(elf), tracer, address_of(kStorageImplVtable), &why_not)) {
    require(*decoded == layout.storage, "StorageImpl's data pointer at " + offset_text(*decoded) +
                                            " and storage_ at " + offset_text(layout.storage) +
                                            " should both follow intrusive_ptr_target");
    storage_data_evidence = "StorageImpl::release_resources";
  } else {
    storage_data_evidence = "storage_data = storage_ by structure (" + why_not + ")";
  }
  layout.storage_data = layout.storage;
  if (const DefinedSymbol* undefined = symbols.find(kUndefinedTensorSingleton)) layout.undefined_tensor_symbol = undefined->address;

  check_consistency(layout);
  layout.source = std::filesystem::path(libc10_path).filename().string() +
                  ": TensorImpl::{dim,sizes,strides,storage_offset,numel,device}_custom, "
                  "has_storage, " +
                  storage_data_evidence + "; " + known_layout_match(layout);
  return layout;
}

}  // namespace

tensor_layout TensorImplLayout::to_bpf() const {
  const uint32_t device_end = std::max({device_type, device_index, device_has_value}) + 1;
  tensor_layout bpf{};
  bpf.enabled = 1;
  bpf.window_offset = dims;
  bpf.window_bytes = (device_end - dims + kWord - 1) / kWord * kWord;
  bpf.storage_field = storage;
  bpf.storage_data_field = storage_data;
  bpf.optional_tensor_payload = optional_payload_first ? 0 : kWord;
  bpf.optional_tensor_flag = optional_payload_first ? kWord : 0;
  return bpf;
}

std::optional<TensorImplLayout> calibrate_tensor_impl_layout(const std::string& libc10_path,
                                                             std::string* why_not) {
  try {
    return calibrate(libc10_path);
  } catch (const Inconsistent& error) {
    if (why_not) *why_not = libc10_path + ": " + error.what();
  } catch (const std::runtime_error& error) {  // ElfFile's: names the file already
    if (why_not) *why_not = error.what();
  }
  return std::nullopt;
}

}  // namespace tprof::symbolizer
