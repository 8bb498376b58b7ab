// Finding targets beyond the pids named: processes whose command line matches (--match), and
// the targets' descendants (--children), from /proc.
#pragma once

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

namespace tprof {

// Every process whose command line (arguments joined by spaces) matches `pattern` (ECMAScript
// regex, searched anywhere in it), but tprof itself and its ancestors (sudo, the shell that
// ran it), whose command lines hold the pattern too. Sorted. Throws tprof::Error for a bad
// pattern.
std::vector<pid_t> processes_matching(const std::string& pattern);

// The live descendants of `roots`, not counting the roots. Sorted.
std::vector<pid_t> descendants_of(const std::set<pid_t>& roots);

}  // namespace tprof
