#include "core/signature.h"

#include "core/classify.h"

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
  static const char* const kNames[] = {"raise",
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

}  // namespace

bool signature_skips_native(const char* module_path, const char* symbol, bool sent_by_process) {
  if (is_raise_symbol(symbol)) return true;
  if (!sent_by_process || !module_path) return false;
  return str_starts_with(path_basename(module_path), "libc.so") && !symbol;
}

void signature_native_field(char* out, size_t cap, const char* module_path, const char* symbol,
                            uint64_t module_offset, const char* origin_id, bool generated) {
  StrBuf b(out, cap);
  if (generated) {
    // Inductor/Triton cache paths carry hashes: the origin and the symbol
    // identify the frame across runs, the path does not.
    b.add(origin_id).add("!").add(symbol ? symbol : "?");
  } else if (!module_path) {
    b.add("?");  // never an absolute address
  } else {
    b.add(path_basename(module_path));
    if (symbol) {
      b.add("!").add(symbol);
    } else {
      b.add("+").add_hex(module_offset);
    }
  }
}

const char* signature_python_file(const char* file, const char* origin_id, bool generated) {
  return generated ? origin_id : path_basename(file);
}

bool origin_is_generated(const char* origin_id, bool python, const char* where, const char* what) {
  int n = 0;
  const OriginRule* rules = origin_rules(&n);
  bool some = false, all = true;
  for (int i = 0; origin_id && i < n; ++i) {
    if (!str_eq(rules[i].origin.id, origin_id)) continue;
    some = some || rules[i].origin.generated;
    all = all && rules[i].origin.generated;
  }
  if (!some) return false;
  if (all) return true;
  const Origin& o = python ? classify_python(where, what) : classify_native(where, what);
  return str_eq(o.id, origin_id) && o.generated;
}

void crash_signature(const SignatureInput& in, char* out) {
  SignatureHash h;
  h.field(in.signal);
  h.field(in.category);
  if (in.exception_type) h.field(in.exception_type);
  for (int i = 0; i < in.nnative && i < kSignatureNativeFrames; ++i) h.field(in.native[i]);
  for (int i = 0; i < in.npython && i < kSignaturePythonFrames; ++i) {
    h.field(in.python[2 * i]);
    h.field(in.python[2 * i + 1]);
  }
  h.finish(out);
}

void dump_signature(char* out) {
  SignatureHash h;
  h.field("dump");
  h.finish(out);
}

}  // namespace faultline::core
