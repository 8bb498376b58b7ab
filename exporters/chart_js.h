// Chart.js (v3, MIT License), as Debian's libjs-chart.js installs it, compiled into tprof by
// exporters/CMakeLists.txt: the memory timeline's HTML page inlines it and needs no network.
#pragma once

#include <string_view>

namespace tprof::exporters {

extern const std::string_view kChartJs;

}  // namespace tprof::exporters
