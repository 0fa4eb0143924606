package store

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	cases := []Outcome{
		{},
		{Status: 200, ContentType: "application/json", Body: []byte(`{"ok":true}`), Fingerprint: fpA},
		{Status: 999, ContentType: "x/" + strings.Repeat("y", 1000), Body: bytes.Repeat([]byte{0xff}, 70000), Fingerprint: "custom"},
		{Status: 100, Fingerprint: strings.ToUpper(fpB)},
		{Status: 204, Fingerprint: fpB[:63] + "g"},
	}
	for _, want := range cases {
		rec, err := encodeRecord(nil, want)
		if err != nil {
			t.Fatalf("encode %+v: %v", want.Status, err)
		}
		if len(rec) != recordSize(want) {
			t.Fatalf("recordSize = %d, encoded %d", recordSize(want), len(rec))
		}
		got, err := decodeRecord(rec)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !sameOutcome(got, want) {
			t.Fatalf("round trip: got %+v, want %+v", got, want)
		}
	}
	// A canonical fingerprint costs 32 bytes, not 64.
	rec, _ := encodeRecord(nil, Outcome{Status: 200, Fingerprint: fpA})
	if len(rec) != recordHeader+32+1+1 {
		t.Fatalf("record with a canonical fingerprint is %d bytes", len(rec))
	}
}

func TestRecordRejects(t *testing.T) {
	for _, out := range []Outcome{
		{Status: -1},
		{Status: 1000},
		{Status: 200, Fingerprint: strings.Repeat("f", maxFingerprint+1)},
		{Status: 200, ContentType: strings.Repeat("t", maxContentType+1)},
	} {
		if _, err := encodeRecord(nil, out); err == nil {
			t.Fatalf("encoded an invalid outcome (status %d, %d-byte fingerprint, %d-byte type)", out.Status, len(out.Fingerprint), len(out.ContentType))
		}
	}
}

func TestDecodeRecordCorrupt(t *testing.T) {
	valid, _ := encodeRecord(nil, Outcome{Status: 200, ContentType: "text/plain", Body: []byte("hi"), Fingerprint: "fp"})
	for name, b := range map[string][]byte{
		"nil":           nil,
		"short":         {recordVersion, 0},
		"version 0":     append([]byte{0}, valid[1:]...),
		"flags":         append([]byte{recordVersion, 2}, valid[2:]...),
		"raw fp short":  {recordVersion, flagRawFP, 0, 200, 1, 2, 3},
		"status":        append([]byte{recordVersion, 0, 0x03, 0xe8}, valid[4:]...),
		"truncated":     valid[:len(valid)-1],
		"trailing":      append(append([]byte(nil), valid...), 'x'),
		"huge fp":       {recordVersion, 0, 0, 200, 0x81, 0x10},
		"huge type":     {recordVersion, 0, 0, 200, 0, 0x81, 0x10},
		"varint":        {recordVersion, 0, 0, 200, 0x80},
		"varint 64 bit": append([]byte{recordVersion, 0, 0, 200, 0, 0}, bytes.Repeat([]byte{0xff}, 9)...),
	} {
		if _, err := decodeRecord(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: decode = %v, want ErrCorrupt", name, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, out := range []Outcome{
		{Status: 200, ContentType: "application/json", Body: []byte(`{"id":1}`), Fingerprint: fpA},
		{Status: 422, ContentType: "text/plain; charset=utf-8", Body: []byte("bad"), Fingerprint: "legacy-fp"},
		{Status: 204},
	} {
		rec, err := encodeRecord(nil, out)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(rec)
	}
	f.Add([]byte{})
	f.Add([]byte{recordVersion, flagRawFP, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		out, err := decodeRecord(b)
		if !bytes.Equal(in, b) {
			t.Fatalf("decodeRecord modified its input")
		}
		owned, errOwned := decodeRecordOwned(append([]byte(nil), b...))
		if (err == nil) != (errOwned == nil) || (err == nil && !sameOutcome(out, owned)) {
			t.Fatalf("decodeRecordOwned disagrees: %+v, %v; decodeRecord: %+v, %v", owned, errOwned, out, err)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// Whatever decodes must encode and decode back to the same outcome.
		again, err := encodeRecord(nil, out)
		if err != nil {
			t.Fatalf("re-encoding a decoded record: %v", err)
		}
		if len(again) > len(b) {
			t.Fatalf("re-encoding grew the record from %d to %d bytes", len(b), len(again))
		}
		out2, err := decodeRecord(again)
		if err != nil || !sameOutcome(out, out2) {
			t.Fatalf("round trip changed the outcome: %+v, %v; want %+v", out2, err, out)
		}
		if len(out.Body) > 0 && len(b) > 0 && &out.Body[0] == &b[len(b)-len(out.Body)] {
			t.Fatalf("decoded body aliases the input")
		}
	})
}
