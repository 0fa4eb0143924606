package main

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"

	"github.com/clawgate/clawgate/admin"
)

// setAdminHeaders sets what every admin API request of the CLI carries:
// the bearer token from $CLAWGATE_ADMIN_TOKEN and, on a request that
// changes state (anything but GET and HEAD), Content-Type:
// application/json and X-Clawgate-Admin: 1, which a browser cannot send
// across origins without a preflight.
func setAdminHeaders(req *http.Request) {
	if tok := os.Getenv("CLAWGATE_ADMIN_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(admin.Header, "1")
	}
}

// apiError is the error an admin API answer carries: its JSON "error",
// else the body itself, trimmed.
func apiError(body []byte) string {
	var e struct{ Error string }
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	return strings.TrimSpace(string(body))
}
