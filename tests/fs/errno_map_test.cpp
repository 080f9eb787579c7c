// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <cerrno>

#include "fs/errno_map.h"

using lazycache::ErrorCode;
using lazycache::Status;
using lazycache::fs::errno_for;

TEST_CASE("every error code maps to an errno, ok to 0", "[unit]") {
  CHECK(errno_for(ErrorCode::kOk) == 0);
  for (int c = 1; c <= static_cast<int>(ErrorCode::kTimeout); ++c) {
    INFO("code " << c);
    CHECK(errno_for(static_cast<ErrorCode>(c)) > 0);
  }
  CHECK(errno_for(ErrorCode::kNotFound) == ENOENT);
  CHECK(errno_for(ErrorCode::kPreconditionFailed) == ESTALE);
  CHECK(errno_for(ErrorCode::kUnavailable) == EIO);
  CHECK(errno_for(ErrorCode::kTimeout) == EIO);
  CHECK(errno_for(ErrorCode::kCorrupt) == EIO);
  CHECK(errno_for(ErrorCode::kCancelled) == EINTR);
  CHECK(errno_for(ErrorCode::kUnsupported) == EOPNOTSUPP);
}

TEST_CASE("kIo keeps the errno it carries", "[unit]") {
  CHECK(errno_for(Status(ErrorCode::kIo, "disk", ENOSPC)) == ENOSPC);
  CHECK(errno_for(Status(ErrorCode::kIo, "no errno")) == EIO);
  CHECK(errno_for(Status(ErrorCode::kNotFound, "x", EPERM)) == ENOENT);
}
