# The crates published to crates.io, in dependency order (sourced by the release
# checks). demo, benches, model and fuzz are publish = false.
PUBLISHED=(admit admit-http admit-tokio admit-smol admit-async-std admit-metrics admit-tower)

# The directory of each published crate, by name.
crate_dir() {
  case "$1" in
    admit) echo core ;;
    admit-*) echo "adapters/${1#admit-}" ;;
  esac
}

# Copies the workspace's sources (not its build output) to a fresh temporary
# directory and prints its path: the checks that rewrite manifests or the lock file
# work there, never on the developer's tree.
scratch_copy() {
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/admit-ci.XXXXXX")
  tar --exclude=./target --exclude='./target-*' --exclude=./fuzz --exclude=./.git \
    --exclude=./mutants.out --exclude='./mutants.out.*' -cf - . | tar -xf - -C "$dir"
  echo "$dir"
}

# `-p` flags for every published crate.
published_flags() {
  local c
  for c in "${PUBLISHED[@]}"; do printf -- '-p %s ' "$c"; done
}
