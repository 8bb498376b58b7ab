#include "tests/support/tensor_layouts.h"

namespace tprof::testing {

symbolizer::TensorImplLayout torch113_tensor_impl_layout() {
  symbolizer::TensorImplLayout layout;
  layout.dims = 72;
  layout.inline_sizes = 80;
  layout.inline_strides = 120;
  layout.storage_offset = 160;
  layout.numel = 168;
  layout.dtype = 176;
  layout.device_has_value = 178;
  layout.device_type = 179;
  layout.device_index = 180;
  layout.storage = 24;
  layout.storage_data = 24;
  layout.optional_payload_first = false;
  return layout;
}

}  // namespace tprof::testing
