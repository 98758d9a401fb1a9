#include "symbolize/inductor_kernel_origins.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace faultline::symbolize {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr const char* kPrefix = "cpp_fused_";
// Large generated files are not kernels' sources.
constexpr std::uintmax_t kMaxSourceBytes = 64u << 20;

std::string str(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}

bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool is_ident(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Reads a text file into lines; "" on success, else why not.
std::string read_lines(const std::string& path, std::vector<std::string>* lines) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec) return "cannot open " + path + ": " + ec.message();
  if (size > kMaxSourceBytes) return path + ": too large for a kernel's source";
  std::ifstream in(path);
  if (!in) return "cannot open " + path + ": " + std::strerror(errno);
  std::string line;
  while (std::getline(in, line)) lines->push_back(line);
  return "";
}

// `File "X", line N, in F` occurrences of a stack trace Inductor wrote on one
// line (its newlines became "\\"); the last is the innermost.
bool last_trace_entry(const std::string& text, KernelOrigin* o) {
  bool found = false;
  size_t at = 0;
  while ((at = text.find("File \"", at)) != std::string::npos) {
    size_t fb = at + 6, fe = text.find('"', fb);
    if (fe == std::string::npos) break;
    size_t lp = text.find(", line ", fe);
    if (lp != fe + 1) {
      at = fe;
      continue;
    }
    size_t nb = lp + 7, ne = nb;
    while (ne < text.size() && std::isdigit(static_cast<unsigned char>(text[ne]))) ++ne;
    if (ne == nb || ne - nb > 9) {
      at = ne;
      continue;
    }
    o->file = text.substr(fb, fe - fb);
    o->line = std::stoi(text.substr(nb, ne - nb));
    o->function.clear();
    o->code.clear();
    size_t rest = ne;
    if (text.compare(rest, 5, ", in ") == 0) {
      size_t b = rest + 5, e = b;
      while (e < text.size() && text[e] != '\\' && text[e] != ' ') ++e;
      o->function = text.substr(b, e - b);
      rest = e;
    }
    // The code is the next "\\"-separated segment.
    size_t cb = text.find("\\\\", rest);
    if (cb != std::string::npos) {
      cb += 2;
      size_t ce = text.find("\\\\", cb);
      o->code = trim(text.substr(cb, ce == std::string::npos ? std::string::npos : ce - cb));
    }
    found = true;
    at = ne;
  }
  return found;
}

std::string comment_text(const std::string& line) {
  std::string t = trim(line);
  return starts_with(t, "//") ? trim(t.substr(2)) : std::string();
}

// Whether path is a readable source that defines the kernel `fn`.
bool defines(const std::string& path, const std::string& fn) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::vector<std::string> lines;
  int def = 0;
  if (!read_lines(path, &lines).empty()) return false;
  kernel_origins(lines, fn, &def);
  return def > 0;
}

// The generated source of the kernel in this frame (defining `fn`): the file
// its line table names (symbolized), the `.cpp` beside the module
// (torch.compile: <hash>.main.so / <hash>.main.cpp), or a `.kernel.cpp`
// beside it (an AOTInductor package as the loader extracted it).
std::string find_source(const Json& frame, const std::string& module, const std::string& fn,
                        std::string* why) {
  std::error_code ec;
  std::string file = str(frame, "file");
  if (!file.empty() && ends_with(file, ".cpp") && defines(file, fn)) return file;
  if (!ends_with(module, ".so")) {
    *why = "no generated source known for this frame";
    return "";
  }
  if (!fs::exists(module, ec)) {
    *why = "cannot open " + module + ": the generated module is gone (Inductor cache removed)";
    return "";
  }
  std::string beside = module.substr(0, module.size() - 3) + ".cpp";
  if (defines(beside, fn)) return beside;
  fs::path dir = fs::path(module).parent_path();
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string p = e.path().string();
    if (ends_with(p, ".kernel.cpp") && defines(p, fn)) return p;
  }
  *why = "no generated source defining " + fn + " beside " + module;
  return "";
}

// The call line of the kernel: the output code's Python frame that called it
// (torch.compile), or the generated wrapper's C++ frame (AOTInductor,
// symbolized). Returns "file:line" and the name that line calls.
std::string call_site(const Json& frames, size_t kernel_index, std::string* name) {
  for (size_t j = kernel_index + 1; j < frames.size(); ++j) {
    const Json& f = frames[j];
    if (!f.is_object()) continue;
    bool python = str(f, "kind") == "python";
    std::string file = str(f, "file");
    auto line = f.find("line");
    if (python && str(f, "origin") != "inductor") return "";  // left the output code
    if (file.empty() || line == f.end() || !line->is_number_integer()) {
      if (python) return "";
      continue;
    }
    bool generated =
        python ? ends_with(file, ".py") && file.find("/torch/_inductor/") == std::string::npos
               : ends_with(file, ".wrapper.cpp");
    if (!generated) {
      if (python) return "";
      continue;
    }
    std::vector<std::string> lines;
    int n = line->get<int>();
    if (!read_lines(file, &lines).empty() || n < 1 || n > static_cast<int>(lines.size())) return "";
    std::string called = kernel_name_in_call(lines[static_cast<size_t>(n - 1)]);
    if (called.empty()) return "";
    *name = called;
    return file + ":" + std::to_string(n);
  }
  return "";
}

}  // namespace

std::string kernel_name_in_call(const std::string& line) {
  size_t at = 0;
  while ((at = line.find(kPrefix, at)) != std::string::npos) {
    if (at > 0 && is_ident(line[at - 1])) {
      ++at;
      continue;
    }
    size_t e = at;
    while (e < line.size() && is_ident(line[e])) ++e;
    size_t p = e;
    while (p < line.size() && line[p] == ' ') ++p;
    if (p < line.size() && line[p] == '(') return line.substr(at, e - at);
    at = e;
  }
  return "";
}

std::vector<KernelOrigin> kernel_origins(const std::vector<std::string>& lines,
                                         const std::string& name, int* definition) {
  std::vector<KernelOrigin> out;
  *definition = 0;
  size_t i = 0;
  for (; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.find("extern \"C\"") == std::string::npos) continue;
    size_t at = l.find(name);
    if (at == std::string::npos) continue;
    size_t e = at + name.size();
    while (e < l.size() && l[e] == ' ') ++e;
    if ((at == 0 || !is_ident(l[at - 1])) && (e == l.size() || l[e] == '(')) break;
  }
  if (i == lines.size()) return out;
  *definition = static_cast<int>(i) + 1;
  bool in_block = false;
  KernelOrigin cur;
  std::string trace;
  for (size_t j = i + 1; j < lines.size(); ++j) {
    if (lines[j].find("extern \"C\"") != std::string::npos) break;
    std::string c = comment_text(lines[j]);
    if (c == "ORIGIN:") {
      in_block = true;
      cur = KernelOrigin{};
      trace.clear();
    } else if (in_block && c == "END ORIGIN") {
      in_block = false;
      KernelOrigin o = cur;
      if (last_trace_entry(trace, &o) || !o.op.empty()) out.push_back(o);
    } else if (in_block) {
      if (starts_with(c, "call_function ") && cur.op.empty()) {
        std::string rest = c.substr(14);
        cur.op = rest.substr(0, rest.find(' '));
      } else {
        trace += c + "\\\\";
      }
    }
  }
  return out;
}

int annotate_inductor_kernels(Json& report) {
  int annotated = 0;
  auto threads = report.find("threads");
  if (threads == report.end() || !threads->is_array()) return 0;
  for (auto& t : *threads) {
    if (!t.is_object() || !t.contains("frames") || !t["frames"].is_array()) continue;
    Json& frames = t["frames"];
    for (size_t i = 0; i < frames.size(); ++i) {
      Json& f = frames[i];
      if (!f.is_object() || str(f, "kind") != "native") continue;
      f.erase("inductor_kernel");
      if (str(f, "origin") != "inductor") continue;
      std::string symbol = str(f, "symbol");
      std::string module = str(f, "module");
      // The kernel's own name (AOTInductor), or `kernel` in a module
      // torch.compile built, named by the output code's call line.
      std::string name, called;
      std::string call = call_site(frames, i, &called);
      if (starts_with(symbol, kPrefix)) {
        name = symbol;
        if (called != name) call.clear();
      } else if (symbol == "kernel") {
        name = called;
      }
      if (name.empty()) continue;
      Json k = Json::object();
      k["name"] = name;
      if (!call.empty()) k["call"] = call;
      std::string why;
      std::string source = find_source(f, module, symbol, &why);
      if (source.empty()) {
        k["source_error"] = why;
      } else {
        std::vector<std::string> lines;
        std::string err = read_lines(source, &lines);
        int def = 0;
        std::vector<KernelOrigin> origins;
        if (err.empty()) origins = kernel_origins(lines, symbol, &def);
        if (!err.empty() || def == 0) {
          k["source_error"] = err.empty() ? "no definition of " + symbol + " in " + source : err;
        } else {
          k["source"] = source;
          k["source_line"] = def;
          if (origins.empty()) {
            k["origins_missing"] =
                "Inductor wrote no origins into this kernel (compile with "
                "torch._inductor.config.comment_origin = True to keep them)";
          } else {
            Json list = Json::array();
            for (const KernelOrigin& o : origins) {
              Json e = Json::object();
              if (!o.op.empty()) e["op"] = o.op;
              if (!o.file.empty()) {
                e["file"] = o.file;
                e["line"] = o.line;
              }
              if (!o.function.empty()) e["function"] = o.function;
              if (!o.code.empty()) e["code"] = o.code;
              list.push_back(std::move(e));
            }
            k["origins"] = std::move(list);
          }
        }
      }
      f["inductor_kernel"] = std::move(k);
      ++annotated;
    }
  }
  return annotated;
}

}  // namespace faultline::symbolize
