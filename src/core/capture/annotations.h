// Annotations (crash keys) and breadcrumbs: what the application records
// before a crash, copied into the report by the crash path.
//
// Storage is static and preallocated. Writers never allocate and never block
// readers; a reader (the crash handler, on any thread) copies a slot under a
// per-slot sequence number and skips a slot caught mid-write.
//
// - Process-wide annotations: kMaxAnnotations key/value slots, any thread.
// - Thread annotations: kMaxThreadAnnotations slots per thread, for up to
//   kMaxAnnotatedThreads threads at once, in a table keyed by thread id (no
//   TLS, so the library can be loaded late); the report shows the crashing
//   thread's, so a server can record the request each worker serves.
// - Breadcrumbs: a ring of the last kMaxBreadcrumbs messages with timestamps.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/frames.h"
#include "faultline/faultline.h"

namespace faultline::core {

// The public limits (faultline.h); the byte sizes hold the terminating NUL.
constexpr int kMaxAnnotations = FAULTLINE_ANNOTATIONS_MAX;
constexpr size_t kAnnotationKeyBytes = FAULTLINE_KEY_MAX + 1;
constexpr size_t kAnnotationValueBytes = FAULTLINE_VALUE_MAX + 1;
constexpr int kMaxThreadAnnotations = FAULTLINE_THREAD_ANNOTATIONS_MAX;
constexpr size_t kThreadValueBytes = FAULTLINE_THREAD_VALUE_MAX + 1;
constexpr int kMaxAnnotatedThreads = FAULTLINE_ANNOTATED_THREADS_MAX;
constexpr int kMaxBreadcrumbs = FAULTLINE_BREADCRUMBS_MAX;
constexpr size_t kBreadcrumbBytes = FAULTLINE_BREADCRUMB_MAX + 1;

// Writers (normal context; async-signal-safe too). value == nullptr removes.
// Return 0, or -ENOSPC when the table is full, -EINVAL for a bad key.
int annotation_set(const char* key, const char* value);
int thread_annotation_set(const char* key, const char* value);
void breadcrumb_add(const char* message);
// In a fork child: the forking thread keeps its thread annotations.
void thread_annotations_after_fork();

// Readers for the crash path: copy every entry into caller storage
// (AnnotationView, BreadcrumbView: frames.h).
// Copies the process-wide annotations into out (cap entries, strings in
// caller buffers provided by `storage` of storage_bytes). Returns the count.
int annotations_snapshot(AnnotationView* out, int cap, char* storage, size_t storage_bytes);
int thread_annotations_snapshot(AnnotationView* out, int cap, char* storage, size_t storage_bytes);

// Oldest first.
int breadcrumbs_snapshot(BreadcrumbView* out, int cap, char* storage, size_t storage_bytes);

}  // namespace faultline::core
