#!/usr/bin/env bash
# The include graph follows the layers of docs/architecture.md: a file
# includes headers of its own layer or of layers below, never above. Prints
# every upward edge and fails if there is one; with --summary, the edges
# between layers too.
set -euo pipefail
cd "$(dirname "$0")/../.."

# layer number: folders (a folder not listed is an error, so that a new one gets a place)
layer_of() {
  case "$1" in
    engine/base/*) echo 0 ;;
    engine/packet/* | engine/flow/* | engine/export/* | engine/traffic/*) echo 1 ;;
    engine/core/* | engine/reload/*) echo 2 ;;
    dsl/*) echo 3 ;;
    engine/placement/* | engine/driver/*) echo 4 ;;
    engine/runtime/*) echo 5 ;;
    elements/*) echo 6 ;;
    engine/jit/*) echo 7 ;;
    engine/control/* | engine/probe/* | engine/cli/*) echo 8 ;;
    *) echo "?" ;;
  esac
}
names=(base libraries "core graph/IR" "front end" "plan (placement, lanes, driver)" runtime elements jit "probe (control, reload requests, CLI)")

upward=0 edges=0 unknown=0
declare -A between
while IFS= read -r file; do
  from=$(layer_of "$file")
  if [ "$from" = "?" ]; then echo "no layer for $file (add its folder to tests/layers/check_layers.sh)"; unknown=1; continue; fi
  while IFS= read -r inc; do
    [ -f "$inc" ] || continue  # same-folder or generated headers (parser.hh)
    to=$(layer_of "$inc")
    edges=$((edges + 1))
    between["$from>$to"]=$(( ${between["$from>$to"]:-0} + 1 ))
    if [ "$to" = "?" ] || [ "$to" -gt "$from" ]; then
      echo "upward: $file (${names[$from]}) includes $inc (${names[$to]:-?})"
      upward=$((upward + 1))
    fi
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$file")
done < <(git ls-files 'engine/*.cc' 'engine/*.hh' 'dsl/*.cc' 'dsl/*.hh' 'dsl/*.re' 'dsl/*.yy' 'elements/*.cc' 'elements/*.hh' |
         grep -v '^elements/plugins/')  # the plugin library is built against the installed SDK

if [ "${1:-}" = "--summary" ]; then
  for k in "${!between[@]}"; do
    f=${k%>*} t=${k#*>}
    [ "$f" != "$t" ] && printf '%6d  %s -> %s\n' "${between[$k]}" "${names[$f]}" "${names[$t]}"
  done | sort -k2
fi
echo "$edges includes between project files, $upward upward"
[ "$upward" -eq 0 ] && [ "$unknown" -eq 0 ]
