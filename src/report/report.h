// Reading faultline/1 reports (offline).
//
//   faultline::report::Report r = faultline::report::load_report("faultline-...json");
//   for (const auto& t : r.threads) ...
//
// A report written by an older or newer minor version of faultline must still
// read: fields this reader does not know are ignored (they stay reachable in
// Report::raw), and optional fields that are missing or of an unexpected type
// are left empty (std::nullopt / ""), which renderers show as "unknown".
// Input that is not a faultline/1 report at all (empty, truncated, not JSON,
// binary, another schema) raises ReportError with a message a person can act on.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace faultline::report {

// The schema string this reader understands. "faultline/1.<minor>" is read too.
inline constexpr const char* kSchema = "faultline/1";

// Why a file could not be read as a report.
enum class ReportErrorKind {
  kIo,           // could not open or read the file
  kEmpty,        // zero bytes, or only white space
  kBinary,       // NUL bytes or invalid UTF-8: not a text file
  kTruncated,    // valid JSON so far, then the input ends
  kNotJson,      // a JSON syntax error
  kWrongSchema,  // JSON, but not a faultline/1 report
  kNotFile,      // a FIFO, device, socket or directory: never read (it could block or be endless)
  kTooLarge,     // larger than kMaxReportBytes
};

// The largest input read as a report: 128 MiB. A report of 256 threads with
// 256 frames each is about 20 MB; anything far larger is not one (a sparse
// file, a core dump, /dev/zero behind a link) and is refused before reading.
inline constexpr uint64_t kMaxReportBytes = 128ull << 20;

const char* to_string(ReportErrorKind kind);

class ReportError : public std::runtime_error {
 public:
  ReportError(ReportErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  ReportErrorKind kind() const { return kind_; }

 private:
  ReportErrorKind kind_;
};

struct Frame {
  std::string kind;    // "native" | "python" | "" (unknown)
  std::string origin;  // "native", "python", "cpython", "dynamo", ...; "" when missing
  // Native frames.
  std::string pc;             // "0x..."
  std::string module;         // path of the module
  std::string module_offset;  // "0x..."
  std::string symbol;         // raw (mangled) name; "" when none covers the pc
  std::string symbol_offset;  // "0x..."
  // Python frames; native frames after `faultline symbolize` (source position).
  std::string file;
  std::optional<int64_t> line;
  std::string function;
  std::string qualname;

  // After `faultline symbolize`: the functions tail calls took off the stack
  // between this frame and the next, innermost first (frames with
  // tail_call set, in this frame's module, without pc).
  std::vector<Frame> tail_calls;
  bool tail_call = false;

  bool is_python() const { return kind == "python"; }
  const nlohmann::json* raw = nullptr;  // the frame's object inside Report::raw
};

struct Thread {
  std::optional<int64_t> tid;
  std::string name;
  bool crashed = false;
  std::optional<int64_t> frames_total;
  bool frames_truncated = false;
  std::vector<Frame> frames;
  const nlohmann::json* raw = nullptr;  // the thread's object inside Report::raw
};

struct Module {
  std::string path;
  std::string base;  // "0x..."
  std::optional<uint64_t> size;
  std::string build_id;   // lower-case hex; "" when the module has none
  std::string load_bias;  // "0x..."; "" when unknown
};

struct Signal {
  std::optional<int64_t> number;
  std::string name;  // "SIGSEGV"
  std::optional<int64_t> code;
  std::string code_name;    // "SEGV_MAPERR"
  std::string description;  // "SEGV_MAPERR: address not mapped to object"
  std::string fault_address;
  std::optional<int64_t> sender_pid;
  // A handler raised the fault again: the signal as delivered ("SIGSEGV"),
  // "" when it was not re-raised.
  std::string reraised_name;
};

struct Diagnosis {
  std::string summary;
  std::string category;
  std::string signature;
};

struct Process {
  std::optional<int64_t> pid;
  std::string executable;
  std::string exec_name;  // the path it was started by (AT_EXECFN)
  std::vector<std::string> argv;
  bool argv_truncated = false;  // the command line did not fit (8 KiB): more came after
  std::string cwd;
  std::string hostname;
  std::string arch;  // "x86_64", "aarch64"; "" in reports from before the field (x86-64)
  std::string start_time;
};

struct Python {
  std::string version;         // "3.11.7"
  std::string implementation;  // "cpython"
};

// Frames and threads point into `raw`, so a Report moves but is never copied.
struct Report {
  Report() = default;
  Report(Report&&) = default;
  Report& operator=(Report&&) = default;
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;

  nlohmann::json raw;  // the whole document, unknown fields included
  std::string path;    // where it was read from ("" for in-memory input)
  std::string schema;
  std::string kind;  // "crash" | "dump" | "terminate" | "shutdown" | "exception" | "" (unknown)
  std::string timestamp;  // ISO 8601, "" when missing
  Signal signal;
  Diagnosis diagnosis;
  Process process;
  std::optional<Python> python;  // nullopt: no Python in the process, or unknown
  std::optional<int64_t> crashed_tid;
  std::vector<Thread> threads;
  std::vector<Module> modules;
  std::string faultline_version;
  std::vector<std::string> errors;  // faultline.errors: what the capture missed
  // faultline.suppressed.count: crashes of this signature not reported
  // before this one (FAULTLINE_SAME_CRASH_LIMIT); 0 when none.
  int64_t suppressed = 0;

  // The crashed thread (by `crashed`, else by crashed_tid), or nullptr.
  const Thread* crashed_thread() const;
  // Threads with the crashed one first, the others in report order.
  std::vector<const Thread*> threads_crashed_first() const;
  // The module whose path is `path`, or nullptr.
  const Module* find_module(const std::string& path) const;
};

// Parses `text` as a report. `path` is only used in messages.
Report parse_report(const std::string& text, const std::string& path = "");
// Reads and parses the file at `path`. Throws ReportError.
Report load_report(const std::string& path);
// Reads a whole regular file of at most `max_bytes`. Never blocks and never
// reads without bound: the file is opened with O_NONBLOCK and checked with
// fstat first. Throws ReportError (kIo with strerror, kNotFile, kTooLarge).
std::string read_file(const std::string& path, uint64_t max_bytes = kMaxReportBytes);
// Reads a descriptor (standard input) to its end, refusing more than `max_bytes`.
std::string read_fd(int fd, const std::string& name, uint64_t max_bytes = kMaxReportBytes);

// Checks the text for being text: throws ReportError(kEmpty/kBinary) when not.
// Split out so that `validate` reports the same reasons as `show`.
void check_text(const std::string& text, const std::string& path);
// Parses JSON with faultline's error classification (kTruncated vs kNotJson).
nlohmann::json parse_json(const std::string& text, const std::string& path);

// FNV-1a over `data` (64 bits), starting from `seed`: stable across builds and
// platforms, for fingerprints and ids derived from report contents.
uint64_t fnv1a64(const std::string& data, uint64_t seed = 0xcbf29ce484222325ull);

// Small helpers for renderers.
// The string member `key` of `object`, "" when missing or not a string.
std::string string_field(const nlohmann::json& object, const char* key);
std::string basename(const std::string& path);
// "module!symbol+0x12" (or "module+0x1234" without a symbol) of a native frame.
std::string native_location(const Frame& f);

}  // namespace faultline::report
