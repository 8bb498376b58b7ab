#include "userspace/session/doctor.h"

#include <bpf/libbpf.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <fstream>
#include <regex>

#include "symbolizer/aten/tensor_impl_layout.h"
#include "symbolizer/python/python_runtime.h"
#include "userspace/loader/uprobe_multi.h"
#include "userspace/session/privileges.h"
#include "userspace/session/target_process.h"

namespace tprof {
namespace {

using Outcome = DoctorCheck::Outcome;

DoctorCheck ok(std::string subject, std::string finding) { return {Outcome::kOk, std::move(subject), std::move(finding), ""}; }
DoctorCheck warning(std::string subject, std::string finding, std::string fix) {
  return {Outcome::kWarning, std::move(subject), std::move(finding), std::move(fix)};
}
DoctorCheck failure(std::string subject, std::string finding, std::string fix) {
  return {Outcome::kFailure, std::move(subject), std::move(finding), std::move(fix)};
}

DoctorCheck check_kernel() {
  utsname uts{};
  ::uname(&uts);
  if (!kernel_release_has_uprobe_multi(uts.release))
    return failure("kernel", std::string("Linux ") + uts.release + " has no uprobe_multi links",
                   "run on Linux 6.6 or newer (tprof attaches thousands of uprobes through one link)");
  return ok("kernel", std::string("Linux ") + uts.release + ", with uprobe_multi links (6.6+)");
}

DoctorCheck check_btf() {
  if (::access("/sys/kernel/btf/vmlinux", R_OK) != 0)
    return failure("BTF", "no /sys/kernel/btf/vmlinux: the kernel describes no types for CO-RE",
                   "use a kernel built with CONFIG_DEBUG_INFO_BTF=y (every major distribution's is)");
  return ok("BTF", "/sys/kernel/btf/vmlinux");
}

// Whether the kernel loads BPF programs at all (a gVisor sandbox does not); needs privileges.
DoctorCheck check_bpf_loads() {
  if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_KPROBE, nullptr) == 1) return ok("BPF", "the kernel loads uprobe programs");
  return failure("BPF", "the kernel refused a trivial uprobe program",
                 "run on a kernel with CONFIG_BPF_SYSCALL and CONFIG_UPROBE_EVENTS, outside a sandbox such as gVisor; "
                 "in a container, with seccomp unconfined (docs/deploy.md)");
}

DoctorCheck check_privileges(uid_t target_uid) {
  const std::string missing = missing_tracing_privilege(target_uid);
  if (!missing.empty())
    return failure("privileges", missing.substr(0, missing.find(';')),
                   "run as root, or grant CAP_BPF, CAP_PERFMON and (for other users' processes) CAP_SYS_PTRACE");
  return ok("privileges", ::geteuid() == 0 ? "root" : "CAP_BPF and CAP_PERFMON held");
}

// torch.__version__ from torch/version.py, beside torch's Python extension (torch/_C.*.so) or,
// in a wheel, above libtorch_cpu's lib/ directory; else the library's own version.
std::string torch_version(const TargetProcess& target, const MappedLibrary& torch) {
  static const std::regex kVersionLine(R"(__version__\s*=\s*['"]([^'"]+)['"])");
  const auto directory_of = [](const std::string& path) { return path.substr(0, path.rfind('/')); };
  std::vector<std::string> candidates = {directory_of(torch.host_path) + "/../version.py"};
  if (const auto extension = target.find_mapped_library("_C.cpython"))
    candidates.insert(candidates.begin(), directory_of(extension->host_path) + "/version.py");
  std::smatch match;
  for (const std::string& candidate : candidates) {
    std::ifstream version_file(candidate);
    for (std::string line; std::getline(version_file, line);)
      if (std::regex_search(line, match, kVersionLine)) return "torch " + match[1].str();
  }
  static const std::regex kSoVersion(R"(\.so\.([0-9][0-9.]*)$)");
  if (std::regex_search(torch.path_in_target, match, kSoVersion)) return "libtorch_cpu " + match[1].str();
  return "torch of unknown version";
}

DoctorCheck check_python(pid_t pid) {
  std::string why_not;
  const auto python = symbolizer::discover_python(pid, &why_not);
  if (!python)
    return warning("Python", "no Python stacks: " + why_not,
                   "tprof reads CPython 3.9-3.14 (GIL builds); ops are still recorded, without stacks");
  return ok("Python", "CPython " + python->version.to_string() + " (" + python->interpreter_path +
                          "): stacks and python_function spans supported");
}

std::vector<DoctorCheck> check_torch(const TargetProcess& target) {
  const auto torch = target.find_mapped_library("libtorch_cpu.so");
  if (!torch)
    return {warning("torch", "no libtorch_cpu is mapped: no ops to record",
                    "attach to the process that imported torch (a launcher's child, a worker), or after it did")};
  std::vector<DoctorCheck> checks{ok("torch", torch_version(target, *torch) + " (" + torch->path_in_target + ")")};
  const auto libc10 = target.find_mapped_library("libc10.so");
  std::string why_not = "no libc10 is mapped";
  std::optional<symbolizer::TensorImplLayout> layout;
  try {
    if (libc10) layout = symbolizer::calibrate_tensor_impl_layout(libc10->host_path, &why_not);
  } catch (const std::exception& error) {
    why_not = error.what();
  }
  if (layout) {
    checks.push_back(ok("shapes", "the TensorImpl layout calibrates: " + layout->source));
  } else {
    checks.push_back(warning("shapes", "ops will be recorded without shapes: " + why_not,
                             "none needed to record ops; shapes need a libc10 whose layout tprof knows"));
  }
  return checks;
}

DoctorCheck check_gpu(const TargetProcess& target) {
  if (const auto library = target.find_mapped_library("libtprof_cupti.so"))
    return ok("GPU", "libtprof_cupti.so is loaded (" + library->path_in_target + "): kernels and copies will be recorded");
  if (!target.find_mapped_library("libcuda.so"))
    return ok("GPU", "the process uses no CUDA driver: CPU only");
  return warning("GPU", "libtprof_cupti.so is not loaded: CUDA API calls only, no kernel timing",
                 "start the job with the variables `tprof env` prints (CUDA reads them at cuInit), or use tprof record");
}

ino_t namespace_inode(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

DoctorCheck check_namespaces(const TargetProcess& target) {
  const std::string proc = "/proc/" + std::to_string(target.pid());
  std::string finding = namespace_inode(proc + "/ns/pid") == namespace_inode("/proc/self/ns/pid")
                            ? "shares tprof's PID namespace"
                            : "in another PID namespace, where it is pid " + std::to_string(target.namespace_pid());
  finding += namespace_inode(proc + "/ns/mnt") == namespace_inode("/proc/self/ns/mnt")
                 ? "; shares tprof's mount namespace"
                 : "; in another mount namespace (its files are read through " + proc + "/root)";
  return ok("namespaces", finding);
}

std::vector<DoctorCheck> check_process(pid_t pid) {
  std::optional<TargetProcess> target;
  try {
    target.emplace(pid);
  } catch (const std::exception& error) {
    return {failure("process", error.what(), "give the pid of a running process as tprof sees it (ps, pgrep)")};
  }
  std::vector<DoctorCheck> checks{ok("process", std::to_string(pid) + " (" + target->name() + ")")};
  if (const std::string missing = missing_tracing_privilege(target->uid()); !missing.empty())
    checks.push_back(failure("access", missing.substr(0, missing.find(';')), "run tprof as root"));
  try {
    checks.push_back(check_python(pid));
    for (DoctorCheck& check : check_torch(*target)) checks.push_back(std::move(check));
    checks.push_back(check_gpu(*target));
    checks.push_back(check_namespaces(*target));
  } catch (const std::exception& error) {
    checks.push_back(failure("process", std::string("cannot inspect it: ") + error.what(),
                             "run tprof as root, or check that the process still runs"));
  }
  // Attach needs something to record: ops or Python stacks.
  const auto is_warning_about = [&](const char* subject) {
    return std::any_of(checks.begin(), checks.end(), [&](const DoctorCheck& check) {
      return check.subject == subject && check.outcome != Outcome::kOk;
    });
  };
  if (is_warning_about("torch") && is_warning_about("Python"))
    checks.push_back(failure("target", "neither torch ops nor Python stacks to record: attach would refuse it",
                             "attach to a PyTorch or CPython process"));
  return checks;
}

}  // namespace

bool DoctorReport::attach_would_fail() const {
  const auto failed = [](const DoctorCheck& check) { return check.outcome == Outcome::kFailure; };
  return std::any_of(system.begin(), system.end(), failed) || std::any_of(process.begin(), process.end(), failed);
}

DoctorReport run_doctor(std::optional<pid_t> pid) {
  DoctorReport report;
  report.system = {check_kernel(), check_btf(), check_privileges(::geteuid())};
  if (report.system.back().outcome == Outcome::kOk) report.system.push_back(check_bpf_loads());
  if (pid) report.process = check_process(*pid);
  return report;
}

}  // namespace tprof
