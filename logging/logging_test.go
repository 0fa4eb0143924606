package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestSameLinesAsSlogJSONHandler: every record renders to the same JSON
// object as slog.JSONHandler's.
func TestSameLinesAsSlogJSONHandler(t *testing.T) {
	when := time.Date(2026, 11, 30, 4, 37, 0, 123456789, time.UTC)
	cases := []struct {
		name  string
		msg   string
		attrs []slog.Attr
		with  []slog.Attr
		group string
	}{
		{"access line", "delivery", []slog.Attr{slog.String("route", "orders"), slog.String("key", "evt_1"),
			slog.String("outcome", "forwarded"), slog.Int("status", 200), slog.Int64("attempt", 3),
			slog.Float64("duration_ms", 1.234), slog.String("request_id", "abc")}, nil, ""},
		{"escapes", "quote \" backslash \\ nl \n tab \t ctl \x01 html <&> ls \u2028 bad \xff utf8 é", []slog.Attr{
			slog.String("k\"ey", "v\x00\x1f\x7f"), slog.String("", "empty key")}, nil, ""},
		{"kinds", "kinds", []slog.Attr{slog.Bool("b", true), slog.Uint64("u", 1<<63), slog.Duration("d", 1500*time.Millisecond),
			slog.Time("t", when), slog.Any("err", errors.New("boom")), slog.Any("m", map[string]int{"a": 1}),
			slog.Float64("f", 1e21), slog.Float64("small", 0.000001), slog.Int("neg", -5)}, nil, ""},
		{"groups and with", "g", []slog.Attr{slog.Group("req", slog.String("method", "POST"), slog.Int("n", 1)),
			slog.Group("empty"), {}}, []slog.Attr{slog.String("component", "redis")}, "sub"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ours, theirs bytes.Buffer
			var h1 slog.Handler = NewHandler(&ours, slog.LevelDebug)
			var h2 slog.Handler = slog.NewJSONHandler(&theirs, &slog.HandlerOptions{Level: slog.LevelDebug})
			if tc.with != nil {
				h1, h2 = h1.WithAttrs(tc.with), h2.WithAttrs(tc.with)
			}
			if tc.group != "" {
				h1, h2 = h1.WithGroup(tc.group), h2.WithGroup(tc.group)
			}
			for _, h := range []slog.Handler{h1, h2} {
				r := slog.NewRecord(when, slog.LevelWarn, tc.msg, 0)
				r.AddAttrs(tc.attrs...)
				if err := h.Handle(context.Background(), r); err != nil {
					t.Fatal(err)
				}
			}
			var a, b any
			if err := json.Unmarshal(ours.Bytes(), &a); err != nil {
				t.Fatalf("our line is not JSON: %v\n%s", err, ours.String())
			}
			json.Unmarshal(theirs.Bytes(), &b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("lines differ:\nours   %s\nslog's %s", ours.String(), theirs.String())
			}
			if !strings.HasSuffix(ours.String(), "}\n") || strings.Count(ours.String(), "\n") != 1 {
				t.Fatalf("not one line: %q", ours.String())
			}
			// HandleAttrs, without a record, writes the same bytes.
			line := ours.String()
			ours.Reset()
			if err := h1.(*Handler).HandleAttrs(when, slog.LevelWarn, tc.msg, tc.attrs); err != nil {
				t.Fatal(err)
			}
			if ours.String() != line {
				t.Fatalf("HandleAttrs wrote\n%s\nHandle wrote\n%s", ours.String(), line)
			}
		})
	}
}

func TestLevel(t *testing.T) {
	h := NewHandler(io.Discard, slog.LevelWarn)
	if h.Enabled(context.Background(), slog.LevelInfo) || !h.Enabled(context.Background(), slog.LevelError) {
		t.Fatal("level not honoured")
	}
}

type countingWriter struct {
	mu     sync.Mutex
	writes int
	buf    bytes.Buffer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	return c.buf.Write(p)
}

func TestBufferedBatchesAndFlushesOnClose(t *testing.T) {
	cw := &countingWriter{}
	b := NewBuffered(cw, time.Hour, 1024) // the interval never fires here
	log := slog.New(NewHandler(b, nil))
	for i := 0; i < 100; i++ {
		log.Info("delivery", "n", i)
	}
	b.Close()
	lines := strings.Split(strings.TrimSpace(cw.buf.String()), "\n")
	if len(lines) != 100 {
		t.Fatalf("%d lines, want 100", len(lines))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("line cut: %q", l)
		}
	}
	if cw.writes >= 100 || cw.writes == 0 {
		t.Fatalf("%d writes for 100 lines: not batched", cw.writes)
	}
	// A line larger than the buffer goes straight through.
	cw2 := &countingWriter{}
	b2 := NewBuffered(cw2, time.Hour, 16)
	b2.Write([]byte(strings.Repeat("x", 100) + "\n"))
	b2.Close()
	if cw2.buf.Len() != 101 {
		t.Fatalf("big line: %d bytes", cw2.buf.Len())
	}
}

func TestBufferedFlushesOnItsInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the interval passes in the bubble's fake time
		cw := &countingWriter{}
		b := NewBuffered(cw, time.Minute, 1<<20)
		defer b.Close()
		written := func() int {
			cw.mu.Lock()
			defer cw.mu.Unlock()
			return cw.buf.Len()
		}
		b.Write([]byte("line\n"))
		synctest.Wait()
		if n := written(); n != 0 {
			t.Fatalf("%d bytes written before the interval passed, want 0", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := written(); n != 5 {
			t.Fatalf("%d bytes written once the interval passed, want 5", n)
		}
	})
}

func BenchmarkAccessLine(b *testing.B) {
	for _, tc := range []struct {
		name string
		h    slog.Handler
	}{{"logging", NewHandler(io.Discard, nil)}, {"slog.JSONHandler", slog.NewJSONHandler(io.Discard, nil)}} {
		b.Run(tc.name, func(b *testing.B) {
			log := slog.New(tc.h)
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				log.LogAttrs(ctx, slog.LevelInfo, "delivery",
					slog.String("route", "orders"), slog.String("key", "evt_1234567890"),
					slog.String("outcome", "replayed"), slog.Int("status", 200), slog.Int64("attempt", 2),
					slog.Float64("duration_ms", 0.123), slog.String("method", "POST"),
					slog.String("path", "/webhook/order"), slog.String("request_id", "4bf92f3577b34da6a3ce929d0e0e4736"))
			}
		})
	}
	// The gateway's way: the attributes in an array, no record.
	b.Run("logging.HandleAttrs", func(b *testing.B) {
		h := NewHandler(io.Discard, nil)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			attrs := [...]slog.Attr{
				slog.String("route", "orders"), slog.String("key", "evt_1234567890"),
				slog.String("outcome", "replayed"), slog.Int("status", 200), slog.Int64("attempt", 2),
				slog.Float64("duration_ms", 0.123), slog.String("method", "POST"),
				slog.String("path", "/webhook/order"), slog.String("request_id", "4bf92f3577b34da6a3ce929d0e0e4736")}
			h.HandleAttrs(time.Now(), slog.LevelInfo, "delivery", attrs[:])
		}
	})
}

// A File reopened after its file was moved away (logrotate) writes to a
// new file at the path; the moved file keeps what came before.
func TestFileReopensAfterRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("one\n"))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("two\n")) // still the moved file
	if err := f.Reopen(path); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("three\n"))
	if err := f.Reopen(filepath.Join(dir, "missing", "x.log")); err == nil {
		t.Fatal("reopen in a missing directory succeeded")
	}
	f.Write([]byte("four\n")) // the failed reopen kept the file
	f.Close()
	if _, err := f.Write([]byte("five\n")); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	for p, want := range map[string]string{path + ".1": "one\ntwo\n", path: "three\nfour\n"} {
		got, _ := os.ReadFile(p)
		if string(got) != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
}
