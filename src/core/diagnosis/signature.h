// The crash signature: 16 hex digits that group reports of one bug. Written
// by the crash path into diagnosis.signature and recomputed by the offline
// side (src/report/triage.cpp) for reports without one, with this same
// SignatureBuilder. doc/report-format.md ("Crash signature") specifies the
// algorithm and gives test vectors, which test/unit/diagnosis/signature_test.cpp runs
// through this code and test/cli/test_signature.py through an independent
// implementation of the text. Pure functions; async-signal-safe.
//
//   SignatureBuilder s("SIGSEGV", "null-deref", nullptr, false);
//   s.native("/usr/bin/app", "crash", 0x1139, "native");   // innermost first
//   s.python("/srv/job.py", "step", "python");
//   char out[kSignatureBytes];
//   s.finish(out);                                         // "3a19a9a3fa7ffaff"
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace faultline::core {

constexpr int kSignatureNativeFrames = 6;     // native frames hashed
constexpr int kSignaturePythonFrames = 4;     // Python frames hashed
constexpr size_t kSignatureFieldBytes = 256;  // a native field is cut to 255 bytes
constexpr size_t kSignatureBytes = 17;        // 16 hex digits and a NUL

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

// Whether a frame is generated code whose file or module name carries hashes
// or counters, decided from what a report records: the frame's origin id and
// its module path and symbol (native) or file and function (Python). Agrees
// with the origin table's `generated` (test/torch/classify_test.cpp checks
// every case of the table).
bool signature_frame_generated(const char* origin_id, bool python, const char* where,
                               const char* what);

// Collects the frames of the crashed thread, innermost first, and hashes
// what the signature uses. Strings given to python() must live until
// finish(); native frames are copied.
class SignatureBuilder {
 public:
  // signal: "SIGSEGV" ("?" when unknown); exception_type: for an uncaught
  // C++ exception (may be ""), else nullptr; sent_by_process: si_code <= 0.
  SignatureBuilder(const char* signal, const char* category, const char* exception_type,
                   bool sent_by_process);

  // module: path, nullptr outside every module; symbol: raw, nullptr if none;
  // module_offset: pc minus the module's load bias; origin: the frame's origin id.
  void native(const char* module, const char* symbol, uint64_t module_offset, const char* origin);
  void python(const char* file, const char* function, const char* origin);

  // Whether more frames of a kind would still be used.
  bool wants_native() const { return nnative_ < kSignatureNativeFrames; }
  bool wants_python() const { return npython_ < kSignaturePythonFrames; }

  void finish(char* out) const;  // out: kSignatureBytes

 private:
  const char* signal_;
  const char* category_;
  const char* exception_type_;
  bool sent_by_process_;
  char native_[kSignatureNativeFrames][kSignatureFieldBytes];
  int nnative_ = 0;
  const char* python_[2 * kSignaturePythonFrames];  // file field, function, ...
  int npython_ = 0;
};

// The signature of a live dump: every dump of a process groups together.
void dump_signature(char* out);

}  // namespace faultline::core
