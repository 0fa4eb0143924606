package store

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// Helpers of the memory store's own tests (the conformance suite every
// store runs is package storetest's).

const (
	fpA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	fpB = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
)

func outcome(status int, body string) Outcome {
	return Outcome{Status: status, ContentType: "application/json", Body: []byte(body), Fingerprint: fpA}
}

func mustClaim(t *testing.T, s Store, key, fp string, ttl time.Duration, want State) Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), key, fp, ttl)
	if err != nil {
		t.Fatalf("Claim(%q): %v", key, err)
	}
	if c.State != want {
		t.Fatalf("Claim(%q) = %v, want %v (%+v)", key, c.State, want, c)
	}
	return c
}

func mustGet(t *testing.T, s Store, key string) KeyState {
	t.Helper()
	st, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return st
}

func sameOutcome(a, b Outcome) bool {
	return a.Status == b.Status && a.ContentType == b.ContentType &&
		bytes.Equal(a.Body, b.Body) && a.Fingerprint == b.Fingerprint
}
