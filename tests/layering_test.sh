#!/usr/bin/env bash
# Fails when a module includes a header from a module it must not depend on:
# format/ and remote/ know nothing of each other or of fs/ or tools/; fs/ never includes remote/.
set -u
cd "${1:-$(dirname "$0")/..}"
bad=0
check() {  # check DIR PATTERN WHY
  local hits
  hits=$(grep -rnE "#include \"($2)/" "$1" 2>/dev/null)
  if [ -n "$hits" ]; then echo "layering violation ($3):"; echo "$hits"; bad=1; fi
}
check common 'format|remote|fs|tools' "common/ is the bottom layer"
check format 'remote|fs|tools' "format/ depends only on common/"
check remote 'format|fs|tools' "remote/ depends only on common/"
check fs 'remote|tools' "fs/ builds on format/ and common/ only"
[ $bad -eq 0 ] && echo "layering ok"
exit $bad
