// SPDX-License-Identifier: MIT
#include "tools/kernel_overlay.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/posix_files.h"

namespace lazycache::cli {

KernelOverlayDirs kernel_overlay_dirs(const std::string& state_dir) {
  return {state_dir + "/lower", state_dir + "/upper", state_dir + "/work"};
}

bool is_kernel_overlay_state(const std::string& state_dir) {
  struct stat st;
  return !state_dir.empty() && ::stat(kernel_overlay_dirs(state_dir).lower.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Status prepare_kernel_overlay(const KernelOverlayDirs& dirs, const fs::Attr& root) {
  // mount(2) takes the options as one string split at commas (and lowerdir at colons); a path
  // holding either, or a backslash, would be cut in the wrong place.
  for (const std::string* p : {&dirs.lower, &dirs.upper, &dirs.work}) {
    if (p->find_first_of(",:\\") != std::string::npos)
      return Status(ErrorCode::kUnsupported, "the overlay's directory " + *p + " holds a comma, colon or backslash");
  }
  for (const std::string* p : {&dirs.lower, &dirs.upper, &dirs.work}) LC_RETURN_IF_ERROR(make_dirs(*p));
  if (!list_dir(dirs.upper).empty()) return Status();  // the job's changes so far: left as they are
  if (::lchown(dirs.upper.c_str(), root.uid, root.gid) != 0) return errno_status("chown " + dirs.upper);
  if (::chmod(dirs.upper.c_str(), root.mode & 07777) != 0) return errno_status("chmod " + dirs.upper);
  const timespec mtime{static_cast<time_t>(root.mtime_ns / 1000000000), static_cast<long>(root.mtime_ns % 1000000000)};
  const timespec times[2] = {mtime, mtime};
  if (::utimensat(AT_FDCWD, dirs.upper.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) return errno_status("utimensat " + dirs.upper);
  return Status();
}

Status mount_kernel_overlay(const KernelOverlayDirs& dirs, const std::string& target) {
  const std::string options = "lowerdir=" + dirs.lower + ",upperdir=" + dirs.upper + ",workdir=" + dirs.work +
                              ",redirect_dir=on,metacopy=off,index=off";
  // volatile first (see the header); a kernel before 5.10 does not know it (EINVAL), and the
  // overlay is then mounted without it.
  int rc = ::mount(kKernelOverlaySource, target.c_str(), "overlay", 0, (options + ",volatile").c_str());
  if (rc != 0 && errno == EINVAL) rc = ::mount(kKernelOverlaySource, target.c_str(), "overlay", 0, options.c_str());
  if (rc != 0) {
    const int err = errno;
    const std::string what = "kernel overlay at " + target;
    if (err == EPERM) return Status(ErrorCode::kPermissionDenied, what + ": mounting overlayfs needs root");
    if (err == ENODEV) return Status(ErrorCode::kUnsupported, what + ": this kernel has no overlayfs");
    // EINVAL: an upper file system overlayfs refuses (no d_type, no trusted xattrs, no
    // RENAME_WHITEOUT), or options this kernel does not know.
    if (err == EINVAL || err == EOPNOTSUPP) return Status(ErrorCode::kUnsupported, what + ": " + std::strerror(err) + " (see dmesg)");
    return errno_status(what, err);
  }
  // The overlay holds its own reference to the FUSE mount: detached here, it ends with the overlay.
  if (::umount2(dirs.lower.c_str(), MNT_DETACH) != 0) {
    const int err = errno;
    (void)::umount2(target.c_str(), MNT_DETACH);
    return errno_status("detaching " + dirs.lower + " under the kernel overlay", err);
  }
  return Status();
}

}  // namespace lazycache::cli
