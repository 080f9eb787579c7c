// SPDX-License-Identifier: MIT
#include "tools/standard_streams.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace lazycache::cli {

void open_closed_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // The lowest free descriptor is `fd` itself (every lower one is open by now), so open() puts
    // /dev/null exactly there. Not O_CLOEXEC: children inherit sane standard streams too.
    int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) ::close(opened);  // cannot happen; never leak one
  }
}

}  // namespace lazycache::cli
