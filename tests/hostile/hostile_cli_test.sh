#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/hostile/hostile_cli_test.sh LAZYCACHE LC_MAKE_HOSTILE: every hostile archive through the
# CLI. Cases refused at open must make `ls`, `verify` and `extract` exit non-zero with a message
# holding the reason; cases refused at read must fail `verify` and `extract`; `extract` cases must
# fail `extract`. Every extract runs in CASE/target beside CASE/outside/sentinel: nothing may
# appear outside the target. A case about one entry (refused at open or at extract) must name
# it by its quoted path, and no message may hold a raw control character.
set -u
cli=$1; gen=$2
tmp=$(mktemp -d /tmp/lc-hostile-cli-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$gen" "$tmp" || { echo "lc-make-hostile failed"; exit 1; }
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect_refusal() {  # NAME CMD REASON ARGS...
  local name=$1 cmd=$2 reason=$3; shift 3
  local out rc
  out=$(timeout 60 "$cli" "$cmd" "$@" 2>&1); rc=$?
  if [ $rc -eq 124 ]; then fail "$name: $cmd hung"; return; fi
  if [ $rc -eq 0 ]; then fail "$name: $cmd exited 0"; return; fi
  if [ $rc -ge 128 ]; then fail "$name: $cmd crashed (exit $rc): $out"; return; fi
  if [ -n "$reason" ] && ! grep -qiF -- "$reason" <<<"$out"; then fail "$name: $cmd message lacks '$reason': $out"; fi
  # A case about one entry: the message names it by its quoted, escaped path.
  if [ -n "$entry" ] && ! grep -qF -- "/$entry'" <<<"$out"; then fail "$name: $cmd message does not name '$entry': $out"; fi
  if LC_ALL=C grep -q '[[:cntrl:]]' <<<"$out"; then fail "$name: $cmd message holds a raw control character"; fi
}
# Fields may be empty: split on a non-whitespace separator (IFS would merge adjacent tabs).
while IFS=$'\037' read -r name at reason entry attack; do
  f=$tmp/$name.tar.zst
  d=$tmp/case-$name
  mkdir -p "$d/target" "$d/outside"; echo untouched > "$d/outside/sentinel"
  case $at in
    open)
      expect_refusal "$name" ls "$reason" "$f"
      expect_refusal "$name" verify "$reason" "$f"
      expect_refusal "$name" extract "$reason" -C "$d/target" "$f" ;;
    read)
      expect_refusal "$name" verify "$reason" "$f"
      expect_refusal "$name" extract "$reason" -C "$d/target" "$f" ;;
    extract)
      expect_refusal "$name" extract "$reason" -C "$d/target" "$f" ;;
    never)
      out=$(timeout 120 "$cli" extract -C "$d/target" "$f" 2>&1); rc=$?
      [ $rc -eq 124 ] && fail "$name: extract hung"
      [ $rc -ge 128 ] && [ $rc -ne 124 ] && fail "$name: extract crashed: $out" ;;
  esac
  [ "$(ls -A "$d")" = "$(printf 'outside\ntarget')" ] || fail "$name: something appeared beside the target: $(ls -A "$d")"
  [ "$(ls -A "$d/outside")" = "sentinel" ] || fail "$name: the outside directory changed"
done < <(tr '\t' '\037' < "$tmp/manifest.tsv")
echo "$fails failures"
[ $fails -eq 0 ]
