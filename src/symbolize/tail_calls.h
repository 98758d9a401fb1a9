// Frames of tail calls, rebuilt from DWARF 5 call-site records the way gdb
// rebuilds them. At -O2 `return g(x);` is a jump: the function that makes it
// leaves no frame, and an unwinder goes from g's frame straight to the frame
// that called the jumping function. The compiler records every call in a
// DW_TAG_call_site (its return address, the function called, and whether it
// is a tail call), so the functions in between can be named when the records
// allow exactly one way from the caller's call to the callee:
//
//   caller --call--> f1 --tail--> f2 --tail--> callee   gives frames f2, f1
//
// Where several ways lead there only the call sites every way shares are
// kept (the common start and the common end, as gdb does); where a tail
// call's target is not known (an indirect jump) nothing is guessed: no frame.
// Internal to the symbolizer.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace faultline::symbolize::internal {

struct CallSite {
  uint64_t return_pc = 0;   // the address after the call or jump
  bool tail = false;        // DW_AT_call_tail_call
  bool has_entry = false;   // the record's target has code in this DWARF
  uint64_t entry = 0;       // ... at this address
  std::string target_name;  // linkage (or source) name; "" for an indirect call
};

// The call sites of `function` (an out-of-line DW_TAG_subprogram), in code
// inlined into it too, not in functions nested in it.
std::vector<CallSite> call_sites(Dwarf_Die* function);

// A function DIE's entry address: DW_AT_entry_pc, DW_AT_low_pc, or the start
// of its first range.
bool function_entry(Dwarf_Die* function, uint64_t* entry);

// The tail-call sites between a call into `first_entry` and the function at
// `callee_entry`, outermost first (the function each site sits in is a frame
// that is not on the stack); empty when the call went there directly, when
// no way or no unambiguous part of one is found, or when a way passes a tail
// call whose target is unknown. `sites_of` gives a function's call sites by
// its entry (null when unknown); `resolve` a site's target entry.
std::vector<CallSite> tail_call_chain(
    uint64_t first_entry, uint64_t callee_entry,
    const std::function<const std::vector<CallSite>*(uint64_t entry)>& sites_of,
    const std::function<bool(const CallSite& site, uint64_t* entry)>& resolve);

}  // namespace faultline::symbolize::internal
