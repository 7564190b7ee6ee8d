#!/usr/bin/env bash
# The leaderboard's pull-request check (.github/workflows/leaderboard.yml runs it).
#
#   deploy/ci/audit-submission.sh BOARD_ROOT [CHANGED_PATHS_FILE]
#
# CHANGED_PATHS_FILE lists the paths the pull request changes, one a line (git diff --name-only):
# a submission adds data only (leaderboards/entries/, leaderboards/pinned/, leaderboards/datasets.json),
# so any other path is refused before anything runs. Then every entry of BOARD_ROOT is audited as the
# official board is (`nfnzoo leaderboard audit --require-verified`: seals, content hashes, pinned test
# metadata, every seed re-scored from its stored predictions). Nothing of the submitter's runs: the
# workflow checks out the base branch's code and takes only those data paths from the pull request.
# NFNZOO names the command to run (default: nfnzoo).
set -euo pipefail
root=${1:?usage: audit-submission.sh BOARD_ROOT [CHANGED_PATHS_FILE]}
changed=${2:-}
if [[ -n $changed ]]; then
  outside=$(grep -vE '^leaderboards/(entries/.+|pinned/[^/]+|datasets\.json)$' "$changed" | grep -v '^$' || true)
  if [[ -n $outside ]]; then
    echo "audit-submission: a submission changes only leaderboards/entries/, leaderboards/pinned/ and" \
         "leaderboards/datasets.json; this one also changes: $(echo "$outside" | head -5 | tr '\n' ' ')" >&2
    exit 1
  fi
fi
read -r -a command <<< "${NFNZOO:-nfnzoo}"
exec "${command[@]}" leaderboard audit --require-verified --root "$root"
