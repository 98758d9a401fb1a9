#include "symbolize/tail_calls.h"

#include <dwarf.h>

#include <algorithm>

#include "symbolize/dwarf_index.h"

namespace faultline::symbolize::internal {
namespace {

// Bounds on the search, for damaged or hostile DWARF and for libraries
// whose tail calls fan out widely: a longer chain than this is not looked
// for, and a search that visits more sites than this gives up (no frames).
constexpr size_t kMaxChain = 32;
constexpr size_t kMaxVisits = 100000;
constexpr int kMaxDepth = 256;

bool attr_flag(Dwarf_Die* die, int name) {
  Dwarf_Attribute attr;
  bool flag = false;
  return dwarf_attr(die, name, &attr) != nullptr && dwarf_formflag(&attr, &flag) == 0 && flag;
}

bool attr_address(Dwarf_Die* die, int name, uint64_t* value) {
  Dwarf_Attribute attr;
  Dwarf_Addr addr = 0;
  if (dwarf_attr(die, name, &attr) == nullptr || dwarf_formaddr(&attr, &addr) != 0) return false;
  *value = addr;
  return true;
}

// DWARF 5 spells the record DW_TAG_call_site; GCC's DWARF 4 extension
// DW_TAG_GNU_call_site, with the return address in DW_AT_low_pc. A record
// with no return address (Clang 14 gives tail calls only DW_AT_call_pc, the
// jump's own address) is left out, as gdb leaves it out: a frame that gdb
// cannot show is one this symbolizer does not add either.
CallSite read_site(Dwarf_Die* die, bool gnu) {
  CallSite site;
  attr_address(die, gnu ? DW_AT_low_pc : DW_AT_call_return_pc, &site.return_pc);
  site.tail = attr_flag(die, gnu ? DW_AT_GNU_tail_call : DW_AT_call_tail_call);
  Dwarf_Attribute attr;
  Dwarf_Die origin;
  if ((dwarf_attr(die, DW_AT_call_origin, &attr) ||
       dwarf_attr(die, DW_AT_abstract_origin, &attr)) &&
      dwarf_formref_die(&attr, &origin) != nullptr) {
    site.has_entry = function_entry(&origin, &site.entry);
    const char* name = attr_string(&origin, DW_AT_linkage_name);
    if (name == nullptr) name = attr_string(&origin, DW_AT_MIPS_linkage_name);
    if (name == nullptr) name = attr_string(&origin, DW_AT_name);
    if (name) site.target_name = name;
  }
  return site;
}

void collect_sites(Dwarf_Die* parent, int depth, std::vector<CallSite>* out) {
  if (depth > kMaxDepth) return;
  Dwarf_Die child;
  for (int rc = dwarf_child(parent, &child); rc == 0; rc = dwarf_siblingof(&child, &child)) {
    int tag = dwarf_tag(&child);
    switch (tag) {
      case DW_TAG_call_site:
      case DW_TAG_GNU_call_site: {
        CallSite site = read_site(&child, tag == DW_TAG_GNU_call_site);
        if (site.return_pc != 0) out->push_back(std::move(site));
        break;
      }
      case DW_TAG_inlined_subroutine:
      case DW_TAG_lexical_block:
      case DW_TAG_try_block:
      case DW_TAG_catch_block:
        collect_sites(&child, depth + 1, out);
        break;
      default:
        break;  // nested functions' calls are their own
    }
  }
}

struct Search {
  uint64_t callee;
  const std::function<const std::vector<CallSite>*(uint64_t)>& sites_of;
  const std::function<bool(const CallSite&, uint64_t*)>& resolve;
  std::vector<CallSite> path;
  std::vector<CallSite> chain;  // what every way found so far shares
  size_t callers = 0, callees = 0;
  bool found = false;
  bool failed = false;
  size_t visits = 0;

  void candidate() {
    if (!found) {
      found = true;
      chain = path;
      callers = callees = path.size();
      return;
    }
    size_t n = std::min(callers, path.size());
    for (size_t i = 0; i < n; ++i)
      if (chain[i].return_pc != path[i].return_pc) n = i;
    callers = n;
    n = std::min(callees, path.size());
    for (size_t i = 0; i < n; ++i)
      if (chain[chain.size() - 1 - i].return_pc != path[path.size() - 1 - i].return_pc) n = i;
    callees = n;
  }

  void walk(uint64_t entry) {
    if (failed) return;
    const std::vector<CallSite>* sites = sites_of(entry);
    if (sites == nullptr) return;
    for (const CallSite& site : *sites) {
      if (!site.tail) continue;
      if (++visits > kMaxVisits) {
        failed = true;
        return;
      }
      uint64_t target = 0;
      if (!resolve(site, &target)) {
        failed = true;  // an unknown target could be any function: nothing is certain
        return;
      }
      bool on_path = std::any_of(path.begin(), path.end(),
                                 [&](const CallSite& s) { return s.return_pc == site.return_pc; });
      if (on_path) continue;
      path.push_back(site);
      if (target == callee) {
        candidate();
      } else if (path.size() < kMaxChain) {
        walk(target);
      }
      path.pop_back();
      if (failed) return;
    }
  }
};

}  // namespace

bool function_entry(Dwarf_Die* function, uint64_t* entry) {
  Dwarf_Addr addr = 0;
  if (dwarf_entrypc(function, &addr) == 0) {
    *entry = addr;
    return true;
  }
  Dwarf_Addr base = 0, low = 0, high = 0;
  if (dwarf_ranges(function, 0, &base, &low, &high) > 0) {
    *entry = low;
    return true;
  }
  return false;
}

std::vector<CallSite> call_sites(Dwarf_Die* function) {
  std::vector<CallSite> out;
  collect_sites(function, 0, &out);
  return out;
}

std::vector<CallSite> tail_call_chain(
    uint64_t first_entry, uint64_t callee_entry,
    const std::function<const std::vector<CallSite>*(uint64_t entry)>& sites_of,
    const std::function<bool(const CallSite& site, uint64_t* entry)>& resolve) {
  if (first_entry == callee_entry) return {};
  Search search{callee_entry, sites_of, resolve, {}, {}, 0, 0, false, false, 0};
  search.walk(first_entry);
  if (search.failed || !search.found) return {};
  std::vector<CallSite>& chain = search.chain;
  if (search.callers == chain.size()) return chain;  // one way, or all alike
  size_t callees = std::min(search.callees, chain.size() - search.callers);
  std::vector<CallSite> out(chain.begin(), chain.begin() + static_cast<long>(search.callers));
  out.insert(out.end(), chain.end() - static_cast<long>(callees), chain.end());
  return out;
}

}  // namespace faultline::symbolize::internal
