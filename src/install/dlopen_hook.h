// The dlopen interposer (dlopen_hook.cpp). Install-side code.
#pragma once

namespace faultline::install {

// libc's dlopen, past faultline's interposer: for faultline's own loads
// (libunwind), which are not a program's load to record (no snapshot
// refresh, not "a dlopen before the install"). The caller seen by the
// loader is faultline, as with a plain dlopen from its code.
void* dlopen_unhooked(const char* file, int mode);

}  // namespace faultline::install
