package verify

import "crypto/sha256"

// newGitHub compiles the github scheme: X-Hub-Signature-256 carries
// "sha256=" and the lowercase hex HMAC-SHA256 of the raw body, keyed with
// the secret's UTF-8 bytes. The scheme has no timestamp, and the delivery id
// (X-GitHub-Delivery) is not signed.
func newGitHub(c Config, env Env) (*bodyMAC, []string, error) {
	return newBodyMAC("github", "X-Hub-Signature-256", "sha256=", false, sha256.New, c, env)
}
