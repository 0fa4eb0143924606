package verify

import "crypto/sha256"

// newShopify compiles the shopify scheme: X-Shopify-Hmac-Sha256 carries the
// base64 HMAC-SHA256 of the raw body, keyed with the app's client secret
// (UTF-8). The scheme has no timestamp.
func newShopify(c Config, env Env) (*bodyMAC, []string, error) {
	return newBodyMAC("shopify", "X-Shopify-Hmac-Sha256", "", true, sha256.New, c, env)
}
