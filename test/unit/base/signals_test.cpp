#include "core/base/signals.h"

#include <doctest/doctest.h>
#include <signal.h>

#include <cstring>
#include <string>

#include "core/base/rt_signal.h"

using namespace faultline::core;

TEST_CASE("every fatal signal has a name and description matching libc") {
  for (int i = 0; i < kFatalSignalCount; ++i) {
    const SignalInfo* s = find_signal(kFatalSignals[i]);
    REQUIRE(s != nullptr);
    CHECK(std::strncmp(s->name, "SIG", 3) == 0);
    // sigabbrev_np is glibc's own table: an independent oracle for names.
    CHECK(std::string(s->name + 3) == sigabbrev_np(kFatalSignals[i]));
  }
}

TEST_CASE("si_code names per signal") {
  CHECK(std::string(find_signal_code(SIGSEGV, SEGV_MAPERR)->name) == "SEGV_MAPERR");
  CHECK(std::string(find_signal_code(SIGSEGV, SEGV_ACCERR)->name) == "SEGV_ACCERR");
  CHECK(std::string(find_signal_code(SIGFPE, FPE_INTDIV)->name) == "FPE_INTDIV");
  CHECK(std::string(find_signal_code(SIGILL, ILL_ILLOPN)->name) == "ILL_ILLOPN");
  CHECK(std::string(find_signal_code(SIGBUS, BUS_ADRERR)->name) == "BUS_ADRERR");
  CHECK(std::string(find_signal_code(SIGABRT, SI_TKILL)->name) == "SI_TKILL");
  CHECK(std::string(find_signal_code(SIGSEGV, SI_USER)->name) == "SI_USER");
  CHECK(std::string(find_signal_code(SIGSEGV, SI_KERNEL)->name) == "SI_KERNEL");
  // The same number means different things for different signals.
  CHECK(std::string(find_signal_code(SIGBUS, 1)->name) == "BUS_ADRALN");
  CHECK(find_signal_code(SIGSEGV, 99) == nullptr);
}

TEST_CASE("signals parse by name, short name and number") {
  CHECK(parse_signal("SIGSEGV") == SIGSEGV);
  CHECK(parse_signal("ABRT") == SIGABRT);
  CHECK(parse_signal("7") == 7);
  CHECK(parse_signal("SIGNOPE") == 0);
  CHECK(parse_signal("") == 0);
  CHECK(parse_signal("99") == 0);
}

TEST_CASE("real-time signals parse as kill -l and the README spell them") {
  CHECK(parse_signal("SIGRTMAX-3") == 61);  // the thread signal's default
  CHECK(parse_signal("RTMAX-3") == 61);
  CHECK(parse_signal("SIGRTMIN") == 34);
  CHECK(parse_signal("RTMIN+2") == 36);
  CHECK(parse_signal("SIGRTMAX-30") == 34);
  // SIGRTMAX itself is a signal, but past the 63 a setting holds.
  CHECK(parse_signal("SIGRTMAX") == 0);
  CHECK(parse_signal("RTMAX-0") == 0);
  CHECK(parse_rt_signal_name("SIGRTMAX") == 64);
  // Past the other end, the wrong direction, junk.
  CHECK(parse_signal("SIGRTMAX-31") == 0);
  CHECK(parse_signal("SIGRTMIN+31") == 0);
  CHECK(parse_signal("SIGRTMIN-1") == 0);
  CHECK(parse_signal("SIGRTMAX+1") == 0);
  CHECK(parse_signal("SIGRTMIN+") == 0);
  CHECK(parse_signal("SIGRTMIN+001") == 0);
  CHECK(parse_signal("SIGRTMIN+2x") == 0);
  CHECK(parse_signal("SIGRTMID") == 0);
  CHECK(parse_signal("RT") == 0);
}

TEST_CASE("who sent it") {
  CHECK(signal_sent_by_process(SI_USER));
  CHECK(signal_sent_by_process(SI_TKILL));
  CHECK_FALSE(signal_sent_by_process(SEGV_MAPERR));
}
