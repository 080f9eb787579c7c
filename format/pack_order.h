// SPDX-License-Identifier: MIT
// File: format/pack_order.h -- scanning a tree for packing and the member order of the packed
// tree, shared by write_archive and the incremental writer so both lay a tree out the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "format/archive_writer.h"
#include "format/index_builder.h"
#include "format/tar.h"
#include "format/tree_scan.h"

namespace lazycache::format {

// normalize_roots (against the current directory) + scan_tree, with every directory's children
// sorted bytewise by name. Errors: those of normalize_roots and scan_tree, kIo (getcwd).
Result<ScannedTree> scan_for_pack(const std::vector<PackRoot>& roots, XattrSet xattrs, const std::function<void(const std::string&)>& warn);

// Member order: `hot` nodes first (in the given order), then a depth-first walk with children
// in the order the model holds them. Implicit ancestor directories and the top (node 0) are not
// members. Pure; `hot` must hold valid, distinct node indices.
std::vector<uint32_t> member_order(const IndexModel& model, const std::vector<uint32_t>& hot);

// The node at archive path `path` ("root/.npm/a", relative to the top), if any. Children must be
// sorted bytewise by name.
std::optional<uint32_t> find_node(const IndexModel& model, const std::string& path);

// The regular-file nodes named by `paths`, in order, without repeats; other paths are ignored.
std::vector<uint32_t> resolve_hot_paths(const IndexModel& model, const std::vector<std::string>& paths);

// The tar member write_archive writes for `node` at archive path `path`: a hardlink to
// `hardlink_target` when it is given (a regular file whose data an earlier member holds), else
// by the node's type.
TarMember node_tar_member(const IndexNode& node, const std::string& path, const std::string* hardlink_target);

// After the data is written: every regular member of `order` takes its link group leader's data
// offset, digest and size, and nlink = the names of the group in the archive. Precondition:
// each node's link_group is its leader (itself if it holds its own data).
void share_hardlink_data(std::vector<IndexNode>& nodes, const std::vector<uint32_t>& order);

}  // namespace lazycache::format
