package main

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawgate/clawgate/verify"
)

// presetRoutes writes one route per provider preset into a config, with
// what each preset needs the route to write, and returns the config text,
// the environment its secrets come from and each provider's -sign-key file
// ("" when the route's secret signs).
func presetRoutes(t *testing.T, dir string) (string, map[string]string, map[string]string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("listen: \"%LISTEN%\"\nadmin: { listen: \"%ADMIN%\" }\nroutes:\n")
	env := map[string]string{}
	signKeys := map[string]string{}

	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	edSeed := filepath.Join(dir, "discord.seed")
	os.WriteFile(edSeed, []byte(hex.EncodeToString(edPriv.Seed())), 0o600)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	ecPath := filepath.Join(dir, "ec.key.pem")
	writePEM(t, ecPath, "PRIVATE KEY", mustPKCS8(t, ec))
	writeJWKS(t, filepath.Join(dir, "plaid.jwks.json"), map[string]string{"kty": "EC", "crv": "P-256", "kid": "p1", "alg": "ES256",
		"x": b64(ec.X.FillBytes(make([]byte, 32))), "y": b64(ec.Y.FillBytes(make([]byte, 32)))})
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	rpub, _ := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	writePEM(t, filepath.Join(dir, "google.pub.pem"), "PUBLIC KEY", rpub)
	rsaPath := filepath.Join(dir, "google.key.pem")
	writePEM(t, rsaPath, "PRIVATE KEY", mustPKCS8(t, rk))

	for _, p := range verify.Presets() {
		envName := "T_" + strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))
		fmt.Fprintf(&b, "  - name: %s\n    match: { path: /p/%s }\n    upstream: %%UPSTREAM%%\n    provider: %s\n", p.Name, p.Name, p.Name)
		if verify.UsesURL(p.Verify) {
			fmt.Fprintf(&b, "    public_url: https://hooks.example.com/p/%s?account=1\n", p.Name)
		}
		switch p.Verify.Scheme {
		case verify.SchemeStandardWebhooks:
			env[envName] = "whsec_" + base64.StdEncoding.EncodeToString([]byte("preset-test-secret-0123456789abc"))
			fmt.Fprintf(&b, "    verify: { secrets: [{ id: s, secret_env: %s }] }\n", envName)
		case verify.SchemeEd25519:
			fmt.Fprintf(&b, "    verify: { secrets: [{ id: s, secret: %s }] }\n", hex.EncodeToString(edPriv.Public().(ed25519.PublicKey)))
			signKeys[p.Name] = edSeed
		case verify.SchemeECDSAP256:
			fmt.Fprintf(&b, "    verify: { secrets: [{ id: s, secret: %q }] }\n", base64.StdEncoding.EncodeToString(ecDER))
			signKeys[p.Name] = ecPath
		case verify.SchemeJWT:
			if p.Name == "plaid" {
				b.WriteString("    verify: { jwt: { jwks_file: plaid.jwks.json } }\n")
				signKeys[p.Name] = ecPath
			} else {
				// Google's keys are not fetched in a test: the route
				// writes a key of its own instead of the jwks_url.
				b.WriteString("    verify: { jwt: { jwks_url: \"\", keys: [{ id: s, pem_file: google.pub.pem }], audience: \"https://hooks.example.com/p/google-pubsub\" } }\n")
				signKeys[p.Name] = rsaPath
			}
		default:
			env[envName] = "preset-secret-" + p.Name + "-0123456789"
			fmt.Fprintf(&b, "    verify: { secrets: [{ id: s, secret_env: %s }] }\n", envName)
		}
	}
	return b.String(), env, signKeys
}

// TestSimulateEveryPresetThroughServe runs a gateway with a route per
// provider preset and, for each, `clawgate simulate -provider NAME`: the
// provider's kind of event, signed as the provider signs it, verifies at
// the gateway and is forwarded once, its copies replayed.
func TestSimulateEveryPresetThroughServe(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	text, env, signKeys := presetRoutes(t, dir)
	gwURL, adminURL, cfgPath := startGateway(t, text)
	// The keys the config refers to live next to it.
	for _, f := range []string{"plaid.jwks.json", "google.pub.pem"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(filepath.Dir(cfgPath), f), data, 0o600)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	cmd := exec.Command(bin, "serve", "-config", cfgPath)
	cmd.Env = os.Environ()
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitReady(t, adminURL+"/healthz")

	for _, p := range verify.Presets() {
		t.Run(p.Name, func(t *testing.T) {
			args := []string{"simulate", "-url", gwURL + "/p/" + p.Name, "-provider", p.Name, "-times", "4", "-config", cfgPath}
			if k := signKeys[p.Name]; k != "" {
				args = append(args, "-sign-key", k)
			}
			code, out, errOut := runCmd(t, args...)
			if code != 0 || !strings.Contains(out, "1 forwarded, 3 replayed") || !strings.Contains(out, "(provider "+p.Name+")") {
				t.Fatalf("exit %d\n%s\n%s\ngateway log:\n%s", code, out, errOut, stderr.String())
			}
		})
	}
	metrics, err := httpGet(adminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, "webhook_signature_failures_total{") && !strings.HasSuffix(l, " 0") {
			t.Errorf("signature failure: %s", l)
		}
	}
}

// TestCheckExplainsPresets: check -explain prints a provider route
// expanded, and plain check notes the routes that only the body's hash
// protects.
func TestCheckExplainsPresets(t *testing.T) {
	dir := t.TempDir()
	text, env, _ := presetRoutes(t, dir)
	text = strings.NewReplacer("%UPSTREAM%", "http://127.0.0.1:9000", "%LISTEN%", "127.0.0.1:0", "%ADMIN%", "127.0.0.1:0").Replace(text)
	path := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(path, []byte(text), 0o600)
	for k, v := range env {
		t.Setenv(k, v)
	}
	code, out, errOut := runCmd(t, "check", "-explain", "-config", path)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for _, want := range []string{
		"route zoom (provider zoom: Zoom)\n",
		"    scheme:       hmac (template)\n",
		"    template:     v0:{header:X-Zm-Request-Timestamp}:{body}\n",
		"    timestamp:    header:X-Zm-Request-Timestamp (unix), tolerance 1h30m0s both ways\n",
		"    secret:       s (secret_env T_ZOOM)\n",
		"  public_url:     https://hooks.example.com/p/twilio?account=1\n",
		"    first source: NOT signed: the signature does not cover the body's bytes\n",
		"  replay guard:   on: ",
		"    first source: signed: the signature covers header Twitch-Eventsub-Message-Id\n",
		"route discord (provider discord: Discord)\n",
		"    scheme:       ed25519\n",
		"    algorithm by: X-Twilio-Webhooks-Signature-Settings (its algorithm= item chooses sha1 or sha256; never weaker than sha1)\n",
		"note: route \"github\" (provider github): the provider signs no timestamp and no event id, so the key is the body's SHA-256",
		"config ok: 32 routes\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q", want)
		}
	}
	for _, v := range env {
		if strings.Contains(out, v) || strings.Contains(errOut, v) {
			t.Fatalf("check prints a secret's value")
		}
	}
	if strings.Contains(out, `note: route "stripe"`) || strings.Contains(out, `note: route "zoom"`) {
		t.Error("a note for a route whose provider signs a timestamp")
	}
	// Without -explain: the notes and the summary only.
	_, plain, _ := runCmd(t, "check", "-config", path)
	if strings.Contains(plain, "route zoom (") || !strings.Contains(plain, `note: route "github"`) {
		t.Errorf("plain check:\n%s", plain)
	}
	if code, _, errOut := runCmd(t, "simulate", "-url", "http://127.0.0.1:1/x", "-provider", "nope", "-config", path); code != 2 || !strings.Contains(errOut, `unknown provider "nope"`) {
		t.Errorf("unknown provider: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "simulate", "-url", "http://127.0.0.1:1/x", "-provider", "discord", "-config", path); code != 1 || !strings.Contains(errOut, "-sign-key") {
		t.Errorf("discord without -sign-key: exit %d %q", code, errOut)
	}
}
