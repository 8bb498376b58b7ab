// `tprof doctor [PID]`: whether `tprof attach` would work here, and on that process, as a
// checklist with one fix per failure. Nothing is attached and nothing is loaded into BPF
// beyond the kernel's own feature probe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace tprof {

struct DoctorCheck {
  enum class Outcome { kOk, kWarning, kFailure };
  Outcome outcome = Outcome::kOk;
  std::string subject;  // "kernel", "BTF", "Python", ...
  std::string finding;  // what was found
  std::string fix;      // how to put it right; "" for ok
};

struct DoctorReport {
  std::vector<DoctorCheck> system;   // the machine and tprof's own privileges
  std::vector<DoctorCheck> process;  // the target, when a pid was given
  bool attach_would_fail() const;
};

DoctorReport run_doctor(std::optional<pid_t> pid);

}  // namespace tprof
