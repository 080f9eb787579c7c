// SPDX-License-Identifier: MIT
// File: tools/early_head.h -- the first bytes of an exact key's entry, read beside the lookup
// that finds it, for `restore --extract`.
//
// Why: an exact hit is found by reading the entry's tail (resolve_entry with kEntryTailBytes),
// and only then did the extract know the frames and send its first wave: the link idled for the
// lookup's round trip, the tail's transfer and the wave's own round trip (far link: data began
// ~350 ms after the start, 229 ms of it before the wave was sent; node's 31 MiB then took 1.3 s).
// The entry's object name is known before the lookup (the key, scope and the paths' version), and
// a full extract reads every frame from byte 0, so the first pieces are read at once, beside the
// lookup, on connections of their own; the pipeline copies the frames they hold
// (format/archive_head.h).
//
// Safety: the pieces are read before the object's size and ETag are known, so they are not pinned
// to the version the lookup finds; every frame still goes through its digest, and a frame that
// fails it is read again from the pinned source (format/frame_pipeline.h). A piece that fails
// (the object is missing: a miss or a restore key's match; shorter than the piece) is not an
// error: the pipeline reads those bytes itself. Dropping the head joins its reads, which a
// missing object answers at once.
#pragma once

#include <memory>
#include <string>

#include "format/archive_head.h"
#include "remote/object_store.h"

namespace lazycache::cli {

// Four pieces of 4 MiB: by hand (node, Swift behind the link proxy, fresh ext4 per run, two or
// three runs each) 0 / 2 / 3 / 4 pieces of 4 MiB and 2 of 8 MiB on the far link (200 Mbit/s,
// 60 ms) took 2.23-2.24 / 2.02-2.12 / 1.97-1.98 / 1.92-1.97 / 2.05-2.09 s, on the hosted link
// 0 / 3 / 4 / 6 pieces 0.92-1.27 / 0.90-1.17 / 0.90-1.08 / 0.87-0.99 s (its writes dominate).
// More pieces slow the lookup's own tail read, which shares the link with them.
inline constexpr uint64_t kEarlyHeadPieceBytes = 4u << 20;
inline constexpr int kEarlyHeadPieces = 4;

// Starts reading the first kEarlyHeadPieces x kEarlyHeadPieceBytes of `object_key` (threads of
// the head; no request is pinned). Never fails: a read that fails only leaves its bytes unread.
std::shared_ptr<format::ArchiveHead> start_early_head(std::shared_ptr<remote::ObjectStore> store, const std::string& object_key);

}  // namespace lazycache::cli
