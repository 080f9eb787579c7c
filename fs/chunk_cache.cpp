// SPDX-License-Identifier: MIT
#include "fs/chunk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <lmdb.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <optional>
#include <shared_mutex>

#include "common/byte_format.h"
#include "fs/chunk_cache_check.h"
#include "fs/local_files.h"

namespace lazycache::fs {
namespace {

// 1 GiB of address space for the metadata: a row pair is ~150 bytes, so this indexes millions of
// chunks (terabytes of cache). The file itself only grows as pages are used.
constexpr size_t kMapSizeBytes = 1ull << 30;
// Reader slots: FUSE threads + fetch threads per mount, times every mount on the runner.
constexpr unsigned kMaxReaders = 1024;
// Hits are written to the LRU table in batches of this many (one write transaction each).
constexpr size_t kLruBatch = 256;
// gc() leaves younger files alone: they may be a put() between rename and row insert.
constexpr int64_t kOrphanGraceSeconds = 60;
constexpr int64_t kTempGraceSeconds = 3600;
// The free-space floor by default: 5 % of the filesystem, at most 1 GiB (chunk_cache.h).
constexpr uint64_t kFloorPercent = 5;
constexpr uint64_t kFloorCapBytes = 1ull << 30;
// The lock file is allocated to at least this size before LMDB maps it: LMDB sizes it
// (maxreaders - 1) * 64-byte reader slots + a 192-byte header; a page of slack on top.
constexpr uint64_t kLockFileBytes = kMaxReaders * 64ull + 4096;

Result<struct statvfs> fs_stat(const std::string& dir) {
  struct statvfs st;
  if (::statvfs(dir.c_str(), &st) != 0) return errno_status("statvfs " + dir);
  return st;
}

// LMDB maps the lock file shared and writes reader slots through the mapping. If the file's
// pages have no blocks behind them (LMDB only ftruncates it) and the filesystem is full, such a
// write is SIGBUS, which would kill the daemon; an allocated file cannot fail that way.
Status preallocate_lock_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status("chunk cache: create " + path);
  struct stat st;
  Status s;
  if (::fstat(fd, &st) != 0) {
    s = errno_status("chunk cache: stat " + path);
  } else {
    const auto size = std::max<off_t>(st.st_size, static_cast<off_t>(kLockFileBytes));
    // fallocate(2), not posix_fallocate: glibc's fallback for filesystems without it writes
    // into a file other processes may be using through their mappings.
    if (::fallocate(fd, 0, 0, size) != 0 && errno != EOPNOTSUPP) {
      s = errno_status("chunk cache: allocating the LMDB lock file " + path + " (" + human_bytes(static_cast<uint64_t>(size)) + ")");
    }
  }
  ::close(fd);
  return s;
}

Status lmdb_status(int rc, const std::string& what) {
  ErrorCode code = ErrorCode::kInternal;
  if (rc == ENOSPC || rc == MDB_MAP_FULL) code = ErrorCode::kResourceExhausted;
  else if (rc == EACCES) code = ErrorCode::kPermissionDenied;
  else if (rc == MDB_CORRUPTED || rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH) code = ErrorCode::kCorrupt;
  else if (rc > 0) code = ErrorCode::kIo;
  return Status(code, "chunk cache: " + what + ": " + mdb_strerror(rc), rc > 0 ? rc : 0);
}

// A transaction that aborts unless committed. It holds the cache's resize mutex shared for
// its whole life (ChunkCache::env_mu_).
class Txn {
 public:
  Txn() = default;
  Txn(Txn&& o) noexcept : txn_(o.txn_), resize_lock_(std::move(o.resize_lock_)), watch_(o.watch_) { o.txn_ = nullptr; }
  Txn& operator=(Txn&&) = delete;
  ~Txn() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
  }
  // `watch`: a write transaction's commit tells it (fs/chunk_cache_check.h OwnWritesWatch).
  static Result<Txn> begin(MDB_env* env, std::shared_mutex& resize_mu, bool write, OwnWritesWatch* watch = nullptr) {
    Txn t;
    t.watch_ = write ? watch : nullptr;
    t.resize_lock_ = std::shared_lock(resize_mu);
    int rc = mdb_txn_begin(env, nullptr, write ? 0 : MDB_RDONLY, &t.txn_);
    if (rc == MDB_MAP_RESIZED) {
      // Another process grew the map: adopt its size, with no transaction of ours live (lmdb.h:
      // mdb_env_set_mapsize is undefined while one is). No thread holds two transactions.
      t.txn_ = nullptr;
      t.resize_lock_.unlock();
      {
        std::unique_lock exclusive(resize_mu);
        mdb_env_set_mapsize(env, 0);
      }
      t.resize_lock_.lock();
      rc = mdb_txn_begin(env, nullptr, write ? 0 : MDB_RDONLY, &t.txn_);
    }
    if (rc != 0) {
      t.txn_ = nullptr;
      return lmdb_status(rc, "begin transaction");
    }
    return t;
  }
  Status commit() {
    if (watch_ != nullptr) watch_->before_commit();
    int rc = mdb_txn_commit(txn_);
    txn_ = nullptr;
    if (watch_ != nullptr) watch_->after_commit();
    return rc == 0 ? Status() : lmdb_status(rc, "commit");
  }
  MDB_txn* get() const { return txn_; }

 private:
  MDB_txn* txn_ = nullptr;
  std::shared_lock<std::shared_mutex> resize_lock_;
  OwnWritesWatch* watch_ = nullptr;
};

struct DigestKey {
  unsigned char bytes[16];
  explicit DigestKey(const Digest128& d) {
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(d.low >> (8 * i));
    for (int i = 0; i < 8; ++i) bytes[8 + i] = static_cast<unsigned char>(d.high >> (8 * i));
  }
  MDB_val val() { return MDB_val{sizeof(bytes), bytes}; }
};

Digest128 digest_from_key(const unsigned char* p) {
  Digest128 d;
  for (int i = 7; i >= 0; --i) d.low = (d.low << 8) | p[i];
  for (int i = 7; i >= 0; --i) d.high = (d.high << 8) | p[8 + i];
  return d;
}

// lru key: sequence big-endian (so LMDB's memcmp order is oldest first), then the digest.
struct LruKey {
  unsigned char bytes[24];
  LruKey(uint64_t seq, const Digest128& d) {
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(seq >> (8 * (7 - i)));
    DigestKey k(d);
    std::memcpy(bytes + 8, k.bytes, 16);
  }
  MDB_val val() { return MDB_val{sizeof(bytes), bytes}; }
};

// chunks row, host byte order (the cache never leaves the machine).
struct Row {
  uint64_t size = 0;
  uint64_t seq = 0;
};

uint64_t get_meta(MDB_txn* txn, MDB_dbi dbi, const char* name) {
  MDB_val k{std::strlen(name), const_cast<char*>(name)}, v;
  uint64_t out = 0;
  if (mdb_get(txn, dbi, &k, &v) == 0 && v.mv_size == sizeof(out)) std::memcpy(&out, v.mv_data, sizeof(out));
  return out;
}

Status put_meta(MDB_txn* txn, MDB_dbi dbi, const char* name, uint64_t value) {
  MDB_val k{std::strlen(name), const_cast<char*>(name)}, v{sizeof(value), &value};
  int rc = mdb_put(txn, dbi, &k, &v, 0);
  return rc == 0 ? Status() : lmdb_status(rc, std::string("write ") + name);
}

std::optional<Row> get_row(MDB_txn* txn, MDB_dbi dbi, const Digest128& d) {
  DigestKey key(d);
  MDB_val k = key.val(), v;
  if (mdb_get(txn, dbi, &k, &v) != 0 || v.mv_size != sizeof(Row)) return std::nullopt;
  Row r;
  std::memcpy(&r, v.mv_data, sizeof(r));
  return r;
}

std::mutex& registry_mu() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, std::weak_ptr<ChunkCache>>& registry() {
  static std::map<std::string, std::weak_ptr<ChunkCache>> r;
  return r;
}

}  // namespace

std::string digest_hex(const Digest128& d) {
  static const char* kHex = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[15 - i] = kHex[(d.low >> (4 * i)) & 0xf];
    s[31 - i] = kHex[(d.high >> (4 * i)) & 0xf];
  }
  return s;
}

std::string ChunkCache::default_dir() {
  if (const char* env = std::getenv("LAZYCACHE_CACHE_DIR"); env != nullptr && *env != '\0') return env;
  if (geteuid() == 0) return "/var/cache/lazycache/chunks";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    return std::string(xdg) + "/lazycache/chunks";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/tmp") + "/.cache/lazycache/chunks";
}

Result<std::shared_ptr<ChunkCache>> ChunkCache::open(const ChunkCacheConfig& config) {
  if (config.dir.empty()) return Status(ErrorCode::kInvalidArgument, "chunk cache: empty directory");
  LC_RETURN_IF_ERROR(make_dirs(config.dir));
  LC_ASSIGN_OR_RETURN(std::string real, real_path(config.dir));
  std::lock_guard lock(registry_mu());
  if (auto existing = registry()[real].lock()) {
    uint64_t seen = existing->max_bytes_.load();
    while (seen < config.max_bytes && !existing->max_bytes_.compare_exchange_weak(seen, config.max_bytes)) {}
    return existing;
  }
  std::shared_ptr<ChunkCache> cache(new ChunkCache(real, config));
  LC_RETURN_IF_ERROR(cache->init(config).with_context("opening chunk cache " + real));
  registry()[real] = cache;
  return cache;
}

ChunkCache::ChunkCache(std::string dir, const ChunkCacheConfig& config)
    : dir_(std::move(dir)), max_bytes_(config.max_bytes), warn_(config.warn), now_(config.now), free_bytes_(config.free_bytes),
      after_evict_commit_(config.after_evict_commit) {
  if (!warn_) warn_ = [](const std::string& line) { std::cerr << "lazycache: " << line << "\n"; };
  if (!now_) now_ = [] { return CacheWriteBackoff::Clock::now(); };
  if (!free_bytes_) {
    free_bytes_ = [this]() -> Result<uint64_t> {
      LC_ASSIGN_OR_RETURN(struct statvfs st, fs_stat(dir_));
      return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
    };
  }
}

Status ChunkCache::init(const ChunkCacheConfig& config) {
  if (config.min_free_bytes) {
    min_free_ = *config.min_free_bytes;
  } else if (auto st = fs_stat(dir_); st.ok()) {
    min_free_ = std::min(static_cast<uint64_t>(st->f_blocks) * st->f_frsize / 100 * kFloorPercent, kFloorCapBytes);
  }
  LC_RETURN_IF_ERROR(make_dirs(dir_ + "/tmp"));
  LC_RETURN_IF_ERROR(make_dirs(dir_ + "/blobs"));
  // One mkdir per subdirectory (make_dirs() would try every parent again: 1,500 system calls on
  // each mount's path to ready).
  static const char* kHex = "0123456789abcdef";
  for (int i = 0; i < 256; ++i) {
    std::string sub = dir_ + "/blobs/" + kHex[i >> 4] + kHex[i & 15];
    if (::mkdir(sub.c_str(), 0755) != 0 && errno != EEXIST) return errno_status("mkdir " + sub);
  }
  // One process at a time checks the index and sets it aside: two that found the same damage
  // must not move the fresh index the first one created. (Where flock fails, the check still
  // runs; only that race is open.)
  const int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) ::flock(dir_fd, LOCK_EX);
  Status opened = open_checked_index();
  if (dir_fd >= 0) ::close(dir_fd);  // releases the lock
  return opened;
}

Status ChunkCache::open_checked_index() {
  const std::string index = dir_ + "/index.mdb";
  std::string problem, walked;  // why the index cannot be trusted; its identity when walked clean
  if (!checked_before(index)) {
    walked = identity_of(index);
    const IndexCheck check = check_index(index, kMapSizeBytes);
    if (check.damaged) problem = check.problem;
  }
  if (problem.empty()) {
    Status s = open_index();
    if (s.ok()) {
      mark_checked(index, walked.empty() && !checked_before(index) ? identity_of(index) : walked);
      own_writes_.trust_from_now();
      return s;
    }
    if (s.code() != ErrorCode::kCorrupt) return s;
    problem = s.message();
  }
  // The cache is disposable: keep the damaged file for inspection and start an empty one.
  LC_RETURN_IF_ERROR(set_index_aside(dir_));
  warn_(
      "chunk cache " + dir_ + ": index.mdb is damaged (" + problem +
      "); moved it aside as index.mdb.damaged and started an empty cache (frames are fetched from the store again; `lazycache cache gc` removes the old blobs)");
  LC_RETURN_IF_ERROR(open_index());
  mark_checked(index, identity_of(index));
  own_writes_.trust_from_now();
  return Status();
}

Status ChunkCache::open_index() {
  Status s = open_index_env();
  if (!s.ok() && env_ != nullptr) {
    mdb_env_close(env_);
    env_ = nullptr;
  }
  return s;
}

Status ChunkCache::open_index_env() {
  LC_RETURN_IF_ERROR(preallocate_lock_file(dir_ + "/index.mdb-lock"));
  int rc = mdb_env_create(&env_);
  if (rc != 0) return lmdb_status(rc, "create environment");
  mdb_env_set_mapsize(env_, kMapSizeBytes);
  mdb_env_set_maxreaders(env_, kMaxReaders);
  mdb_env_set_maxdbs(env_, 4);
  // NOTLS: read transactions are not tied to threads (FUSE and fetch threads come and go).
  // NOMETASYNC: one fsync per commit instead of two; a crash may lose the last commit, never
  // the structure, and a lost row only means a refetch.
  // Never MDB_WRITEMAP: it ftruncates the data file to the map size and writes through the
  // mapping, so a full disk would be SIGBUS instead of ENOSPC (chunk_cache.h).
  rc = mdb_env_open(env_, (dir_ + "/index.mdb").c_str(), MDB_NOSUBDIR | MDB_NOTLS | MDB_NOMETASYNC | MDB_NORDAHEAD, 0644);
  if (rc != 0) {
    mdb_env_close(env_);
    env_ = nullptr;
    return lmdb_status(rc, "open " + dir_ + "/index.mdb");
  }
  int dead = 0;
  mdb_reader_check(env_, &dead);  // slots of killed processes would pin old pages forever
  LC_ASSIGN_OR_RETURN(Txn txn, Txn::begin(env_, env_mu_, true, &own_writes_));
  MDB_dbi dbi;
  if ((rc = mdb_dbi_open(txn.get(), "chunks", MDB_CREATE, &dbi)) != 0) return lmdb_status(rc, "open chunks table");
  dbi_chunks_ = dbi;
  if ((rc = mdb_dbi_open(txn.get(), "lru", MDB_CREATE, &dbi)) != 0) return lmdb_status(rc, "open lru table");
  dbi_lru_ = dbi;
  if ((rc = mdb_dbi_open(txn.get(), "meta", MDB_CREATE, &dbi)) != 0) return lmdb_status(rc, "open meta table");
  dbi_meta_ = dbi;
  return txn.commit();
}

ChunkCache::~ChunkCache() {
  if (env_ == nullptr) return;
  ignore_error(flush(), "best effort at close: losing LRU hints only ages chunks");
  mdb_env_close(env_);
  own_writes_.mark_if_only_own();  // the next open need not walk what only this process wrote
}

std::string ChunkCache::blob_path(const Digest128& d) const {
  std::string hex = digest_hex(d);
  return dir_ + "/blobs/" + hex.substr(0, 2) + "/" + hex;
}

uint64_t ChunkCache::corrupt_removed() const {
  std::lock_guard lock(pending_mu_);
  return corrupt_removed_;
}

bool ChunkCache::contains(const Digest128& digest) {
  auto txn = Txn::begin(env_, env_mu_, false);
  if (!txn.ok()) return false;
  return get_row(txn->get(), dbi_chunks_, digest).has_value();
}

Result<ByteBuffer> ChunkCache::get(const Digest128& digest) {
  std::optional<Row> row;
  {
    LC_ASSIGN_OR_RETURN(Txn txn, Txn::begin(env_, env_mu_, false));
    row = get_row(txn.get(), dbi_chunks_, digest);
  }
  if (!row) return Status(ErrorCode::kNotFound, "chunk " + digest_hex(digest) + " not cached");
  std::string path = blob_path(digest);
  auto bytes = read_whole_file_bytes(path, row->size + 1);
  std::string damage;  // why the blob cannot be trusted; empty when it is good or just gone
  if (bytes.ok() && bytes->size() != row->size) {
    damage = std::to_string(bytes->size()) + " bytes where " + std::to_string(row->size) + " were stored";
  } else if (bytes.ok()) {
    XXH128_hash_t h = XXH3_128bits(bytes->data(), bytes->size());
    if (h.low64 != digest.low || h.high64 != digest.high) damage = "its bytes do not match their digest";
  }
  if (!bytes.ok() || !damage.empty()) {
    // Torn by a power loss, damaged on disk, removed by hand or by a concurrent eviction: a
    // miss, never bad bytes. A damaged blob is kCorrupt, so callers can count and log it.
    ignore_error(remove_row(digest), "the row is dropped again by gc() if this fails");
    if (bytes.ok()) ::unlink(path.c_str());
    std::lock_guard lock(pending_mu_);
    ++corrupt_removed_;
    if (damage.empty()) return Status(ErrorCode::kNotFound, "chunk " + digest_hex(digest) + " missing from the cache");
    return Status(ErrorCode::kCorrupt, "chunk cache blob " + path + " is damaged (" + damage + "); removed");
  }
  bool flush_now = false;
  {
    std::lock_guard lock(pending_mu_);
    pending_.push_back(digest);
    flush_now = pending_.size() >= kLruBatch;
  }
  if (flush_now) ignore_error(flush(), "LRU hints are advisory");
  return std::move(bytes).value();
}

Status ChunkCache::remove_row(const Digest128& d) {
  LC_ASSIGN_OR_RETURN(Txn txn, Txn::begin(env_, env_mu_, true, &own_writes_));
  auto row = get_row(txn.get(), dbi_chunks_, d);
  if (!row) return Status();
  DigestKey key(d);
  MDB_val k = key.val();
  mdb_del(txn.get(), dbi_chunks_, &k, nullptr);
  LruKey lk(row->seq, d);
  MDB_val lv = lk.val();
  mdb_del(txn.get(), dbi_lru_, &lv, nullptr);
  uint64_t total = get_meta(txn.get(), dbi_meta_, "total");
  LC_RETURN_IF_ERROR(put_meta(txn.get(), dbi_meta_, "total", total >= row->size ? total - row->size : 0));
  return txn.commit();
}

// Moves each pending hit to the young end of the LRU table, inside the caller's transaction.
static Status apply_hits(MDB_txn* txn, unsigned chunks, unsigned lru, unsigned meta, const std::vector<Digest128>& hits) {
  uint64_t seq = get_meta(txn, meta, "seq");
  for (const Digest128& d : hits) {
    auto row = get_row(txn, chunks, d);
    if (!row) continue;
    LruKey old_key(row->seq, d);
    MDB_val ok = old_key.val();
    mdb_del(txn, lru, &ok, nullptr);
    row->seq = ++seq;
    LruKey new_key(row->seq, d);
    MDB_val nk = new_key.val(), empty{0, nullptr};
    DigestKey dk(d);
    MDB_val k = dk.val(), v{sizeof(Row), &*row};
    int rc = mdb_put(txn, lru, &nk, &empty, 0);
    if (rc == 0) rc = mdb_put(txn, chunks, &k, &v, 0);
    if (rc != 0) return lmdb_status(rc, "record chunk use");
  }
  return put_meta(txn, meta, "seq", seq);
}

Status ChunkCache::flush() {
  std::vector<Digest128> hits;
  {
    std::lock_guard lock(pending_mu_);
    hits.swap(pending_);
  }
  if (hits.empty()) return Status();
  LC_ASSIGN_OR_RETURN(Txn txn, Txn::begin(env_, env_mu_, true, &own_writes_));
  LC_RETURN_IF_ERROR(apply_hits(txn.get(), dbi_chunks_, dbi_lru_, dbi_meta_, hits));
  return txn.commit();
}

Status ChunkCache::evict_locked(void* raw_txn, uint64_t target_bytes, std::vector<Digest128>& evicted, uint64_t& freed) {
  auto* txn = static_cast<MDB_txn*>(raw_txn);
  uint64_t total = get_meta(txn, dbi_meta_, "total");
  if (total <= target_bytes) return Status();
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, dbi_lru_, &cur);
  if (rc != 0) return lmdb_status(rc, "open lru cursor");
  MDB_val k, v;
  rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  while (rc == 0 && total > target_bytes) {
    if (k.mv_size == sizeof(LruKey::bytes)) {
      Digest128 d = digest_from_key(static_cast<const unsigned char*>(k.mv_data) + 8);
      if (auto row = get_row(txn, dbi_chunks_, d)) {
        DigestKey dk(d);
        MDB_val key = dk.val();
        mdb_del(txn, dbi_chunks_, &key, nullptr);
        total = total >= row->size ? total - row->size : 0;
        freed += row->size;
        ::unlink(blob_path(d).c_str());  // before the commit: see chunk_cache.h
        evicted.push_back(d);
      }
    }
    mdb_cursor_del(cur, 0);
    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
  mdb_cursor_close(cur);
  return put_meta(txn, dbi_meta_, "total", total);
}

bool ChunkCache::writes_paused() {
  const auto now = now_();
  std::lock_guard lock(write_mu_);
  return backoff_.paused(now);
}

uint64_t ChunkCache::writes_skipped() const {
  std::lock_guard lock(write_mu_);
  return writes_skipped_;
}

uint64_t ChunkCache::floor_evictions() const {
  std::lock_guard lock(write_mu_);
  return floor_evictions_;
}

Status ChunkCache::write_failed(const Status& failure) {
  bool started = false;
  std::chrono::seconds pause{};
  {
    const auto now = now_();
    std::lock_guard lock(write_mu_);
    started = backoff_.failed(now);
    pause = std::chrono::duration_cast<std::chrono::seconds>(backoff_.paused_until() - now);
  }
  if (started) {
    warn_("chunk cache " + dir_ + ": cannot store frames (" + failure.to_string() + "); not caching for " + std::to_string(pause.count()) +
          " s, then retrying with a growing pause (at most 5 min); reads are served from the store meanwhile");
  }
  return failure;
}

Result<ChunkCache::Room> ChunkCache::make_room(uint64_t size) {
  // The free space is read and the blob's bytes reserved under one lock: fetch threads writing
  // at once would each see the same free space and pass the floor together.
  auto probe = [&](uint64_t& free, uint64_t& need, uint64_t& others) -> bool {
    auto probed = free_bytes_();
    if (!probed.ok()) return true;  // unknown: the write itself will tell
    free = *probed > in_flight_ - size ? *probed - (in_flight_ - size) : 0;
    if (free >= size + min_free_) return true;
    need = size + min_free_ - free;
    // Other threads' blobs take room that the index's total does not show yet (being written:
    // statvfs sees part of them and in_flight_ all; renamed but not indexed: statvfs sees them).
    others = in_flight_ - size + unindexed_;
    return false;
  };
  uint64_t free = 0, need = 0, others = 0;
  {
    std::lock_guard lock(write_mu_);
    in_flight_ += size;
    if (probe(free, need, others)) return Room::kMade;
  }
  std::vector<Digest128> evicted;
  uint64_t freed = 0, total = 0;
  {
    auto txn = Txn::begin(env_, env_mu_, true, &own_writes_);
    if (!txn.ok()) {
      release(size);
      return txn.error();
    }
    {
      // Probed again under LMDB's writer lock, which every eviction and row insert holds: the
      // first probe may predate another thread's eviction (its room freed, its rows gone from
      // the total) and would take a disk with room for one full of other files.
      std::lock_guard lock(write_mu_);
      if (probe(free, need, others)) return Room::kMade;
    }
    total = get_meta(txn->get(), dbi_meta_, "total");
    if (total < need && others > 0) {
      // Short only because frames being stored at this moment are not in the index yet (and
      // in_flight_ counts the bytes statvfs already sees twice): skip this one frame. Pausing
      // here would stop caching for 30 s on a disk that has room once those rows are in.
      std::lock_guard lock(write_mu_);
      in_flight_ -= std::min(in_flight_, size);
      ++writes_skipped_;
      return Room::kBusy;
    }
    if (total < need) {
      // Evicting all of it would not make room: the disk is full of other files. Keep what we
      // have (it still serves hits) and pause.
      release(size);
      return Status(ErrorCode::kResourceExhausted,
                    "its filesystem has " + human_bytes(free) + " free, " + human_bytes(min_free_) +
                        " must stay free for other files, and the cache holds only " + human_bytes(total) + " to evict",
                    ENOSPC);
    }
    Status evicting = evict_locked(txn->get(), total - need, evicted, freed);
    if (evicting.ok()) evicting = txn->commit();
    if (!evicting.ok()) {
      release(size);
      return evicting;
    }
  }
  if (!evicted.empty() && after_evict_commit_) after_evict_commit_();
  bool first = false;
  {
    std::lock_guard lock(write_mu_);
    floor_evictions_ += evicted.size();
    // Probed once more, now that the evicted blobs are unlinked: one a reader still has open (a
    // chunk-cache hit read just before its eviction) keeps its bytes on the disk until it is
    // closed, so the room counted above may not be there yet. Skip this one frame rather than
    // write past the floor (cache_disk_full_test in a loaded clean-clone ctest: 217 KB past it).
    uint64_t free_now = 0, need_now = 0, others_now = 0;
    if (!probe(free_now, need_now, others_now)) {
      in_flight_ -= std::min(in_flight_, size);
      ++writes_skipped_;
      return Room::kBusy;
    }
    first = !floor_warned_;
    floor_warned_ = true;
  }
  if (first) {
    warn_("chunk cache " + dir_ + ": its filesystem has only " + human_bytes(free) + " free and " + human_bytes(min_free_) +
          " must stay free for other files: evicting older chunks to make room (the cache holds " + human_bytes(total - freed) +
          "; its bound is " + human_bytes(max_bytes()) + ")");
  }
  return Room::kMade;
}

void ChunkCache::release(uint64_t size) {
  std::lock_guard lock(write_mu_);
  in_flight_ -= std::min(in_flight_, size);
}

Status ChunkCache::insert_row(const Digest128& digest, uint64_t size) {
  std::vector<Digest128> hits;
  {
    std::lock_guard lock(pending_mu_);
    hits.swap(pending_);
  }
  std::vector<Digest128> evicted;
  uint64_t freed = 0;
  {
    LC_ASSIGN_OR_RETURN(Txn txn, Txn::begin(env_, env_mu_, true, &own_writes_));
    LC_RETURN_IF_ERROR(apply_hits(txn.get(), dbi_chunks_, dbi_lru_, dbi_meta_, hits));
    // Under LMDB's writer lock, as evictions unlink: a blob another process's eviction removed
    // after our rename gets no row (a miss later, never a row without its file).
    if (::access(blob_path(digest).c_str(), F_OK) != 0) return txn.commit();
    uint64_t seq = get_meta(txn.get(), dbi_meta_, "seq") + 1;
    Row row{size, seq};
    DigestKey dk(digest);
    MDB_val k = dk.val(), v{sizeof(row), &row};
    int rc = mdb_put(txn.get(), dbi_chunks_, &k, &v, MDB_NOOVERWRITE);
    if (rc == MDB_KEYEXIST) return txn.commit();  // another process stored it meanwhile
    if (rc != 0) return lmdb_status(rc, "insert chunk");
    LruKey lk(seq, digest);
    MDB_val lv = lk.val(), empty{0, nullptr};
    if ((rc = mdb_put(txn.get(), dbi_lru_, &lv, &empty, 0)) != 0) return lmdb_status(rc, "insert lru");
    LC_RETURN_IF_ERROR(put_meta(txn.get(), dbi_meta_, "seq", seq));
    LC_RETURN_IF_ERROR(put_meta(txn.get(), dbi_meta_, "total", get_meta(txn.get(), dbi_meta_, "total") + size));
    LC_RETURN_IF_ERROR(evict_locked(txn.get(), max_bytes(), evicted, freed));
    LC_RETURN_IF_ERROR(txn.commit());
  }
  if (!evicted.empty() && after_evict_commit_) after_evict_commit_();
  return Status();
}

Status ChunkCache::put(const Digest128& digest, std::span<const std::byte> bytes) {
  if (contains(digest)) {
    std::lock_guard lock(pending_mu_);
    pending_.push_back(digest);
    return Status();
  }
  {
    const auto now = now_();
    std::lock_guard lock(write_mu_);
    if (backoff_.paused(now)) {
      ++writes_skipped_;
      return Status(ErrorCode::kResourceExhausted, "chunk cache " + dir_ + ": writes paused after a failure");
    }
  }
  Result<Room> room = make_room(bytes.size());
  if (!room.ok()) return write_failed(room.error());
  if (*room == Room::kBusy) {
    return Status(ErrorCode::kResourceExhausted,
                  "chunk cache " + dir_ + ": frame not stored: the room is being taken by frames being stored");
  }
  uint64_t n;
  {
    std::lock_guard lock(pending_mu_);
    n = ++tmp_counter_;
  }
  const std::string tmp = dir_ + "/tmp/" + digest_hex(digest) + "." + std::to_string(getpid()) + "." + std::to_string(n);
  const std::string final_path = blob_path(digest);
  Status written = write_new_file(tmp, bytes).with_context("chunk cache");
  if (written.ok() && ::rename(tmp.c_str(), final_path.c_str()) != 0) {
    written = errno_status("chunk cache: rename " + tmp + " to " + final_path);
    ::unlink(tmp.c_str());
  }
  {
    // On disk now (statvfs counts it) but not in the index until insert_row, or not at all.
    std::lock_guard lock(write_mu_);
    in_flight_ -= std::min(in_flight_, bytes.size());
    if (written.ok()) unindexed_ += bytes.size();
  }
  if (!written.ok()) return write_failed(written);
  Status indexed = insert_row(digest, bytes.size());
  {
    std::lock_guard lock(write_mu_);
    unindexed_ -= std::min(unindexed_, bytes.size());
  }
  if (!indexed.ok()) {
    // No row names the blob (unless another process stored the same digest): remove it now
    // rather than leave gc() an orphan taking space on a disk that is likely full.
    if (!contains(digest)) ::unlink(final_path.c_str());
    return write_failed(indexed);
  }
  bool resumed = false;
  {
    std::lock_guard lock(write_mu_);
    resumed = backoff_.succeeded();
  }
  if (resumed) warn_("chunk cache " + dir_ + ": caching resumed");
  return Status();
}

Result<ChunkCacheStats> ChunkCache::stats() {
  LC_RETURN_IF_ERROR(flush());
  LC_ASSIGN_OR_RETURN(Txn txn, Txn::begin(env_, env_mu_, false));
  MDB_stat st;
  int rc = mdb_stat(txn.get(), dbi_chunks_, &st);
  if (rc != 0) return lmdb_status(rc, "stat");
  return ChunkCacheStats{st.ms_entries, get_meta(txn.get(), dbi_meta_, "total"), max_bytes()};
}

Result<ChunkCacheGcReport> ChunkCache::gc() {
  LC_RETURN_IF_ERROR(flush());
  ChunkCacheGcReport report;
  std::vector<Digest128> evicted;
  {
    LC_ASSIGN_OR_RETURN(Txn txn, Txn::begin(env_, env_mu_, true, &own_writes_));
    LC_RETURN_IF_ERROR(evict_locked(txn.get(), max_bytes(), evicted, report.bytes_freed));
    LC_RETURN_IF_ERROR(txn.commit());
  }
  if (!evicted.empty() && after_evict_commit_) after_evict_commit_();
  report.evicted_chunks = evicted.size();
  {
    std::lock_guard lock(write_mu_);
    backoff_.reset();  // room may have been freed: let the next put try
  }

  const int64_t now = std::time(nullptr);
  // Blobs without a row.
  for (const std::string& sub : list_dir(dir_ + "/blobs")) {
    for (const std::string& name : list_dir(dir_ + "/blobs/" + sub)) {
      std::string path = dir_ + "/blobs/" + sub + "/" + name;
      struct stat st;
      if (::stat(path.c_str(), &st) != 0 || now - st.st_mtime < kOrphanGraceSeconds) continue;
      Digest128 d;
      bool parsed = name.size() == 32;
      for (size_t i = 0; parsed && i < 32; ++i) {
        char c = name[i];
        int val = c >= '0' && c <= '9' ? c - '0' : (c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1);
        if (val < 0) parsed = false;
        else if (i < 16) d.low = (d.low << 4) | static_cast<uint64_t>(val);
        else d.high = (d.high << 4) | static_cast<uint64_t>(val);
      }
      if (parsed && contains(d)) continue;
      if (::unlink(path.c_str()) == 0) {
        ++report.orphan_files_removed;
        report.bytes_freed += static_cast<uint64_t>(st.st_size);
      }
    }
  }
  for (const std::string& name : list_dir(dir_ + "/tmp")) {
    std::string path = dir_ + "/tmp/" + name;
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && now - st.st_mtime >= kTempGraceSeconds && ::unlink(path.c_str()) == 0) {
      ++report.orphan_files_removed;
    }
  }
  // Rows whose blob is gone.
  std::vector<Digest128> missing;
  {
    LC_ASSIGN_OR_RETURN(Txn txn, Txn::begin(env_, env_mu_, false));
    MDB_cursor* cur = nullptr;
    if (mdb_cursor_open(txn.get(), dbi_chunks_, &cur) == 0) {
      MDB_val k, v;
      for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != 16) continue;
        Digest128 d = digest_from_key(static_cast<const unsigned char*>(k.mv_data));
        if (::access(blob_path(d).c_str(), F_OK) != 0) missing.push_back(d);
      }
      mdb_cursor_close(cur);
    }
  }
  for (const Digest128& d : missing) {
    if (::access(blob_path(d).c_str(), F_OK) == 0) continue;
    LC_RETURN_IF_ERROR(remove_row(d));
    ++report.missing_rows_removed;
  }
  return report;
}

Status ChunkCache::clear() {
  {
    std::lock_guard lock(pending_mu_);
    pending_.clear();
  }
  {
    LC_ASSIGN_OR_RETURN(Txn txn, Txn::begin(env_, env_mu_, true, &own_writes_));
    int rc = mdb_drop(txn.get(), dbi_chunks_, 0);
    if (rc == 0) rc = mdb_drop(txn.get(), dbi_lru_, 0);
    if (rc != 0) return lmdb_status(rc, "clear");
    LC_RETURN_IF_ERROR(put_meta(txn.get(), dbi_meta_, "total", 0));
    LC_RETURN_IF_ERROR(txn.commit());
  }
  for (const std::string& sub : list_dir(dir_ + "/blobs")) {
    for (const std::string& name : list_dir(dir_ + "/blobs/" + sub)) {
      ::unlink((dir_ + "/blobs/" + sub + "/" + name).c_str());
    }
  }
  std::lock_guard lock(write_mu_);
  backoff_.reset();
  return Status();
}

}  // namespace lazycache::fs
