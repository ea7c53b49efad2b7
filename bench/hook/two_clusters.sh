# Sourced by run.sh and syscalls.sh (after test/lib/pg.sh): their two throwaway clusters' directory.
# two_cluster_workdir: work, A and B (the clusters' directories under it), started (the clusters to stop:
# append each one started), everything stopped and removed on exit; die().
two_cluster_workdir() {
  work=$(pg_tmpdir)
  A="$work/a"
  B="$work/b"
  started=()
  trap two_clusters_cleanup EXIT
  trap 'exit 130' INT TERM
}

two_clusters_cleanup() {
  local d
  for d in "${started[@]}"; do pg_stop "$d" immediate; done
  rm -rf "$work"
}

die() { echo "${0##*/}: $*" >&2; exit 1; }
