package store

import (
	"context"
	"testing"
	"time"
)

// Peek reports a key's state and stored answer without counting a
// delivery: memory, and through Timed (the Redis store's is
// ledger.RedisStore's).
func TestPeek(t *testing.T) {
	stores := map[string]func(t *testing.T) Store{
		"memory": func(t *testing.T) Store { return NewMemory(MemoryOptions{}) },
		"timed": func(t *testing.T) Store {
			return NewTimed(NewMemory(MemoryOptions{}), func(string) Observer { return nopObserver{} })
		},
	}
	ctx := context.Background()
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			p := s.(Peeker)
			peek := func(want State) Outcome {
				t.Helper()
				st, out, err := p.Peek(ctx, "orders:k1")
				if err != nil || st != want {
					t.Fatalf("Peek = %v, %v; want %v", st, err, want)
				}
				return out
			}
			peek(Absent)
			c, err := s.Claim(ctx, "orders:k1", fp1, time.Minute)
			if err != nil || c.State != Claimed {
				t.Fatalf("Claim = %+v, %v", c, err)
			}
			peek(InFlight)
			want := Outcome{Status: 201, ContentType: "application/json", Body: []byte(`{"ok":1}`), Fingerprint: fp1}
			if err := s.Finish(ctx, "orders:k1", c.Token, want, time.Hour); err != nil {
				t.Fatal(err)
			}
			before := mustGet(t, s, "orders:k1")
			out := peek(Finished)
			if out.Status != 201 || string(out.Body) != `{"ok":1}` || out.ContentType != want.ContentType || out.Fingerprint != fp1 {
				t.Fatalf("Peek's outcome = %+v, want %+v", out, want)
			}
			if after := mustGet(t, s, "orders:k1"); after != before {
				t.Fatalf("Peek changed the key: %+v then %+v", before, after)
			}
		})
	}
}

const fp1 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
