// Pairs each backward node with the forward op that created it (Kineto's fwdbwd flows).
#pragma once

#include "model/trace_model.h"

namespace tprof {

// Fills trace.forward_backward_links: a backward node range with sequence number s is linked
// to the forward op that created node s, when exactly one op of the trace did (sequence
// numbers count per thread, and tprof cannot map torch's logical forward-thread ids to OS
// threads, so a number made on two threads links to neither).
void link_forward_backward(model::Trace& trace);

}  // namespace tprof
