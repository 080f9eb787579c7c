// SPDX-License-Identifier: MIT
// File: remote/testing/store_op.h -- StoreOp, the ObjectStore operations the test doubles count
// and fault by.
#pragma once

namespace lazycache::remote::testing {

enum class StoreOp : int { kHead = 0, kGetRange, kPut, kList, kRemove, kCount };

inline const char* store_op_name(StoreOp op) {
  switch (op) {
    case StoreOp::kHead: return "head";
    case StoreOp::kGetRange: return "get_range";
    case StoreOp::kPut: return "put";
    case StoreOp::kList: return "list";
    case StoreOp::kRemove: return "remove";
    case StoreOp::kCount: break;
  }
  return "?";
}

}  // namespace lazycache::remote::testing
