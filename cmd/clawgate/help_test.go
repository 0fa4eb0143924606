package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
)

// Regression: `clawgate -h` and `--help` printed serve's flags instead of
// the command list.
func TestHelpFlagPrintsTheCommandList(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help", "help"} {
		t.Run(arg, func(t *testing.T) {
			code, out, errOut := runCmd(t, arg)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if !strings.HasPrefix(out, "usage: clawgate <command> [flags]\n") || strings.Contains(out, "-grace") {
				t.Fatalf("not the command list:\n%s", out)
			}
			for _, c := range commands {
				if !strings.Contains(out, "\n  "+c.name+" ") {
					t.Errorf("command list lacks %s:\n%s", c.name, out)
				}
			}
		})
	}
	// help CMD is the command's own help.
	if code, out, _ := runCmd(t, "help", "check"); code != 0 || !strings.HasPrefix(out, "usage: clawgate check [flags]\n") {
		t.Fatalf("help check: exit %d %q", code, out)
	}
}

// Regression: `clawgate --version` failed with "flag provided but not
// defined: -version".
func TestVersionFlagPrintsTheVersion(t *testing.T) {
	_, want, _ := runCmd(t, "version")
	for _, arg := range []string{"--version", "-version"} {
		if code, out, errOut := runCmd(t, arg); code != 0 || out != want || errOut != "" {
			t.Errorf("%s: exit %d %q %q, want %q", arg, code, out, errOut, want)
		}
	}
}

// Regression: `clawgate keys -h` (and `keys get -h`) exited 2, as a usage
// error, where every other command's -h exits 0.
func TestKeysHelpExits0(t *testing.T) {
	for _, args := range [][]string{{"keys", "-h"}, {"keys", "--help"}, {"keys", "get", "-h"}, {"keys", "reset", "orders", "k", "-h"}} {
		code, out, errOut := runCmd(t, args...)
		if code != 0 || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
		if !strings.HasPrefix(out, "usage: clawgate keys get|reset|history [flags] ROUTE KEY\n") || !strings.Contains(out, "-admin URL") {
			t.Errorf("%q: usage %q", args, out)
		}
	}
}

// Every command's -h exits 0 with its usage line, its description and its
// flags, each default printed once. Regression: -config printed its
// default twice.
func TestEveryCommandHelp(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, c.name, "-h")
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if !strings.HasPrefix(out, "usage: clawgate "+c.name) || !strings.Contains(out, "\n"+c.about+"\n") {
				t.Fatalf("no usage line and description:\n%s", out)
			}
			for _, entry := range strings.Split(out, "\n  -")[1:] {
				if n := strings.Count(entry, "default"); n > 1 {
					t.Errorf("a default is given %d times:\n  -%s", n, entry)
				}
			}
		})
	}
}

// Regression: check said "config ok: 1 routes".
func TestCheckCountsRoutesInEnglish(t *testing.T) {
	const route = `
  - name: %s
    match: { path: /%s }
    upstream: http://127.0.0.1:9000
    verify: { scheme: none }`
	for n, want := range map[int]string{1: "config ok: 1 route\n", 2: "config ok: 2 routes\n"} {
		text := "routes:"
		for i, name := range []string{"a", "b"}[:n] {
			_ = i
			text += strings.NewReplacer("%s", name).Replace(route)
		}
		p := filepath.Join(t.TempDir(), "gateway.yaml")
		os.WriteFile(p, []byte(text+"\n"), 0o600)
		if code, out, errOut := runCmd(t, "check", "-config", p); code != 0 || out != want {
			t.Errorf("%d routes: exit %d %q %q, want %q", n, code, out, errOut, want)
		}
	}
}

// stubGateway is the little of the gateway the admin API needs.
type stubGateway struct{ cfg *config.Config }

func (s stubGateway) Config() *config.Config                    { return s.cfg }
func (stubGateway) Forget(string)                               {}
func (stubGateway) WindowState(string) (int64, time.Time, bool) { return 0, time.Time{}, false }

// Regression: `keys reset` printed the key's record as it was before the
// reset (state finished, status 200), which read as if nothing happened.
func TestKeysResetSaysWhatItForgot(t *testing.T) {
	st := ledger.NewMemoryStore(store.MemoryOptions{})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		c, err := st.Claim(ctx, "orders:evt_1", "fp", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if c.State == store.Claimed {
			if err := st.Finish(ctx, "orders:evt_1", c.Token, store.Outcome{Status: 200, Fingerprint: "fp"}, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := &config.Config{Routes: []config.Route{{Name: "orders"}}}
	srv := httptest.NewServer(admin.Handler(admin.Options{
		Gatherer: prometheus.NewRegistry(), Store: st, Gateway: stubGateway{cfg},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}))
	defer srv.Close()

	code, out, errOut := runCmd(t, "keys", "reset", "-admin", srv.URL, "orders", "evt_1")
	if want := "reset orders evt_1: forgot finished (status 200, 3 attempts); the next delivery is forwarded\n"; code != 0 || out != want {
		t.Fatalf("exit %d %q %q, want %q", code, out, errOut, want)
	}
	code, out, _ = runCmd(t, "keys", "reset", "-admin", srv.URL, "orders", "evt_1")
	if want := "reset orders evt_1: nothing to forget (the key was absent); the next delivery is forwarded\n"; code != 0 || out != want {
		t.Fatalf("second reset: exit %d %q, want %q", code, out, want)
	}
	// -json prints the API's answer: what was forgotten, marked as a reset.
	st.Claim(ctx, "orders:evt_2", "fp", time.Minute)
	code, out, _ = runCmd(t, "keys", "reset", "-json", "-admin", srv.URL, "orders", "evt_2")
	var res admin.ResetResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || !res.Reset || res.Forgot.State != "in_flight" || res.Forgot.Attempts != 1 {
		t.Fatalf("-json: exit %d %q", code, out)
	}
}

// Regression: a subcommand's -h wrote its usage to stderr while
// `clawgate -h` wrote to stdout, so `clawgate check -h | less` showed
// nothing. A usage error still prints the usage to stderr, exit 2.
func TestSubcommandHelpGoesToStdout(t *testing.T) {
	for _, args := range [][]string{{"check", "-h"}, {"serve", "--help"}, {"echo", "-help"}, {"simulate", "-h"}, {"keys", "get", "-h"}, {"dlq", "list", "-h"}, {"help", "health"}} {
		code, out, errOut := runCmd(t, args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: clawgate ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	code, out, errOut := runCmd(t, "check", "-nope")
	if code != 2 || out != "" || !strings.Contains(errOut, "flag provided but not defined: -nope") || !strings.Contains(errOut, "usage: clawgate check") {
		t.Errorf("check -nope: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// Regression: `keys get orders` said "want ROUTE and KEY, got 1
// arguments"; it names the missing argument in one sentence, exit 2.
func TestKeysNamesTheMissingArgument(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "get", "orders"}, "clawgate keys get: missing the KEY argument (want ROUTE KEY); clawgate keys -h shows the flags\n"},
		{[]string{"keys", "reset"}, "clawgate keys reset: missing the ROUTE and KEY arguments (want ROUTE KEY); clawgate keys -h shows the flags\n"},
		{[]string{"keys", "get", "orders", "k", "extra"}, "clawgate keys get: unexpected argument \"extra\" (want ROUTE KEY); clawgate keys -h shows the flags\n"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := runCmd(t, tt.args...)
			if code != 2 || out != "" || errOut != tt.want {
				t.Errorf("exit %d, stdout %q, stderr %q, want %q", code, out, errOut, tt.want)
			}
		})
	}
}
