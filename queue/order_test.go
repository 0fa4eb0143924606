package queue

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store/redistest"
)

// orderUpstream is a fake upstream that checks the order gate from the
// outside: per order value (the key's part before "-"), never two tries
// at once, and the 2xx answers in the order of enqueueing.
type orderUpstream struct {
	mu        sync.Mutex
	rnd       *rand.Rand
	inFlight  map[string]int
	overlaps  []string
	delivered map[string][]string // value -> keys, in the order accepted
	hold      map[string]bool     // values whose tries fail while set
}

func newOrderUpstream() *orderUpstream {
	return &orderUpstream{rnd: rand.New(rand.NewPCG(1, 2)), inFlight: map[string]int{},
		delivered: map[string][]string{}, hold: map[string]bool{}}
}

func (u *orderUpstream) Send(_ context.Context, _ string, payload []byte, attempt int64) Result {
	key := string(payload)
	v, _, _ := strings.Cut(key, "-")
	u.mu.Lock()
	u.inFlight[v]++
	if u.inFlight[v] > 1 && v != "u" {
		u.overlaps = append(u.overlaps, key)
	}
	fail := u.hold[v] || attempt <= 2 && u.rnd.IntN(3) == 0
	u.mu.Unlock()
	time.Sleep(time.Millisecond) // a try takes a moment: overlaps would show
	u.mu.Lock()
	defer u.mu.Unlock()
	u.inFlight[v]--
	if fail {
		return answer(500)
	}
	u.delivered[v] = append(u.delivered[v], key)
	return answer(200)
}

func (u *orderUpstream) setHold(v string, on bool) {
	u.mu.Lock()
	u.hold[v] = on
	u.mu.Unlock()
}

// gathered reads one series of reg by metric name and label values.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue metric
				}
			}
			return metricValue(m), true
		}
	}
	return 0, false
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return 0
}

// The manager over an ordered route: values interleaved in one burst,
// random upstream failures, a head held failing (its value waits, the
// others go on), stale events skipped, events without a value delivered
// unordered; the three order metrics read back from the registry.
func TestManagerOrder(t *testing.T) {
	backends := map[string]func(t *testing.T) Backend{
		"memory": func(*testing.T) Backend { return NewMemory() },
		"redis": func(t *testing.T) Backend {
			c := redis.NewClient(&redis.Options{Addr: redistest.Start(t), Protocol: 2})
			t.Cleanup(func() { _ = c.Close() })
			return NewRedis(c, "order:", 0)
		},
	}
	for name, newBackend := range backends {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := metrics.New(reg)
			up := newOrderUpstream()
			route := testQueueRoute()
			route.Ordered = true
			route.Retry = Retry{MaxAttempts: 10, Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond}
			mgr := New(Options{Backend: newBackend(t), Sender: up, Metrics: m, Log: slog.New(slog.DiscardHandler),
				Consumer: "order-" + name, StatsEvery: 20 * time.Millisecond, PromoteEvery: 5 * time.Millisecond,
				Block: 50 * time.Millisecond, Jitter: func() float64 { return 0.5 }})
			t.Cleanup(func() { mgr.Close(time.Second) })
			if err := mgr.Apply(context.Background(), []Route{route}); err != nil {
				t.Fatal(err)
			}
			labels := map[string]string{"route": testRoute}

			// H's head fails until released: H's later events wait,
			// parked; the other values are delivered meanwhile.
			up.setHold("H", true)
			var keys []string
			want := map[string][]string{} // value -> keys to be delivered, in order
			enqueue := func(key, v, stale string) {
				e := testEntry(key, "fp-"+key)
				e.Order, e.Stale = v, stale
				if ack, err := mgr.Enqueue(context.Background(), e); err != nil || ack.State != Enqueued {
					t.Fatalf("Enqueue %s: %+v, %v", key, ack, err)
				}
				keys = append(keys, key)
			}
			for i := range 5 {
				enqueue(fmt.Sprintf("H-%d", i), "H", "")
				want["H"] = append(want["H"], fmt.Sprintf("H-%d", i))
			}
			skipped := 0
			for i := range 12 {
				for _, v := range []string{"A", "B", "C", "D"} {
					key := fmt.Sprintf("%s-%02d", v, i)
					stale := i * 10
					if i%4 == 3 {
						// older than the event before it, delivered first
						stale = (i - 2) * 10
						skipped++
					} else {
						want[v] = append(want[v], key)
					}
					enqueue(key, v, strconv.Itoa(stale))
				}
			}
			for i := range 3 {
				enqueue(fmt.Sprintf("u-%d", i), "", "")
			}
			waitFor(t, "H's later events parked behind its failing head", func() bool {
				n, ok := gathered(t, reg, "webhook_queue_order_waiting", labels)
				return ok && n == 4
			})
			waitFor(t, "every other value delivered while H waits", func() bool {
				up.mu.Lock()
				defer up.mu.Unlock()
				for _, v := range []string{"A", "B", "C", "D"} {
					if len(up.delivered[v]) != len(want[v]) {
						return false
					}
				}
				return len(up.delivered["H"]) == 0
			})
			up.setHold("H", false)
			waitFor(t, "every event finished", func() bool {
				for _, k := range keys {
					ks, err := mgr.o.Backend.Get(context.Background(), testRoute, k)
					if err != nil || ks.State != StateFinished {
						return false
					}
				}
				return true
			})
			up.mu.Lock()
			defer up.mu.Unlock()
			if len(up.overlaps) > 0 {
				t.Fatalf("tries of one value overlapped: %v", up.overlaps)
			}
			for v, ks := range want {
				if !slices.Equal(up.delivered[v], ks) {
					t.Errorf("value %s delivered %v, want %v", v, up.delivered[v], ks)
				}
			}
			if len(up.delivered["u"]) != 3 {
				t.Errorf("unordered events delivered %v, want 3", up.delivered["u"])
			}
			if n, _ := gathered(t, reg, "webhook_queue_unordered_total", labels); n != 3 {
				t.Errorf("webhook_queue_unordered_total = %v, want 3", n)
			}
			if n, _ := gathered(t, reg, "webhook_queue_skipped_total", map[string]string{"route": testRoute, "reason": "stale"}); n != float64(skipped) {
				t.Errorf("webhook_queue_skipped_total{reason=stale} = %v, want %d", n, skipped)
			}
			ks, _ := mgr.o.Backend.Get(context.Background(), testRoute, "A-03")
			if ks.Status != 200 || string(ks.Outcome.Body) != SkippedBody {
				t.Errorf("skipped A-03 = %+v, want the skipped answer", ks)
			}
			waitFor(t, "order waiting back to 0", func() bool {
				n, ok := gathered(t, reg, "webhook_queue_order_waiting", labels)
				return ok && n == 0
			})
		})
	}
}

// An order value whose line empties keeps its greatest stale value for
// the retention, not forever: after a delivery, and after a dead letter
// (on_dead: continue); a new event of the value keeps it again.
func TestOrderValueKeptForRetention(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Start(t), Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	b := NewRedis(c, "keep:", 0)
	ctx := context.Background()
	if err := b.Prepare(ctx, testRoute, 1); err != nil {
		t.Fatal(err)
	}
	h := "keep:webhook_ord:{q:" + testRoute + ":0}h:A"
	ttl := func() time.Duration {
		d, err := c.PTTL(ctx, h).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	cycle := func(key string, s Settlement) {
		e := testEntry(key, "fp-"+key)
		e.Order, e.Stale = "A", "10"
		if ack, err := b.Enqueue(ctx, e, 100); err != nil || ack.State != Enqueued {
			t.Fatalf("Enqueue %s: %+v, %v", key, ack, err)
		}
		if d := ttl(); d != -1 && d != -2 {
			t.Fatalf("value A with an event queued expires in %v", d)
		}
		ls, err := b.Read(ctx, testRoute, 0, "c", 1, time.Second)
		if err != nil || len(ls) != 1 {
			t.Fatal(ls, err)
		}
		j, ok, err := b.Begin(ctx, ls[0])
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		if got, err := b.Settle(ctx, "c", j, s); err != nil || got != Recorded {
			t.Fatal(got, err)
		}
		if d := ttl(); d <= 0 || d > time.Hour {
			t.Fatalf("after %s settled, value A expires in %v, want within the hour's retention", key, d)
		}
	}
	cycle("a1", Settlement{Kind: SettleDelivered, Retention: time.Hour, At: time.Now(), Outcome: SkippedOutcome("fp")})
	cycle("a2", Settlement{Kind: SettleDead, Reason: "rejected:400", Status: 400, At: time.Now(), Retention: time.Hour})
}
