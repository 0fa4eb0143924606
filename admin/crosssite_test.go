package admin_test

import (
	"net/http"
	"strings"
	"testing"
)

// A page the operator opens cannot change anything through the admin
// listener: a cross-site simple request (an HTML form's POST, a no-cors
// fetch) to replay a DLQ, purge an event, reset a key or reload the
// config is refused, on a tokenless listener (the default) too. Issue: a
// tokenless admin listener accepted cross-site simple POSTs.
func TestAdminRefusesCrossSiteSimpleRequests(t *testing.T) {
	e := newDLQEnvToken(t, 1000, "")
	e.enqueue("dead-1", 400) // rejected: dead-lettered at once
	dead := e.waitDLQ(1)
	id := dead[0].ID
	rl := &stubReloader{}
	reload := reloadServer(t, "", rl)

	type attempt struct {
		name, method, url string
		header            map[string]string
	}
	form := "application/x-www-form-urlencoded"
	var attempts []attempt
	for _, target := range []struct{ name, method, url string }{
		{"replay all", http.MethodPost, e.srv.URL + "/admin/dlq/hooks/replay"},
		{"replay one", http.MethodPost, e.srv.URL + "/admin/dlq/hooks/" + id + "/replay"},
		{"purge", http.MethodDelete, e.srv.URL + "/admin/dlq/hooks/" + id},
		{"reset key", http.MethodDelete, e.srv.URL + "/admin/keys/hooks/dead-1"},
		{"reload", http.MethodPost, reload.URL + "/admin/reload"},
	} {
		attempts = append(attempts,
			attempt{target.name + "/form from another site", target.method, target.url,
				map[string]string{"Content-Type": form, "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}},
			attempt{target.name + "/text/plain, no Origin sent", target.method, target.url,
				map[string]string{"Content-Type": "text/plain"}},
			attempt{target.name + "/form, Origin only", target.method, target.url,
				map[string]string{"Content-Type": form, "Origin": "http://evil.example"}},
			attempt{target.name + "/header but another Origin", target.method, target.url,
				map[string]string{"X-Clawgate-Admin": "1", "Origin": "http://evil.example:80"}},
			attempt{target.name + "/json but cross-site fetch metadata", target.method, target.url,
				map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}},
		)
	}
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			req, _ := http.NewRequest(a.method, a.url, strings.NewReader("x=1"))
			for k, v := range a.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s: %d, want 403", a.method, a.url, resp.StatusCode)
			}
		})
	}
	if got := e.waitDLQ(1); got[0].ID != id {
		t.Fatalf("DLQ changed: %+v", got)
	}
	if ks := e.waitKey("dead-1", "dead_lettered"); ks.ID != id {
		t.Fatalf("key changed: %+v", ks)
	}
	if _, ok := e.mgr.Replaying("hooks"); ok {
		t.Fatal("a whole-DLQ replay was started")
	}
	if rl.calls != 0 {
		t.Fatalf("%d reloads", rl.calls)
	}

	// What the CLI sends (the header, no Origin), and a same-origin
	// page's JSON request, are served.
	if code, body := e.do(http.MethodPost, "/admin/dlq/hooks/"+id+"/replay", ""); code != http.StatusOK {
		t.Fatalf("replay with the header: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodPost, reload.URL+"/admin/reload", nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", reload.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || rl.calls != 1 {
		t.Fatalf("same-origin JSON reload: %d, %d reloads", resp.StatusCode, rl.calls)
	}
}
