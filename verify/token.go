package verify

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// tokenScheme verifies a shared secret sent as it is in a header (GitLab's
// X-Gitlab-Token, Telegram's X-Telegram-Bot-Api-Secret-Token), after an
// optional prefix ("Bearer "). The value's SHA-256 is compared with each
// active secret's in constant time, so that neither the secret's length
// nor its bytes show in the timing. A token authenticates the sender and
// binds nothing: not the body, not a time. Anyone who sees one delivery
// holds the token and can send any delivery; the scheme therefore signs no
// body and no header, and is not a SignedDigester.
type tokenScheme struct {
	header string
	prefix string
	keys   []tokenKey
}

type tokenKey struct {
	Secret
	sum [sha256.Size]byte
}

// maxTokenLen bounds the token a delivery may carry.
const maxTokenLen = 1024

func newToken(c Config, env Env) (*tokenScheme, []string, error) {
	hdr := strings.TrimSpace(c.Header)
	if hdr == "" {
		return nil, nil, fmt.Errorf("verify: token: header is required (the request header carrying the token)")
	}
	if !validHeaderName(hdr) {
		return nil, nil, fmt.Errorf("verify: token: header %q is not a header name", clipText(hdr))
	}
	v := &tokenScheme{header: textproto.CanonicalMIMEHeaderKey(hdr), prefix: c.Prefix}
	if c.Format != "" {
		f, err := parseFormat(c.Format)
		switch {
		case err != nil:
			return nil, nil, fmt.Errorf("verify: token: format: %w", err)
		case c.Prefix != "":
			return nil, nil, fmt.Errorf("verify: token: set prefix or format, not both")
		case f.kind == fmtPlain:
		case f.kind == fmtPrefix:
			v.prefix = f.prefix
		default:
			return nil, nil, fmt.Errorf("verify: token: format must be \"{signature}\" or \"PREFIX{signature}\"")
		}
	}
	if c.Template != "" || c.Timestamp != "" || c.Signature != "" {
		return nil, nil, fmt.Errorf("verify: token: a token signs nothing, so template, timestamp and signature do not apply")
	}
	secrets, warnings, err := ResolveSecrets(c.Secrets, env)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range secrets {
		v.keys = append(v.keys, tokenKey{Secret: s, sum: sha256.Sum256(s.Key)})
	}
	return v, warnings, nil
}

// Verify implements Verifier.
func (v *tokenScheme) Verify(h http.Header, _ []byte, now time.Time) (string, error) {
	hv := header(h, v.header)
	if hv == "" {
		return "", fail(SchemeToken, ErrMissing, "token header missing")
	}
	tok, ok := strings.CutPrefix(hv, v.prefix)
	if !ok || tok == "" {
		return "", fail(SchemeToken, ErrMalformed, "token prefix missing")
	}
	if len(tok) > maxTokenLen {
		return "", fail(SchemeToken, ErrMalformed, "token too long")
	}
	var buf [maxTokenLen]byte
	n := copy(buf[:], tok)
	sum := sha256.Sum256(buf[:n])
	match, active := -1, false
	for i := range v.keys {
		if !v.keys[i].Active(now) {
			continue
		}
		active = true
		if subtle.ConstantTimeCompare(sum[:], v.keys[i].sum[:]) == 1 && match < 0 {
			match = i
		}
	}
	switch {
	case match >= 0:
		return v.keys[match].ID, nil
	case !active:
		return "", fail(SchemeToken, ErrNoActiveSecret, "no secret is active")
	}
	return "", fail(SchemeToken, ErrMismatch, "the token matches no active secret")
}

func (v *tokenScheme) signer(signKey []byte) (Signer, error) {
	return &tokenSigner{v: v, key: signKey}, nil
}

type tokenSigner struct {
	v   *tokenScheme
	key []byte
}

// Sign implements Signer: the header carries the prefix and the first
// active secret (or signKey).
func (s *tokenSigner) Sign(h http.Header, _ []byte, now time.Time) error {
	key := s.key
	if len(key) == 0 {
		for i := range s.v.keys {
			if s.v.keys[i].Active(now) {
				key = s.v.keys[i].Key
				break
			}
		}
	}
	if len(key) == 0 {
		return fail(SchemeToken, ErrNoActiveSecret, "no secret is active")
	}
	h.Set(s.v.header, s.v.prefix+string(key))
	return nil
}
