#include "core/diagnosis/signature.h"

#include "core/base/str.h"

namespace faultline::core {

void SignatureHash::field(const char* s) {
  for (; s && *s; ++s) {
    h_ ^= static_cast<unsigned char>(*s);
    h_ *= 1099511628211ull;
  }
  h_ ^= 0xff;  // separator
  h_ *= 1099511628211ull;
}

void SignatureHash::finish(char* out) const {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(h_ >> (8 * i));
  fmt_hex_bytes(out, bytes, 8);
  out[16] = '\0';
}

namespace {

bool is_raise_symbol(const char* sym) {
  // Text, not pointers: no relocation of the table at load.
  static const char kNames[][40] = {"raise",
                                    "abort",
                                    "__pthread_kill_implementation",
                                    "__pthread_kill_internal",
                                    "pthread_kill",
                                    "gsignal",
                                    "__GI_raise",
                                    "__GI_abort"};
  if (!sym) return false;
  for (const char* n : kNames) {
    if (str_eq(sym, n)) return true;
  }
  return false;
}

bool contains(const char* s, const char* needle) {
  return s && str_find(s, str_len(s), needle) != nullptr;
}

bool starts_with(const char* s, const char* prefix) {
  return s && str_starts_with(s, prefix);
}

}  // namespace

bool signature_skips_native(const char* module_path, const char* symbol, bool sent_by_process) {
  if (is_raise_symbol(symbol)) return true;
  if (!sent_by_process || !module_path) return false;
  return str_starts_with(path_basename(module_path), "libc.so") && !symbol;
}

bool signature_frame_generated(const char* origin_id, bool python, const char* where,
                               const char* what) {
  if (!origin_id) return false;
  if (!python) {
    // Inductor's compiled kernels; Triton's kernels and launchers, not the
    // Triton compiler (libtriton) unless the symbol is a kernel's.
    if (str_eq(origin_id, "inductor")) return true;
    if (str_eq(origin_id, "triton")) {
      return !(where && str_starts_with(path_basename(where), "libtriton")) ||
             starts_with(what, "triton_");
    }
    return false;
  }
  // FX graph code, Dynamo's resume functions, Inductor's output code (every
  // Inductor frame outside the torch/_inductor package).
  if (str_eq(origin_id, "fx")) return starts_with(where, "<eval_with_key>");
  if (str_eq(origin_id, "dynamo")) return contains(what, "torch_dynamo_resume_in_");
  if (str_eq(origin_id, "inductor")) return !contains(where, "/torch/_inductor/");
  return false;
}

SignatureBuilder::SignatureBuilder(const char* signal, const char* category,
                                   const char* exception_type, bool sent_by_process)
    : signal_(signal),
      category_(category),
      exception_type_(exception_type),
      sent_by_process_(sent_by_process) {}

void SignatureBuilder::native(const char* module, const char* symbol, uint64_t module_offset,
                              const char* origin) {
  if (!wants_native() || signature_skips_native(module, symbol, sent_by_process_)) return;
  StrBuf b(native_[nnative_++], kSignatureFieldBytes);
  if (signature_frame_generated(origin, false, module, symbol)) {
    // Inductor/Triton cache paths carry hashes: the origin and the symbol
    // identify the frame across runs, the path does not.
    b.add(origin).add("!").add(symbol ? symbol : "?");
  } else if (!module) {
    b.add("?");  // never an absolute address
  } else {
    b.add(path_basename(module));
    if (symbol) {
      b.add("!").add(symbol);
    } else {
      b.add("+").add_hex(module_offset);
    }
  }
}

void SignatureBuilder::python(const char* file, const char* function, const char* origin) {
  if (!wants_python()) return;
  // <eval_with_key>.N counters and hashed cache paths: the origin stands for the file.
  bool generated = signature_frame_generated(origin, true, file, function);
  python_[2 * npython_] = generated ? origin : (file ? path_basename(file) : nullptr);
  python_[2 * npython_ + 1] = function;
  ++npython_;
}

void SignatureBuilder::finish(char* out) const {
  SignatureHash h;
  h.field(signal_);
  h.field(category_);
  if (exception_type_) h.field(exception_type_);
  for (int i = 0; i < nnative_; ++i) h.field(native_[i]);
  for (int i = 0; i < 2 * npython_; ++i) h.field(python_[i]);
  h.finish(out);
}

void dump_signature(char* out) {
  SignatureHash h;
  h.field("dump");
  h.finish(out);
}

}  // namespace faultline::core
