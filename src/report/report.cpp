#include "report/report.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace faultline::report {

using nlohmann::json;

const char* to_string(ReportErrorKind kind) {
  switch (kind) {
    case ReportErrorKind::kIo:
      return "unreadable";
    case ReportErrorKind::kEmpty:
      return "empty";
    case ReportErrorKind::kBinary:
      return "binary";
    case ReportErrorKind::kTruncated:
      return "truncated";
    case ReportErrorKind::kNotJson:
      return "not-json";
    case ReportErrorKind::kWrongSchema:
      return "wrong-schema";
    case ReportErrorKind::kNotFile:
      return "not-a-file";
    case ReportErrorKind::kTooLarge:
      return "too-large";
  }
  return "unknown";
}

namespace {

std::string where(const std::string& path) {
  return path.empty() ? "input" : path;
}

// Length of the UTF-8 sequence starting at s[i], or 0 when it is not valid
// UTF-8 (overlongs and surrogates included, as JSON text must be UTF-8).
size_t utf8_sequence_length(const std::string& s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// Typed getters that never throw: a field of the wrong type reads as missing.
std::string str(const json& o, const char* key) {
  if (!o.is_object()) return "";
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

std::optional<int64_t> integer(const json& o, const char* key) {
  if (!o.is_object()) return std::nullopt;
  auto it = o.find(key);
  if (it == o.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float()) {
    double d = it->get<double>();
    if (d == static_cast<double>(static_cast<int64_t>(d))) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

bool boolean(const json& o, const char* key) {
  if (!o.is_object()) return false;
  auto it = o.find(key);
  return it != o.end() && it->is_boolean() && it->get<bool>();
}

const json& member(const json& o, const char* key) {
  static const json kNull;
  if (!o.is_object()) return kNull;
  auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}

// Sizes are hex strings in the format ("0x1d5000"), but a number is accepted.
std::optional<uint64_t> hex_or_number(const json& o, const char* key) {
  const json& v = member(o, key);
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() > 2 && s.size() <= 18 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
      uint64_t value = 0;
      for (size_t i = 2; i < s.size(); ++i) {
        char c = s[i];
        int d = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                         : -1;
        if (d < 0) return std::nullopt;
        value = value * 16 + static_cast<uint64_t>(d);
      }
      return value;
    }
  }
  return std::nullopt;
}

// `nested`: a tail call's entry, whose own "tail_calls" mean nothing.
Frame read_frame(const json& j, bool nested = false) {
  Frame f;
  f.raw = &j;
  f.kind = str(j, "kind");
  f.origin = str(j, "origin");
  f.pc = str(j, "pc");
  f.module = str(j, "module");
  f.module_offset = str(j, "module_offset");
  f.symbol = str(j, "symbol");
  f.symbol_offset = str(j, "symbol_offset");
  f.file = str(j, "file");
  f.line = integer(j, "line");
  f.function = str(j, "function");
  f.qualname = str(j, "qualname");
  const json& tail_calls = member(j, "tail_calls");
  if (!nested && tail_calls.is_array() && f.kind != "python") {
    for (const json& t : tail_calls) {
      if (!t.is_object()) continue;
      Frame tc = read_frame(t, true);
      tc.kind = "native";
      tc.origin = f.origin;
      if (tc.module.empty()) tc.module = f.module;
      tc.tail_call = true;
      f.tail_calls.push_back(std::move(tc));
    }
  }
  if (f.kind.empty()) {
    // An older or foreign writer: infer the kind from the fields present.
    if (!f.pc.empty()) {
      f.kind = "native";
    } else if (!f.file.empty() || !f.function.empty()) {
      f.kind = "python";
    }
  }
  return f;
}

Thread read_thread(const json& j) {
  Thread t;
  t.raw = &j;
  t.tid = integer(j, "tid");
  t.name = str(j, "name");
  t.crashed = boolean(j, "crashed");
  t.frames_total = integer(j, "frames_total");
  t.frames_truncated = boolean(j, "frames_truncated");
  const json& frames = member(j, "frames");
  if (frames.is_array()) {
    for (const json& f : frames) {
      if (f.is_object()) t.frames.push_back(read_frame(f));
    }
  }
  return t;
}

// Accepts "faultline/1" and "faultline/1.<minor>": minor versions only add fields.
bool schema_supported(const std::string& s) {
  const std::string major = kSchema;
  if (s == major) return true;
  return s.size() > major.size() + 1 && s.compare(0, major.size(), major) == 0 &&
         s[major.size()] == '.';
}

const char* json_type_name(const json& j) {
  switch (j.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::null:
      return "null";
    default:
      return "a number";
  }
}

}  // namespace

void check_text(const std::string& text, const std::string& path) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw ReportError(
        ReportErrorKind::kEmpty,
        fmt::format("{}: empty file ({} bytes), not a report", where(path), text.size()));
  }
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\0') {
      throw ReportError(ReportErrorKind::kBinary,
                        fmt::format("{}: binary data (NUL byte at offset {}), not a JSON report",
                                    where(path), i));
    }
    size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      throw ReportError(
          ReportErrorKind::kBinary,
          fmt::format("{}: binary data (invalid UTF-8 at offset {}), not a JSON report",
                      where(path), i));
    }
    i += n;
  }
}

// "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> the part
// after the id, which says where and why.
std::string json_error_text(const json::exception& e) {
  std::string msg = e.what();
  auto pos = msg.find("] ");
  return pos == std::string::npos ? msg : msg.substr(pos + 2);
}

// The deepest nesting of arrays and objects in `text`, stopping early once it
// passes `limit`. One linear pass that skips strings; the parser then runs
// without a callback (a parse callback made wide arrays quadratic).
int nesting_depth(const std::string& text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

json parse_json(const std::string& text, const std::string& path) {
  check_text(text, path);
  // 256 levels: far deeper than any report, shallow enough that recursive
  // code over the document (dump(), renderers) cannot exhaust the stack.
  const int kMaxDepth = 256;
  if (nesting_depth(text, kMaxDepth) > kMaxDepth) {
    throw ReportError(ReportErrorKind::kNotJson,
                      fmt::format("{}: JSON nested more than {} levels deep, not a report",
                                  where(path), kMaxDepth));
  }
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // A document that stops early was cut short (a crash while writing, a full
    // disk): say so, since "syntax error" would send people looking for a typo.
    // nlohmann counts the bytes it read; one more than the input has means it
    // hit the end while a value (a string, a number, an object) was still open.
    if (e.byte > text.size()) {
      throw ReportError(
          ReportErrorKind::kTruncated,
          fmt::format("{}: truncated JSON: the input ends after {} bytes before the document is "
                      "complete",
                      where(path), text.size()));
    }
    throw ReportError(ReportErrorKind::kNotJson,
                      fmt::format("{}: not JSON: {}", where(path), json_error_text(e)));
  } catch (const json::exception& e) {
    // Valid syntax the parser still refuses: a number too large for a double
    // (found by fuzzing: it used to escape as an uncaught exception).
    throw ReportError(ReportErrorKind::kNotJson, fmt::format("{}: not a usable JSON document: {}",
                                                             where(path), json_error_text(e)));
  }
}

Report parse_report(const std::string& text, const std::string& path) {
  Report r;
  r.path = path;
  r.raw = parse_json(text, path);
  const json& j = r.raw;
  if (!j.is_object()) {
    throw ReportError(ReportErrorKind::kWrongSchema,
                      fmt::format("{}: not a faultline report: the document is {}, expected an "
                                  "object with \"schema\": \"{}\"",
                                  where(path), json_type_name(j), kSchema));
  }
  auto schema_it = j.find("schema");
  if (schema_it == j.end() || !schema_it->is_string()) {
    throw ReportError(ReportErrorKind::kWrongSchema,
                      fmt::format("{}: not a faultline report: no \"schema\" string (expected "
                                  "\"{}\")",
                                  where(path), kSchema));
  }
  r.schema = schema_it->get<std::string>();
  if (!schema_supported(r.schema)) {
    throw ReportError(ReportErrorKind::kWrongSchema,
                      fmt::format("{}: unsupported schema \"{}\" (this faultline reads \"{}\")",
                                  where(path), r.schema, kSchema));
  }
  r.kind = str(j, "kind");
  r.timestamp = str(j, "timestamp");

  const json& s = member(j, "signal");
  r.signal.number = integer(s, "number");
  r.signal.name = str(s, "name");
  r.signal.code = integer(s, "code");
  r.signal.code_name = str(s, "code_name");
  r.signal.description = str(s, "description");
  r.signal.fault_address = str(s, "fault_address");
  r.signal.sender_pid = integer(s, "sender_pid");
  const json& rr = member(s, "reraised");
  if (rr.is_object()) r.signal.reraised_name = str(rr, "name").empty() ? "?" : str(rr, "name");

  const json& d = member(j, "diagnosis");
  r.diagnosis.summary = str(d, "summary");
  r.diagnosis.category = str(d, "category");
  r.diagnosis.signature = str(d, "signature");

  const json& p = member(j, "process");
  r.process.pid = integer(p, "pid");
  r.process.executable = str(p, "executable");
  r.process.exec_name = str(p, "exec_name");
  r.process.cwd = str(p, "cwd");
  r.process.hostname = str(p, "hostname");
  r.process.arch = str(p, "arch");
  r.process.start_time = str(p, "start_time");
  const json& argv = member(p, "argv");
  if (argv.is_array()) {
    for (const json& a : argv) {
      if (a.is_string()) r.process.argv.push_back(a.get<std::string>());
    }
  }
  const json& cut = member(p, "argv_truncated");
  r.process.argv_truncated = cut.is_boolean() && cut.get<bool>();

  const json& py = member(j, "python");
  if (py.is_object()) r.python = Python{str(py, "version"), str(py, "implementation")};

  r.crashed_tid = integer(j, "crashed_tid");
  const json& threads = member(j, "threads");
  if (threads.is_array()) {
    for (const json& t : threads) {
      if (t.is_object()) r.threads.push_back(read_thread(t));
    }
  }
  const json& modules = member(j, "modules");
  if (modules.is_array()) {
    for (const json& m : modules) {
      if (!m.is_object()) continue;
      r.modules.push_back(Module{str(m, "path"), str(m, "base"), hex_or_number(m, "size"),
                                 str(m, "build_id"), str(m, "load_bias")});
    }
  }
  const json& fl = member(j, "faultline");
  r.faultline_version = str(fl, "version");
  r.suppressed = std::max<int64_t>(0, integer(member(fl, "suppressed"), "count").value_or(0));
  const json& errors = member(fl, "errors");
  if (errors.is_array()) {
    for (const json& e : errors) {
      if (e.is_string()) {
        r.errors.push_back(e.get<std::string>());
      } else if (!e.is_null()) {
        r.errors.push_back(e.dump());  // structured errors of a newer writer, shown as JSON
      }
    }
  }
  return r;
}

namespace {

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string too_large(const std::string& name, uint64_t max_bytes) {
  return fmt::format("{}: larger than {} MiB, not a report", name, max_bytes >> 20);
}

// Appends what `fd` holds until its end; throws once more than `max_bytes` came.
void read_all(int fd, const std::string& name, uint64_t max_bytes, std::string& out) {
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw ReportError(ReportErrorKind::kIo,
                        fmt::format("{}: cannot read: {}", name, std::strerror(errno)));
    }
    if (n == 0) return;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      throw ReportError(ReportErrorKind::kTooLarge, too_large(name, max_bytes));
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

std::string read_file(const std::string& path, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO nobody writes to must not wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    throw ReportError(ReportErrorKind::kIo,
                      fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw ReportError(ReportErrorKind::kIo,
                      fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw ReportError(ReportErrorKind::kNotFile,
                      fmt::format("{}: {}, not a report", path, file_type_name(st.st_mode)));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    throw ReportError(ReportErrorKind::kTooLarge, too_large(path, max_bytes));
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  read_all(fd, path, max_bytes, out);  // the file may still grow: the cap holds while reading
  return out;
}

std::string read_fd(int fd, const std::string& name, uint64_t max_bytes) {
  std::string out;
  read_all(fd, name, max_bytes, out);
  return out;
}

Report load_report(const std::string& path) {
  return parse_report(read_file(path), path);
}

const Thread* Report::crashed_thread() const {
  for (const Thread& t : threads) {
    if (t.crashed) return &t;
  }
  if (crashed_tid) {
    for (const Thread& t : threads) {
      if (t.tid == crashed_tid) return &t;
    }
  }
  return nullptr;
}

std::vector<const Thread*> Report::threads_crashed_first() const {
  std::vector<const Thread*> out;
  const Thread* c = crashed_thread();
  if (c) out.push_back(c);
  for (const Thread& t : threads) {
    if (&t != c) out.push_back(&t);
  }
  return out;
}

const Module* Report::find_module(const std::string& module_path) const {
  for (const Module& m : modules) {
    if (m.path == module_path) return &m;
  }
  return nullptr;
}

std::string string_field(const json& object, const char* key) {
  return str(object, key);
}

uint64_t fnv1a64(const std::string& data, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string basename(const std::string& path) {
  auto pos = path.find_last_of('/');
  return pos == std::string::npos ? path : path.substr(pos + 1);
}

std::string native_location(const Frame& f) {
  std::string module = f.module.empty() ? "???" : basename(f.module);
  if (!f.symbol.empty()) {
    std::string out = module + "!" + f.symbol;
    if (!f.symbol_offset.empty() && f.symbol_offset != "0x0") out += "+" + f.symbol_offset;
    return out;
  }
  if (!f.module_offset.empty()) return module + "+" + f.module_offset;
  return f.pc.empty() ? module : module + "@" + f.pc;
}

}  // namespace faultline::report
