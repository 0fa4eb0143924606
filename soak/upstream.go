package main

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// acceptance is one copy of an event the upstream accepted: it wrote a 200
// for it, completely, to a gateway that was still connected.
type acceptance struct {
	ID      string
	Inst    int       // the gateway instance that forwarded it (by listener)
	Recv    time.Time // the request arrived
	At      time.Time // just before the 200 was written
	ReqID   string    // the gateway's X-Request-Id
	Attempt string    // the gateway's X-Clawgate-Attempt
}

// upstream is the service behind both gateways: one listener per instance,
// one shared state. Per copy it answers, by a seeded PRNG, 200 (accepted),
// 500 (rejected) or hangs past the route's timeout (not accepted).
type upstream struct {
	p500, pHang float64
	hangMax     time.Duration // a hang ends here even if the gateway is still connected; still not accepted

	mu       sync.Mutex
	rng      *rand.Rand
	accepted []acceptance

	received   atomic.Int64
	n500       atomic.Int64
	nHang      atomic.Int64
	gone       atomic.Int64 // 200 intended, but the gateway had hung up first
	writeFail  atomic.Int64 // 200 write failed
	hangMaxed  atomic.Int64 // a hang outlived hangMax (the gateway never hung up)
	badRequest atomic.Int64 // no event id in the body

	servers [2]*http.Server
	addrs   [2]string
}

func startUpstream(seed uint64, p500, pHang float64, hangMax time.Duration) (*upstream, error) {
	u := &upstream{p500: p500, pHang: pHang, hangMax: hangMax, rng: rand.New(rand.NewPCG(seed, 0x75707374))}
	for i := range u.servers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			u.close()
			return nil, err
		}
		u.addrs[i] = ln.Addr().String()
		u.servers[i] = &http.Server{Handler: u.handler(i), ReadHeaderTimeout: 10 * time.Second}
		go u.servers[i].Serve(ln)
	}
	return u, nil
}

func (u *upstream) close() {
	for _, s := range u.servers {
		if s != nil {
			s.Close()
		}
	}
}

const (
	answerAccept = iota
	answer500
	answerHang
)

func (u *upstream) decide() (int, time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	x := u.rng.Float64()
	// Most 200s take 0-5 ms, one in five 20-500 ms (half the route timeout
	// at most): so that copies are between the gateway's claim and its
	// finish when a gateway dies or Redis goes away.
	delay := time.Duration(u.rng.IntN(5000)) * time.Microsecond
	if u.rng.IntN(5) == 0 {
		delay = 20*time.Millisecond + time.Duration(u.rng.Int64N(int64(480*time.Millisecond)))
	}
	switch {
	case x < u.p500:
		return answer500, 0
	case x < u.p500+u.pHang:
		return answerHang, 0
	}
	return answerAccept, delay
}

func (u *upstream) handler(inst int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		recv := time.Now()
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var ev struct {
			ID string `json:"id"`
		}
		if err != nil || json.Unmarshal(body, &ev) != nil || ev.ID == "" {
			u.badRequest.Add(1)
			http.Error(w, "no event id", http.StatusBadRequest)
			return
		}
		u.received.Add(1)
		kind, delay := u.decide()
		ctx := r.Context()
		switch kind {
		case answer500:
			u.n500.Add(1)
			http.Error(w, `{"error":"soak: rejected"}`, http.StatusInternalServerError)
			return
		case answerHang:
			u.nHang.Add(1)
			t := time.NewTimer(u.hangMax)
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.C:
				// The gateway should have given up long ago: answer, but do
				// not accept.
				u.hangMaxed.Add(1)
				http.Error(w, `{"error":"soak: hung"}`, http.StatusInternalServerError)
			}
			return
		}
		if delay > 0 {
			sleep(ctx, delay)
		}
		if ctx.Err() != nil {
			u.gone.Add(1) // the gateway hung up (it died, or timed out): not accepted
			return
		}
		out, _ := json.Marshal(map[string]any{"id": ev.ID, "instance": inst, "accepted": true})
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(out)))
		at := time.Now()
		w.WriteHeader(http.StatusOK)
		_, err = w.Write(out)
		if err == nil {
			err = http.NewResponseController(w).Flush()
		}
		if err != nil {
			u.writeFail.Add(1)
			return
		}
		u.mu.Lock()
		u.accepted = append(u.accepted, acceptance{
			ID: ev.ID, Inst: inst, Recv: recv, At: at,
			ReqID: r.Header.Get("X-Request-Id"), Attempt: r.Header.Get("X-Clawgate-Attempt"),
		})
		u.mu.Unlock()
	})
}

func (u *upstream) snapshot() []acceptance {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]acceptance(nil), u.accepted...)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
