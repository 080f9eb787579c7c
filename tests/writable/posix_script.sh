#!/bin/bash
# SPDX-License-Identifier: MIT
# The POSIX behaviour script of the writable-mount tests: run in a directory holding the tree of
# tests/fs/fs_test_util.h make_node_like_tree (node_modules/pkg-N/...), it makes every kind of
# change a tool makes and prints one line per step (exit status, message, result). Run on a
# lazycache mount and on a plain copy of the same tree, the two outputs must be identical.
# Usage: posix_script.sh DIR
set -u
cd "$1" || exit 1
export LC_ALL=C
NM=node_modules

step() {  # step CMD ARGS...: exit status and output of one command
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  echo "[$*] rc=$rc ${out//$'\n'/ | }"
}
py() { python3 -c "$1"; }

# Reading and writing archive files (copy-up), inode numbers across copy-up.
ino_before=$(stat -c %i $NM/pkg-0/lib/big.bin)
step head -c 64 $NM/pkg-0/index.js
step sh -c "printf XYZ | dd of=$NM/pkg-0/lib/big.bin bs=1 seek=70000 conv=notrunc status=none"
[ "$ino_before" = "$(stat -c %i $NM/pkg-0/lib/big.bin)" ] && echo "inode kept across the first write" || echo "inode changed by the first write"
step sh -c "dd if=$NM/pkg-0/lib/big.bin bs=1 skip=69998 count=7 status=none | od -c | head -1"
step truncate -s 10 $NM/pkg-1/index.js
step truncate -s 100000 $NM/pkg-2/index.js
step sh -c "cat $NM/pkg-1/index.js $NM/pkg-2/index.js | md5sum"
step sh -c "echo hello > $NM/pkg-3/index.js; cat $NM/pkg-3/index.js"

# O_APPEND from two descriptors.
step sh -c "exec 3>>$NM/pkg-4/package.json; echo a >&3; echo b >> $NM/pkg-4/package.json; echo c >&3; exec 3>&-; tail -c 6 $NM/pkg-4/package.json"

# Creating files and directories; errors of existing names.
step mkdir $NM/new-dir
step mkdir $NM/new-dir
step mkdir $NM/pkg-5
step sh -c "echo fresh > $NM/new-dir/fresh.txt && cat $NM/new-dir/fresh.txt"
step sh -c "set -o noclobber; echo x > $NM/new-dir/fresh.txt"
step touch $NM/pkg-5/new-empty

# Renames: over an existing file, to a new name, whole archive directories, and the errors.
step mv -f $NM/pkg-5/index.js $NM/pkg-5/package.json
step mv $NM/pkg-6 $NM/renamed-6
step ls $NM/renamed-6 $NM/renamed-6/lib
step cat $NM/pkg-6/package.json
step mv $NM/renamed-6/lib $NM/renamed-6/lib/inner
step mv -T $NM/pkg-7 $NM/pkg-8
step python3 -c "import os; os.rename('$NM/pkg-9/index.js', '$NM/pkg-9/lib')"
step python3 -c "import os; os.rename('$NM/pkg-9/lib', '$NM/pkg-9/index.js')"
step python3 -c "import os; os.rename('$NM/pkg-11/lib', '$NM/pkg-0/empty-dir'); print(sorted(os.listdir('$NM/pkg-0/empty-dir')))"
step mv $NM/new-dir $NM/pkg-12/moved-new-dir

# Deleting: files, whole archive trees, non-empty directories; re-creating deleted names.
step rm $NM/pkg-1/package.json
step cat $NM/pkg-1/package.json
step rmdir $NM/pkg-2
step rm $NM/pkg-2
step rm -r $NM/pkg-2
step ls $NM/pkg-2
step mkdir $NM/pkg-2
step ls -A $NM/pkg-2
step sh -c "echo again > $NM/pkg-1/package.json && cat $NM/pkg-1/package.json"

# Links, modes, owners, times, xattrs.
step ln -s ../pkg-3/index.js $NM/pkg-3/alias
step readlink $NM/pkg-3/alias
step cat $NM/pkg-3/alias
step ln $NM/pkg-10/package.json $NM/pkg-10/hard.json
step sh -c "stat -c %h $NM/pkg-10/package.json; [ \$(stat -c %i $NM/pkg-10/package.json) = \$(stat -c %i $NM/pkg-10/hard.json) ] && echo same-inode"
step ln $NM/pkg-10 $NM/dir-link
step chmod 600 $NM/pkg-10/index.js
step stat -c %a $NM/pkg-10/index.js
step chmod 700 $NM/pkg-10/lib
step stat -c %a $NM/pkg-10/lib
step chown 1234:5678 $NM/pkg-4/index.js
step stat -c %u:%g $NM/pkg-4/index.js
step touch -m -d @1234567890.5 $NM/pkg-4/index.js
step stat -c %Y $NM/pkg-4/index.js
step setfattr -n user.lc -v one $NM/pkg-4/index.js
step getfattr --only-values -n user.lc $NM/pkg-4/index.js
step setfattr -x user.lc $NM/pkg-4/index.js
step getfattr --only-values -n user.lc $NM/pkg-4/index.js

# Open-unlinked, fsync, mmap of a copied-up file.
step py "
import os
fd = os.open('$NM/pkg-3/lib/util.js', os.O_RDWR)
os.unlink('$NM/pkg-3/lib/util.js')
os.pwrite(fd, b'still-here', 0)
os.fsync(fd)
print(os.pread(fd, 10, 0), os.fstat(fd).st_nlink, os.path.exists('$NM/pkg-3/lib/util.js'))
os.close(fd)"
step py "
import mmap, os
fd = os.open('$NM/pkg-11/index.js', os.O_RDWR)
m = mmap.mmap(fd, 0)
m[0:4] = b'MMAP'
m.flush(); m.close(); os.close(fd)
print(open('$NM/pkg-11/index.js', 'rb').read()[:6])"

# A listing while the directory changes: every name present before and after is seen once.
step py "
import os
d = '$NM/pkg-12'
for i in range(20): open(f'{d}/f{i}', 'w').close()
seen = []
with os.scandir(d) as it:
    for n, e in enumerate(it):
        seen.append(e.name)
        if n == 2:
            for i in range(20, 40): open(f'{d}/f{i}', 'w').close()
            os.unlink(f'{d}/f0')
stable = [f'f{i}' for i in range(1, 20)]
print(all(seen.count(s) == 1 for s in stable), len(set(seen)) == len(seen))"

# The final tree: every entry's type, mode, size, links and content.
echo "== tree"
find . -mindepth 1 \( -type d -printf '%y %m %p\n' \) -o \( -printf '%y %m %s %n %p %l\n' \) | sort
echo "== content"
find . -type f -print0 | sort -z | xargs -0 md5sum
