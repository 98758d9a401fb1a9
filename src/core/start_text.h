// Where the code that every process runs at start-up is placed.
//
// The preload's install runs in every process, and on a virtual machine
// each first touch of a page of the library's code is a page fault (~10 us;
// the kernel maps the 64 KiB around it). The install code is at the start
// of the library's text; the few functions of other files it calls are
// placed beside it, with the constructor (.text.startup), instead of in
// their files' text, which spread them over three such windows.
#pragma once

#define FAULTLINE_START_TEXT __attribute__((section(".text.startup.faultline")))
