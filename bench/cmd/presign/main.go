// Command presign writes the benchmark's file of N pre-signed webhook
// deliveries (format: bench/internal/reqfile): each one a distinct
// idempotency key (UUID-shaped, 36 bytes) spliced into a JSON body of
// exactly -body bytes, signed as clawgate's generic hmac scheme expects
// (HMAC-SHA256 of the raw body, hex, with -prefix).
//
//	presign -n 600000 -secret-env CLAWGATE_BENCH_SECRET -out requests.txt
package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/clawgate/clawgate/bench/internal/reqfile"
)

func main() {
	n := flag.Int("n", 600_000, "number of deliveries")
	out := flag.String("out", "requests.txt", "output `file`")
	secretEnv := flag.String("secret-env", "CLAWGATE_BENCH_SECRET", "environment `variable` holding the HMAC secret")
	bodySize := flag.Int("body", 1024, "body size in `bytes`")
	path := flag.String("path", "/webhook/bench", "request path")
	prefix := flag.String("prefix", "sha256=", "signature prefix")
	flag.Parse()
	secret := os.Getenv(*secretEnv)
	if secret == "" {
		fatalf("presign: $%s is empty", *secretEnv)
	}
	if *n < 1 {
		fatalf("presign: -n must be at least 1")
	}
	f := &reqfile.File{
		Method:    "POST",
		Path:      *path,
		Headers:   [][2]string{{"Content-Type", "application/json"}},
		KeyHeader: "Idempotency-Key",
		SigHeader: "X-Signature",
	}
	var err error
	if f.BodyPrefix, f.BodySuffix, err = template(*bodySize, len(key(0))); err != nil {
		fatalf("presign: %v", err)
	}
	fh, err := os.Create(*out)
	if err != nil {
		fatalf("presign: %v", err)
	}
	if err := f.WriteHeader(fh, *n); err != nil {
		fatalf("presign: %v", err)
	}
	w := bufio.NewWriterSize(fh, 1<<20)
	mac := hmac.New(sha256.New, []byte(secret))
	body := make([]byte, 0, *bodySize)
	var sum [sha256.Size]byte
	var hexsum [2 * sha256.Size]byte
	for i := 0; i < *n; i++ {
		k := key(i)
		body = f.AppendBody(body[:0], k)
		mac.Reset()
		mac.Write(body)
		hex.Encode(hexsum[:], mac.Sum(sum[:0]))
		w.WriteString(k)
		w.WriteByte(' ')
		w.WriteString(*prefix)
		w.Write(hexsum[:])
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		fatalf("presign: %v", err)
	}
	if err := fh.Close(); err != nil {
		fatalf("presign: %v", err)
	}
}

// key is delivery i's idempotency key: UUID-shaped, 36 bytes, distinct for
// every i below 2^32.
func key(i int) string {
	return fmt.Sprintf("%08x-7c1e-4b7a-9d3f-%012x", i, uint64(i)*7919)
}

// template returns the two halves of a JSON order event that is size bytes
// long once a keyLen-byte key sits between them.
func template(size, keyLen int) (string, string, error) {
	prefix := `{"id":"`
	suffix := `","type":"order.paid","api_version":"2025-01-01","created":1767225600,"livemode":false,` +
		`"data":{"object":{"object":"order","amount":4200,"currency":"eur","status":"paid",` +
		`"customer":{"id":"cus_bench","email":"bench@example.com","name":"Bench Customer"},` +
		`"items":[{"sku":"sku_1","qty":1,"price":4200}],"metadata":{"source":"clawgate-bench"},"note":"`
	tail := `"}}}`
	pad := size - len(prefix) - keyLen - len(suffix) - len(tail)
	if pad < 0 {
		return "", "", fmt.Errorf("-body %d is too small: at least %d bytes", size, size-pad)
	}
	return prefix, suffix + strings.Repeat("x", pad) + tail, nil
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}
