// Where the code that every process runs when it starts is placed: the
// preload's install, and the fork handlers a fork child runs.
//
// On a virtual machine each first touch of a page of the library's code is
// a page fault (~10 us; the kernel maps the 64 KiB around it), and a fork
// child touches its code afresh (the kernel does not copy the page tables
// of file mappings). The install code and the fork handlers are at the
// start of the library's text; the few functions of other files they call
// are placed beside them, with the constructor (.text.startup), instead of
// in their files' text, which spread them over three such windows.
#pragma once

#define FAULTLINE_START_TEXT __attribute__((section(".text.startup.faultline")))
