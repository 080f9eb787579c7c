// SPDX-License-Identifier: MIT
#include "format/dir_stack.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

namespace lazycache::format {

void DirStack::reset(const Index* index, int base_fd, EntryId top) {
  reset(Tree{[index](EntryId id) { return index->entry(id).parent; }, [index](EntryId id) { return std::string(index->entry(id).name); },
             index->root()},
        base_fd, top);
}

void DirStack::reset(Tree tree, int base_fd, EntryId top) {
  tree_ = std::move(tree);
  ready_ = true;
  base_fd_ = base_fd;
  levels_.clear();
  level_of_.clear();
  levels_.push_back(Level{top, nullptr});
  level_of_[top] = 0;
}

size_t DirStack::open_descriptors() const {
  return static_cast<size_t>(std::count_if(levels_.begin(), levels_.end(), [](const Level& l) { return l.valid(); }));
}

void DirStack::truncate(size_t size) {
  while (levels_.size() > size) {
    level_of_.erase(levels_.back().id);
    levels_.pop_back();
  }
}

Status DirStack::push(EntryId id, const Describe& what) {
  const int parent = fd_at(levels_.size() - 1);
  ++openat_calls_;
  if (create_missing_ && !(exists_ && exists_(id))) {
    const std::string name = tree_.name(id);
    if (::mkdirat(parent, name.c_str(), mode_ ? mode_(id) : 0700) != 0 && errno != EEXIST)
      return errno_status("creating directory for " + what());
  }
  LC_ASSIGN_OR_RETURN(Fd fd, open_dir_below(parent, {tree_.name(id)}, false, what()));
  level_of_[id] = levels_.size();
  levels_.push_back(Level{id, std::make_shared<const Fd>(std::move(fd))});
  // Leaving the window: keep only checkpoints, so a later jump back reopens few levels.
  if (levels_.size() > kWindow + 1) {
    const size_t out = levels_.size() - 1 - kWindow;
    if (out % kWindow != 0) levels_[out].fd.reset();  // closed once no open_shared() holder has it
  }
  return Status();
}

Status DirStack::reopen(size_t level, const Describe& what) {
  size_t from = level;
  while (from > 0 && !levels_[from].valid()) --from;
  for (size_t l = from + 1; l <= level; ++l) {
    ++openat_calls_;
    LC_ASSIGN_OR_RETURN(Fd fd, open_dir_below(fd_at(l - 1), {tree_.name(levels_[l].id)}, false, what()));
    levels_[l].fd = std::make_shared<const Fd>(std::move(fd));
  }
  return Status();
}

Result<int> DirStack::open(EntryId dir, const Describe& what) {
  if (!ready_) return Status(ErrorCode::kInternal, "DirStack used before reset");
  // Climb from `dir` to the nearest entry already on the stack (the common ancestor).
  std::vector<EntryId> down;
  EntryId e = dir;
  for (auto it = level_of_.find(e); it == level_of_.end(); it = level_of_.find(e)) {
    down.push_back(e);
    if (e == tree_.root) return Status(ErrorCode::kInternal, what() + ": not below the directory being walked");
    e = tree_.parent(e);
  }
  const size_t common = level_of_.at(e);
  truncate(common + 1);
  if (common > 0 && !levels_[common].valid()) LC_RETURN_IF_ERROR(reopen(common, what));
  for (auto it = down.rbegin(); it != down.rend(); ++it) LC_RETURN_IF_ERROR(push(*it, what));
  return fd_at(levels_.size() - 1);
}

Result<std::shared_ptr<const Fd>> DirStack::open_shared(EntryId dir, const Describe& what) {
  LC_RETURN_IF_ERROR(open(dir, what).status());
  Level& top = levels_.back();
  if (levels_.size() == 1 && !top.valid()) {
    int fd = ::fcntl(base_fd_, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return errno_status("duplicating the directory descriptor for " + what());
    top.fd = std::make_shared<const Fd>(fd);
  }
  return top.fd;
}

}  // namespace lazycache::format
