package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/clawgate/clawgate/admin"
)

// Browser tests of the console (/ui/ on the admin listener): a real
// headless Chromium, driven over the DevTools protocol, against a real
// gateway and upstream on loopback. With CLAWGATE_WRITE_SCREENSHOTS=1 they
// write docs/img/console-*.png.

// consoleTab is one browser tab with the console messages it logged.
type consoleTab struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	log []chromedp.ConsoleMessage
}

// newConsoleTab starts headless Chromium (its own profile, no sandbox:
// the tests may run as root) with one tab, bounded to a minute.
func newConsoleTab(t *testing.T) *consoleTab {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the console's browser tests need Chromium (the binary chromium): `make test` installs it (Debian package chromium), or apt-get install chromium: %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 760),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelT := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancel(); cancelT(); cancelA() })
	tab := &consoleTab{t: t, ctx: ctx}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			tab.mu.Lock()
			tab.log = append(tab.log, m)
			tab.mu.Unlock()
		}
	}()
	t.Cleanup(tab.checkConsole)
	return tab
}

// checkConsole fails on an uncaught exception or a Content-Security-Policy
// violation in the tab: the console must run under its own CSP.
func (b *consoleTab) checkConsole() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.log {
		if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
			b.t.Errorf("browser console: %s", m)
		}
	}
}

// with is the tab for the subtest t (the console messages are checked
// by the parent's).
func (b *consoleTab) with(t *testing.T) *consoleTab { return &consoleTab{t: t, ctx: b.ctx} }

// do runs steps, 20 s at most (a click waits for its element).
func (b *consoleTab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v\npage: %s", err, b.text())
	}
}

// text is the page's visible text, for failure messages.
func (b *consoleTab) text() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	return s
}

// wait polls the JavaScript expression until it is truthy (15 s at most).
func (b *consoleTab) wait(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v\npage: %s", what, expr, err, b.text())
	}
}

func consoleEval[T any](b *consoleTab, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (b *consoleTab) click(css string) {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS(css)))
}

// screenshot writes docs/img/NAME when CLAWGATE_WRITE_SCREENSHOTS is 1.
func (b *consoleTab) screenshot(name string) {
	b.t.Helper()
	if os.Getenv("CLAWGATE_WRITE_SCREENSHOTS") != "1" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", "img", name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// consoleGateway is a gateway with the queue route "orders" (upstream up)
// and the sync route "payments".
func consoleGateway(t *testing.T, up *qUpstream, env map[string]string) *qInstance {
	t.Helper()
	y := qConf{upstream: up.srv.URL, retry: "{ max_attempts: 3, initial: 20ms, max: 100ms }"}.yaml() + fmt.Sprintf(`  - name: payments
    match: { path: /webhook/pay }
    upstream: %s
    timeout: 2s
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
`, up.srv.URL)
	return startQueueYAML(t, y, env)
}

// Keys an attacker picks: markup that would run if a page assembled HTML.
const (
	xssImg    = `<img src=x onerror=window.__xss=1>`
	xssScript = `<script>window.__xss=2</script>`
	xssPurge  = `<b onmouseover=window.__xss=3>purge me</b>`
)

// An event whose body carries markup that would run if the DLQ page's
// body preview assembled HTML, or if it ended its <pre> early.
const (
	bodyXSSKey = "body-xss"
	bodyXSS    = `{"id":"` + bodyXSSKey + `","note":"<img src=x onerror=window.__xss=3>","tail":"</pre><script>window.__xss=4</script>"}`
)

// consolePost posts body to url as JSON and answers the status.
func consolePost(t *testing.T, url, body string) int {
	t.Helper()
	resp, err := qClient.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("post %s: %v", body, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestConsoleBrowser(t *testing.T) {
	up := newQUpstream(t)
	// The attacker's events are rejected (400: dead-lettered at once)
	// on their first try, and taken afterwards.
	up.setAnswer(func(key string, n int) int {
		if (strings.HasPrefix(key, "<") || key == bodyXSSKey) && n == 1 {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	in := consoleGateway(t, up, nil)
	for _, k := range []string{xssImg, xssScript, xssPurge} {
		if a := qPost(in.url(), k); a.status != http.StatusAccepted {
			t.Fatalf("post %q: %d %s %v", k, a.status, a.raw, a.err)
		}
	}
	if code := consolePost(t, in.url(), bodyXSS); code != http.StatusAccepted {
		t.Fatalf("post the body-xss event: %d", code)
	}
	// The sync route: one forwarded, one refused (no key).
	pay := "http://" + in.Addr().String() + "/webhook/pay"
	if code := consolePost(t, pay, `{"id":"pay-1"}`); code != http.StatusOK {
		t.Fatalf("post pay-1: %d", code)
	}
	if code := consolePost(t, pay, `{"amount":1}`); code != http.StatusBadRequest {
		t.Fatalf("post without a key: %d, want 400", code)
	}
	qEventually(t, 10*time.Second, func() bool { return len(in.dlq().Entries) == 4 }, func() string { return fmt.Sprintf("DLQ %+v", in.dlq()) })
	ids := map[string]string{}
	for _, e := range in.dlq().Entries {
		ids[e.Key] = e.ID
	}
	if want := `"console":"` + in.admin() + `/ui/"`; !strings.Contains(in.log.String(), want) {
		t.Errorf("the start-up log does not give the console's address %s:\n%s", want, in.log)
	}
	b := newConsoleTab(t)
	ui := in.admin() + "/ui/"

	// The overview lists every route, live.
	b.do(chromedp.Navigate(ui))
	b.wait("the routes table", `document.querySelectorAll('#routes tbody tr').length === 2`)
	b.wait("the DLQ size", `document.querySelector('#routes tr[data-route="orders"] td.dlq').textContent === "4"`)
	for _, r := range []string{"orders", "payments"} {
		if got := consoleEval[string](b, `document.querySelector('#routes tr[data-route="`+r+`"] td').textContent`); got != r {
			t.Errorf("overview row %s: %q", r, got)
		}
	}
	// This instance's counts, and the queue's lag.
	cell := func(route, class string) string {
		return consoleEval[string](b, `document.querySelector('#routes tr[data-route="`+route+`"] td.`+class+`').textContent`)
	}
	b.wait("the counts", `document.querySelector('#routes tr[data-route="payments"] td.count.deliveries').textContent === "2"`)
	for _, c := range []struct{ route, class, want string }{
		{"orders", "count.deliveries", "4"}, {"orders", "count.queued", "4"}, {"orders", "count.forwarded", "0"}, {"orders", "depth", "0"},
		{"payments", "count.forwarded", "1"}, {"payments", "count.refused", "1"}, {"payments", "count.queued", "0"}, {"payments", "lag", "—"},
	} {
		if got := cell(c.route, c.class); got != c.want {
			t.Errorf("overview %s %s: %q, want %q", c.route, c.class, got, c.want)
		}
	}
	if got := cell("orders", "lag"); !strings.HasSuffix(got, " s") {
		t.Errorf("overview orders lag: %q, want seconds", got)
	}
	if !consoleEval[bool](b, `document.querySelector('main').textContent.includes("Counts are this instance's since it started")`) {
		t.Error("the overview does not say whose counts it shows")
	}
	// They are live: a copy of pay-1 shows up at the next refresh.
	if code := consolePost(t, pay, `{"id":"pay-1"}`); code != http.StatusOK {
		t.Fatalf("post pay-1 again: %d", code)
	}
	b.wait("the refreshed counts", `document.querySelector('#routes tr[data-route="payments"] td.count.deliveries').textContent === "3" && document.querySelector('#routes tr[data-route="payments"] td.count.replayed').textContent === "1"`)
	b.screenshot("console-routes.png")

	t.Run("pause and resume", func(t *testing.T) {
		b := b.with(t)
		b.click(`#routes tr[data-route="orders"] button[data-action="pause"]`)
		qEventually(t, 5*time.Second, func() bool { return in.routeInfo().Paused }, func() string { return "orders is not paused" })
		b.wait("the resume button", `document.querySelector('#routes tr[data-route="orders"] button[data-action="resume"]')`)
		b.click(`#routes tr[data-route="orders"] button[data-action="resume"]`)
		qEventually(t, 5*time.Second, func() bool { return !in.routeInfo().Paused }, func() string { return "orders is still paused" })
		b.wait("the pause button", `document.querySelector('#routes tr[data-route="orders"] button[data-action="pause"]')`)
		if consoleEval[bool](b, `!!document.querySelector('#routes tr[data-route="payments"] button')`) {
			t.Error("the sync route has a pause button")
		}
	})

	t.Run("key lookup form", func(t *testing.T) {
		b := b.with(t)
		b.do(chromedp.Navigate(ui))
		b.wait("the routes table", `document.querySelectorAll('#routes tbody tr').length === 2`)
		before := consoleEval[string](b, `document.querySelector('main p.muted').textContent`)
		b.do(chromedp.SendKeys(chromedp.CSS(`form.lookup input[name="key"]`), xssImg))
		// What the operator types survives the overview's refresh.
		b.wait("a refresh", `document.querySelector('main p.muted').textContent !== `+jsString(before))
		if got := consoleEval[string](b, `document.querySelector('form.lookup input[name="key"]').value`); got != xssImg {
			t.Fatalf("the lookup field holds %q after a refresh, want %q", got, xssImg)
		}
		b.click(`form.lookup button[type="submit"]`)
		b.wait("the key page", `document.getElementById('key-state') && document.getElementById('key-state').textContent === "dead_lettered"`)
		if got := consoleEval[string](b, `document.querySelector('#key dd').textContent`); got != xssImg {
			t.Errorf("key shown as %q", got)
		}
	})

	t.Run("DLQ shows attacker keys as text", func(t *testing.T) {
		b := b.with(t)
		// A deep link, loaded afresh.
		b.do(chromedp.Navigate(ui + "routes/orders/dlq"))
		b.wait("the DLQ rows", `document.querySelectorAll('#dlq tbody tr[data-id]').length === 4`)
		for k, id := range ids {
			got := consoleEval[string](b, `document.querySelector('#dlq tr[data-id=`+jsString(id)+`] td.key').textContent`)
			if got != k {
				t.Errorf("key cell of %s: %q, want %q", id, got, k)
			}
		}
		if n := consoleEval[int](b, `document.querySelectorAll('main img, main script').length`); n != 0 {
			t.Errorf("%d img or script elements in the page's content", n)
		}
		if typ := consoleEval[string](b, `typeof window.__xss`); typ != "undefined" {
			t.Errorf("window.__xss is %s: the attacker's markup ran", typ)
		}
	})

	t.Run("DLQ body preview shows the body as text", func(t *testing.T) {
		b := b.with(t)
		id := ids[bodyXSSKey]
		var ev admin.DLQEvent
		if code := in.adminJSON("GET", "/admin/dlq/orders/"+id, &ev); code != http.StatusOK || ev.BodyPreview != bodyXSS || ev.ContentType != "application/json" || ev.Key != bodyXSSKey {
			t.Fatalf("GET /admin/dlq/orders/%s: %d %+v", id, code, ev)
		}
		row := `document.querySelector('#dlq tr[data-id="` + id + `"]')`
		b.click(`#dlq tr[data-id="` + id + `"] button[data-action="show-body"]`)
		b.wait("the preview", row+`.nextElementSibling && `+row+`.nextElementSibling.querySelector('pre.body')`)
		if got := consoleEval[string](b, row+`.nextElementSibling.querySelector('pre.body').textContent`); got != bodyXSS {
			t.Errorf("the preview shows %q, want the body %q", got, bodyXSS)
		}
		if n := consoleEval[int](b, row+`.nextElementSibling.querySelectorAll('pre.body *').length`); n != 0 {
			t.Errorf("the preview holds %d elements, want text only", n)
		}
		if !consoleEval[bool](b, row+`.nextElementSibling.textContent.includes("application/json")`) {
			t.Error("the preview does not give the Content-Type")
		}
		if n := consoleEval[int](b, `document.querySelectorAll('main img, main script').length`); n != 0 {
			t.Errorf("%d img or script elements in the page's content", n)
		}
		if typ := consoleEval[string](b, `typeof window.__xss`); typ != "undefined" {
			t.Errorf("window.__xss is %s: the attacker's markup ran", typ)
		}
		b.screenshot("console-dlq.png")
		// The button hides it again.
		b.click(`#dlq tr[data-id="` + id + `"] button[data-action="show-body"]`)
		b.wait("the preview to close", `!document.querySelector('#dlq tr.preview')`)
		// Out of the DLQ, so that the next steps count the others.
		if code := in.adminJSON("DELETE", "/admin/dlq/orders/"+id, nil); code != http.StatusOK {
			t.Fatalf("purge the body-xss event: %d", code)
		}
	})

	t.Run("replay one from the DLQ page", func(t *testing.T) {
		b := b.with(t)
		id := ids[xssImg]
		before := len(up.tries(xssImg))
		b.click(`#dlq tr[data-id="` + id + `"] button[data-action="replay"]`)
		qEventually(t, 10*time.Second, func() bool { return up.completions(xssImg) == 1 }, func() string { return fmt.Sprintf("tries %v", up.tries(xssImg)) })
		if got := len(up.tries(xssImg)); got != before+1 {
			t.Errorf("upstream tries of the replayed event: %d, want %d", got, before+1)
		}
		b.wait("the replayed entry to leave", `!document.querySelector('#dlq tr[data-id="`+id+`"]') && document.querySelectorAll('#dlq tbody tr[data-id]').length === 2`)
		for _, e := range in.dlq().Entries {
			if e.ID == id {
				t.Errorf("the replayed event is still in the DLQ: %+v", e)
			}
		}
	})

	t.Run("key lookup and reset", func(t *testing.T) {
		b := b.with(t)
		id := ids[xssScript]
		b.click(`#dlq tr[data-id="` + id + `"] td.key a`)
		b.wait("the key page", `document.getElementById('key-state') && document.getElementById('key-state').textContent === "dead_lettered"`)
		if got := consoleEval[string](b, `location.pathname`); got != "/ui/keys/orders/"+encodeURIComponent(xssScript) {
			t.Errorf("key page address %q", got)
		}
		// The address reloads to the same page.
		b.do(chromedp.Reload())
		b.wait("the key page after a reload", `document.getElementById('key-state') && document.getElementById('key-state').textContent === "dead_lettered"`)
		if got := consoleEval[string](b, `document.querySelector('#key dd').textContent`); got != xssScript {
			t.Errorf("key shown as %q", got)
		}
		// The timeline: the arrival, the try the upstream refused, the
		// dead-lettering with its reason, each row built of text.
		b.wait("the history table", `document.querySelectorAll('#history tbody tr[data-kind]').length >= 3`)
		kinds := consoleEval[string](b, `[...document.querySelectorAll('#history tbody tr[data-kind]')].map(r => r.dataset.kind).join(" ")`)
		if kinds != "arrival try dead" {
			t.Errorf("history rows %q, want arrival try dead", kinds)
		}
		if d := consoleEval[string](b, `document.querySelector('#history tr[data-kind="dead"] td.detail').textContent`); d != "rejected:400" {
			t.Errorf("dead row detail %q", d)
		}
		if d := consoleEval[string](b, `document.querySelector('#history tr[data-kind="arrival"] td.detail').textContent`); !strings.HasPrefix(d, "queued") {
			t.Errorf("arrival row detail %q", d)
		}
		if typ := consoleEval[string](b, `typeof window.__xss`); typ != "undefined" {
			t.Errorf("window.__xss is %s: the attacker's markup ran", typ)
		}
		b.screenshot("console-key.png")

		// Reset asks first.
		b.click(`button[data-action="reset"]`)
		b.wait("the confirmation", `document.querySelector('button[data-action="confirm"]')`)
		if st := in.keyState(xssScript).State; st != "dead_lettered" {
			t.Fatalf("the key changed before the confirmation: %s", st)
		}
		b.click(`button[data-action="confirm"]`)
		b.wait("the reset key", `document.getElementById('key-state') && document.getElementById('key-state').textContent === "absent"`)
		// The reset is the timeline's last row, the history kept.
		b.wait("the reset in the history", `[...document.querySelectorAll('#history tbody tr[data-kind]')].map(r => r.dataset.kind).join(" ") === "arrival try dead delete"`)
		if st := in.keyState(xssScript).State; st != "absent" {
			t.Errorf("after the reset the key is %s, want absent", st)
		}
	})

	t.Run("purge from the DLQ page", func(t *testing.T) {
		b := b.with(t)
		id := ids[xssPurge]
		b.do(chromedp.Navigate(ui + "routes/orders/dlq"))
		b.wait("the DLQ row", `document.querySelector('#dlq tr[data-id="`+id+`"]')`)
		b.click(`#dlq tr[data-id="` + id + `"] button[data-action="purge"]`)
		if len(in.dlq().Entries) == 0 {
			t.Fatal("purged before the confirmation")
		}
		b.click(`#dlq tr[data-id="` + id + `"] button[data-action="confirm"]`)
		b.wait("the purged entry to leave", `!document.querySelector('#dlq tr[data-id="`+id+`"]')`)
		for _, e := range in.dlq().Entries {
			if e.ID == id {
				t.Errorf("the purged event is still in the DLQ: %+v", e)
			}
		}
		if typ := consoleEval[string](b, `typeof window.__xss`); typ != "undefined" {
			t.Errorf("window.__xss is %s: the attacker's markup ran", typ)
		}
	})

	t.Run("paging and replay all", func(t *testing.T) { consoleReplayAll(t, in, up, b.with(t)) })
}

// consoleReplayAll: a DLQ paged one event a page with the cursor, then
// replayed whole from the page, with its progress shown.
func consoleReplayAll(t *testing.T, in *qInstance, up *qUpstream, b *consoleTab) {
	keys := []string{"<i>all-1</i>", "<i>all-2</i>"}
	for _, k := range keys {
		if a := qPost(in.url(), k); a.status != http.StatusAccepted {
			t.Fatalf("post %q: %d %s", k, a.status, a.raw)
		}
	}
	qEventually(t, 10*time.Second, func() bool { return len(in.dlq().Entries) == 2 }, func() string { return fmt.Sprintf("DLQ %+v", in.dlq()) })
	first, second := in.dlq().Entries[0].ID, in.dlq().Entries[1].ID
	b.do(chromedp.Navigate(in.admin() + "/ui/routes/orders/dlq?limit=1"))
	b.wait("the first page", `document.querySelectorAll('#dlq tbody tr[data-id]').length === 1 && document.querySelector('#dlq tr[data-id="`+first+`"]')`)
	b.click(`button[data-action="next"]`)
	b.wait("the second page", `document.querySelectorAll('#dlq tbody tr[data-id]').length === 1 && document.querySelector('#dlq tr[data-id="`+second+`"]')`)
	if consoleEval[bool](b, `!!document.querySelector('button[data-action="next"]')`) {
		t.Error("a next page after the last")
	}
	b.click(`button[data-action="first"]`)
	b.wait("the first page again", `document.querySelector('#dlq tr[data-id="`+first+`"]')`)

	b.click(`button[data-action="replay-all"]`)
	b.click(`button[data-action="confirm"]`)
	b.wait("the replay's end", `document.getElementById('replay-progress').textContent.includes("done, 2 of 2 replayed")`)
	b.wait("the empty DLQ", `document.querySelectorAll('#dlq tbody tr[data-id]').length === 0`)
	up.waitCompleted(t, keys, 10*time.Second)
	for _, k := range keys {
		if n := up.completions(k); n != 1 {
			t.Errorf("%s completed %d times, want 1", k, n)
		}
	}
}

// encodeURIComponent escapes s as the console's JavaScript does.
func encodeURIComponent(s string) string {
	const keep = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'()"
	var out strings.Builder
	for _, c := range []byte(s) {
		if strings.IndexByte(keep, c) >= 0 {
			out.WriteByte(c)
		} else {
			fmt.Fprintf(&out, "%%%02X", c)
		}
	}
	return out.String()
}

// A page of another site the operator opens cannot change anything
// through a tokenless admin listener with a form: its cross-site POSTs to
// the endpoints the console uses (pause, resume, replay one, replay all)
// are refused, and nothing changes. (A form cannot send the DELETEs of
// purge and reset; admin's TestAdminRefusesCrossSiteSimpleRequests sends
// them as other simple requests.)
func TestConsoleCrossSiteFormPost(t *testing.T) {
	up := newQUpstream(t)
	up.setAnswer(func(string, int) int { return http.StatusBadRequest })
	in := consoleGateway(t, up, nil)
	if a := qPost(in.url(), "dead-1"); a.status != http.StatusAccepted {
		t.Fatalf("post: %d %s", a.status, a.raw)
	}
	qEventually(t, 10*time.Second, func() bool { return len(in.dlq().Entries) == 1 }, func() string { return "not dead-lettered" })
	id := in.dlq().Entries[0].ID
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := in.admin() + r.URL.Query().Get("to")
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form method="POST" action="%s" enctype="%s"><input name="x" value="1"></form><script>document.forms[0].submit()</script>`,
			target, r.URL.Query().Get("enctype"))
	}))
	t.Cleanup(evil.Close)
	b := newConsoleTab(t)
	for _, to := range []string{"/admin/routes/orders/pause", "/admin/dlq/orders/" + id + "/replay", "/admin/dlq/orders/replay"} {
		for _, enctype := range []string{"application/x-www-form-urlencoded", "text/plain", "multipart/form-data"} {
			b.do(chromedp.Navigate(evil.URL + "/?to=" + to + "&enctype=" + enctype))
			b.wait("the admin listener's answer", `location.href.startsWith(`+jsString(in.admin())+`) && document.body && document.body.innerText.includes("refused")`)
		}
	}
	if in.routeInfo().Paused {
		t.Error("a cross-site form paused the route")
	}
	// Nor can it resume a paused route.
	if code := in.adminJSON("POST", "/admin/routes/orders/pause", nil); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}
	b.do(chromedp.Navigate(evil.URL + "/?to=/admin/routes/orders/resume&enctype=application/x-www-form-urlencoded"))
	b.wait("the admin listener's answer", `location.href.startsWith(`+jsString(in.admin())+`) && document.body && document.body.innerText.includes("refused")`)
	if !in.routeInfo().Paused {
		t.Error("a cross-site form resumed the route")
	}
	if p := in.dlq(); len(p.Entries) != 1 || p.Entries[0].ID != id {
		t.Errorf("a cross-site form changed the DLQ: %+v", p)
	}
	if code := in.adminJSON("GET", "/admin/dlq/orders/replay", nil); code != http.StatusNotFound {
		t.Errorf("GET /admin/dlq/orders/replay: %d, want 404 (no replay-all started)", code)
	}
	if n := len(up.tries("dead-1")); n != 1 {
		t.Errorf("the upstream saw %d tries, want 1", n)
	}
}

// With an admin token, the console asks for it on the first 401, says so
// when it is refused, and then works with the right one, kept in the
// tab's sessionStorage (never in the address or a cookie).
func TestConsoleToken(t *testing.T) {
	const token = "console-test-token-0123456789"
	up := newQUpstream(t)
	in := consoleGateway(t, up, map[string]string{"CLAWGATE_ADMIN_TOKEN": token})
	b := newConsoleTab(t)
	b.do(chromedp.Navigate(in.admin() + "/ui/"))
	b.wait("the token prompt", `!document.getElementById('auth').hidden`)
	if n := consoleEval[int](b, `document.querySelectorAll('#routes tbody tr').length`); n != 0 {
		t.Fatalf("routes shown without the token: %d", n)
	}
	b.do(chromedp.SendKeys(chromedp.CSS("#token-input"), "wrong-token"))
	b.click("#token-submit")
	b.wait("the refusal", `!document.getElementById('auth').hidden && document.getElementById('token-msg').textContent.includes("refused")`)
	b.do(chromedp.SendKeys(chromedp.CSS("#token-input"), token))
	b.click("#token-submit")
	b.wait("the routes table", `document.querySelectorAll('#routes tbody tr').length === 2`)
	if consoleEval[string](b, `sessionStorage.getItem("clawgate-admin-token")`) != token {
		t.Error("the token is not in sessionStorage")
	}
	if c := consoleEval[string](b, `document.cookie`); c != "" {
		t.Errorf("cookies: %q", c)
	}
	if u := consoleEval[string](b, `location.href`); strings.Contains(u, token) {
		t.Errorf("the token is in the address %q", u)
	}
	// A state change with the token: pause from the overview.
	b.click(`#routes tr[data-route="orders"] button[data-action="pause"]`)
	qEventually(t, 5*time.Second, func() bool {
		var page admin.RoutesPage
		req, _ := http.NewRequest("GET", in.admin()+"/admin/routes", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&page)
		return len(page.Routes) > 0 && page.Routes[0].Paused
	}, func() string { return "orders is not paused" })
	// The token is asked once per tab: a new page of the same tab uses it.
	b.do(chromedp.Navigate(in.admin() + "/ui/routes/orders"))
	b.wait("the route page", `document.getElementById('route') && document.getElementById('route').textContent.includes("since")`)
	if !consoleEval[bool](b, `document.getElementById('auth').hidden`) {
		t.Error("the token was asked again")
	}
}
