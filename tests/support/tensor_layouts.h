// TensorImpl layouts the unit tests build tensor windows with, by hand.
#pragma once

#include "symbolizer/aten/tensor_impl_layout.h"

namespace tprof::testing {

// torch 1.13's layout (c10::optional, 3-word intrusive_ptr_target), as calibrated from
// Debian's libc10.so.1.13 and listed in runtime-layouts.md §5.
symbolizer::TensorImplLayout torch113_tensor_impl_layout();

}  // namespace tprof::testing
