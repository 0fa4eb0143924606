package queue

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzShardOfID: reading the shard out of any id never panics, names only
// a shard that exists, and reads back what newEventID wrote.
func FuzzShardOfID(f *testing.F) {
	f.Add("0-0123456789abcdef01234567", 1)
	f.Add("3-0123456789abcdef01234567", 4)
	f.Add("4-0123456789abcdef01234567", 4)
	f.Add("-0123456789abcdef01234567", 4)
	f.Add("1-0123456789abcdef0123456", 2)
	f.Add("1-0123456789abcdef0123456g", 2)
	f.Add("", 0)
	f.Add("9999999999999999999999-0123456789abcdef01234567", 3)
	f.Fuzz(func(t *testing.T, id string, shards int) {
		s, ok := shardOfID(id, shards)
		if ok && (s < 0 || s >= shards) {
			t.Fatalf("shardOfID(%q, %d) = %d, outside [0, %d)", id, shards, s, shards)
		}
		if ok && !strings.Contains(id, "-") {
			t.Fatalf("shardOfID(%q) accepted an id without a dash", id)
		}
		if shards <= 0 {
			return
		}
		want := int(uint(len(id)) % uint(min(shards, 1<<16)))
		made := newEventID(want)
		got, ok := shardOfID(made, shards)
		if !ok || got != want {
			t.Fatalf("shardOfID(newEventID(%d) = %q, %d) = %d, %v", want, made, shards, got, ok)
		}
		if _, ok := shardOfID(made, want); ok {
			t.Fatalf("shardOfID(%q, %d) accepted shard %d of only %d", made, want, want, want)
		}
	})
}

// FuzzParseStreamID: a DLQ cursor never panics the parser, and what it
// accepts reads back the same and orders consistently.
func FuzzParseStreamID(f *testing.F) {
	for _, s := range []string{"0-0", "1700000000000-3", "18446744073709551615-18446744073709551615",
		"18446744073709551616-0", "-", "1-", "-1", "1", "a-b", "1-2-3", "+1-2", " 1-2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ms, seq, ok := parseStreamID(id)
		if !ok {
			return
		}
		canon := strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(seq, 10)
		ms2, seq2, ok2 := parseStreamID(canon)
		if !ok2 || ms2 != ms || seq2 != seq {
			t.Fatalf("%q parsed as %d-%d, whose canonical form %q parses as %d-%d (%v)", id, ms, seq, canon, ms2, seq2, ok2)
		}
		if streamIDLess(id, canon) || streamIDLess(canon, id) {
			t.Fatalf("%q and its canonical form %q order apart", id, canon)
		}
		if seq < ^uint64(0) {
			next := strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(seq+1, 10)
			if !streamIDLess(id, next) || streamIDLess(next, id) {
				t.Fatalf("%q does not order before %q", id, next)
			}
		}
	})
}
