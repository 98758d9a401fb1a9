// The crash-time diagnosis (diagnosis.h) over hand-built captures: the
// category, the one-line summary (with the PyTorch layer it names) and the
// signature, which must equal the specification's test vectors
// (doc/report-format.md) for the same frames.
#include "core/diagnosis/diagnosis.h"

#include <doctest/doctest.h>
#include <string.h>

#include <memory>
#include <string>

#include "core/terminate_record.h"

using namespace faultline::core;

namespace {

constexpr uintptr_t kAppBias = 0x555500000000;
constexpr uintptr_t kLibcBias = 0x7f1000000000;
constexpr uintptr_t kTorchBias = 0x7f2000000000;

// A capture of one crashed thread (tid 7) over three modules, filled frame
// by frame; Python frames go to the Python thread on the same tid.
struct Scene {
  Capture c{};
  Module modules[3] = {{kAppBias,
                        kAppBias + 0x100000,
                        kAppBias,
                        "/usr/local/bin/app",
                        {},
                        0,
                        true,
                        false,
                        0,
                        nullptr,
                        0,
                        0,
                        0},
                       {kLibcBias,
                        kLibcBias + 0x200000,
                        kLibcBias,
                        "/usr/lib/x86_64-linux-gnu/libc.so.6",
                        {},
                        0,
                        false,
                        false,
                        0,
                        nullptr,
                        0,
                        0,
                        0},
                       {kTorchBias,
                        kTorchBias + 0x4000000,
                        kTorchBias,
                        "/usr/lib/python3/dist-packages/torch/lib/libtorch_python.so",
                        {},
                        0,
                        false,
                        false,
                        0,
                        nullptr,
                        0,
                        0,
                        0}};
  NativeFrame frames[16]{};
  PyFrame py[8]{};
  ThreadCapture thread{};
  PyThread py_thread{};

  Scene(CaptureKind kind, int signo, int code, uintptr_t addr) {
    c.kind = kind;
    c.signo = signo;
    c.info.si_signo = signo;
    c.info.si_code = code;
    c.info.si_addr = reinterpret_cast<void*>(addr);
    c.modules = {modules, 3, 3, false};
    thread.tid = 7;
    thread.crashed = true;
    thread.frames = frames;
    c.threads = &thread;
    c.nthreads = 1;
    py_thread.native_tid = 7;
    py_thread.frames = py;
    c.python.threads = &py_thread;
  }
  // module -1: outside every module; offset is then the pc itself.
  Scene& native(int module, uintptr_t offset, const char* symbol) {
    uintptr_t bias = module >= 0 ? modules[module].bias : 0;
    frames[thread.nframes++] = {bias + offset, 0, module, symbol, 0, false, nullptr};
    return *this;
  }
  Scene& python(const char* file, const char* function, int line) {
    py[py_thread.nframes++] = {file, function, nullptr, line, false, 0, 0};
    c.python.present = true;
    c.python.nthreads = 1;
    return *this;
  }
  Scene& context(uintptr_t sp, uintptr_t pc) {
    c.have_uc = true;
    c.uc.uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(sp);
    c.uc.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(pc);
    return *this;
  }
  Capture& diagnosed() {
    diagnose(&c);
    return c;
  }
};

std::string summary(Capture& c) {
  return c.summary;
}

}  // namespace

TEST_CASE("diagnosis: a null read names the function, and signs like the spec's vector") {
  auto s = std::make_unique<Scene>(CaptureKind::kCrash, SIGSEGV, SEGV_MAPERR, 0);
  s->context(0x7ffd0000f000, kAppBias + 0x1139)
      .native(0, 0x1139, "null_read")
      .native(0, 0x2a0, nullptr)
      .native(-1, 0x7f0000001000, nullptr)
      .native(1, 0x271ca, "__libc_start_call_main");
  Capture& c = s->diagnosed();
  CHECK(std::string(c.category) == "null-deref");
  CHECK(summary(c) == "SIGSEGV (address not mapped to object at 0x0) in app!null_read");
  CHECK(std::string(c.signature) == "72f894ac5df2e908");  // vector "native crash"
}

TEST_CASE("diagnosis: an abort is put on its caller, past libc's raise path") {
  auto s = std::make_unique<Scene>(CaptureKind::kCrash, SIGABRT, SI_TKILL, 0);
  s->modules[0].path = "/srv/bin/server";
  s->native(1, 0x8eebc, nullptr)
      .native(1, 0x3efb2, "raise")
      .native(1, 0x29472, "abort")
      .native(0, 0x4410, "_ZN6server5checkEv")
      .native(0, 0x4520, "main");
  Capture& c = s->diagnosed();
  CHECK(std::string(c.category) == "abort");
  CHECK(summary(c) == "SIGABRT (sent by tkill or tgkill) in server!_ZN6server5checkEv");
  CHECK(std::string(c.signature) == "c2e6a81af4615f63");  // vector "abort"
}

TEST_CASE("diagnosis: the PyTorch layer, the Python frame and the user's frame") {
  auto s = std::make_unique<Scene>(CaptureKind::kCrash, SIGSEGV, SEGV_MAPERR, 0x10);
  s->native(2, 0x9945f1, "_ZN5torch6dynamo12_GLOBAL__N_112GuardManager5checkEv")
      .python("<eval_with_key>.3", "forward", 7)
      .python("/usr/lib/python3/dist-packages/torch/fx/graph_module.py", "__call__", 304)
      .python("/home/u/jobs.py", "step", 60);
  Capture& c = s->diagnosed();
  CHECK(std::string(c.category) == "null-deref");
  CHECK(summary(c) ==
        "SIGSEGV (address not mapped to object at 0x10) in Dynamo guard evaluation "
        "(libtorch_python.so!_ZN5torch6dynamo12_GLOBAL__N_112GuardManager5checkEv) "
        "under FX graph code forward at <eval_with_key>.3:7 while running step at jobs.py:60");
}

TEST_CASE("diagnosis: user code crashing names no layer and no second frame") {
  auto s = std::make_unique<Scene>(CaptureKind::kCrash, SIGSEGV, SEGV_MAPERR, 0);
  s->native(0, 0x1139, "null_read").python("/home/u/train.py", "kernel", 6);
  CHECK(summary(s->diagnosed()) ==
        "SIGSEGV (address not mapped to object at 0x0) in app!null_read while running kernel "
        "at train.py:6");
}

TEST_CASE("diagnosis: an uncaught exception names its type, message and thrower") {
  auto s = std::make_unique<Scene>(CaptureKind::kTerminate, SIGABRT, SI_TKILL, 0);
  s->modules[0].path = "/srv/bin/api";
  s->modules[2].path = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
  s->native(1, 0x29472, "abort")
      .native(2, 0xa8b9e, nullptr)
      .native(2, 0xbb1f1, "__cxa_throw")
      .native(0, 0x3000, "_ZN12_GLOBAL__N_18throw_itEPKc");
  // What the terminate handler recorded reaches the diagnosis through the
  // capture, not a global.
  TerminateInfo recorded = {};
  recorded.has_exception = 1;
  strcpy(recorded.type, "St13runtime_error");
  strcpy(recorded.message, "bad shape");
  s->c.terminate = &recorded;
  Capture& c = s->diagnosed();
  CHECK(std::string(c.category) == "uncaught-exception");
  CHECK(summary(c) ==
        "uncaught C++ exception of type St13runtime_error: bad shape in "
        "api!_ZN12_GLOBAL__N_18throw_itEPKc");
  CHECK(std::string(c.signature) == "8e88af7ab2427263");  // vector "uncaught C++ exception"
}

TEST_CASE("diagnosis: a live dump") {
  auto s = std::make_unique<Scene>(CaptureKind::kDump, SIGUSR2, SI_TKILL, 0);
  s->thread.crashed = false;
  s->native(0, 0x1000, "poll_loop");
  Capture& c = s->diagnosed();
  CHECK(std::string(c.category) == "dump");
  CHECK(summary(c) == "live dump (SIGUSR2) of 1 threads");
  CHECK(std::string(c.signature) == "5e876664d92d8aa2");  // vector "a live dump"
}

TEST_CASE("diagnosis: categories") {
  const uintptr_t sp = 0x7ffd00010000;
  CHECK(std::string(crash_category(SIGSEGV, SEGV_MAPERR, 0x8, sp, 0x401000)) == "null-deref");
  CHECK(std::string(crash_category(SIGSEGV, SEGV_MAPERR, sp - 64, sp, 0x401000)) ==
        "stack-overflow");
  CHECK(std::string(crash_category(SIGSEGV, SEGV_MAPERR, 0xdead0000, sp, 0xdead0000)) ==
        "bad-jump");
  CHECK(std::string(crash_category(SIGSEGV, SEGV_ACCERR, 0x7f0000000000, sp, 0x401000)) ==
        "memory-access");
  CHECK(std::string(crash_category(SIGBUS, BUS_ADRERR, 0x7f0000000000, sp, 0x401000)) ==
        "bus-error");
  CHECK(std::string(crash_category(SIGFPE, FPE_INTDIV, 0x401000, sp, 0x401000)) ==
        "divide-by-zero");
  CHECK(std::string(crash_category(SIGFPE, FPE_FLTINV, 0x401000, sp, 0x401000)) == "arithmetic");
  CHECK(std::string(crash_category(SIGILL, ILL_ILLOPN, 0x401000, sp, 0x401000)) ==
        "illegal-instruction");
  CHECK(std::string(crash_category(SIGTRAP, TRAP_BRKPT, 0x401000, sp, 0x401000)) == "breakpoint");
  CHECK(std::string(crash_category(SIGABRT, SI_TKILL, 0, sp, 0x401000)) == "abort");
  // Sent by a process: si_addr is no fault address, whatever it holds.
  CHECK(std::string(crash_category(SIGSEGV, SI_USER, 0, sp, 0x401000)) == "memory-access");
  CHECK(std::string(crash_category(SIGTERM, SI_USER, 0, sp, 0x401000)) == "crash");
}
