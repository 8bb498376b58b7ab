// Translates a discovered interpreter layout into the BPF frame walker's configuration.
#pragma once

#include "python_stack.h"
#include "symbolizer/python/python_layout.h"

namespace tprof {

// Throws tprof::Error if the layout needs reads larger than the walker's buffers.
python_walker_config make_walker_config(const symbolizer::PythonLayout& layout);

}  // namespace tprof
