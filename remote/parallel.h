// SPDX-License-Identifier: MIT
// File: remote/parallel.h -- run_bounded(): n independent tasks on at most `concurrency` threads.
//
// The transfer engine's only way of running requests at once (multipart parts, ranged GETs of
// ObjectByteSource::read_ranges). Threads are started per call and always joined before it
// returns, so nothing outlives the caller's buffers. A thread costs ~20 us next to requests that
// take milliseconds, which is why there is no long-lived pool here.
#pragma once

#include <cstddef>
#include <functional>

#include "common/status.h"

namespace lazycache::remote {

// Calls task(i) for every i in [0, n), at most `concurrency` at a time (<= 0 means 1), from
// worker threads (the calling thread runs tasks too when concurrency is 1). After the first
// failure no new task starts; returns the first failure (by time), or ok. Blocking.
// Exceptions thrown by a task become kInternal.
Status run_bounded(size_t n, int concurrency, const std::function<Status(size_t)>& task);

}  // namespace lazycache::remote
