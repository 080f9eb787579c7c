// SPDX-License-Identifier: MIT
// File: format/dir_repeats.h -- which directory members a stream must hold again at its end so
// that stock tars restore every directory's metadata (mtime above all).
//
// When tar extracts a directory's member it sets the directory's metadata: GNU tar once
// extraction leaves the members that follow it inside the directory, bsdtar at the end if the
// member created the directory but at once if the directory already existed. Creating anything
// in the directory after that point (a file, a symlink, a new subdirectory; re-extracting a
// file unlinks and creates it again) sets its mtime to the extraction time. Layouts other than
// plain depth-first do that: a hot-first archive writes files before their directories (which
// then already exist at their member: bsdtar), an incremental archive writes changed files at
// the end, after their directory's member (both tars). The remedy is `tar --append`'s: the
// directory's member again after everything, when nothing is created in it any more.
#pragma once

#include <cstdint>
#include <vector>

#include "format/index_builder.h"

namespace lazycache::format {

// `stream`: the node of every member in stream order, superseded (dead) members included; a
// node's last member is its live one. Returns, in stream order of their live members, the
// directories whose live member is followed by a creation inside them while either the
// directory already existed at that member or the creation is not in the run of its own
// members right after it. Writing those members again at the end (the earlier ones becoming
// dead) fixes both tars: the directories exist then, so nothing is created in their parents.
// Pure. The top (node 0) and implicit directories have no member and are never returned.
std::vector<uint32_t> directories_to_repeat(const std::vector<IndexNode>& nodes, const std::vector<uint32_t>& stream);

}  // namespace lazycache::format
