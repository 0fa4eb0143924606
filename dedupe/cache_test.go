package dedupe

import (
	"testing"
	"time"

	"github.com/clawgate/clawgate/store"
)

// A delivery that began before a reset cannot put its outcome back into
// the window after the reset; one that began after it can.
func TestCacheAddRefusedAfterAReset(t *testing.T) {
	c := NewCache(10, time.Minute)
	out := store.Outcome{Status: 200, Fingerprint: "fp"}
	before := c.Gen()
	c.Remove("r:k") // the operator's reset reaches this instance
	if c.Add("r:k", out, 1, before) {
		t.Fatal("an outcome from before the reset was added")
	}
	if _, ok := c.Get("r:k"); ok {
		t.Fatal("window holds a pre-reset outcome")
	}
	if !c.Add("r:k", out, 1, c.Gen()) {
		t.Fatal("an outcome from after the reset was refused")
	}
	if e, ok := c.Get("r:k"); !ok || e.Attempts.Load() != 1 {
		t.Fatalf("window entry %v %v", e, ok)
	}
}

// A second local copy shares the first copy's Flight, and counts on it.
func TestCacheBeginSharesTheFlight(t *testing.T) {
	c := NewCache(10, time.Minute)
	f, ok := c.Begin("r:k")
	if !ok {
		t.Fatal("first Begin refused")
	}
	f.Attempts.Store(3)
	g, ok := c.Begin("r:k")
	if ok || g != f || g.Attempts.Add(1) != 4 {
		t.Fatalf("second Begin: %v %v", ok, g == f)
	}
	c.End("r:k")
	if _, ok := c.Begin("r:k"); !ok {
		t.Fatal("Begin after End refused")
	}
}
