package verify

// New compiles c: it resolves secrets (env, file, inline), loads keys, and
// rejects an empty or unknown scheme, a block with no active secret, an unset
// secret variable, and (jwt) "none" or a key of the wrong family. Warnings
// (inline secret, expired secret) are returned for the config's log.
func New(c Config, env Env) (v Verifier, warnings []string, err error) {
	panic("TODO verify helper")
}

// NewSigner returns a Signer for c. For jwt, signKey is a PEM private key
// (or nil to sign HS* with the first active secret).
func NewSigner(c Config, env Env, signKey []byte) (Signer, error) {
	panic("TODO verify helper")
}

// SignedHeaders lists the request headers the scheme's signature covers
// (e.g. webhook-id for standard-webhooks); nil when only the body is signed.
func SignedHeaders(scheme string) []string {
	panic("TODO verify helper")
}
