# SPDX-License-Identifier: MIT
# bash completion for lazycache. Commands and options are read from the installed binary's own
# --help output, so new commands and options complete without editing this file.
# Needs nothing from the bash-completion package beyond being sourced.

_lazycache_commands() {
  LAZYCACHE_CONFIG= "${1:-lazycache}" --help 2>/dev/null |
    awk '/^commands:/ { f = 1; next } f && /^  [a-z]/ { print $1 } f && /^$/ { f = 0 }'
}

# Prints the options of command $2, one a line, with a
# trailing " VALUE" when it takes one, as "--output FILE".
_lazycache_options() {
  LAZYCACHE_CONFIG= "${1:-lazycache}" "$2" --help 2>/dev/null |
    awk '/^options:/ { f = 1; next } f && /^  -/ {
           line = substr($0, 3); cut = index(line, "  "); if (cut > 0) line = substr(line, 1, cut - 1)
           sub(/^-[a-zA-Z], /, "", line); print line }'
}

# The literal actions of command $2 from its usage line ("stats|gc|clear" for cache), one a
# line: an a|b|c word of lowercase names that is not the value of an option.
_lazycache_actions() {
  LAZYCACHE_CONFIG= "${1:-lazycache}" "$2" --help 2>/dev/null |
    awk 'NR == 1 && /^usage:/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+(\|[a-z]+)+$/ && $(i-1) !~ /^\[?-/) {
           n = split($i, a, "|"); for (j = 1; j <= n; j++) print a[j] } }'
}

_lazycache() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=""
  local bin=${COMP_WORDS[0]}
  [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}
  COMPREPLY=()
  if [ "$COMP_CWORD" -eq 1 ]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_lazycache_commands "$bin") --help --version" -- "$cur")
    return 0
  fi
  local cmd=${COMP_WORDS[1]} specs opt value_name
  specs=$(_lazycache_options "$bin" "$cmd")
  # The previous word is an option that takes a value: complete that value.
  if [[ $prev == --* ]]; then
    value_name=$(printf '%s\n' "$specs" | awk -v o="$prev" '$1 == o && NF > 1 { print $2 }')
    if [ -n "$value_name" ]; then
      case $value_name in
        FILE|PATH|DIR*) mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
        *'|'*)  # "auto|mount|extract", "SIZE|auto": offer the literal choices
          mapfile -t COMPREPLY < <(compgen -W "$(tr '|' '\n' <<<"$value_name" | grep -v '^[A-Z]')" -- "$cur") ;;
        *) ;;  # a key, a URL, a number: nothing sensible to offer
      esac
      return 0
    fi
  fi
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(printf '%s\n' "$specs" | awk '{ print $1 }')" -- "$cur")
    return 0
  fi
  # A command with actions (cache stats|gc|clear): offer them until one is given.
  local actions word
  actions=$(_lazycache_actions "$bin" "$cmd")
  if [ -n "$actions" ]; then
    for word in "${COMP_WORDS[@]:2:COMP_CWORD-2}"; do
      grep -qxF -- "$word" <<<"$actions" && actions=""
    done
    if [ -n "$actions" ]; then
      mapfile -t COMPREPLY < <(compgen -W "$actions" -- "$cur")
      return 0
    fi
  fi
  mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  return 0
}
complete -o filenames -o bashdefault -F _lazycache lazycache
