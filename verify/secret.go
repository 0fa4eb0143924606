package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Secret is one resolved signing secret.
type Secret struct {
	// ID labels the secret in webhook_signature_verified_total{secret_id}.
	// A secret configured without an id gets its position: "0", "1", ...
	ID string
	// Key is the secret exactly as configured (the UTF-8 bytes of the value,
	// a trailing newline trimmed for secret_file). Each scheme decides how
	// to use it, e.g. standard-webhooks base64-decodes it after "whsec_".
	Key []byte
	// NotBefore: the secret is not tried before this instant. Zero: always.
	NotBefore time.Time
	// NotAfter: the secret is not tried from this instant on. Zero: never
	// expires.
	NotAfter time.Time

	// from says where the value came from, for warnings: "inline",
	// "secret_env NAME" or "secret_file PATH".
	from string
}

// MinSecretLen is the shortest signing secret (or HMAC key) that loads
// without a warning, in bytes.
const MinSecretLen = 16

// Active reports whether s may be tried at now: not before NotBefore and
// strictly before NotAfter.
func (s Secret) Active(now time.Time) bool {
	return activeAt(s.NotBefore, s.NotAfter, now)
}

func activeAt(notBefore, notAfter, now time.Time) bool {
	if !notBefore.IsZero() && now.Before(notBefore) {
		return false
	}
	return notAfter.IsZero() || now.Before(notAfter)
}

// ResolveSecrets resolves a verify block's secrets: it reads each from the
// environment (secret_env), a file (secret_file, relative to env.Dir) or the
// inline value, assigns positional IDs, and checks that at least one secret
// is active at env.Now. Warnings: an inline secret; a secret shorter than
// MinSecretLen bytes; a secret_file that its group or others may read; a
// secret already past its not_after while another is active. Errors and
// warnings name the field and the variable or file, never a secret's value.
func ResolveSecrets(cs []SecretConfig, env Env) ([]Secret, []string, error) {
	return resolveSecrets(cs, env, "secret")
}

// resolveSecrets is ResolveSecrets for what ("secret", or "key" for public
// keys, which hold nothing secret and so draw none of the warnings meant
// for secrets: inline, short, readable by others).
func resolveSecrets(cs []SecretConfig, env Env, what string) ([]Secret, []string, error) {
	if len(cs) == 0 {
		if what == "key" {
			return nil, nil, errors.New("verify: secrets: at least one public key is required")
		}
		return nil, nil, errors.New("verify: secrets: at least one secret is required")
	}
	var warnings []string
	out := make([]Secret, 0, len(cs))
	seen := make(map[string]int, len(cs))
	for i, sc := range cs {
		field := fmt.Sprintf("secrets[%d]", i)
		id := sc.ID
		if id == "" {
			id = strconv.Itoa(i)
		}
		if j, dup := seen[id]; dup {
			return nil, nil, fmt.Errorf("verify: %s: id %q is already used by secrets[%d]", field, id, j)
		}
		seen[id] = i
		v, err := resolveValue(field, sc.Secret, sc.SecretEnv, sc.SecretFile, env)
		if err != nil {
			return nil, nil, err
		}
		if what == "secret" {
			warnings = append(warnings, v.warnings(field, id)...)
		}
		if !sc.NotBefore.IsZero() && !sc.NotAfter.IsZero() && !sc.NotBefore.Before(sc.NotAfter) {
			return nil, nil, fmt.Errorf("verify: %s: not_before must be earlier than not_after", field)
		}
		out = append(out, Secret{ID: id, Key: v.key, NotBefore: sc.NotBefore, NotAfter: sc.NotAfter, from: v.from})
	}
	w, err := checkActive(what, len(out), func(i int) (string, time.Time, time.Time) {
		return out[i].ID, out[i].NotBefore, out[i].NotAfter
	}, env.now())
	if err != nil {
		return nil, nil, err
	}
	return out, append(warnings, w...), nil
}

// checkActive fails when none of n items is active at now, and warns about
// each item already past its not_after.
func checkActive(what string, n int, item func(int) (id string, nb, na time.Time), now time.Time) ([]string, error) {
	var warnings []string
	active := 0
	for i := range n {
		id, nb, na := item(i)
		switch {
		case activeAt(nb, na, now):
			active++
		case !na.IsZero() && !now.Before(na):
			warnings = append(warnings, fmt.Sprintf("%s %q expired at %s and is no longer tried; remove it from the config", what, id, na.UTC().Format(time.RFC3339)))
		}
	}
	if active == 0 {
		return nil, fmt.Errorf("verify: no %s is active at %s (check not_before and not_after)", what, now.UTC().Format(time.RFC3339))
	}
	return warnings, nil
}

func inlineWarning(field, id string) string {
	return fmt.Sprintf("route uses an inline secret (%s, id %q): keep it in secret_env or secret_file outside demos (demo only)", field, id)
}

// shortSecretWarning warns about a secret of n bytes, n < MinSecretLen;
// what is "is only" or "decodes to only".
func shortSecretWarning(field, id, from, what string, n int) string {
	return fmt.Sprintf("%s (id %q, %s) %s %d bytes long; a short secret can be guessed: use at least %d random bytes",
		field, id, from, what, n, MinSecretLen)
}

// value is a resolved secret and where it came from.
type value struct {
	key    []byte
	inline bool
	from   string      // "inline", "secret_env NAME" or "secret_file PATH"
	mode   fs.FileMode // permission bits of a secret_file; 0 otherwise
}

// warnings returns the warnings about v as the secret field (id id): an
// inline value, a value shorter than MinSecretLen, a secret_file its group
// or others may read.
func (v value) warnings(field, id string) []string {
	var w []string
	if v.inline {
		w = append(w, inlineWarning(field, id))
	}
	if len(v.key) < MinSecretLen {
		w = append(w, shortSecretWarning(field, id, v.from, "is only", len(v.key)))
	}
	if v.mode&0o044 != 0 && runtime.GOOS != "windows" {
		w = append(w, fmt.Sprintf("%s (id %q): %s is readable by its group or others (mode %04o); restrict it to the gateway's user (chmod 600)",
			field, id, v.from, v.mode))
	}
	return w
}

// resolveValue returns the bytes of exactly one of an inline value, an
// environment variable and a file.
func resolveValue(field, inline, envName, file string, env Env) (value, error) {
	n := 0
	for _, s := range []string{inline, envName, file} {
		if s != "" {
			n++
		}
	}
	switch {
	case n == 0:
		return value{}, fmt.Errorf("verify: %s: one of secret, secret_env or secret_file is required", field)
	case n > 1:
		return value{}, fmt.Errorf("verify: %s: set only one of secret, secret_env and secret_file", field)
	case inline != "":
		return value{key: []byte(inline), inline: true, from: "inline"}, nil
	case envName != "":
		v := env.getenv(envName)
		if v == "" {
			return value{}, fmt.Errorf("verify: %s: secret_env: environment variable %s is unset or empty", field, envName)
		}
		return value{key: []byte(v), from: "secret_env " + envName}, nil
	default:
		path := env.path(file)
		b, mode, err := readKeyFileMode(path)
		if err != nil {
			return value{}, fmt.Errorf("verify: %s: secret_file: cannot read %s: %w", field, path, unwrapPathErr(err))
		}
		b = trimNewline(b)
		if len(b) == 0 {
			return value{}, fmt.Errorf("verify: %s: secret_file: %s is empty", field, path)
		}
		return value{key: b, from: "secret_file " + path, mode: mode}, nil
	}
}

// unwrapPathErr drops the *fs.PathError wrapper (whose text repeats the
// path) and keeps the cause, e.g. "no such file or directory".
func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func trimNewline(b []byte) []byte {
	s := strings.TrimRight(string(b), "\r\n")
	return []byte(s)
}

func (e Env) getenv(name string) string {
	if e.Getenv != nil {
		return e.Getenv(name)
	}
	return os.Getenv(name)
}

func (e Env) path(p string) string {
	if filepath.IsAbs(p) || e.Dir == "" {
		return p
	}
	return filepath.Join(e.Dir, p)
}

func (e Env) now() time.Time {
	if e.Now.IsZero() {
		return time.Now()
	}
	return e.Now
}
