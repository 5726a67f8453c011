# Sourced by the side-by-side benches (bench/side_by_side.sh, bench/paired_sweeps.sh): the code at commit "$baseline"
# checked out in a temporary git worktree "$base" (removed on exit), beside the working tree "$here", with this
# checkout's virtual environments linked in, so both trees run on the same packages.
here="$(pwd)"
base="$(mktemp -d)/base"
git worktree add -q --detach "$base" "$baseline"
trap 'git worktree remove --force "$base"' EXIT
for venv in .venv .venv-lmeval; do
  [ -d "$here/$venv" ] && ln -s "$here/$venv" "$base/$venv"
done
tree_name() { [ "$1" = "$here" ] && echo working-tree || echo "$baseline"; }
