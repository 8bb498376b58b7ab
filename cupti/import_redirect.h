// Redirects other objects' calls to a libcupti function through their imports (PLT and GOT slots).
//
// CUPTI hands every activity buffer it completes to whichever buffer callbacks were registered
// last, and no CUPTI callback reports a registration. The target's own torch.profiler (Kineto)
// registers its callbacks at every start and drops any buffer it did not ask for, with what that
// buffer holds of its own session. Seeing the registration before CUPTI acts on it is the only
// way for tprof's library to give its buffers back first: so its imports in the target's
// libraries (libtorch_cpu.so imports libcupti's functions by name) are pointed at the library.
#pragma once

#include <span>

namespace tprof::cupti {

struct ImportRedirect {
  const char* symbol;
  void* replacement;
};

// Points the slot of every loaded object that imports one of `redirects`' symbols by a PLT or GOT
// relocation at its replacement, except in the objects that hold any of `skip` (addresses inside
// them: this library, and the one defining the symbols). Slots already pointing there are left; a
// slot in a RELRO segment is made writable for the write only. One pass over the relocations:
// 6-7 ms for a process with torch 1.13's libtorch_cpu.so on the development VM, page cache
// dropped. Returns how many slots it changed.
int redirect_imports(std::span<const ImportRedirect> redirects, std::span<const void* const> skip);

// Whether objects were loaded or unloaded since the last call (glibc's dlpi_adds and dlpi_subs):
// a library loaded later than a redirect has its own slots still to redirect.
bool loaded_objects_changed();

}  // namespace tprof::cupti
