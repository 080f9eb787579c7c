// SPDX-License-Identifier: MIT
// File: tools/standard_streams.h -- making sure descriptors 0, 1 and 2 are open before anything
// else opens a file.
#pragma once

namespace lazycache::cli {

// Opens /dev/null on each of stdin, stdout and stderr that is closed. A process started with, say,
// stdout closed (CI runners, `cmd >&-`) would otherwise get descriptor 1 for the first file it
// opens -- an archive being written, a chunk-cache file -- and every progress line printed to
// std::cout would land inside it. Called first thing in main().
void open_closed_standard_streams();

}  // namespace lazycache::cli
