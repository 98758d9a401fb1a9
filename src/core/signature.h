// The crash signature: 16 hex digits that group reports of one bug. Written
// by the crash path into diagnosis.signature and recomputed by the offline
// side (src/report/triage.cpp) for reports without one, with these same
// functions. doc/report-format.md ("Crash signature") specifies the
// algorithm and gives test vectors. Pure functions; async-signal-safe.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/str.h"

namespace faultline::core {

constexpr int kSignatureNativeFrames = 6;  // native frames hashed
constexpr int kSignaturePythonFrames = 4;  // Python frames hashed
constexpr size_t kSignatureBytes = 17;     // 16 hex digits and a NUL

// 64-bit FNV-1a over fields; each field's bytes are followed by one 0xff
// byte. finish() writes the hash's 8 bytes least significant first, as hex.
class SignatureHash {
 public:
  void field(const char* s);  // nullptr hashes like ""
  void finish(char* out) const;

 private:
  uint64_t h_ = 1469598103934665603ull;
};

// libc's own signal-raising path (abort -> raise -> pthread_kill), skipped:
// a frame whose symbol is one of those functions, or, for a signal sent by a
// process, a frame of libc.so* without a symbol (stripped libc hides them).
bool signature_skips_native(const char* module_path, const char* symbol, bool sent_by_process);

// A native frame as a field (at most cap - 1 bytes, in out):
//   generated code (origin says so)  "<origin id>!<symbol or ?>"
//   outside every module             "?"
//   otherwise                        "<module basename>!<symbol>", or without a
//                                    symbol "<module basename>+0x<offset>"
// module_offset is pc minus the module's load bias.
void signature_native_field(char* out, size_t cap, const char* module_path, const char* symbol,
                            uint64_t module_offset, const char* origin_id, bool generated);

// A Python frame's file field: the origin id for generated code (FX's
// <eval_with_key>.N, hashed cache paths), else the file's basename.
const char* signature_python_file(const char* file, const char* origin_id, bool generated);

// Whether a frame the crash path classified as origin_id is generated code
// (the origin table's `generated`), for the offline side, which has the id
// from the report: when every rule of that id agrees, the id decides; when
// they differ (a Dynamo resume function is generated, the rest of Dynamo is
// not), the frame is classified again (where: module path or file; what:
// symbol or function).
bool origin_is_generated(const char* origin_id, bool python, const char* where, const char* what);

struct SignatureInput {
  const char* signal;          // "SIGSEGV" ("?" when unknown)
  const char* category;        // diagnosis.category
  const char* exception_type;  // for an uncaught C++ exception (may be ""), else nullptr
  const char* const* native;   // native frame fields, innermost first, raise path skipped
  int nnative;
  const char* const* python;  // Python frames: file field, function (co_name), ...
  int npython;                // frames (not fields)
};

// The signature of a crash (out: kSignatureBytes). Uses the first
// kSignatureNativeFrames native and kSignaturePythonFrames Python frames.
void crash_signature(const SignatureInput& in, char* out);

// The signature of a live dump: every dump of a process groups together.
void dump_signature(char* out);

}  // namespace faultline::core
