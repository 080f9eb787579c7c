// SPDX-License-Identifier: MIT
// File: fs/chunk_cache.h -- ChunkCache: the persistent local cache of compressed archive frames,
// shared by every mount and process on the machine.
//
// Layout under the cache directory (default ~/.cache/lazycache/chunks, /var/cache/lazycache/chunks
// as root):
//   index.mdb, index.mdb-lock   LMDB: chunks (digest -> size, LRU sequence), lru (sequence ->
//                               digest, oldest first), meta (total bytes, next sequence)
//   blobs/<2 hex>/<32 hex>      one file per frame, named by the XXH3-128 digest of its bytes
//   tmp/                        files being written; renamed into blobs/ when complete
//
// Why files and not LMDB values: frames are 0.5-4 MiB, so as LMDB values they would be long runs
// of overflow pages, and deleting and re-adding them under LRU churn fragments LMDB's freelist and
// grows the file (tech notes, LMDB "Large values"). Files are freed exactly on unlink, so the cache
// stays within its bound; LMDB only holds small fixed-size rows.
//
// Crash safety (kill -9 at any point leaves a usable cache): a blob is written to tmp/, renamed
// into place, and only then is its row inserted, so a row never names a file that was not complete
// when it was renamed. Eviction commits the row deletion before unlinking the file. What a crash
// can leave behind is harmless: a blob without a row (an orphan, removed by gc()), or a stale temp
// file (removed by gc() after an hour). Blobs are not fsynced: every get() verifies the XXH3-128
// digest, so a blob torn by a power loss is a miss that is removed and refetched, never wrong bytes.
//
// A full disk (issue 7): the cache never takes the last free space of its filesystem. It keeps
// `min_free_bytes` free for everything else (the build): a put that would leave less first
// evicts the least recently used chunks to make room, so the cache keeps caching the frames in
// use at a size the disk can hold (warned once: "its filesystem has only X free"). When its own
// chunks are too few to make room (other files fill the disk), or a write fails anyway (ENOSPC,
// quota, MDB_MAP_FULL, EIO), writes pause (CacheWriteBackoff: 30 s, doubling to 5 min) with one
// warning naming the directory and the reason: put() then returns kResourceExhausted at once,
// touching nothing on disk, and readers get their frames from the store as before. A write that
// succeeds again says "caching resumed". LMDB is opened without MDB_WRITEMAP and its lock file
// is allocated before LMDB maps it: a write through a shared mapping of a file with no block
// behind it is SIGBUS on a full tmpfs or ext4, not ENOSPC. Without WRITEMAP the 1 GiB map size
// is address space only (the file grows by writes), so it is not checked against free space.
//
// A damaged index (issue 13): LMDB has no page checksums, and a damaged page can crash any
// process that reads it. open() first walks index.mdb in a child process (unless the file is
// unchanged since the last clean walk; fs/chunk_cache_check.h); a damaged index, or one LMDB
// refuses to open (MDB_INVALID: zeroed, truncated, bad meta pages), is moved aside as
// index.mdb.damaged and an empty index started, with one warning. The blobs it named become
// orphans that gc() removes.
//
// Sharing: any number of processes and threads. LMDB serialises writers across processes; readers
// never block. The LRU order is approximate: hits are recorded in memory and written in batches.
// Thread-safe: all methods may be called concurrently. One instance per directory per process
// (open() returns the shared one: LMDB forbids opening an environment twice in one process).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "format/archive.h"
#include "format/frame_source.h"
#include "fs/cache_write_backoff.h"
#include "fs/chunk_cache_check.h"

struct MDB_env;

namespace lazycache::fs {

using format::Digest128;

struct ChunkCacheConfig {
  std::string dir;
  // 10 GiB: a typical CI runner's spare disk, several times a large node_modules or cargo cache.
  uint64_t max_bytes = 10ull << 30;
  // Free space kept on the cache's filesystem for other files (see the top of this file).
  // Default: 5 % of the filesystem, at most 1 GiB (Mountpoint keeps 5 %; the cap keeps a large
  // disk from idling hundreds of GiB).
  std::optional<uint64_t> min_free_bytes;
  // Where the cache's warnings go, one line each without a newline. Default: stderr, prefixed
  // "lazycache: " (a mount daemon's stderr is its log file).
  std::function<void(const std::string&)> warn;
  // Tests: the clock of the write backoff and the free bytes of the cache's filesystem
  // (defaults: steady_clock, statvfs f_bavail).
  std::function<CacheWriteBackoff::Clock::time_point()> now;
  std::function<Result<uint64_t>()> free_bytes;
  // Tests: runs after an eviction's transaction committed (its blobs are already unlinked), the
  // moment another process's put() of an evicted digest can run.
  std::function<void()> after_evict_commit;
};

struct ChunkCacheStats {
  uint64_t chunk_count = 0;
  uint64_t total_bytes = 0;  // sum of blob sizes the index accounts for
  uint64_t max_bytes = 0;
};

struct ChunkCacheGcReport {
  uint64_t evicted_chunks = 0;
  uint64_t orphan_files_removed = 0;  // blobs without a row, stale temp files
  uint64_t missing_rows_removed = 0;  // rows whose blob was gone
  uint64_t bytes_freed = 0;
};

// The persistent format::FrameDataCache of a mount (format/frame_source.h reads through it).
class ChunkCache final : public format::FrameDataCache {
 public:
  // Opens (creating if needed) the cache in config.dir, clears reader slots left by dead
  // processes. A second open of the same directory in this process returns the same instance
  // (its max_bytes is then the larger of the two). Errors: kIo, kPermissionDenied, kCorrupt.
  static Result<std::shared_ptr<ChunkCache>> open(const ChunkCacheConfig& config);
  // The default directory for this user: $LAZYCACHE_CACHE_DIR, else /var/cache/lazycache/chunks
  // as root, else $XDG_CACHE_HOME/lazycache/chunks or ~/.cache/lazycache/chunks.
  static std::string default_dir();

  ~ChunkCache() override;
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  // The bytes stored under `digest`, verified against it. kNotFound on a miss (also when the
  // row's blob is gone); a blob that is short or fails verification is removed and reported as
  // kCorrupt, naming the file and the damage (both counted in corrupt_removed()). Either way the
  // caller refetches. Records the hit for LRU.
  Result<ByteBuffer> get(const Digest128& digest) override;
  bool contains(const Digest128& digest);
  // Stores `bytes` under `digest` (the caller has verified that they hash to it), then evicts the
  // least recently used chunks until the total is within max_bytes (and the free-space floor
  // holds). Storing a present digest only records a use. Errors: kResourceExhausted (no room, or
  // writes paused after a failure: nothing was written), kIo, kPermissionDenied, kInternal
  // (LMDB). The cache warns once per episode of failing writes (config.warn), so callers need
  // not log each failure.
  Status put(const Digest128& digest, std::span<const std::byte> bytes) override;
  // Writes batched LRU updates. Called by put() and the destructor; call before reporting.
  Status flush();

  Result<ChunkCacheStats> stats();
  // Evicts down to max_bytes, removes orphan blobs and stale temp files, drops rows whose blob
  // is missing. Safe while mounts are using the cache.
  Result<ChunkCacheGcReport> gc();
  // Drops every chunk. Safe while mounts are using the cache (they refetch).
  Status clear();

  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_.load(std::memory_order_relaxed); }
  uint64_t corrupt_removed() const;
  uint64_t min_free_bytes() const { return min_free_; }
  // True while writes are paused after a failure (see the top of this file).
  bool writes_paused();
  // put() calls skipped because writes were paused, and chunks evicted to keep the floor.
  uint64_t writes_skipped() const;
  uint64_t floor_evictions() const;

 private:
  ChunkCache(std::string dir, const ChunkCacheConfig& config);
  Status init(const ChunkCacheConfig& config);
  // Checks index.mdb (fs/chunk_cache_check.h) unless it is unchanged since its last clean
  // check, sets a damaged one aside with one warning, and opens the index.
  Status open_checked_index();
  // Opens the LMDB environment and its tables; on failure env_ is closed again.
  Status open_index();
  Status open_index_env();
  // What make_room did: kMade reserved `size` bytes (in_flight_, released by the caller once
  // the blob is written or failed); kBusy reserved nothing because the room is short only while
  // other threads' blobs are being written or indexed: the caller skips this frame, and caching
  // goes on (those blobs will show in the index, where eviction can find them).
  enum class Room { kMade, kBusy };
  // Reserves `size` bytes and evicts older chunks so that storing them leaves min_free_ free;
  // kResourceExhausted (nothing reserved) when even evicting the whole cache would not make room
  // and no other write is under way.
  Result<Room> make_room(uint64_t size);
  void release(uint64_t size);
  // Stores the row of a blob already renamed into place, evicting down to max_bytes.
  Status insert_row(const Digest128& digest, uint64_t size);
  // Pauses writes after `failure`, warning when this starts an episode; returns `failure`.
  Status write_failed(const Status& failure);
  std::string blob_path(const Digest128& d) const;
  Status remove_row(const Digest128& d);
  // Evicts within the open write transaction and unlinks the evicted blobs before it commits:
  // LMDB's writer lock then orders each unlink with every other process's insert_row (which
  // checks its blob is there under the same lock), so no row is left without its file. A failed
  // commit leaves rows whose blob is gone: get() treats them as misses and drops them.
  Status evict_locked(void* txn, uint64_t target_bytes, std::vector<Digest128>& evicted, uint64_t& freed);
  Status flush_locked();

  const std::string dir_;
  // Raised by a later open() of the same directory while other threads evict: atomic.
  std::atomic<uint64_t> max_bytes_;
  MDB_env* env_ = nullptr;
  // Every transaction holds it shared; adopting a map grown by another process
  // (mdb_env_set_mapsize after MDB_MAP_RESIZED) holds it exclusive, as lmdb.h requires that no
  // transaction of this process be live then.
  mutable std::shared_mutex env_mu_;
  OwnWritesWatch own_writes_{dir_ + "/index.mdb"};  // marks the index checked at close (chunk_cache_check.h)
  unsigned dbi_chunks_ = 0, dbi_lru_ = 0, dbi_meta_ = 0;
  mutable std::mutex pending_mu_;   // guards pending_, corrupt_removed_; never held across LMDB calls
                                    // except in flush_locked (taken before any write transaction)
  std::vector<Digest128> pending_;  // hits not yet written to the lru table
  uint64_t corrupt_removed_ = 0;
  uint64_t tmp_counter_ = 0;  // guarded by pending_mu_

  uint64_t min_free_ = 0;
  std::function<void(const std::string&)> warn_;
  std::function<CacheWriteBackoff::Clock::time_point()> now_;
  std::function<Result<uint64_t>()> free_bytes_;
  std::function<void()> after_evict_commit_;
  mutable std::mutex write_mu_;  // guards the fields below; never held across I/O
  CacheWriteBackoff backoff_;
  bool floor_warned_ = false;
  uint64_t in_flight_ = 0;  // bytes of blobs being written, not yet seen by statvfs
  // Bytes of blobs renamed into place whose rows are not inserted yet: statvfs sees them, the
  // index's "total" does not, so eviction cannot free them yet.
  uint64_t unindexed_ = 0;
  uint64_t writes_skipped_ = 0;
  uint64_t floor_evictions_ = 0;
};

// "0123...ef": 32 lowercase hex digits, low 64 bits first (the blob file name).
std::string digest_hex(const Digest128& d);

}  // namespace lazycache::fs
