// Loading libunwind when FAULTLINE_UNWINDER asks for it. The library does
// not link it: the default CFI unwinder needs nothing from it, and every
// process start would pay for loading it (and liblzma, which it pulls in).
#pragma once

namespace faultline::install {

// dlopen()s libunwind, resolves its local-unwinding entry points and hands
// them to the crash path (core/unwind/unwind.h). Install time only. Returns false,
// with *why set to the loader's message, when it cannot be loaded.
bool libunwind_load(const char** why);

}  // namespace faultline::install
