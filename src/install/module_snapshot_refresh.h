// Install-time half of the module snapshot (the crash-time reader is
// core/modules/module_snapshot.h): reads the loaded modules under the
// loader's lock and publishes them for the crash handler. Not signal-safe.
#pragma once

namespace faultline::core {

// Install time and after dlopen/dlclose (takes the loader's lock through
// dl_iterate_phdr, and a mutex). Cheap when nothing changed: modules
// already known are reused. True when modules were loaded or unloaded
// since the last call. With `wait` false (the hooks on pthread_create and
// dlopen), a refresh already running in another thread makes this one
// return at once instead of waiting: a hook may run inside a dlopen (a
// library's constructor) holding the loader's lock that the other refresh
// waits for.
bool module_snapshot_refresh(bool wait = true);

// Around fork: the fork waits for a refresh in another thread to finish,
// so the child never inherits the snapshot's lock, nor the loader's lock
// held by a refresh (glibc does not reset it). The child never refreshes
// (the program's own dlopen in another thread may have held the loader's
// lock at the fork): its pthread_create must not wait forever in
// dl_iterate_phdr.
void module_snapshot_before_fork();
void module_snapshot_after_fork_parent();
void module_snapshot_after_fork();

}  // namespace faultline::core
