#!/usr/bin/env bash
# Transaction crash test: SIGKILLs the transaction coordinator (3 brokers), a data partition's
# leader (3 brokers) and a whole single broker at named points of commits and aborts and at
# random delays, N cycles per kind, and checks after each cycle and at the end that every
# transaction is all-or-nothing across its partitions, that read_committed never sees an aborted
# record, that no transaction hangs (LSO = HW within the transaction timeout + slack) and that
# transactional group offsets agree with the output. The tests are broker/txn_crash_test.go
# (see its comment and docs/transactions.md, "Crash tests"); the crash points are the broker's
# WEIR_TEST_FAULT_DIR hook (broker/faultpoints.go), which the tests set.
#
#   scripts/txn-crash.sh                  # 50 cycles of each kind
#   scripts/txn-crash.sh 60 leader        # 60 cycles, one kind (coordinator | leader | broker)
#
# Environment: WEIR_TXN_CRASH_SEED fixes the random choices (each run prints its seed).
# Prints one TXN-CRASH summary line per kind; the full log is kept in $TMPDIR.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cycles="${1:-50}"
kinds="${2:-coordinator leader broker}"
declare -A tests=([coordinator]=TestClusterTxnCoordinatorKill [leader]=TestClusterTxnLeaderKill [broker]=TestTxnSingleBrokerKill)
cd "$root"
status=0
for kind in $kinds; do
	test="${tests[$kind]:-}"
	if [[ -z "$test" ]]; then
		echo "unknown kind $kind: want coordinator, leader or broker" >&2
		exit 2
	fi
	log="$(mktemp "${TMPDIR:-/tmp}/weir-txn-crash-$kind.XXXXXX")"
	start=$(date +%s)
	if WEIR_TXN_KILL_CYCLES="$cycles" go test -count=1 -v -timeout $((10 + cycles))m -run "^${test}\$" ./broker/ >"$log" 2>&1; then
		result=PASS
	else
		result=FAIL
		status=1
	fi
	summary="$(grep -o 'TXN-CRASH .*' "$log" || true)"
	echo "$kind: $result in $(($(date +%s) - start)) s: ${summary:-no summary (see $log)}"
	[[ $result == PASS ]] || grep -E 'txn_crash_test.go:[0-9]+: (kind|cycle [0-9]+: the|partition|c[0-9]+|group|read_uncommitted|TxnOffsetCommit|transaction coordinators)' "$log" | tail -5
	echo "  log: $log"
done
exit $status
