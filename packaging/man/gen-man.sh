#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gen-man.sh LAZYCACHE TEMPLATE VERSION OUT: writes lazycache(1) from TEMPLATE, replacing
# @COMMANDS@ with every registered command's summary, usage and options as printed by
# `LAZYCACHE --help` and `LAZYCACHE CMD --help` (so the page cannot drift from the binary).
# Writes OUT.tmp and renames it: a failure never leaves a half-written page.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 LAZYCACHE TEMPLATE VERSION OUT" >&2; exit 2; }
bin=$1 template=$2 version=$3 out=$4
export LAZYCACHE_CONFIG=  # the machine's settings file must not change what --help prints

# roff escapes: backslash first, then '-' as a real minus, and a leading '.' or "'" guarded.
roff() { sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }

commands=$("$bin" --help | awk '/^commands:/{f=1;next} f && /^  [a-z]/{print $1} f && /^$/{f=0}')
[ -n "$commands" ] || { echo "gen-man: '$bin --help' listed no commands" >&2; exit 1; }

body=$(mktemp)
trap 'rm -f "$body" "$out.tmp"' EXIT
for cmd in $commands; do
  summary=$("$bin" --help | awk -v c="$cmd" '$1 == c { $1 = ""; sub(/^ +/, ""); print; exit }')
  help=$("$bin" "$cmd" --help) || { echo "gen-man: '$bin $cmd --help' failed" >&2; exit 1; }
  # Some usages repeat "lazycache CMD" or span lines; keep the first line, without the repeat.
  usage=$(printf '%s\n' "$help" | sed -n 's/^usage: lazycache //p' | head -1 | sed "s/^$cmd lazycache $cmd /$cmd /")
  {
    printf '.SS %s\n' "$(printf '%s' "$usage" | roff)"
    printf '%s\n' "$(printf '%s' "$summary" | roff)."
    # Option lines: "  -o, --output FILE     help text" or a long left part with the help
    # on the next line (indented 30). Each becomes a .TP entry.
    printf '%s\n' "$help" | awk '
      function esc(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); return s }
      /^options:/ { inopt = 1; next }
      !inopt { next }
      /^  -/ {
        line = substr($0, 3)
        cut = index(line, "  ")
        if (cut > 0) { left = substr(line, 1, cut - 1); text = substr(line, cut) } else { left = line; text = "" }
        sub(/^ +/, "", text)
        # "--output FILE": the option bold, its value name italic.
        n = split(left, w, " ")
        if (n > 1 && w[n] ~ /^[A-Z][A-Z_|.]*$/) {
          opt = substr(left, 1, length(left) - length(w[n]) - 1)
          print ".TP"; print ".BI \"" esc(opt) " \" " esc(w[n])
        } else {
          print ".TP"; print ".B " esc(left)
        }
        if (text != "") print esc(text)
        next
      }
      /^ {8,}/ { t = $0; sub(/^ +/, "", t); print esc(t) }
    '
  } >> "$body"
done

date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(stat -c %Y "$template")}" +%Y-%m-%d)
awk -v body="$body" -v version="$version" -v date="$date" '
  /^@COMMANDS@$/ { while ((getline l < body) > 0) print l; next }
  { gsub(/@VERSION@/, version); gsub(/@DATE@/, date); print }
' "$template" > "$out.tmp"
mv "$out.tmp" "$out"
trap - EXIT
rm -f "$body"
