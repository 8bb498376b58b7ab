// What the library knows of the GPUs: their properties, read once through the CUDA driver the
// process already loaded, sent to tprof at every attach (struct device_properties), and used to
// estimate each kernel's occupancy as Kineto does (the toolkit's header-only occupancy
// calculator), on CUPTI's buffer thread rather than on the target's launch path.
#pragma once

#include <cuda.h>
#include <cuda_occupancy.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "device_activity.h"

namespace tprof::cupti {

// The driver functions used, resolved with dlsym in the driver the process has loaded.
struct DriverFunctions {
  decltype(&cuDeviceGetCount) device_count = nullptr;
  decltype(&cuDeviceGet) device = nullptr;
  decltype(&cuDeviceGetName) name = nullptr;
  decltype(&cuDeviceTotalMem) total_memory = nullptr;
  decltype(&cuDeviceGetAttribute) attribute = nullptr;

  // Resolves them in `library` (a dlopen handle, or RTLD_DEFAULT); false if any is missing.
  bool resolve(void* library);
};

// A kernel's launch configuration, as far as occupancy depends on it.
struct KernelShape {
  uint32_t device = 0;
  uint32_t registers_per_thread = 0;
  uint32_t static_shared_memory = 0;
  uint32_t dynamic_shared_memory = 0;
  uint32_t threads_per_block = 0;
};

class Devices {
 public:
  static constexpr size_t kMaxDevices = 64;
  static constexpr size_t kMaxNameBytes = 256;

  // Reads every device's properties once; later calls keep the first answer. False when the
  // driver gave none (not initialized, no GPU). Only one thread may call it.
  bool read(const DriverFunctions& driver);
  // The records to send tprof; empty until read succeeded.
  std::span<const device_properties> records() const;
  // How many blocks of `kernel` one SM holds at once (cudaOccMaxActiveBlocksPerMultiprocessor,
  // with the function attributes Kineto assumes); 0 when its device is not known.
  uint32_t active_blocks_per_sm(const KernelShape& kernel) const;

 private:
  bool read_device(const DriverFunctions& driver, int ordinal, size_t index);

  device_properties records_[kMaxDevices] = {};
  cudaOccDeviceProp occupancy_properties_[kMaxDevices];
  char names_[kMaxDevices][kMaxNameBytes] = {};  // records_[i].name points here, for the process's life
  std::atomic<size_t> count_{0};                 // set once every record is filled
};

}  // namespace tprof::cupti
