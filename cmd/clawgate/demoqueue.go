package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// demoQueueConfig is the queue act's gateway: one delivery: queue route
// with short retry gaps, so the act takes seconds, not hours.
const demoQueueConfig = `
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
store: { backend: memory }
dedupe: { lock_ttl: 5s }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %[1]s
    timeout: 1s
    delivery: queue
    workers: 4
    retry: { max_attempts: 5, initial: 200ms, max: 2s }
    idempotency: { key: ["json:id"] }
    verify:
      scheme: hmac
      header: X-Signature
      prefix: "sha256="
      secrets: [{ id: demo, secret: demo-secret-change-me }]
  - name: subscriptions
    match: { path: /webhook/subscription }
    upstream: %[1]s
    timeout: 1s
    delivery: queue
    workers: 4
    retry: { max_attempts: 5, initial: 200ms, max: 2s }
    idempotency: { key: ["json:id"] }
    order: { by: "json:data.object.id", stale: "json:created" }
    verify:
      scheme: hmac
      header: X-Signature
      prefix: "sha256="
      secrets: [{ id: demo, secret: demo-secret-change-me }]
`

// cmdDemoQueue is the delivery queue's act: the provider is answered 202
// at once while the upstream is down for its first tries, and the event is
// delivered once after growing gaps; then an event the upstream rejects
// lands in the dead-letter queue and is replayed once the upstream is
// fixed; then a burst on an ordered route (order.by the subscription)
// reaches the upstream in order per subscription, an old update skipped
// as stale. It exits 0 when each event was completed exactly once.
func cmdDemoQueue(stdout, stderr io.Writer, log *slog.Logger) int {
	var (
		mu       sync.Mutex
		arrived  []string // the subscriptions route's deliveries, in order
		tries    = map[string][]time.Time{}
		done     = map[string]int{}
		fixed    atomic.Bool
		accepted = map[string]time.Time{}
	)
	upstream := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		tries[key] = append(tries[key], time.Now())
		n := len(tries[key])
		mu.Unlock()
		switch {
		case key == "evt_3001" && n == 1:
			http.Error(w, "billing service warming up", http.StatusServiceUnavailable)
			return
		case key == "evt_2001" && n <= 3:
			http.Error(w, "points service restarting", http.StatusServiceUnavailable)
			return
		case bytes.Contains(body, []byte(`"sku":"B-17"`)) && !fixed.Load():
			http.Error(w, "unknown sku B-17", http.StatusUnprocessableEntity)
			return
		}
		mu.Lock()
		done[key]++
		if strings.HasPrefix(key, "evt_3") {
			arrived = append(arrived, key)
		}
		mu.Unlock()
		fmt.Fprintf(w, `{"ok":true}`)
	})}
	d, err := startDemo(demoQueueConfig, upstream, log)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate demo: %v\n", err)
		return 1
	}
	defer d.stop()
	inst, reg, route, signer := d.inst, d.reg, d.route, d.signer
	url := "http://" + inst.Addr().String() + route.Match.Path
	admin := "http://" + inst.AdminAddr().String()
	client := &http.Client{Timeout: 10 * time.Second}
	sendTo := func(url, id, body string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if err := signer.Sign(req.Header, []byte(body), time.Now()); err != nil {
			return 0, "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		mark := ""
		if resp.Header.Get("Idempotent-Replayed") == "true" {
			mark = " (Idempotent-Replayed)"
		}
		mu.Lock()
		if _, ok := accepted[id]; !ok {
			accepted[id] = time.Now()
		}
		mu.Unlock()
		return resp.StatusCode, string(bytes.TrimSpace(b)) + mark, nil
	}
	send := func(id, body string) (int, string, error) { return sendTo(url, id, body) }
	waitFor := func(cond func() bool) bool {
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if cond() {
				return true
			}
		}
		return false
	}
	completed := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		return done[key]
	}

	fmt.Fprintf(stdout, "clawgate demo -queue: route orders is delivery: queue (retry 5 tries, 200ms doubling; memory queue)\n\n")
	fmt.Fprintln(stdout, "act 1: the upstream is down for the first 3 tries; the provider sends evt_2001 three times")
	a := `{"id":"evt_2001","type":"order.paid","data":{"order_id":"ord_2001","points":100}}`
	for i := 1; i <= 3; i++ {
		status, answer, err := send("evt_2001", a)
		if err != nil {
			fmt.Fprintf(stderr, "clawgate demo: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "  provider delivery %d: %d %s\n", i, status, answer)
	}
	if !waitFor(func() bool { return completed("evt_2001") > 0 }) {
		fmt.Fprintln(stdout, "FAIL: evt_2001 was not delivered")
		return 1
	}
	mu.Lock()
	prev := accepted["evt_2001"]
	for i, t := range tries["evt_2001"] {
		result := "503, retried"
		if i == len(tries["evt_2001"])-1 {
			result = "200, delivered"
		}
		fmt.Fprintf(stdout, "  upstream try %d: +%-6s after the previous (%s)\n", i+1, t.Sub(prev).Round(10*time.Millisecond), result)
		prev = t
	}
	mu.Unlock()

	fmt.Fprintln(stdout, "\nact 2: the upstream rejects evt_2002 (422 unknown sku): dead-lettered at once")
	b := `{"id":"evt_2002","type":"order.paid","data":{"order_id":"ord_2002","sku":"B-17"}}`
	status, answer, err := send("evt_2002", b)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate demo: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "  provider delivery: %d %s\n", status, answer)
	var list struct {
		Entries []struct {
			ID, Key, Reason string
			Attempts        int64
		} `json:"entries"`
	}
	if !waitFor(func() bool {
		resp, err := client.Get(admin + "/admin/dlq/orders")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&list) == nil && len(list.Entries) == 1
	}) {
		fmt.Fprintln(stdout, "FAIL: evt_2002 did not reach the DLQ")
		return 1
	}
	e := list.Entries[0]
	fmt.Fprintf(stdout, "  GET /admin/dlq/orders: id %s key %s reason %s attempts %d\n", e.ID, e.Key, e.Reason, e.Attempts)
	dlq, _ := gatherSum(reg, "dead_letter_queue_size")
	fmt.Fprintf(stdout, "  dead_letter_queue_size{route=\"orders\"} %g\n", dlq)
	fixed.Store(true)
	fmt.Fprintln(stdout, "  the upstream is fixed; the operator replays it (clawgate dlq replay -admin URL orders ID):")
	resp, err := client.Post(admin+"/admin/dlq/orders/"+e.ID+"/replay", "application/json", nil)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate demo: %v\n", err)
		return 1
	}
	resp.Body.Close()
	fmt.Fprintf(stdout, "  POST /admin/dlq/orders/%s/replay: %d\n", e.ID, resp.StatusCode)
	if !waitFor(func() bool { return completed("evt_2002") > 0 }) {
		fmt.Fprintln(stdout, "FAIL: evt_2002 was not delivered after the replay")
		return 1
	}
	time.Sleep(300 * time.Millisecond) // a second delivery, were there one, would show here
	replays, _ := gatherSum(reg, "webhook_dlq_replays_total")
	fmt.Fprintf(stdout, "  delivered; webhook_dlq_replays_total %g\n", replays)
	if completed("evt_2001") != 1 || completed("evt_2002") != 1 {
		fmt.Fprintf(stdout, "\nFAIL: completed evt_2001 %d times, evt_2002 %d times\n", completed("evt_2001"), completed("evt_2002"))
		return 1
	}

	fmt.Fprintln(stdout, "\nact 3: route subscriptions has order by data.object.id (stale: created); the provider sends a burst")
	subURL := "http://" + inst.Addr().String() + "/webhook/subscription"
	burst := []struct {
		id, obj, typ string
		created      int
	}{
		{"evt_3001", "sub_1", "customer.subscription.created", 100},
		{"evt_3002", "sub_1", "customer.subscription.updated", 200},
		{"evt_3003", "sub_2", "customer.subscription.created", 110},
		{"evt_3004", "sub_1", "customer.subscription.deleted", 300},
		{"evt_3005", "sub_1", "customer.subscription.updated", 150}, // an old update, sent late
	}
	for _, e := range burst {
		body := fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"object":{"id":%q}}}`, e.id, e.typ, e.created, e.obj)
		status, answer, err := sendTo(subURL, e.id, body)
		if err != nil {
			fmt.Fprintf(stderr, "clawgate demo: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "  %s %-30s %s created %d: %d %s\n", e.id, e.typ, e.obj, e.created, status, answer)
	}
	fmt.Fprintln(stdout, "  the upstream fails evt_3001's first try: sub_1's later events wait for its retry, sub_2 does not")
	if !waitFor(func() bool {
		skipped, _ := gatherSum(reg, "webhook_queue_skipped_total")
		return completed("evt_3004") > 0 && completed("evt_3003") > 0 && skipped == 1
	}) {
		fmt.Fprintln(stdout, "FAIL: the burst was not delivered")
		return 1
	}
	time.Sleep(300 * time.Millisecond) // a late or second delivery, were there one, would show here
	mu.Lock()
	got := append([]string(nil), arrived...)
	mu.Unlock()
	fmt.Fprintf(stdout, "  the upstream got, in order: %s\n", strings.Join(got, " "))
	var sub1 []string
	for _, k := range got {
		if k != "evt_3003" {
			sub1 = append(sub1, k)
		}
	}
	status, answer, err = sendTo(subURL, "evt_3005", `{"id":"evt_3005","type":"customer.subscription.updated","created":150,"data":{"object":{"id":"sub_1"}}}`)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate demo: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "  evt_3005 (older than evt_3004, delivered before it) was skipped; a copy of it now: %d %s\n", status, answer)
	skipped, _ := gatherSum(reg, "webhook_queue_skipped_total")
	fmt.Fprintf(stdout, "  webhook_queue_skipped_total{reason=\"stale\"} %g\n", skipped)
	if strings.Join(sub1, " ") != "evt_3001 evt_3002 evt_3004" || completed("evt_3005") != 0 {
		fmt.Fprintf(stdout, "\nFAIL: sub_1's events reached the upstream as %v, want evt_3001 evt_3002 evt_3004 (evt_3005 skipped)\n", sub1)
		return 1
	}
	fmt.Fprintln(stdout, "\nok: every acknowledged event was completed exactly once")
	return 0
}
