// `tprof report TRACE[.json|.gz]`: the end-of-run table from a saved Chrome trace, tprof's or
// torch.profiler's own: every cpu_op and user_annotation, its self time being its duration
// less that of the ranges directly inside it on its thread.
#pragma once

#include <string>

#include "userspace/cli/op_summary.h"

namespace tprof {

// Throws tprof::Error when the file cannot be read or is not a Chrome trace.
OperatorTotalsTable totals_from_trace(const std::string& path, bool group_by_shape);

}  // namespace tprof
