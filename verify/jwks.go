package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// jwk is the subset of a JSON Web Key (RFC 7517, 7518, 8037) clawgate reads.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// loadJWKS reads a JWK Set file: see parseJWKS. A key that cannot be
// decoded is an error.
func loadJWKS(path string, algs []string) ([]*jwtKey, []string, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: jwt: jwks_file: cannot read %s: %w", path, unwrapPathErr(err))
	}
	return parseJWKS(data, algs, "jwks_file "+path, true)
}

// parseJWKS decodes a JWK Set; src names it in messages ("jwks_file
// PATH"). Keys of type RSA, EC (P-256, P-384, P-521) and OKP (Ed25519) are
// loaded; a key meant for encryption, of another type, or that fits none of
// algs is skipped with a warning, and so is a key that cannot be decoded
// unless strict, when that is an error. A set with no usable key is an
// error. A key's kid is its id, and its alg, when set, is the only
// algorithm it verifies.
func parseJWKS(data []byte, algs []string, src string, strict bool) ([]*jwtKey, []string, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, nil, fmt.Errorf("verify: jwt: %s: not a JSON Web Key Set: %w", src, err)
	}
	var keys []*jwtKey
	var warnings []string
	for i, k := range set.Keys {
		name := fmt.Sprintf("key %d", i)
		if k.Kid != "" {
			name = fmt.Sprintf("key %q", k.Kid)
		}
		if k.Use != "" && k.Use != "sig" {
			warnings = append(warnings, fmt.Sprintf("%s: %s skipped: use is %q, not sig", src, name, k.Use))
			continue
		}
		pub, err := k.publicKey()
		if err != nil {
			if strict {
				return nil, nil, fmt.Errorf("verify: jwt: %s: %s: %w", src, name, err)
			}
			warnings = append(warnings, fmt.Sprintf("%s: %s skipped: %v", src, name, err))
			continue
		}
		if pub == nil {
			warnings = append(warnings, fmt.Sprintf("%s: %s skipped: kty %q is not supported", src, name, k.Kty))
			continue
		}
		fits := slices.ContainsFunc(algs, func(a string) bool {
			return (k.Alg == "" || k.Alg == a) && keyFits(pub, a)
		})
		if !fits {
			warnings = append(warnings, fmt.Sprintf("%s: %s skipped: %s fits none of the algorithms %v", src, name, keyKind(pub), algs))
			continue
		}
		keys = append(keys, &jwtKey{id: k.Kid, explicit: k.Kid != "", key: pub, alg: k.Alg})
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("verify: jwt: %s: no key fits the algorithms %v", src, algs)
	}
	return keys, warnings, nil
}

// publicKey decodes k; nil, nil for an unsupported kty.
func (k jwk) publicKey() (any, error) {
	switch k.Kty {
	case "RSA":
		n, err := b64url(k.N)
		if err != nil || len(n) == 0 {
			return nil, errors.New("RSA key: n is not base64url")
		}
		e, err := b64url(k.E)
		if err != nil || len(e) == 0 || len(e) > 4 {
			return nil, errors.New("RSA key: e is not a base64url exponent")
		}
		exp := 0
		for _, b := range e {
			exp = exp<<8 | int(b)
		}
		if exp < 3 || exp%2 == 0 {
			return nil, errors.New("RSA key: invalid exponent")
		}
		return checkPublicKey(&rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp})
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, fmt.Errorf("EC key: curve %q is not P-256, P-384 or P-521", k.Crv)
		}
		size := (curve.Params().BitSize + 7) / 8
		x, errX := b64url(k.X)
		y, errY := b64url(k.Y)
		if errX != nil || errY != nil || len(x) != size || len(y) != size {
			return nil, fmt.Errorf("EC key: x and y must be base64url of %d bytes", size)
		}
		point := append(append([]byte{4}, x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return nil, errors.New("EC key: point is not on the curve")
		}
		return pub, nil
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, fmt.Errorf("OKP key: curve %q is not Ed25519", k.Crv)
		}
		x, err := b64url(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("OKP key: x must be base64url of 32 bytes")
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, nil
}

// b64url decodes base64url with or without padding.
func b64url(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
