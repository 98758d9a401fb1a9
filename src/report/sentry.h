// Sentry events from reports (offline).
//
//   nlohmann::json event = faultline::report::sentry_event(report);
//   std::string body = faultline::report::sentry_envelope(report);  // POST to /api/<id>/envelope/
//
// The event follows Sentry's documented payload (develop.sentry.dev/sdk/event-payloads):
// `exception` with mechanism "signalhandler" and the signal in `mechanism.meta.signal`,
// `threads`, stack frames oldest first, and `debug_meta.images` of type "elf" whose
// `debug_id` is derived from the GNU build-id the way Sentry derives it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "report/report.h"

namespace faultline::report {

nlohmann::json sentry_event(const Report& r);
// An envelope with one event item: header line, item header line, payload.
std::string sentry_envelope(const Report& r);

// Sentry's debug_id for an ELF build-id (hex): the first 16 bytes (zero-padded),
// read as a little-endian GUID, i.e. the first three fields byte-swapped, then
// formatted "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx". "" when build_id is not hex.
// Example from Sentry's docs: 68220ae2c65d65c1b6aaa12fa6765a6ec2f5f434 ->
// e20a2268-5dc6-c165-b6aa-a12fa6765a6e.
std::string sentry_debug_id(const std::string& build_id);

}  // namespace faultline::report
