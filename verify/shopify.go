package verify

import "crypto/sha256"

// newShopify compiles the shopify scheme: the base64 HMAC-SHA256 of the
// raw body, keyed with the app's client secret (UTF-8), in
// X-Shopify-Hmac-Sha256 (webhooks) or Shopify-Hmac-Sha256 (Shopify Events,
// whose headers have no X- prefix). As @shopify/shopify-api's
// webhooks.validate does, Shopify-Hmac-Sha256 is read when present and not
// empty, X-Shopify-Hmac-Sha256 otherwise; the Signer sets
// X-Shopify-Hmac-Sha256. Either way the signature covers the body alone:
// no header is signed. The scheme has no timestamp.
func newShopify(c Config, env Env) (*bodyMAC, []string, error) {
	v, warnings, err := newBodyMAC("shopify", "X-Shopify-Hmac-Sha256", "", true, sha256.New, c, env)
	if err != nil {
		return nil, nil, err
	}
	v.alts = []string{"Shopify-Hmac-Sha256"}
	return v, warnings, nil
}
