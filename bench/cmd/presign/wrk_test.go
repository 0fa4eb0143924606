package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// wrk's reader, bench/wrk/deliveries.lua, sends what presign signed, in
// both forms: every request's signature is its body's HMAC, its key header
// the body's id and, in the object form, the body's data.object.id the
// object presign gave that key. Run against a loopback server for one
// second; skipped where wrk is not installed.
func TestWrkScriptSendsSignedBodies(t *testing.T) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		t.Skip("wrk is not installed")
	}
	script, err := filepath.Abs("../../wrk/deliveries.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, objects := range []int{0, 1000} {
		t.Run(map[bool]string{true: "plain", false: "objects"}[objects == 0], func(t *testing.T) {
			f, file := writeFile(t, options{n: 5000, body: 1024, objects: objects, path: "/webhook/bench", prefix: "sha256=", secret: "s"})
			objOf := map[string]string{}
			for i, k := range f.Keys {
				if f.Objects {
					objOf[k] = f.Objs[i]
				}
			}
			var mu sync.Mutex
			var good int
			var bad []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				m := hmac.New(sha256.New, []byte("s"))
				m.Write(body)
				var ev struct {
					ID   string `json:"id"`
					Data struct {
						Object struct {
							ID string `json:"id"`
						} `json:"object"`
					} `json:"data"`
				}
				err := json.Unmarshal(body, &ev)
				key := r.Header.Get("Idempotency-Key")
				ok := err == nil && len(body) == 1024 && r.URL.Path == "/webhook/bench" &&
					r.Header.Get("X-Signature") == "sha256="+hex.EncodeToString(m.Sum(nil)) &&
					ev.ID == key && ev.Data.Object.ID == objOf[key]
				mu.Lock()
				if ok {
					good++
				} else if len(bad) < 3 {
					bad = append(bad, string(body))
				}
				mu.Unlock()
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, wrk, "-t1", "-c2", "-d1s", "-s", script, srv.URL+"/", "--", file, "unique", "1").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "BENCH requests=") {
				t.Fatalf("wrk: %v\n%s", err, out)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(bad) > 0 || good == 0 {
				t.Fatalf("%d requests as signed; not as signed: %q", good, bad)
			}
		})
	}
}
