// SPDX-License-Identifier: MIT
// File: fs/filesystem.h -- Filesystem: the read-only file system over one archive, without FUSE.
//
// Parts and data flow: metadata (getattr, lookup, readdir, readlink, xattrs, statfs) is answered
// from the archive's Index alone, with no I/O. File data goes
//   read(handle, offset, size) -> frames_for_range -> FrameFetcher (memory FrameCache -> LMDB
//   ChunkCache -> range reads) -> pieces of decompressed frames handed to the callback,
// plus per-open-file sequential readahead (ReadAheadPolicy), readahead across files along the
// archive's frames (ArchiveReadAhead) and mount-time prefetch (the index's hot list, a list of
// paths, or the whole archive in the background).
//
// Identity: an EntryId names an index entry. Hardlinked names share one canonical id (the group's
// first entry), which lookup() returns, so the FUSE adapter gives them one inode number.
// The adapter (fs/fuse_adapter.h) maps kernel inode numbers to ids; nothing here knows FUSE. The
// writable upper layer (fs/overlay.h) wraps this class the same way.
//
// Caveats (the operating rules):
//  - The archive is immutable: attributes never change while mounted, so the adapter hands out
//    long entry/attr timeouts and keep_cache. A store object replaced under a mount makes reads
//    fail (kPreconditionFailed -> ESTALE) rather than mix versions, if the source pins versions.
//  - No state is held per inode: only open files have state (a small struct each), so a tree of
//    any size costs no descriptors and no memory per entry.
//  - Every read either completes or fails within `read_timeout_ms` (kTimeout -> EIO), even when
//    the source hangs; a fetch that completes later still fills the caches. A read through the
//    same handle of the frames whose read just timed out (the kernel retries a failed readahead
//    page at once) repeats the timeout without waiting, for one read timeout or until the store
//    delivers a frame again: one pread costs one timeout, not two. A new open always tries the
//    store again (a handle without opens, fs/inode_handles.h, after the store's recovery).
//
// Thread-safety: every method may be called from any thread concurrently. Read callbacks run on a
// fetch thread, on the watchdog thread (timeouts) or inline in read().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "format/archive.h"
#include "fs/archive_read_ahead.h"
#include "fs/chunk_cache.h"
#include "fs/fill_policy.h"
#include "fs/frame_cache.h"
#include "fs/frame_fetcher.h"
#include "fs/hand_off_thread.h"
#include "fs/memory_budget.h"
#include "fs/mount_stats.h"
#include "fs/read_ahead_policy.h"
#include "fs/split_file_pages.h"

namespace lazycache::fs {

using format::EntryId;

struct FilesystemConfig {
  FetcherConfig fetcher;
  ReadAheadConfig readahead;
  ArchiveReadAheadConfig archive_readahead;
  // Locality prefetch (issue 15): a job that opens a file of a directory (a package) reads its
  // other files too, so the first open in a directory queues, at readahead priority, the frames
  // of the directory's files, when they span at most this many frames (0: off). 8: ~4-8 MiB
  // compressed at the default frame size, a few range reads on parallel connections; a
  // directory's direct files lie together in the archive (depth-first, name order). Not for
  // files of the learned hot region, whose directories' other files lie elsewhere.
  uint32_t directory_prefetch_frames = 8;
  // Decompressed frames in memory plus the fetches in flight; 0: auto_memory_budget() of the
  // archive (fs/memory_budget.h: a sixteenth of its tar stream, 32-256 MiB). Readahead and fill
  // do not take room here beyond their bytes in flight (they go to the chunk cache undecoded,
  // fs/frame_fetcher.h), and decode-ahead hands fetched frames whose files the kernel knows to
  // its page cache, so a job's later passes over the same files read the page cache instead of
  // decoding evicted frames again (before decode-ahead, 32 MiB cost node's partial job 144
  // decodes of 50 frames against 49 at 256 MiB; now 46-57 against 48-56).
  uint64_t memory_budget_bytes = 0;
  // How much of the archive the mount fetches in the background into the chunk cache, and the
  // cache's bound that the auto policy weighs the archive against (fs/fill_policy.h).
  FillPolicy fill;
  uint64_t cache_bound_bytes = 10ull << 30;
  // Decode-ahead (issue 15): fill and prefetch frames whose files the kernel knows (after the
  // tree walk, or a listing) are decoded as they arrive and their files handed to the kernel's
  // page cache (add_page_cache_sink), up to this many decompressed bytes per mount; 0: off (fill
  // frames are only stored in the chunk cache). Without it a job's first read of each frame
  // waits for its decode, one frame after the other, although the fill brought the bytes long
  // before; with it the job reads from the page cache while the daemon decodes on the other
  // core. The mount command's default: tools/mount_options.h.
  uint64_t decode_ahead_bytes = 0;
  // 30 s: longer than the store's own retry schedule for one range read, short enough that a
  // job sees EIO instead of hanging in D state when the store goes away.
  uint64_t read_timeout_ms = 30000;
  // After this long without a read, the decompressed frames held in memory are dropped and the
  // freed heap returned to the system: an idle mount (a job between steps) should not sit on a
  // few hundred MiB. The kernel's page cache still holds what was read (keep_cache), and the
  // chunk cache the compressed frames. 0 keeps them.
  uint64_t idle_trim_ms = 3000;
  // When set, every entry reports this owner (a mount by a non-root user shows the user's files,
  // as tar does when extracting as non-root); else the archive's uid/gid.
  std::optional<std::pair<uint32_t, uint32_t>> owner;
  // Where frames larger than a quarter of the memory budget are decoded to (fs/frame_spill.h).
  // Empty: the chunk cache's tmp/ directory, else $TMPDIR, else /tmp.
  std::string spill_dir;
  // Reads of the archive made before the Filesystem existed (opening its tail), for the figures.
  uint64_t mount_range_reads = 0;
};

struct Attr {
  uint32_t mode = 0;  // S_IFMT bits included
  uint32_t nlink = 1;
  uint32_t uid = 0, gid = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

struct StatfsInfo {
  uint64_t block_size = 4096;
  uint64_t blocks = 0;
  uint64_t files = 0;
  uint32_t name_max = 255;
};

// A slice of a decompressed frame: the read's bytes are the pieces in order. The FramePtr keeps
// the bytes alive for as long as the piece is held.
struct ReadPiece {
  FramePtr frame;
  size_t offset = 0;
  size_t length = 0;
};
using ReadCallback = std::function<void(Result<std::vector<ReadPiece>>)>;

// Puts `bytes` of regular file `file` (canonical id), from byte `offset` on, into the kernel's
// page cache (FUSE notify_store); true when the kernel took them (it knows the file's inode).
// Either the whole file (offset 0) or whole pages of it (a file that spans frames, as its frames
// come: fs/split_file_pages.h). See Filesystem::add_page_cache_sink.
using PageCacheSink = std::function<bool(EntryId file, uint64_t offset, std::span<const char> bytes)>;

enum class PrefetchMode { kNone, kHotList, kAll };

class Filesystem {
 public:
  // Takes the opened archive. `chunk_cache` may be null (no local cache).
  Filesystem(std::unique_ptr<format::ArchiveReader> reader, std::shared_ptr<ChunkCache> chunk_cache, FilesystemConfig config = {});
  // Stops prefetch, fails reads still waiting with kCancelled, joins every thread.
  ~Filesystem();
  Filesystem(const Filesystem&) = delete;
  Filesystem& operator=(const Filesystem&) = delete;

  const format::Index& index() const { return reader_->index(); }
  const format::ArchiveReader& reader() const { return *reader_; }

  // The id the rest of the API expects for entry `id`: hardlinks map to their group's first entry.
  EntryId canonical(EntryId id) const;
  // Errors: kNotFound (no such entry).
  Result<Attr> getattr(EntryId id) const;
  // The canonical id of `name` in directory `dir`. Errors: kNotFound, kInvalidArgument (ENOTDIR).
  Result<EntryId> lookup(EntryId dir, std::string_view name) const;
  // Children of a directory in name order. Errors: kNotFound, kInvalidArgument (not a directory).
  Result<format::Index::ChildRange> children(EntryId dir) const;
  // Errors: kNotFound, kInvalidArgument (not a symlink).
  Result<std::string> readlink(EntryId id) const;
  // The value of xattr `name`, or nullopt when the entry has no such attribute.
  Result<std::optional<std::string>> getxattr(EntryId id, std::string_view name) const;
  Result<std::vector<std::string>> listxattr(EntryId id) const;
  StatfsInfo statfs() const;

  // Opens a regular file for reading; returns a handle for read()/release(). Errors: kNotFound,
  // kInvalidArgument (a directory or symlink), kPermissionDenied (write access asked: read-only).
  Result<uint64_t> open(EntryId id, int open_flags);
  void release(uint64_t handle);
  // An open of regular file `id` that reached the daemon by another way than open() (fanotify on
  // a kernel overlay over a zero-message-open mount, tools/kernel_overlay.h): counted as opened,
  // recorded in the access order and, for the first file of its directory, the locality
  // prefetch. Anything but a regular file is ignored.
  void note_open(EntryId id);
  // Reads up to `size` bytes at `offset` of the open file; short only at end of file (an empty
  // piece list at or past it). `cb` runs exactly once. Errors: the fetch's (kUnavailable,
  // kCorrupt, kPreconditionFailed, ...), kTimeout after read_timeout_ms, kCancelled at shutdown.
  void read(uint64_t handle, uint64_t offset, size_t size, ReadCallback cb);
  // Blocking whole-range read into a string (tests and tools).
  Result<std::string> read_sync(uint64_t handle, uint64_t offset, size_t size);

  // Queues prefetch: `paths` (index paths, "a/b/c") first in the order given, then (kHotList,
  // kAll) the index's hot list, at prefetch priority; then the background fill in archive
  // order: the frames the fill policy's target covers (kHotList) or every frame (kAll). kNone
  // queues the paths only. Returns the number of paths that were not found (they are skipped).
  size_t start_prefetch(PrefetchMode mode, const std::vector<std::string>& paths = {});
  void wait_prefetch_idle() { fetcher_->wait_idle(); }
  bool prefetch_idle() const { return fetcher_->idle(); }
  // Drops the prefetch and fill not yet started (the mount is ending: it must not wait for them).
  void stop_fill() { fetcher_->stop_background(); }
  // Ends the archive's reads in flight at once (ByteSource::cancel): for the daemon's exit, after
  // stop_fill() and once no read waits (reads_in_flight() == 0), so that the fill's range reads
  // in flight do not hold it up (a 2 MiB run is ~0.2 s on a far link's connection). Every later
  // fetch fails with kCancelled, unlogged and not counted as a fetch error (the final figures
  // were written before).
  void cancel_store_reads() { reader_->source().cancel(); }
  // The tree walk (fs/tree_warmer.h) and decode-ahead: while a walk runs, a frame whose files all
  // became known is held until the walk has listed the directory (walk_listed): the kernel makes
  // the inodes a READDIRPLUS reply names only when the walk's thread gets to parse it, so a frame
  // decoded right after the reply was sent found some of them missing (node-like test tree under
  // ASan: 310 of 360 files taken). walk_ended() queues what is held and, when the walk finished,
  // runs decode_known_ahead(). One call of walk_started() per walk; each ends with walk_ended().
  void walk_started();
  void walk_listed();
  void walk_ended(bool finished);
  // Decode-ahead, second pass (issue 15): queues again, at background priority, every frame
  // whose known files (described to the kernel, not handed to it yet) make it worth decoding
  // ahead (decode_ahead_bytes), among the frames the fill covers, the learned hot region and
  // those the chunk cache holds. The fill stores frames whose files the kernel did not know yet
  // undecoded; the tree walk (fs/tree_warmer.h) calls this when it has described the tree, so
  // those frames reach the page cache too. Never blocks on I/O.
  void decode_known_ahead();

  // Page-cache hand-off (issue 15: memory, and a request per file less). Every frame decoded
  // into memory offers each file that lies wholly inside it to every sink (after the reads
  // waiting on the frame were answered), and of each file that spans it and a neighbour, the
  // whole pages it holds (the pages straddling the boundary once both frames came:
  // fs/split_file_pages.h); such a file keeps its frames in memory as before. A job walking the tree then reads those files from the
  // page cache without a request to the mount (keep_cache keeps the pages across opens), and
  // when every file of the frame was taken (none reaches into a neighbouring frame), the frame is
  // dropped from memory at once (with a chunk cache to decode it from again, should the kernel
  // drop pages) and readahead skips it. The kernel takes a file only when it knows its inode
  // (a lookup or readdirplus named it; getattr() notes the entries it described and only those
  // are offered): a job opening files by path hands off little, and its frames stay in memory.
  // A file the kernel learns of only after its frame was decoded (node's require looks a file
  // up by path just before it opens it) is handed off late: see note_known().
  // `owner` identifies the sink for removal. Sinks run on a fetch thread or the late hand-off
  // thread; remove_page_cache_sink() waits for a hand-off in progress, so after it returns the
  // sink is never called again.
  void add_page_cache_sink(const void* owner, PageCacheSink sink);
  void remove_page_cache_sink(const void* owner);
  // Late hand-off (issue 15): the adapter has sent the kernel a reply naming entry `id` (lookup,
  // readdirplus, open), so the kernel knows its inode now. When `id` is a regular file wholly
  // inside a frame that is still decoded in memory and not handed off yet, the late hand-off
  // thread offers it to the sinks; when every file of that frame has been taken, the frame is
  // dropped as after a decode. Only frames in memory: a frame that is gone costs a decode, and
  // the job's own read would bring it back anyway (and offer the file then, as it is known).
  // Never blocks (request threads call it): a few atomics, a FrameCache lookup, a queue push.
  void note_known(EntryId id);
  // Blocks until every late hand-off, and every hand-off of a file spanning frames, queued so far
  // has run (tests).
  void wait_late_hand_offs();

  MountStats stats() const;
  // Reads whose callback has not run yet. The FUSE glue waits for 0 before it destroys sessions,
  // so no reply is ever sent on a destroyed session (every read ends within read_timeout_ms).
  size_t reads_in_flight();
  // Regular files in the order they were first opened (for the learned hot list of the next save).
  std::vector<EntryId> access_order() const;

 private:
  struct OpenFile;
  struct ReadOp;
  void prefetch_file(const format::Entry& e, Priority p);
  // Locality prefetch: the first open of a file in a directory queues the frames of the
  // directory's other files at readahead priority (see directory_prefetch_frames).
  void prefetch_directory(const format::Entry& opened);
  void finish(const std::shared_ptr<ReadOp>& op, Result<std::vector<ReadPiece>> result);
  void hand_to_page_cache(uint32_t frame, const FramePtr& bytes, bool ahead);  // fetch thread (on_decoded)
  struct FileSpan;
  // hand_to_page_cache's part for file `f`, which spans the frame [begin, end) and a neighbour:
  // queues (queue_split_part, on the fetch thread) and then offers on split_hand_offs_' thread
  // (hand_split_part) its whole pages there (fs/split_file_pages.h).
  void queue_split_part(const FileSpan& f, uint64_t begin, uint64_t end, const FramePtr& bytes);
  void hand_split_part(const FileSpan& f, uint64_t begin, uint64_t end, const FramePtr& bytes);
  // Whether a read not answered yet covers a byte of [begin, end) of the tar stream.
  bool reading(uint64_t begin, uint64_t end);
  // Decompressed bytes of the files wholly inside `frame` that the kernel knows and that were not
  // handed to it yet (what a decode of the frame would hand off now).
  uint64_t known_bytes_to_hand(uint32_t frame) const;
  // Whether decoding `frame` ahead would hand the kernel enough (a quarter of the frame).
  bool worth_decoding_ahead(uint32_t frame) const;
  // Whether the kernel was told of (note_known) every file wholly inside `frame`: a decode of it
  // now hands off all it ever will.
  bool fully_known(uint32_t frame) const;
  // note_known's part in decode-ahead: counts the file `e` towards its frame, and queues the
  // frame (queue_decode_ahead) when that makes it fully known.
  void count_known(const format::Entry& e);
  // Queues `frame` at background priority for decode-ahead, unless it is in memory, not worth it,
  // or outside what the fill, the hot region and the chunk cache cover.
  void queue_decode_ahead(uint32_t frame);
  // FetcherConfig::decode_ahead: fully known and worth it; takes the frame's size from the cap.
  // Reads atomics only (the fetcher calls it with its lock held).
  bool take_decode_ahead(uint32_t frame);
  void late_hand_off_loop(std::stop_token stop);  // the late hand-off thread
  void hand_off_late(EntryId id);                 // that thread, one file
  // Whether every file of `frame` lies wholly inside it and was taken by a sink (none reaches
  // into a neighbouring frame).
  bool frame_wholly_taken(uint32_t frame) const;
  void watchdog(std::stop_token stop);
  void trim_if_idle();  // watchdog thread

  std::unique_ptr<format::ArchiveReader> reader_;
  FilesystemConfig config_;
  MemoryBudget budget_;
  FrameCache memory_;
  std::shared_ptr<ChunkCache> chunk_cache_;
  std::unique_ptr<FrameFetcher> fetcher_;  // reset first in the destructor
  const std::chrono::steady_clock::time_point started_;

  std::atomic<uint64_t> files_opened_{0}, open_handles_{0}, reads_{0}, bytes_served_{0}, read_errors_{0}, read_timeouts_{0};
  std::atomic<int64_t> last_read_ns_{0};  // steady_clock of the latest read(), for idle trimming

  std::mutex archive_ahead_mu_;  // guards archive_ahead_
  ArchiveReadAhead archive_ahead_;
  // The frames of the learned hot region (files of the index's hot list, laid out together by
  // the save that learned them), or -1. Readahead across files inside the region stops at its
  // end: the job that read the region reads little past it.
  int64_t hot_region_first_frame_ = -1, hot_region_last_frame_ = -1;
  std::atomic<uint64_t> fill_target_bytes_{0};   // set by start_prefetch
  std::atomic<uint32_t> fill_end_frame_{0};      // the fill covers frames [0, this); set by start_prefetch
  std::atomic<uint64_t> decode_ahead_taken_{0};  // decompressed bytes decode_ahead said yes to
  std::atomic<size_t> sink_count_{0};            // sinks_.size(), for take_decode_ahead (no lock)
  // Decode-ahead's bookkeeping (only when decode_ahead_bytes > 0): per entry, whether note_known
  // counted it; per frame, the bytes of the files wholly inside it, and of those counted.
  std::unique_ptr<std::atomic<bool>[]> noted_;
  std::vector<uint64_t> frame_file_bytes_;
  std::unique_ptr<std::atomic<uint64_t>[]> frame_noted_bytes_;
  std::unique_ptr<std::atomic<bool>[]> frame_decoded_;  // per frame: decoded into memory at least once
  std::atomic<int> walks_{0};                           // walks running (walk_started - walk_ended)
  std::mutex held_mu_;                                  // guards held_frames_
  std::vector<uint32_t> held_frames_;                   // fully known during a walk, not queued yet

  // Canonical regular files with data, by data offset (the page-cache hand-off's map from a
  // frame to the files inside it). Built once; read-only after the constructor.
  struct FileSpan {
    uint64_t data_offset = 0, size = 0;
    EntryId id = 0;
  };
  std::vector<FileSpan> files_by_offset_;
  // Entries getattr() described (lookup and readdirplus replies carry its attributes): the
  // inodes the kernel may know. Others are not offered to the sinks (a notify_store of an
  // unknown inode fails, and node's first run would pay a failed write per file of each frame).
  std::unique_ptr<std::atomic<bool>[]> described_;
  std::shared_mutex sinks_mu_;  // guards sinks_; held shared while a hand-off runs
  std::vector<std::pair<const void*, PageCacheSink>> sinks_;
  std::atomic<uint64_t> files_to_page_cache_{0}, frames_to_page_cache_{0}, files_to_page_cache_late_{0};
  std::atomic<uint64_t> split_pieces_to_page_cache_{0};
  // Straddling pages of files that span frames, until both sides came: 512 pages (2 MiB) at most,
  // against ~10 boundaries inside files in node's 50 frames and a few hundred in the large
  // fixture's 543.
  SplitFilePages split_pages_{512};
  // Where hand_split_part runs (a READ of a file that spans frames may hold pages a store of it
  // waits for, until a fetch thread answers it): 32 MiB of queued frames at most.
  HandOffThread split_hand_offs_{32ull << 20};
  // Per entry: kNotHanded, kQueued (for the late hand-off thread), kTaken (a sink took it).
  enum HandOff : uint8_t { kNotHanded = 0, kQueued = 1, kTaken = 2 };
  std::unique_ptr<std::atomic<uint8_t>[]> handed_;
  std::mutex late_mu_;  // guards late_queue_, late_pending_
  std::condition_variable_any late_cv_;
  std::condition_variable late_done_cv_;
  std::vector<EntryId> late_queue_;
  size_t late_pending_ = 0;   // queued or running
  std::jthread late_thread_;  // joined first in the destructor

  mutable std::mutex access_mu_;  // guards opened_, access_order_
  std::vector<bool> opened_;
  std::vector<EntryId> access_order_;

  std::mutex ops_mu_;  // guards ops_, next_op_; taken before a ReadOp's own state (never inside)
  std::condition_variable_any ops_cv_;
  std::map<uint64_t, std::weak_ptr<ReadOp>> ops_;  // reads in flight, by id, for the watchdog
  uint64_t next_op_ = 0;
  std::jthread watchdog_;  // last member: stops and joins first
};

}  // namespace lazycache::fs
