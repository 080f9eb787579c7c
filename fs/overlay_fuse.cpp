// SPDX-License-Identifier: MIT
#include "fs/overlay_fuse.h"

#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "fs/errno_map.h"
#include "fs/fuse_reply.h"
#include "fs/overlay.h"

namespace lazycache::fs {
namespace {

// The writable table's userdata.
struct OverlayMount {
  OverlayMount(Overlay& o, FuseMountConfig c) : overlay(o), config(std::move(c)) {}
  Overlay& overlay;
  const FuseMountConfig config;
  RequestCounts requests;
};

OverlayMount& mount_of(fuse_req_t req) { return *static_cast<OverlayMount*>(fuse_req_userdata(req)); }
Overlay& overlay_of(fuse_req_t req) { return mount_of(req).overlay; }
void count(fuse_req_t req, FuseRequest r, uint64_t n = 1) { mount_of(req).requests.add(r, n); }

using fuse_reply::guarded;
using fuse_reply::reply_error;
void reply_status(fuse_req_t req, const Status& s) { fuse_reply_err(req, s.ok() ? 0 : errno_for(s)); }

Caller caller(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  return Caller{ctx->uid, ctx->gid, ctx->umask};
}

fuse_entry_param entry_param(fuse_req_t req, const OverlayEntry& e) {
  fuse_entry_param p;
  std::memset(&p, 0, sizeof(p));
  p.ino = e.ino;
  p.generation = 1;
  p.attr = e.st;
  p.attr_timeout = mount_of(req).config.timeout_seconds;
  p.entry_timeout = mount_of(req).config.timeout_seconds;
  return p;
}

// Late page-cache hand-off (Filesystem::note_known): a reply naming regular file `ino` was sent.
// Archive files keep their entry's number (fs/inode_numbers.h: N + 2); the hand-off's filter
// (Overlay::offer_to_page_cache) refuses inodes copied up or cut off before a change.
void note_known(Overlay& overlay, uint64_t ino, mode_t mode) {
  if (!S_ISREG(mode) || ino < 2 || ino - 2 >= overlay.lower().index().entry_count()) return;
  overlay.lower().note_known(static_cast<EntryId>(ino - 2));
}

void reply_entry(fuse_req_t req, const Result<OverlayEntry>& e) {
  if (!e.ok()) return reply_error(req, e.error());
  fuse_entry_param p = entry_param(req, *e);
  Overlay& overlay = overlay_of(req);                                    // `req` is gone once replied to
  if (fuse_reply_entry(req, &p) != 0) return overlay.forget(e->ino, 1);  // the caller went away
  note_known(overlay, e->ino, e->st.st_mode);
}

void op_init(void* userdata, fuse_conn_info* conn) {
  auto* m = static_cast<OverlayMount*>(userdata);
  conn->max_background = m->config.max_background;
  conn->congestion_threshold = m->config.max_background * 3 / 4;
  // Always readdirplus: `find`, `ls -l` and the save's scan then need no lookup round trip per
  // name (a writable mount's find over a node_modules took twice as long without it).
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  // The caller's umask is applied by the kernel before the mode reaches us.
  conn->want &= ~FUSE_CAP_DONT_MASK;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  count(req, FuseRequest::kLookup);
  guarded(req, [&] {
    auto e = overlay_of(req).lookup(parent, name);
    if (!e.ok() && e.error().code() == ErrorCode::kNotFound) {
      // A negative entry the kernel may keep: every name this mount gains comes through this
      // kernel mount (create, mkdir, symlink, link, rename), which replaces the negative dentry
      // itself; the overlay makes no name appear on its own (a copy-up keeps names, a renamed
      // directory's names move with it). A job's module resolution probes many missing names.
      fuse_entry_param neg;
      std::memset(&neg, 0, sizeof(neg));
      neg.entry_timeout = mount_of(req).config.timeout_seconds;
      return void(fuse_reply_entry(req, &neg));
    }
    reply_entry(req, e);
  });
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n) {
  count(req, FuseRequest::kForget);
  overlay_of(req).forget(ino, n);
  fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t n, fuse_forget_data* list) {
  count(req, FuseRequest::kForget, n);
  for (size_t i = 0; i < n; ++i) overlay_of(req).forget(list[i].ino, list[i].nlookup);
  fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  count(req, FuseRequest::kGetattr);
  guarded(req, [&] {
    auto st = overlay_of(req).getattr(ino);
    if (!st.ok()) return reply_error(req, st.error());
    fuse_reply_attr(req, &*st, mount_of(req).config.timeout_seconds);
  });
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  count(req, FuseRequest::kSetattr);
  guarded(req, [&] {
    SetAttr a;
    if (to_set & FUSE_SET_ATTR_MODE) a.mode = attr->st_mode;
    if (to_set & FUSE_SET_ATTR_UID) a.uid = attr->st_uid;
    if (to_set & FUSE_SET_ATTR_GID) a.gid = attr->st_gid;
    if (to_set & FUSE_SET_ATTR_SIZE) a.size = static_cast<uint64_t>(attr->st_size);
    if (to_set & FUSE_SET_ATTR_ATIME_NOW) a.atime = timespec{0, UTIME_NOW};
    else if (to_set & FUSE_SET_ATTR_ATIME) a.atime = attr->st_atim;
    if (to_set & FUSE_SET_ATTR_MTIME_NOW) a.mtime = timespec{0, UTIME_NOW};
    else if (to_set & FUSE_SET_ATTR_MTIME) a.mtime = attr->st_mtim;
    std::optional<uint64_t> handle;
    if (fi != nullptr) handle = fi->fh;
    auto st = overlay_of(req).setattr(ino, a, handle);
    if (!st.ok()) return reply_error(req, st.error());
    fuse_reply_attr(req, &*st, mount_of(req).config.timeout_seconds);
  });
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  count(req, FuseRequest::kReadlink);
  guarded(req, [&] {
    auto target = overlay_of(req).readlink(ino);
    if (!target.ok()) return reply_error(req, target.error());
    fuse_reply_readlink(req, target->c_str());
  });
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t) {
  count(req, FuseRequest::kNameChange);
  guarded(req, [&] { reply_entry(req, overlay_of(req).mknod(parent, name, mode, caller(req))); });
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  count(req, FuseRequest::kNameChange);
  guarded(req, [&] { reply_entry(req, overlay_of(req).mkdir(parent, name, mode, caller(req))); });
}

void op_symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  count(req, FuseRequest::kNameChange);
  guarded(req, [&] { reply_entry(req, overlay_of(req).symlink(target, parent, name, caller(req))); });
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char* name) {
  count(req, FuseRequest::kNameChange);
  guarded(req, [&] { reply_entry(req, overlay_of(req).link(ino, parent, name)); });
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  count(req, FuseRequest::kNameChange);
  guarded(req, [&] { reply_status(req, overlay_of(req).unlink(parent, name)); });
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  count(req, FuseRequest::kNameChange);
  guarded(req, [&] { reply_status(req, overlay_of(req).rmdir(parent, name)); });
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent, const char* new_name, unsigned int flags) {
  count(req, FuseRequest::kNameChange);
  guarded(req, [&] { reply_status(req, overlay_of(req).rename(parent, name, new_parent, new_name, flags)); });
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  count(req, FuseRequest::kOpen);
  guarded(req, [&] {
    bool keep = false;
    auto h = overlay_of(req).open(ino, fi->flags, &keep);
    if (!h.ok()) return reply_error(req, h.error());
    fi->fh = *h;
    fi->keep_cache = keep ? 1 : 0;
    Overlay& overlay = overlay_of(req);  // `req` is gone once replied to
    if (fuse_reply_open(req, fi) != 0) return overlay.release(*h);
    if (keep) note_known(overlay, ino, S_IFREG);  // keep: the archive's bytes (else cut off)
  });
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  count(req, FuseRequest::kCreate);
  guarded(req, [&] {
    auto r = overlay_of(req).create(parent, name, mode, fi->flags, caller(req));
    if (!r.ok()) return reply_error(req, r.error());
    fi->fh = r->second;
    fuse_entry_param p = entry_param(req, r->first);
    if (fuse_reply_create(req, &p, fi) != 0) {
      overlay_of(req).release(r->second);
      overlay_of(req).forget(r->first.ino, 1);
    }
  });
}

void op_read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  count(req, FuseRequest::kRead);
  guarded(req, [&] {
    overlay_of(req).read(fi->fh, static_cast<uint64_t>(off), size,
                         [req](Result<std::vector<ReadPiece>> r) { fuse_reply::reply_pieces(req, r); });
  });
}

void op_write(fuse_req_t req, fuse_ino_t, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  count(req, FuseRequest::kWrite);
  guarded(req, [&] {
    auto n = overlay_of(req).write(fi->fh, std::span<const char>(buf, size), static_cast<uint64_t>(off));
    if (!n.ok()) return reply_error(req, n.error());
    fuse_reply_write(req, *n);
  });
}

void op_fsync(fuse_req_t req, fuse_ino_t, int datasync, fuse_file_info* fi) {
  count(req, FuseRequest::kFsync);
  guarded(req, [&] { reply_status(req, overlay_of(req).fsync(fi->fh, datasync != 0)); });
}

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  count(req, FuseRequest::kRelease);
  overlay_of(req).release(fi->fh);
  fuse_reply_err(req, 0);
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  count(req, FuseRequest::kOpendir);
  guarded(req, [&] {
    auto h = overlay_of(req).open_dir(ino);
    if (!h.ok()) return reply_error(req, h.error());
    fi->fh = *h;
    if (fuse_reply_open(req, fi) != 0) overlay_of(req).release_dir(*h);
  });
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  count(req, FuseRequest::kReaddir);
  guarded(req, [&] {
    const std::vector<DirEntryInfo>* entries = overlay_of(req).listing(fi->fh);
    if (entries == nullptr) return void(fuse_reply_err(req, EBADF));
    // Not zeroed: only the first `used` bytes are sent, and the tree walk at mount lists thousands.
    auto buf = std::make_unique_for_overwrite<char[]>(size);
    size_t used = 0;
    auto add = [&](const char* name, uint64_t entry_ino, uint32_t type, off_t next) {
      struct stat st;
      std::memset(&st, 0, sizeof(st));
      st.st_ino = entry_ino;
      st.st_mode = type;
      const size_t n = fuse_add_direntry(req, buf.get() + used, size - used, name, &st, next);
      if (n > size - used) return false;
      used += n;
      return true;
    };
    // Offsets: 1 after ".", 2 after "..", 3 + i after entry i.
    if (off < 1 && !add(".", ino, S_IFDIR, 1)) return void(fuse_reply_buf(req, buf.get(), used));
    if (off < 2 && !add("..", ino, S_IFDIR, 2)) return void(fuse_reply_buf(req, buf.get(), used));
    for (size_t i = off < 3 ? 0 : static_cast<size_t>(off) - 2; i < entries->size(); ++i) {
      const DirEntryInfo& e = (*entries)[i];
      if (!add(e.name.c_str(), e.ino, e.type, static_cast<off_t>(i + 3))) break;
    }
    fuse_reply_buf(req, buf.get(), used);
  });
}

// Each listed name (but "." and "..") is a lookup the kernel counts, so it is remembered as one
// here; a name that does not fit the buffer, or a reply the kernel never got, is forgotten again.
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  count(req, FuseRequest::kReaddir);
  guarded(req, [&] {
    Overlay& overlay = overlay_of(req);
    const std::vector<DirEntryInfo>* entries = overlay.listing(fi->fh);
    if (entries == nullptr) return void(fuse_reply_err(req, EBADF));
    // Not zeroed: only the first `used` bytes are sent, and the tree walk at mount lists thousands.
    auto buf = std::make_unique_for_overwrite<char[]>(size);
    size_t used = 0;
    std::vector<uint64_t> counted;
    std::vector<uint64_t> files;  // regular files named, for the late hand-off after the reply
    auto add = [&](const char* name, fuse_entry_param& e, off_t next) {
      const size_t n = fuse_add_direntry_plus(req, buf.get() + used, size - used, name, &e, next);
      if (n > size - used) return false;
      used += n;
      return true;
    };
    auto add_dot = [&](const char* name, off_t next) {
      fuse_entry_param e;
      std::memset(&e, 0, sizeof(e));  // ino 0: the kernel counts no lookup for it
      e.attr.st_ino = ino;
      e.attr.st_mode = S_IFDIR;
      return add(name, e, next);
    };
    auto reply = [&] {
      if (fuse_reply_buf(req, buf.get(), used) != 0) {
        for (uint64_t i : counted) overlay.forget(i, 1);
        return;
      }
      for (uint64_t i : files) note_known(overlay, i, S_IFREG);
    };
    if (off < 1 && !add_dot(".", 1)) return reply();
    if (off < 2 && !add_dot("..", 2)) return reply();
    for (size_t i = off < 3 ? 0 : static_cast<size_t>(off) - 2; i < entries->size(); ++i) {
      auto looked = overlay.lookup(ino, (*entries)[i].name);
      if (!looked.ok()) continue;  // removed since the listing was taken
      fuse_entry_param e = entry_param(req, *looked);
      if (!add((*entries)[i].name.c_str(), e, static_cast<off_t>(i + 3))) {
        overlay.forget(looked->ino, 1);
        break;
      }
      counted.push_back(looked->ino);
      if (S_ISREG(looked->st.st_mode)) files.push_back(looked->ino);
    }
    reply();
  });
}

void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  count(req, FuseRequest::kReleasedir);
  overlay_of(req).release_dir(fi->fh);
  fuse_reply_err(req, 0);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) {
  count(req, FuseRequest::kFsync);
  fuse_reply_err(req, 0);
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  count(req, FuseRequest::kStatfs);
  guarded(req, [&] {
    auto st = overlay_of(req).statfs();
    if (!st.ok()) return reply_error(req, st.error());
    fuse_reply_statfs(req, &*st);
  });
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags) {
  count(req, FuseRequest::kXattr);
  guarded(req, [&] { reply_status(req, overlay_of(req).setxattr(ino, name, std::string_view(value, size), flags)); });
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  count(req, FuseRequest::kXattr);
  guarded(req, [&] {
    auto v = overlay_of(req).getxattr(ino, name);
    if (!v.ok()) return reply_error(req, v.error());
    fuse_reply::reply_xattr_value(req, size, *v);
  });
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  count(req, FuseRequest::kXattr);
  guarded(req, [&] {
    auto names = overlay_of(req).listxattr(ino);
    if (!names.ok()) return reply_error(req, names.error());
    fuse_reply::reply_xattr_names(req, size, *names);
  });
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  count(req, FuseRequest::kXattr);
  guarded(req, [&] { reply_status(req, overlay_of(req).removexattr(ino, name)); });
}

const fuse_lowlevel_ops* overlay_ops() {
  static const fuse_lowlevel_ops table = [] {
    fuse_lowlevel_ops o;
    std::memset(&o, 0, sizeof(o));
    o.init = op_init;
    o.lookup = op_lookup;
    o.forget = op_forget;
    o.forget_multi = op_forget_multi;
    o.getattr = op_getattr;
    o.setattr = op_setattr;
    o.readlink = op_readlink;
    o.mknod = op_mknod;
    o.mkdir = op_mkdir;
    o.symlink = op_symlink;
    o.link = op_link;
    o.unlink = op_unlink;
    o.rmdir = op_rmdir;
    o.rename = op_rename;
    o.open = op_open;
    o.create = op_create;
    o.read = op_read;
    o.write = op_write;
    // No flush handler: writes go straight to the upper file, so close() has nothing to flush,
    // and the kernel's ENOSYS fallback (never send FLUSH again) saves a round trip per close.
    o.fsync = op_fsync;
    o.release = op_release;
    o.opendir = op_opendir;
    o.readdir = op_readdir;
    o.readdirplus = op_readdirplus;
    o.releasedir = op_releasedir;
    o.fsyncdir = op_fsyncdir;
    o.statfs = op_statfs;
    o.setxattr = op_setxattr;
    o.getxattr = op_getxattr;
    o.listxattr = op_listxattr;
    o.removexattr = op_removexattr;
    return o;
  }();
  return &table;
}

}  // namespace

Result<std::unique_ptr<FuseMount>> mount_overlay(Overlay& overlay, FuseMountConfig config) {
  auto userdata = std::make_shared<OverlayMount>(overlay, config);
  RequestCounts* requests = &userdata->requests;
  auto m = FuseMount::mount(FuseOps{overlay_ops(), std::move(userdata), /*writable=*/true, requests}, std::move(config));
  // Archive files the overlay still serves go to the kernel's page cache as on a read-only
  // mount; the overlay refuses those copied up or about to change (fs/page_cache_gate.h).
  if (m.ok()) {
    (*m)->hand_off_page_cache(overlay.lower(), [&overlay](EntryId id, const std::function<bool(uint64_t)>& store) {
      return overlay.offer_to_page_cache(id, store);
    });
  }
  return m;
}

}  // namespace lazycache::fs
