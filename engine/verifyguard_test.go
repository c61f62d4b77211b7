package engine

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestVerificationGuard: Kafka's VerificationGuard semantics in the producer state. A guard
// taken before a verification lets the transaction's first batch in; a marker written in
// between withdraws it (INVALID_TXN_STATE); a newer guard replaces an older one; once the
// transaction is ongoing no verification is needed (TxnOngoingGuard), and that answer is
// refused if the transaction ended before the append.
func TestVerificationGuard(t *testing.T) {
	l := openTxnLog(t, t.TempDir(), false)
	defer l.Close()
	const pid = 9

	g := l.StartTxnVerification(pid, 0)
	if g == NoVerificationGuard || g == TxnOngoingGuard {
		t.Fatalf("first guard %d", g)
	}
	mustMarker(t, l, pid, 0, false) // the transaction ends while the verification is in flight
	if _, err := l.AppendVerified(txnBatch(pid, 0, 0, 1), g); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("append with a withdrawn guard: %v, want INVALID_TXN_STATE", err)
	}
	if end := l.LogEndOffset(); end != 1 {
		t.Fatalf("log end %d, want only the marker", end)
	}

	old := l.StartTxnVerification(pid, 0)
	g = l.StartTxnVerification(pid, 0)
	if _, err := l.AppendVerified(txnBatch(pid, 0, 0, 1), old); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("append with a replaced guard: %v", err)
	}
	if _, err := l.AppendVerified(txnBatch(pid, 0, 0, 1), g); err != nil {
		t.Fatalf("append with the current guard: %v", err)
	}
	if got := l.StartTxnVerification(pid, 0); got != TxnOngoingGuard {
		t.Fatalf("guard with the transaction ongoing: %d, want TxnOngoingGuard", got)
	}
	if _, err := l.AppendVerified(txnBatch(pid, 0, 1, 1), TxnOngoingGuard); err != nil {
		t.Fatalf("append inside the ongoing transaction: %v", err)
	}
	mustMarker(t, l, pid, 0, true)
	if _, err := l.AppendVerified(txnBatch(pid, 0, 2, 1), TxnOngoingGuard); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("append with TxnOngoingGuard after the marker: %v", err)
	}
	// A plain Append (no verification configured) is not guarded.
	if _, err := l.Append(txnBatch(pid, 0, 2, 1)); err != nil {
		t.Fatalf("unguarded append: %v", err)
	}
	// A new epoch needs a new verification even while the old epoch's transaction is open.
	if got := l.StartTxnVerification(pid, 1); got == TxnOngoingGuard {
		t.Fatal("TxnOngoingGuard for another epoch")
	}
}

// TestVerificationGuardVersion2: with transaction version 2 a marker carries the epoch the
// coordinator bumped to, so the marker ending the transaction at epoch 0 comes at epoch 1: a
// guard taken for the producer's next transaction (epoch 1) before that marker landed stays
// valid, and the marker ending that transaction (epoch 2) withdraws it.
func TestVerificationGuardVersion2(t *testing.T) {
	l := openTxnLog(t, t.TempDir(), false)
	defer l.Close()
	const pid = 4
	g := l.StartTxnVerification(pid, 0)
	if _, err := l.AppendVerified(txnBatch(pid, 0, 0, 1), g); err != nil {
		t.Fatal(err)
	}
	next := l.StartTxnVerification(pid, 1) // the next transaction's Produce v12 races the markers
	if _, err := l.AppendMarker(pid, 1, 0, true, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendVerified(txnBatch(pid, 1, 0, 1), next); err != nil {
		t.Fatalf("next transaction's first batch: %v", err)
	}
	if _, err := l.AppendMarker(pid, 2, 0, false, 2); err != nil {
		t.Fatal(err)
	}
	late := l.StartTxnVerification(pid, 2)
	if _, err := l.AppendMarker(pid, 3, 0, false, 2); err != nil { // an abort (epoch bumped to 3) lands meanwhile
		t.Fatal(err)
	}
	if _, err := l.AppendVerified(txnBatch(pid, 2, 0, 1), late); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("append after the version 2 abort of its transaction: %v", err)
	}
}

// TestSequenceAfterVersion2Marker: a version 2 marker moves the producer to the bumped epoch
// with no batch; the next transaction's first batch must then start at sequence 0, as Kafka's
// checkSequence requires (a later batch arriving first is OUT_OF_ORDER_SEQUENCE_NUMBER).
func TestSequenceAfterVersion2Marker(t *testing.T) {
	l := openTxnLog(t, t.TempDir(), false)
	defer l.Close()
	const pid = 6
	mustAppend(t, l, txnBatch(pid, 0, 0, 3))
	if _, err := l.AppendMarker(pid, 1, 0, true, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(txnBatch(pid, 1, 5, 1)); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("epoch 1 starting at sequence 5: %v", err)
	}
	mustAppend(t, l, txnBatch(pid, 1, 0, 5))
	mustAppend(t, l, txnBatch(pid, 1, 5, 1))
}
