// The diagnosis: category, summary line and signature of a capture.
#include "core/diagnosis/diagnosis.h"

#include "core/base/arch.h"
#include "core/base/signals.h"
#include "core/base/time_fmt.h"
#include "core/diagnosis/classify.h"
#include "core/diagnosis/signature.h"

namespace faultline::core {

bool is_raise_frame(const Capture& c, const NativeFrame& f) {
  return signature_skips_native(f.module >= 0 ? c.modules.items[f.module].path : nullptr, f.symbol,
                                signal_sent_by_process(c.info.si_code));
}

// "module!symbol", or "module+0xOFFSET" when no symbol covers the pc.
void write_frame_name(StrBuf* b, const Capture& c, const NativeFrame& f) {
  if (f.module < 0) {
    b->add("?!").add_hex(f.pc);
    return;
  }
  const Module& m = c.modules.items[f.module];
  b->add(path_basename(m.path));
  if (f.symbol) {
    b->add("!").add(f.symbol);
  } else {
    b->add("+").add_hex(f.pc - m.bias);
  }
}

bool has_fault_address(int signo, int code) {
  if (signal_sent_by_process(code)) return false;
  return signo == SIGSEGV || signo == SIGBUS || signo == SIGILL || signo == SIGFPE ||
         signo == SIGTRAP;
}

const ThreadCapture* crashed_thread(const Capture& c) {
  for (int i = 0; i < c.nthreads; ++i) {
    if (c.threads[i].crashed) return &c.threads[i];
  }
  return nullptr;
}

const PyThread* python_thread_for(const Capture& c, pid_t tid) {
  if (!c.python.present) return nullptr;
  for (int i = 0; i < c.python.nthreads; ++i) {
    if (c.python.threads[i].native_tid == tid) return &c.python.threads[i];
  }
  return nullptr;
}

const char* crash_category(int signo, int code, uintptr_t addr, uintptr_t sp, uintptr_t pc) {
  bool fault = has_fault_address(signo, code);
  if (signo == SIGSEGV || signo == SIGBUS) {
    uintptr_t dist = addr > sp ? addr - sp : sp - addr;
    if (fault && pc == addr && pc != 0) return "bad-jump";
    if (fault && addr < 4096) return "null-deref";
    if (fault && sp && dist < 65536 && signo == SIGSEGV) return "stack-overflow";
    return signo == SIGBUS ? "bus-error" : "memory-access";
  }
  if (signo == SIGABRT) return "abort";
  if (signo == SIGFPE) return code == FPE_INTDIV ? "divide-by-zero" : "arithmetic";
  if (signo == SIGILL) return "illegal-instruction";
  if (signo == SIGTRAP) return "breakpoint";
  return "crash";
}

namespace {

// The first native frame that names the place of the crash: outside the
// signal machinery, or for an uncaught exception the thrower (the frame
// below __cxa_throw, when the stack has it).
const NativeFrame* crash_site(const Capture& c, const ThreadCapture* t) {
  // A fault a handler raised again: the frame the original signal
  // interrupted, below the trampoline.
  if (c.reraised.present && t && c.reraised.frame + 1 < t->nframes) {
    return &t->frames[c.reraised.frame + 1];
  }
  const NativeFrame* where = nullptr;
  for (int i = 0; t && i < t->nframes; ++i) {
    if (!is_raise_frame(c, t->frames[i])) {
      where = &t->frames[i];
      break;
    }
  }
  if (c.kind == CaptureKind::kTerminate) {
    for (int i = 0; t && i + 1 < t->nframes; ++i) {
      if (t->frames[i].symbol && str_eq(t->frames[i].symbol, "__cxa_throw")) {
        where = &t->frames[i + 1];
        break;
      }
    }
  }
  return where;
}

// The one-line summary: what happened, where (native), under which Python
// frame, while running which user code.
void write_summary(Capture* c, const ThreadCapture* t, const NativeFrame* where) {
  const SignalInfo* si = find_signal(c->signo);
  const SignalCodeInfo* code = find_signal_code(c->signo, c->info.si_code);
  uintptr_t addr = reinterpret_cast<uintptr_t>(c->info.si_addr);
  bool fault = has_fault_address(c->signo, c->info.si_code);
  bool terminate = c->kind == CaptureKind::kTerminate;
  // The innermost Python frame of the crashed thread, if any.
  const PyThread* py = t ? python_thread_for(*c, t->tid) : nullptr;
  const PyFrame* pyf = (py && py->nframes > 0) ? &py->frames[0] : nullptr;

  StrBuf b(c->summary, sizeof c->summary);
  if (terminate) {
    b.add("uncaught C++ exception");
    if (c->terminate && c->terminate->has_exception) {
      b.add(" of type ").add(c->terminate->type);
      if (c->terminate->message[0]) b.add(": ").add_n(c->terminate->message, 160);
    }
  } else {
    b.add(si ? si->name : "signal");
  }
  if (code && !terminate) b.add(" (").add(code->description);
  if (fault) {
    b.add(code ? " at " : " (at ").add_hex(addr);
  }
  if ((code && !terminate) || fault) b.add(")");
  if (where) {
    // Name the layer when the classifier knows it: "in Dynamo guard
    // evaluation (libtorch_python.so!...)".
    const Origin& o = classify_native(
        where->module >= 0 ? c->modules.items[where->module].path : nullptr, where->symbol);
    b.add(" in ");
    if (!str_eq(o.id, "native")) b.add(o.layer).add(" (");
    write_frame_name(&b, *c, *where);
    if (!str_eq(o.id, "native")) b.add(")");
  }
  // The innermost Python frame, and if it is not the user's own code (FX
  // graph code, Dynamo, the standard library), also the innermost user frame.
  const PyFrame* user = nullptr;
  for (int i = 0; py && i < py->nframes && !user; ++i) {
    if (classify_python(py->frames[i].file, py->frames[i].function).user) user = &py->frames[i];
  }
  if (pyf && pyf != user) {
    const Origin& o = classify_python(pyf->file, pyf->function);
    b.add(" under ").add(o.layer).add(" ").add(pyf->function ? pyf->function : "?").add(" at ");
    b.add(path_basename(pyf->file ? pyf->file : "?")).add(":").add_dec(pyf->line);
  }
  if (user) {
    b.add(" while running ").add(user->function ? user->function : "?").add(" at ");
    b.add(path_basename(user->file ? user->file : "?")).add(":").add_dec(user->line);
  }
}

// The signature (signature.h): signal, category and the top frames' names
// (never addresses).
void write_signature(Capture* c, const ThreadCapture* t) {
  const SignalInfo* si = find_signal(c->signo);
  SignatureBuilder s(
      si ? si->name : "?", c->category,
      c->kind == CaptureKind::kTerminate && c->terminate ? c->terminate->type : nullptr,
      signal_sent_by_process(c->info.si_code));
  // A re-raised fault is signed from the frame it interrupted: the same
  // signature as without the handler that raised it again.
  int first = c->reraised.present ? c->reraised.frame + 1 : 0;
  for (int i = first; t && i < t->nframes && s.wants_native(); ++i) {
    const NativeFrame& f = t->frames[i];
    const char* path = f.module >= 0 ? c->modules.items[f.module].path : nullptr;
    uint64_t offset = f.module >= 0 ? f.pc - c->modules.items[f.module].bias : 0;
    s.native(path, f.symbol, offset, classify_native(path, f.symbol).id);
  }
  const PyThread* py = t ? python_thread_for(*c, t->tid) : nullptr;
  for (int i = 0; py && i < py->nframes && s.wants_python(); ++i) {
    const PyFrame& f = py->frames[i];
    s.python(f.file, f.function, classify_python(f.file, f.function).id);
  }
  s.finish(c->signature);
}

// An uncaught Python exception: its type and message, where it was raised
// (the traceback's innermost frame, and the innermost frame of the user's
// own code when that is another), signed by its type and innermost frames.
void diagnose_py_exception(Capture* c) {
  const PythonExceptionInfo& e = *c->py_exception;
  c->category = "python-exception";
  // The last kSignaturePythonFrames frames, and the innermost user frame.
  static ExceptionFrame last[kSignaturePythonFrames], user;
  int n = 0;
  bool have_user = false;
  ExceptionFrame f;
  for (const char* p = e.frames; next_exception_frame(&p, &f);) {
    last[n % kSignaturePythonFrames] = f;
    ++n;
    if (classify_python(f.file, f.function).user) {
      user = f;
      have_user = true;
    }
  }
  StrBuf b(c->summary, sizeof c->summary);
  b.add("uncaught Python exception ").add(e.type[0] ? e.type : "?");
  if (e.message[0]) b.add(": ").add_n(e.message, 160);
  const ExceptionFrame* inner = n > 0 ? &last[(n - 1) % kSignaturePythonFrames] : nullptr;
  if (inner) {
    b.add(" in ").add(inner->function).add(" at ").add(path_basename(inner->file));
    b.add(":").add_dec(static_cast<uint64_t>(inner->line));
  }
  if (have_user && inner && !(str_eq(user.file, inner->file) && user.line == inner->line)) {
    b.add(" while running ").add(user.function).add(" at ").add(path_basename(user.file));
    b.add(":").add_dec(static_cast<uint64_t>(user.line));
  }
  const SignalInfo* si = find_signal(c->signo);
  SignatureBuilder sig(si ? si->name : "?", c->category, e.type,
                       signal_sent_by_process(c->info.si_code));
  for (int i = n - 1; i >= 0 && i >= n - kSignaturePythonFrames; --i) {
    const ExceptionFrame& g = last[i % kSignaturePythonFrames];
    sig.python(g.file, g.function, classify_python(g.file, g.function).id);
  }
  sig.finish(c->signature);
}

}  // namespace

void diagnose(Capture* c) {
  const ThreadCapture* t = crashed_thread(*c);
  if (c->kind == CaptureKind::kDump) {
    const SignalInfo* si = find_signal(c->signo);
    c->category = "dump";
    StrBuf b(c->summary, sizeof c->summary);
    b.add("live dump (").add(si ? si->name : "signal").add(") of ").add_dec(c->nthreads);
    b.add(" threads");
    dump_signature(c->signature);
    return;
  }
  if (c->kind == CaptureKind::kException && c->py_exception) {
    diagnose_py_exception(c);
    return;
  }
  uintptr_t sp = c->have_uc ? uc_sp(c->uc) : 0;
  uintptr_t pc = c->have_uc ? uc_pc(c->uc) : 0;
  c->category = crash_category(c->signo, c->info.si_code,
                               reinterpret_cast<uintptr_t>(c->info.si_addr), sp, pc);
  if (c->kind == CaptureKind::kTerminate) c->category = "uncaught-exception";
  if (c->kind == CaptureKind::kShutdown) c->category = "shutdown";
  write_summary(c, t, crash_site(*c, t));
  write_signature(c, t);
}

}  // namespace faultline::core
