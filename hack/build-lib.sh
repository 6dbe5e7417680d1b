# Sourced by the hack/build-*.sh scripts: where builds are cached, and how
# one build of a binary is shared by whoever asks for it.

# $KUBESKILLS_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/kubeskills: outside
# the checkout, keyed by version, so a fresh clone on the machine reuses it.
cache=${KUBESKILLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeskills}

# once OUT COMMAND...: runs COMMAND, which makes OUT, unless OUT is there
# once OUT's own lock is held. Tests, the demo, make and CI's early build of
# the cluster may ask at the same time: whoever asks for a binary being built
# waits for that one build; a binary that is built, or another binary being
# built, makes no one wait.
once() {
  local out=$1
  shift
  [ -e "$out" ] && return
  mkdir -p "$(dirname "$out")"
  (
    flock 9
    [ -e "$out" ] || "$@"
  ) 9>"$out.lock"
}
