#!/usr/bin/env bash
# Compares the go test -bench suites at two revisions with benchstat.
#   scripts/bench-compare.sh OLD [NEW] [PKGS]     (NEW defaults to the working tree)
# COUNT (default 6) runs each, BENCH (default .) selects benchmarks, BENCHTIME (default 1s).
# Runs alternate between the two trees so machine noise hits both alike.
set -euo pipefail
old="${1:?usage: $0 OLD_REV [NEW_REV] [PKGS]}"
new="${2:-}"
pkgs="${3:-./segment/ ./engine/ ./index/ ./record/}"
count="${COUNT:-6}"
bench="${BENCH:-.}"
benchtime="${BENCHTIME:-1s}"
benchstat_version="v0.0.0-20260908200009-22c9c6c9d4da"
top="$(git rev-parse --show-toplevel)"
work="$(mktemp -d)"
trap 'git -C "$top" worktree remove --force "$work/old" >/dev/null 2>&1 || true; [[ -n "$new" ]] && git -C "$top" worktree remove --force "$work/new" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$top" worktree add -q --detach "$work/old" "$old"
newdir="$top"
if [[ -n "$new" ]]; then
  git -C "$top" worktree add -q --detach "$work/new" "$new"
  newdir="$work/new"
fi
for i in $(seq 1 "$count"); do
  for side in old new; do
    dir="$work/old"; [[ $side == new ]] && dir="$newdir"
    echo "run $i/$count: $side" >&2
    # shellcheck disable=SC2086
    (cd "$dir" && go test -p 1 -run '^$' -bench "$bench" -benchmem -benchtime "$benchtime" -count 1 $pkgs) \
      | grep -E '^(Benchmark|goos|goarch|pkg|cpu)' >>"$work/$side.txt"
  done
done
go run "golang.org/x/perf/cmd/benchstat@$benchstat_version" "old=$work/old.txt" "new=$work/new.txt"
