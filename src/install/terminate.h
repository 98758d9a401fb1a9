// Installs the std::terminate handler that records an uncaught exception
// for the crash report (core/terminate.h holds the record). Install time;
// compiled with exceptions.
#pragma once

namespace faultline::core {

void install_terminate_handler();
void uninstall_terminate_handler();

}  // namespace faultline::core
