// Where each thread's alternate signal stack is, for the capture to fault
// its top pages in before asking the thread for its stack.
//
// A thread answering the thread-dump signal first writes the kernel's
// signal frame (about 3.5 KiB with AVX-512 state) onto its alternate
// stack, then runs the unwinder below it. Those pages are usually touched
// for the first time at the crash, and a first touch costs a page fault
// each (~10 us in a virtual machine, where a system call costs ~1 us).
// The capture instead asks the kernel for them with one
// MADV_POPULATE_WRITE per thread, made by the owner while the threads it
// already asked are answering.
//
// A fixed table keyed by thread id: registered at thread start (install
// time), withdrawn when the thread ends, read at crash time without locks.
// Only stacks faultline mapped are registered, and an entry is withdrawn
// before its mapping is unmapped, so a populate never reaches memory the
// program mapped there since.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

namespace faultline::core {

// Install time: thread tid's alternate stack, one faultline mapped (only
// those: their unmapping is known), is [lo, lo + size).
void altstack_register(pid_t tid, void* lo, size_t size);
// Its mapping at lo is going away (thread exit): withdraws tid's entry if
// it is that range.
void altstack_forget(pid_t tid, void* lo);
// In a fork child: withdraws every entry of the range at lo (the forking
// thread's, under its parent-side id) before it is registered anew.
void altstack_forget_range(void* lo);
// Crash time (async-signal-safe): faults in the top `bytes` of tid's
// registered alternate stack, or for the thread that installed faultline
// (usually the main thread), of the one install gave it
// (g_crash.altstack_*). False when there is none.
bool altstack_prefault(pid_t tid, size_t bytes);

// The top of a signal stack the thread-dump handler and the unwinder use:
// the kernel's frame plus the handler's own frames.
constexpr size_t kAltStackPrefaultBytes = 16u << 10;

}  // namespace faultline::core
