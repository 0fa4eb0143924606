package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/clawgate/clawgate/verify"
)

// provider plays the webhook sender: every event is delivered 1-5 times
// (spontaneous duplicates, spread over dupSpread), each delivery retried
// until a 2xx like a real provider, to one of the two instances behind a
// load balancer.
type provider struct {
	o      Options
	urls   [2]string
	signer verify.Signer
	client *http.Client
	sem    chan struct{}

	events []eventState

	deliveries atomic.Int64 // HTTP requests sent
	retries    atomic.Int64 // provider retries (a delivery after a failed one)
	failovers  atomic.Int64 // the load balancer's second try after a refused connection
	duplicates atomic.Int64 // deliveries started beyond the first per event
	replayed   atomic.Int64 // 2xx with Idempotent-Replayed: true
	connErrs   atomic.Int64 // refused, reset, EOF (other than a client timeout)
	timeouts   atomic.Int64 // no answer within the client timeout
	gaveUp     atomic.Int64 // deliveries that ran out of tries or time

	mu     sync.Mutex
	status map[int]int64 // gateway answers by status
}

// eventState is what the provider knows about one event.
type eventState struct {
	id   string
	body []byte

	mu       sync.Mutex
	acked    int // deliveries answered 2xx
	wrong    int // 2xx whose body is not this event's answer
	refused  int // deliveries given up on a non-retryable 4xx
	last     string
	finished bool // every delivery ended (acked, refused or given up)
}

func newProvider(o Options, urls [2]string, signer verify.Signer) *provider {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConns:        4 * o.Concurrency,
		MaxIdleConnsPerHost: 2 * o.Concurrency,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	p := &provider{
		o: o, urls: urls, signer: signer,
		client: &http.Client{Transport: tr, Timeout: o.ClientTimeout},
		sem:    make(chan struct{}, o.Concurrency),
		events: make([]eventState, o.Events),
		status: map[int]int64{},
	}
	for i := range p.events {
		id := fmt.Sprintf("evt_soak_%d_%06d", o.Seed, i)
		p.events[i].id = id
		p.events[i].body = fmt.Appendf(nil, `{"id":%q,"type":"soak.test","n":%d,"data":{"amount":%d}}`, id, i, 100+i%900)
	}
	return p
}

// run starts event i at t0 + i/rate and returns when every delivery ended
// or ctx did.
func (p *provider) run(ctx context.Context, t0 time.Time) {
	var wg sync.WaitGroup
	for i := range p.events {
		at := t0.Add(time.Duration(float64(i) / p.o.Rate * float64(time.Second)))
		if !sleep(ctx, time.Until(at)) {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.runEvent(ctx, i)
		}()
	}
	wg.Wait()
	p.client.CloseIdleConnections()
}

func (p *provider) runEvent(ctx context.Context, i int) {
	ev := &p.events[i]
	rng := rand.New(rand.NewPCG(p.o.Seed, uint64(i)+1))
	copies := 1 + rng.IntN(p.o.MaxCopies)
	var wg sync.WaitGroup
	for c := 0; c < copies; c++ {
		var offset time.Duration
		if c > 0 {
			p.duplicates.Add(1)
			offset = time.Duration(rng.Int64N(int64(p.o.DupSpread)))
		}
		srng := rand.New(rand.NewPCG(p.o.Seed^0x736f616b, uint64(i)<<3|uint64(c)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sleep(ctx, offset) {
				p.deliver(ctx, ev, srng)
			}
		}()
	}
	wg.Wait()
	ev.mu.Lock()
	ev.finished = true
	ev.mu.Unlock()
}

// deliver is one delivery of ev, retried with a growing backoff (100 ms
// doubling to 2 s, jittered; Retry-After honoured up to the cap) on 408,
// 409, 425, 429, 5xx, connection errors and timeouts, until a 2xx or the
// per-delivery budget runs out.
func (p *provider) deliver(ctx context.Context, ev *eventState, rng *rand.Rand) {
	start := time.Now()
	backoff := p.o.BackoffMin
	for try := 1; ; try++ {
		if try > 1 {
			p.retries.Add(1)
		}
		status, hdr, body, err := p.send(ctx, ev, rng.IntN(2))
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && status >= 200 && status < 300:
			if hdr.Get("Idempotent-Replayed") == "true" {
				p.replayed.Add(1)
			}
			ev.mu.Lock()
			ev.acked++
			// The upstream's 200 names the event: a replay of another
			// event's answer would be a wrong answer. A queue route's 202
			// names it as its key.
			if !bytes.Contains(body, []byte(`"id":"`+ev.id+`"`)) && !(p.o.Queue && bytes.Contains(body, []byte(`"key":"`+ev.id+`"`))) {
				ev.wrong++
			}
			ev.mu.Unlock()
			return
		case err == nil && !retryable(status):
			ev.mu.Lock()
			ev.refused++
			ev.last = fmt.Sprintf("%d %s", status, bytes.TrimSpace(body))
			ev.mu.Unlock()
			return
		}
		last := ""
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d %s", status, bytes.TrimSpace(body))
		}
		ev.mu.Lock()
		ev.last = last
		ev.mu.Unlock()
		if try >= p.o.MaxTries || time.Since(start) >= p.o.DeliveryBudget {
			p.gaveUp.Add(1)
			return
		}
		wait := backoff/2 + time.Duration(rng.Int64N(int64(backoff)))
		if err == nil {
			if ra, e := strconv.Atoi(hdr.Get("Retry-After")); e == nil && ra > 0 {
				wait = max(wait, min(time.Duration(ra)*time.Second, p.o.BackoffMax))
			}
		}
		backoff = min(2*backoff, p.o.BackoffMax)
		if !sleep(ctx, wait) {
			return
		}
	}
}

// ackedNotAccepted counts the acknowledged events the upstream has not
// accepted in acc: in queue mode, those the queue has yet to deliver.
func (p *provider) ackedNotAccepted(acc []acceptance) int {
	accepted := make(map[string]bool, len(acc))
	for _, a := range acc {
		accepted[a.ID] = true
	}
	n := 0
	for i := range p.events {
		ev := &p.events[i]
		ev.mu.Lock()
		if ev.acked > 0 && !accepted[ev.id] {
			n++
		}
		ev.mu.Unlock()
	}
	return n
}

func retryable(status int) bool {
	switch status {
	case 408, 409, 425, 429:
		return true
	}
	return status >= 500
}

// send is one request through the load balancer: to instance inst, or to
// the other one when inst refuses the connection (it is down).
func (p *provider) send(ctx context.Context, ev *eventState, inst int) (int, http.Header, []byte, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, nil, nil, ctx.Err()
	}
	defer func() { <-p.sem }()
	status, hdr, body, err := p.post(ctx, ev, inst)
	if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
		p.failovers.Add(1)
		status, hdr, body, err = p.post(ctx, ev, 1-inst)
	}
	return status, hdr, body, err
}

func (p *provider) post(ctx context.Context, ev *eventState, inst int) (int, http.Header, []byte, error) {
	p.deliveries.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.urls[inst], bytes.NewReader(ev.body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := p.signer.Sign(req.Header, ev.body, time.Now()); err != nil {
		return 0, nil, nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		var ne net.Error
		switch {
		case ctx.Err() != nil: // the run is over, not the gateway's doing
		case errors.As(err, &ne) && ne.Timeout():
			p.timeouts.Add(1)
		default:
			p.connErrs.Add(1)
		}
		return 0, nil, nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	p.mu.Lock()
	p.status[resp.StatusCode]++
	p.mu.Unlock()
	if err != nil {
		// The status line came, the body did not: as good as no answer.
		p.connErrs.Add(1)
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, body, nil
}

// progress is a one-line summary for -v.
func (p *provider) progress() string {
	var acked, done int
	for i := range p.events {
		ev := &p.events[i]
		ev.mu.Lock()
		if ev.acked > 0 {
			acked++
		}
		if ev.finished {
			done++
		}
		ev.mu.Unlock()
	}
	return fmt.Sprintf("acknowledged %d, finished %d of %d events; %d deliveries, %d retries",
		acked, done, len(p.events), p.deliveries.Load(), p.retries.Load())
}
