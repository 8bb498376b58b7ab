// Where c10::TensorImpl keeps shape, dtype, device and storage, in the target's own build:
// read off the machine code of accessors libc10 exports, cross-checked against the layouts
// known from PyTorch's headers, never taken from a table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "bpf/op_arguments.h"

namespace tprof::symbolizer {

// Byte offsets into c10::TensorImpl (and, for storage_data, into c10::StorageImpl).
struct TensorImplLayout {
  uint32_t dims = 0;            // sizes_and_strides_.size_
  uint32_t inline_sizes = 0;    // first inline size (also the out-of-line pointer slot)
  uint32_t inline_strides = 0;  // first inline stride (= inline_sizes + 5*8)
  uint32_t storage_offset = 0;  // storage_offset_ (int64, elements)
  uint32_t numel = 0;
  uint32_t dtype = 0;             // data_type_ (TypeMeta index, uint16) = numel + 8
  uint32_t device_type = 0;       // DeviceType (int8) inside device_opt_
  uint32_t device_index = 0;      // DeviceIndex (int8)
  uint32_t device_has_value = 0;  // the optional's engaged flag
  uint32_t storage = 0;           // storage_ (StorageImpl*)
  uint32_t storage_data = 0;      // the data pointer inside StorageImpl
  // std::optional (torch 2.2+) stores the payload before its flag, c10::optional the flag
  // first; the same holds for optional<Tensor> arguments.
  bool optional_payload_first = false;
  // c10::UndefinedTensorImpl::_singleton's address in the file (0: not exported): every
  // undefined at::Tensor points at it, and torch's ET names a None in a Tensor?[] by it.
  uint64_t undefined_tensor_symbol = 0;
  std::string source;  // how it was found, one line (trace metadata, --verbose)

  // What BPF copies: the window runs from `dims` to the end of device_opt_, rounded up to
  // 8 bytes. Expects a calibrated layout, whose window fits TENSOR_WINDOW_BYTES.
  tensor_layout to_bpf() const;
};

// Calibrates from the target's libc10, e.g. /proc/PID/root/usr/lib/x86_64-linux-gnu/
// libc10.so.1.13 or a wheel's torch/lib/libc10.so. nullopt and a one-line *why_not when an
// accessor is missing or decodes to something inconsistent. A consistent layout that no known
// torch has is used all the same, as its accessors give it, and said so in `source`: the first
// tensors decoded are its trial (ArgumentDecoder::layout_rejection).
std::optional<TensorImplLayout> calibrate_tensor_impl_layout(const std::string& libc10_path,
                                                             std::string* why_not);

}  // namespace tprof::symbolizer
