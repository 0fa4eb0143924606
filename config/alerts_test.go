package config

import (
	"strings"
	"testing"
)

// Regression: the PagerDuty routing key was read from an undocumented
// variable (CLAWGATE_ALERT_ROUTING_KEY) rather than from the config. It is
// now named by alerts.pagerduty_routing_key_env, like every other secret.
func TestPagerDutyRoutingKeyComesFromTheConfiguredVariable(t *testing.T) {
	useFakes(t)
	env := map[string]string{
		"ALERT_URL":                  "https://events.pagerduty.com/v2/enqueue",
		"PD_KEY":                     "configured-routing-key-0123456789",
		"CLAWGATE_ALERT_ROUTING_KEY": "legacy-routing-key-0123456789",
	}
	getenv := func(k string) string { return env[k] }

	cfg, err := Parse([]byte("alerts: { webhook_url_env: ALERT_URL, pagerduty_routing_key_env: PD_KEY }"+okRoute), "gateway.yaml", "", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Alerts.PagerDutyRoutingKey != env["PD_KEY"] {
		t.Fatalf("routing key %q, want the value of PD_KEY", cfg.Alerts.PagerDutyRoutingKey)
	}
	if len(cfg.Warnings) != 0 {
		t.Fatalf("warnings: %q", cfg.Warnings)
	}

	// Without the field nothing is read, and the old variable, still set,
	// is pointed at the field instead of being sent silently or dropped
	// silently.
	cfg, err = Parse([]byte("alerts: { webhook_url_env: ALERT_URL }"+okRoute), "gateway.yaml", "", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Alerts.PagerDutyRoutingKey != "" {
		t.Fatalf("routing key %q without pagerduty_routing_key_env", cfg.Alerts.PagerDutyRoutingKey)
	}
	w := strings.Join(cfg.Warnings, "\n")
	if !strings.Contains(w, "gateway.yaml:1: alerts: CLAWGATE_ALERT_ROUTING_KEY is set but not read") ||
		!strings.Contains(w, "pagerduty_routing_key_env") {
		t.Fatalf("warnings: %q", w)
	}
	for _, v := range env {
		if strings.Contains(w, v) {
			t.Fatalf("warning shows the value of a variable: %q", w)
		}
	}
}
