// Redirects other objects' calls to a libcupti function through their imports (PLT and GOT slots).
//
// CUPTI hands every activity buffer it completes to whichever buffer callbacks were registered
// last, and no CUPTI callback reports a registration. The target's own torch.profiler (Kineto)
// registers its callbacks at every start and drops any buffer it did not ask for, with what that
// buffer holds of its own session. Seeing the registration before CUPTI acts on it is the only
// way for tprof's library to give its buffers back first: so its imports in the target's
// libraries (libtorch_cpu.so imports libcupti's functions by name) are pointed at the library.
#pragma once

#include <cstddef>

namespace tprof::cupti {

// Points the slot of every loaded object that imports `symbol` by a PLT or GOT relocation at
// `replacement`, except in the objects that hold any of `skip` (addresses inside them: this
// library, and the one defining `symbol`). Slots already pointing there are left; a slot in a
// RELRO segment is made writable for the write only. Returns how many slots it changed.
int redirect_imports(const char* symbol, void* replacement, const void* const* skip, size_t skip_count);

// Whether objects were loaded or unloaded since the last call (glibc's dlpi_adds and dlpi_subs):
// a library loaded later than a redirect has its own slots still to redirect.
bool loaded_objects_changed();

}  // namespace tprof::cupti
