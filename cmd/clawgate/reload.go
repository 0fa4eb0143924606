package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/clawgate/clawgate/admin"
)

// cmdReload asks a running gateway to reload its config, as SIGHUP does
// (nginx -s reload, caddy reload):
//
//	clawgate reload [-admin URL]
//
// It POSTs /admin/reload and prints the result: exit 0 when the config
// was reloaded, 1 when it was refused (each problem printed on stderr; the
// running config is kept) or the admin API could not be reached, 2 on a
// usage error.
func cmdReload(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("reload", stdout, stderr)
	adminURL := fs.String("admin", "http://127.0.0.1:9090", "admin listener `URL`")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this `duration`")
	if code := parseFlags(fs, args, 0); code >= 0 {
		return code
	}
	base, err := url.Parse(*adminURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		fmt.Fprintf(stderr, "clawgate reload: -admin %q is not an http(s) URL\n", *adminURL)
		return 2
	}
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(base.String(), "/")+"/admin/reload", strings.NewReader("{}"))
	if err != nil {
		fmt.Fprintf(stderr, "clawgate reload: %v\n", err)
		return 1
	}
	setAdminHeaders(req)
	resp, err := (&http.Client{Timeout: *timeout}).Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate reload: cannot reach the admin API at %s: %v\n", base.Redacted(), err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var res admin.ReloadResult
	decoded := json.Unmarshal(body, &res) == nil
	switch {
	case resp.StatusCode == http.StatusOK && decoded && res.Status == "reloaded":
		fmt.Fprintf(stdout, "config reloaded (%s)\n", base.Redacted())
		return 0
	case resp.StatusCode == http.StatusBadRequest && decoded && res.Status == "failed":
		fmt.Fprintln(stderr, "clawgate reload: the new config was refused; the gateway keeps running the old one:")
		for _, e := range res.Errors {
			fmt.Fprintf(stderr, "  %s\n", e)
		}
		return 1
	case resp.StatusCode == http.StatusUnauthorized:
		fmt.Fprintln(stderr, "clawgate reload: the admin API refused the token: set $CLAWGATE_ADMIN_TOKEN to the gateway's admin token")
		return 1
	}
	fmt.Fprintf(stderr, "clawgate reload: %s: %s\n", resp.Status, apiError(body))
	return 1
}
