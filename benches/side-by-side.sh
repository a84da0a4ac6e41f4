#!/usr/bin/env bash
# The core at two commits in one bench binary: `new` and `old`, each a package of
# its own built alike (no features), neither of them the `admit` column.
#
#   benches/side-by-side.sh OLD [NEW] [-- ARGS]
#
# OLD and NEW are revisions (NEW defaults to the working tree). Two binaries are
# built, one with `new` listed first and packaged as `admit-a`, the other with
# `old` first and packaged as `admit-a`, so that neither a column's place nor a
# package's name favours one core; the runs alternate between them (ROUNDS, 2 by
# default). The arguments after `--` go to each run (default: the scenarios of a
# side by side, S1-S5, S7, S9-S12). Prints old ÷ new per row and run: above 1.00
# the new core is faster. Scratch workspaces go to $SIDE_DIR (default
# target/side-by-side); each keeps its own target directory.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
old=${1:?usage: benches/side-by-side.sh OLD [NEW] [-- ARGS]}
shift
new=
if [[ $# -gt 0 && $1 != -- ]]; then
    new=$1
    shift
fi
[[ ${1:-} == -- ]] && shift
args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(S1 S2 S3 S4 S5 S7 S9 S10 S11 S12)
dir=${SIDE_DIR:-$root/target/side-by-side}
rounds=${ROUNDS:-2}

# core_of REV DEST: the core at REV (the working tree if REV is empty).
core_of() {
    mkdir -p "$2"
    if [[ -z $1 ]]; then
        cp -r "$root/core/." "$2"
    else
        git -C "$root" archive "$1" core | tar -x -C "$2" --strip-components=1
    fi
}

# workspace NAME FIRST: a copy of the working tree's workspace with both cores,
# the FIRST one (new or old) as `admit-a` and listed first.
workspace() {
    local ws=$dir/$1 first=$2 a b
    if [[ $first == new ]]; then a=$new b=$old; else a=$old b=$new; fi
    rm -rf "$ws"
    mkdir -p "$ws"
    git -C "$root" ls-files -z | (cd "$root" && xargs -0 tar -c) | tar -x -C "$ws"
    core_of "$a" "$ws/core-a"
    core_of "$b" "$ws/core-b"
    sed -i 's/^name = "admit"$/name = "admit-a"/' "$ws/core-a/Cargo.toml"
    sed -i 's/^name = "admit"$/name = "admit-b"/' "$ws/core-b/Cargo.toml"
    sed -i 's/^members = \["core",/members = ["core", "core-a", "core-b",/' "$ws/Cargo.toml"
    sed -i 's|^admit = { path = "../core".*|&\nadmit-a = { path = "../core-a" }\nadmit-b = { path = "../core-b" }|' \
        "$ws/benches/Cargo.toml"
    local second=old
    [[ $first == new ]] || second=new
    cat >>"$ws/benches/src/peer.rs" <<EOF

macro_rules! side_peer {
    (\$ty:ident, \$krate:ident, \$name:literal) => {
        /// A core at another commit (benches/side-by-side.sh).
        #[derive(Debug)]
        pub struct \$ty(\$krate::Semaphore);
        impl Peer for \$ty {
            const NAME: &'static str = \$name;
            const WEIGHTED: bool = true;
            const PARKS: bool = true;
            const SEMAPHORE_SIZE: usize = size_of::<\$krate::Semaphore>();
            type Permit<'a> = \$krate::Permit<'a>;
            fn new(capacity: usize) -> Self {
                Self(\$krate::Semaphore::new(capacity))
            }
            fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
                self.0.try_acquire(units).ok()
            }
            fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_ {
                Expect(self.0.acquire(units))
            }
        }
    };
}
side_peer!(SideFirst, admit_a, "$first");
side_peer!(SideSecond, admit_b, "$second");
EOF
    sed -i 's|^        Box::new(Of::<Admit>::new()),|        Box::new(Of::<admit_benches::peer::SideFirst>::new()),\n        Box::new(Of::<admit_benches::peer::SideSecond>::new()),\n&|' \
        "$ws/benches/benches/peers.rs"
    (cd "$ws" && cargo bench -p admit-benches --bench peers --no-run --message-format=json 2>"$ws/build.log") |
        sed -n 's/.*"executable":"\([^"]*peers-[^"]*\)".*/\1/p' | tail -1 >"$ws/binary"
    [[ -s $ws/binary ]] || { echo "build of $ws failed: $ws/build.log" >&2; exit 1; }
}

workspace new-first new
workspace old-first old
for round in $(seq "$rounds"); do
    for ws in new-first old-first; do
        out=$dir/$ws-$round.txt
        "$(cat "$dir/$ws/binary")" --bench "${args[@]}" --peer new --peer old >"$out" 2>&1
        echo "== $ws, round $round"
        # The detail table's medians: | metric | peer | median unit | min | max | ...
        awk -F' *[|] *' '
            ($3 == "new" || $3 == "old") && $4 ~ / ns(\/op)?$/ { split($4, m, " "); v[$2, $3] = m[1]; if (!(($2) in seen)) { seen[$2] = 1; order[++n] = $2 } }
            END { for (i = 1; i <= n; i++) { k = order[i]; if (v[k, "new"] > 0 && v[k, "old"] != "")
                printf "%-60s %10s %10s %6.2fx\n", substr(k, 1, 60), v[k, "new"], v[k, "old"], v[k, "old"] / v[k, "new"] } }
        ' "$out"
    done
done
