// Install-time facts about how the library was loaded (at start-up, or late
// with dlopen) that the crash path must adapt to.
#pragma once

namespace faultline::install {

// True when libunwind's thread-local storage sits in the static TLS block
// (loaded at start-up, or given static TLS), so touching it in a signal
// handler allocates nothing; false when it is dynamic (libunwind loaded by
// a late dlopen of libfaultline.so) or cannot be told.
bool libunwind_tls_is_static();

}  // namespace faultline::install
