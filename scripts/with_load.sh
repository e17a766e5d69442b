#!/usr/bin/env bash
# with_load.sh N COMMAND...: run COMMAND with N CPU-bound processes beside it
# for the whole run (`make test LOAD=N`), to show that the suites hold on a
# loaded machine: a test that races a timer or a guess of elapsed time fails
# here first. The burners stop when COMMAND ends (or this script is
# stopped), and after CLAIMS_LOAD_MAX_SECONDS (default 4 hours) in any case.
# Exits with COMMAND's status.
set -u

N="${1:?usage: with_load.sh N COMMAND...}"
shift
[[ "$N" =~ ^[0-9]+$ ]] || { echo "with_load.sh: LOAD must be a number of processes, not '$N'" >&2; exit 2; }
MAX="${CLAIMS_LOAD_MAX_SECONDS:-14400}"
PIDS=()

# Stop the burners (EXIT trap).
# shellcheck disable=SC2317  # invoked by trap
stop_burners() {
    [ "${#PIDS[@]}" -gt 0 ] && kill "${PIDS[@]}" 2>/dev/null
    PIDS=()
}
trap stop_burners EXIT
trap 'exit 130' INT TERM

for ((i = 0; i < N; i++)); do
    timeout "$MAX" bash -c 'while :; do :; done' &
    PIDS+=("$!")
done
echo "with_load.sh: $N CPU-bound processes beside the run (pids ${PIDS[*]})"
"$@"
