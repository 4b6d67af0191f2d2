# shellcheck shell=bash
# add_to_channel TEMPLATE PACKAGE CHANNEL NEW PREV [RANGE]: append the entry PACKAGE.vNEW, replacing
# PACKAGE.vPREV (none when PREV is empty) and skipping RANGE (if given), to CHANNEL's entries in an opm
# basic catalog template, in place. Returns 2 when the template has no such channel, 3 when NEW is already in it.
# Sourced by hack/release.sh (cutting a release) and hack/images/olm.sh (the e2e's synthetic next
# release), so both edit the template the same way.
add_to_channel() {
  local template=$1 pkg=$2 tmp rc=0
  tmp=$(mktemp)
  awk -v ch="$3" -v new="$pkg.v$4" -v prev="${5:+$pkg.v$5}" -v range="${6:-}" '
    function emit() {
      if (inch && !done) {
        print "  - name: " new
        if (prev != "") print "    replaces: " prev
        if (range != "") print "    skipRange: \x27" range "\x27"
        done = 1
      }
    }
    /^- schema:/ { emit(); inch = 0 }
    /^- schema: olm.channel$/ { chan = 1 }
    /^  name: / && chan { inch = ($2 == ch); chan = 0 }
    $0 ~ "^  - name: " new "$" && inch { dup = 1 }
    { print }
    END { emit(); if (dup) exit 3; if (!done) exit 2 }
  ' "$template" > "$tmp" || rc=$?
  if [ "$rc" = 0 ]; then mv "$tmp" "$template"; else rm -f "$tmp"; fi
  return "$rc"
}
