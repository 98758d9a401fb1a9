// Installs the std::terminate handler that records an uncaught exception
// for the crash report (core/terminate_record.h holds the record). Install time,
// and again when modules were loaded (a C++ runtime may have come with
// them): installs nothing while the process has no libstdc++, which the
// library never loads itself.
#pragma once

namespace faultline::core {

void install_terminate_handler();
void uninstall_terminate_handler();

}  // namespace faultline::core
