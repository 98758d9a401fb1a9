#include "install/thread_stacks.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/base/sys.h"
#include "core/capture/altstacks.h"
#include "core/crash_state.h"
#include "core/modules/module_snapshot.h"
#include "install/main_altstack.h"
#include "install/module_snapshot_refresh.h"
#include "install/terminate.h"

namespace faultline::core {

struct Start {
  void* (*fn)(void*);
  void* arg;
};
using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
CreateFn real_create();
void* start_thread(void* p);
extern volatile int g_enabled;

namespace {

// 64 KiB per thread: the crash handler keeps its big buffers in static
// memory; unwinding, symbol lookup and the Python walker need tens of KiB.
// Address space only: untouched pages cost no memory.
constexpr size_t kThreadAltStack = 64u << 10;

CreateFn g_real_create = nullptr;
pthread_key_t g_key;
bool g_key_made = false;
// Whether any thread got a stack of its own: until then a fork child has
// none to register, and does not call pthread_getspecific (its first call,
// bound lazily, was half a dozen page faults of the loader's in every fork
// child of a program without threads).
bool g_own_stacks = false;

struct OwnStack {
  void* map;
  size_t len;
};

void free_stack(void* p) {
  OwnStack* s = static_cast<OwnStack*>(p);
  // Withdrawn whatever the thread's signal stack is now: the mapping goes.
  altstack_forget(sys_gettid(), static_cast<char*>(s->map) + getpagesize());
  stack_t current;
  // Only disable it if it is still ours (the program may have set another).
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_ONSTACK) &&
      current.ss_sp == static_cast<char*>(s->map) + getpagesize()) {
    stack_t off = {};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
  }
  munmap(s->map, s->len);
  free(s);
}

}  // namespace

volatile int g_enabled = 0;

void* start_thread(void* p) {
  Start start = *static_cast<Start*>(p);
  free(p);
  ensure_thread_altstack();
  return start.fn(start.arg);
}

CreateFn real_create() {
  if (!g_real_create) {
    g_real_create = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
  }
  return g_real_create;
}

void ensure_thread_altstack() {
  stack_t current;
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE) &&
      current.ss_size >= kThreadAltStack) {
    return;  // the program's own: not registered (its unmapping is not seen)
  }
  size_t page = static_cast<size_t>(getpagesize());
  size_t len = kThreadAltStack + page;
  // No memfd here, where the kernel cannot name the mapping: a descriptor
  // made and closed at every thread's start could take the number another
  // thread's close(); open() expects, and costs a file per thread.
  void* map = map_stack(len, MAP_STACK | MAP_NORESERVE, /*memfd=*/false);
  if (map == MAP_FAILED) return;
  stack_t ss = {};
  ss.ss_sp = static_cast<char*>(map) + page;
  ss.ss_size = kThreadAltStack;
  OwnStack* own = static_cast<OwnStack*>(malloc(sizeof(OwnStack)));
  if (!own || sigaltstack(&ss, nullptr) != 0) {
    free(own);
    munmap(map, len);
    return;
  }
  own->map = map;
  own->len = len;
  if (!g_key_made || pthread_setspecific(g_key, own) != 0) {
    // No destructor to free it: keep it for the thread's life (leaks the
    // mapping only if the thread ends). Not registered: nothing would
    // withdraw the entry when the thread ends.
    free(own);
    return;
  }
  __atomic_store_n(&g_own_stacks, true, __ATOMIC_RELAXED);
  altstack_register(sys_gettid(), ss.ss_sp, ss.ss_size);
}

void register_altstack_after_fork() {
  if (!g_key_made || !__atomic_load_n(&g_own_stacks, __ATOMIC_RELAXED)) return;
  // The forking thread's own signal stack, under its new id.
  OwnStack* own = static_cast<OwnStack*>(pthread_getspecific(g_key));
  if (own) {
    altstack_forget_range(static_cast<char*>(own->map) + getpagesize());
    altstack_register(sys_gettid(), static_cast<char*>(own->map) + getpagesize(),
                      own->len - static_cast<size_t>(getpagesize()));
  }
}

void set_thread_altstacks(bool on) {
  if (on && !g_key_made) g_key_made = pthread_key_create(&g_key, free_stack) == 0;
  real_create();
  g_enabled = on ? 1 : 0;
}

}  // namespace faultline::core

using faultline::core::Start;

// The interposed pthread_create: the new thread first gets its alternate
// stack, then runs the caller's function.
extern "C" __attribute__((visibility("default"))) int pthread_create(pthread_t* thread,
                                                                     const pthread_attr_t* attr,
                                                                     void* (*fn)(void*),
                                                                     void* arg) {
  faultline::core::CreateFn real = faultline::core::real_create();
  if (!real) return EAGAIN;
  // Modules loaded since the last snapshot (a Python job imports its
  // extensions, then starts its worker threads): cheap when none were.
  // A C++ runtime among them gets the terminate hook.
  if (faultline::core::g_crash.installed && faultline::core::module_snapshot_refresh(false)) {
    faultline::core::install_terminate_handler();
  }
  if (!faultline::core::g_enabled) return real(thread, attr, fn, arg);
  Start* start = static_cast<Start*>(malloc(sizeof(Start)));
  if (!start) return real(thread, attr, fn, arg);
  start->fn = fn;
  start->arg = arg;
  int rc = real(thread, attr, faultline::core::start_thread, start);
  if (rc != 0) free(start);
  return rc;
}
