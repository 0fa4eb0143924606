package kafka

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/kafkatest"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
)

// The config checks topic names with the suffixes it knows; they must be
// the backend's.
func TestTopicsMatchConfigSuffixes(t *testing.T) {
	b := &Backend{o: Options{TopicPrefix: "p."}}
	var want []string
	for _, s := range config.KafkaTopicSuffixes {
		want = append(want, "p.orders"+s)
	}
	if got := b.Topics("orders"); !slices.Equal(got, want) {
		t.Fatalf("Topics = %v, config expects %v", got, want)
	}
	longest := ""
	for _, s := range config.KafkaTopicSuffixes {
		if len(s) > len(longest) {
			longest = s
		}
	}
	if len(longest) != len(config.KafkaLongestTopicSuffix) {
		t.Fatalf("longest suffix %q, config.KafkaLongestTopicSuffix %q", longest, config.KafkaLongestTopicSuffix)
	}
}

func TestTierFor(t *testing.T) {
	for _, tc := range []struct {
		left time.Duration
		want time.Duration
	}{
		{0, time.Second},
		{20 * time.Millisecond, time.Second},
		{999 * time.Millisecond, time.Second},
		{time.Second, time.Second},
		{4900 * time.Millisecond, time.Second},
		{5 * time.Second, 5 * time.Second},
		{29 * time.Second, 5 * time.Second},
		{45 * time.Minute, 10 * time.Minute},
		{90 * time.Minute, time.Hour},
		{48 * time.Hour, 6 * time.Hour},
	} {
		t.Run(tc.left.String(), func(t *testing.T) {
			if got := tierFor(tc.left); got != tc.want {
				t.Fatalf("tierFor(%v) = %v, want %v", tc.left, got, tc.want)
			}
		})
	}
}

func TestTierNames(t *testing.T) {
	var got []string
	for _, d := range Tiers {
		got = append(got, tierName(d))
	}
	if want := []string{"1s", "5s", "30s", "2m", "10m", "1h", "6h"}; !slices.Equal(got, want) {
		t.Fatalf("tier names %v, want %v", got, want)
	}
}

// A record position comes back from the ledger (Redis): anything but
// "partition/offset" with both non-negative is refused, never a panic.
func FuzzParsePos(f *testing.F) {
	for _, s := range []string{"0/0", "3/12345", "", "/", "1/", "/1", "-1/0", "0/-1", "1/2/3", "2147483648/0", "x/y", "0/9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, off, ok := parsePos(s)
		if !ok {
			return
		}
		if p < 0 || off < 0 {
			t.Fatalf("parsePos(%q) = %d, %d accepted", s, p, off)
		}
		if q, o2, ok2 := parsePos(pos(p, off)); !ok2 || q != p || o2 != off {
			t.Fatalf("round trip of %q: %d/%d -> %d/%d %v", s, p, off, q, o2, ok2)
		}
	})
}

// create_topics: false on a cluster without the route's topics: Prepare
// fails with an error naming each missing topic, and nothing is created.
func TestPrepareNamesMissingTopics(t *testing.T) {
	kc := kafkatest.Start(t)
	b, err := New(Options{Brokers: kc.Addrs(), TopicPrefix: "strict.", Ledger: ledger.NewMemory(nil), Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	var perr error
	eventually(t, bound, func() bool {
		perr = b.Prepare(t.Context(), "orders", 1)
		return perr != nil && !errors.Is(perr, queue.ErrUnavailable)
	}, func() string { return fmt.Sprintf("Prepare: %v, want the missing topics", perr) })
	if !errors.Is(perr, errTopicsMissing) {
		t.Fatalf("Prepare: %v, want errTopicsMissing", perr)
	}
	for _, topic := range b.Topics("orders") {
		if !strings.Contains(perr.Error(), topic) {
			t.Errorf("the error does not name %s: %v", topic, perr)
		}
	}
	if !strings.Contains(perr.Error(), "create_topics") {
		t.Errorf("the error does not say how to fix it: %v", perr)
	}
	details, err := kc.Admin(t).ListTopics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range b.Topics("orders") {
		if details.Has(topic) {
			t.Errorf("topic %s was created with create_topics: false", topic)
		}
	}
}
