// Command presign writes the benchmark's file of N pre-signed webhook
// deliveries (format: bench/internal/reqfile): each one a distinct
// idempotency key (UUID-shaped, 36 bytes) spliced into a JSON body of
// exactly -body bytes, signed as clawgate's generic hmac scheme expects
// (HMAC-SHA256 of the raw body, hex, with -prefix).
//
// With -objects N (N > 0) the file is in reqfile's object form: the body
// also carries an object id at data.object.id, obj_ and a zero-padded
// number (obj_0000 to obj_0999 for N = 1,000), delivery i's being i mod N,
// for a route whose order.by is "json:data.object.id". The body keeps its
// -body size (the padding shrinks). -objects 0 writes the plain form.
//
//	presign -n 600000 -secret-env CLAWGATE_BENCH_SECRET -out requests.txt [-objects 1000]
package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/clawgate/clawgate/bench/internal/reqfile"
)

func main() {
	o := options{}
	flag.IntVar(&o.n, "n", 600_000, "number of deliveries")
	out := flag.String("out", "requests.txt", "output `file`")
	secretEnv := flag.String("secret-env", "CLAWGATE_BENCH_SECRET", "environment `variable` holding the HMAC secret")
	flag.IntVar(&o.body, "body", 1024, "body size in `bytes`")
	flag.StringVar(&o.path, "path", "/webhook/bench", "request path")
	flag.StringVar(&o.prefix, "prefix", "sha256=", "signature prefix")
	flag.IntVar(&o.objects, "objects", 0, "distinct object ids at data.object.id, delivery i's being i mod `N` (0: none, the plain form)")
	flag.Parse()
	o.secret = os.Getenv(*secretEnv)
	if o.secret == "" {
		fatalf("presign: $%s is empty", *secretEnv)
	}
	fh, err := os.Create(*out)
	if err != nil {
		fatalf("presign: %v", err)
	}
	if err := write(fh, o); err != nil {
		fatalf("presign: %v", err)
	}
	if err := fh.Close(); err != nil {
		fatalf("presign: %v", err)
	}
}

// options are presign's flags.
type options struct {
	n, body, objects     int
	path, prefix, secret string
}

// write writes the request file o describes to out.
func write(out io.Writer, o options) error {
	if o.n < 1 {
		return errors.New("-n must be at least 1")
	}
	if o.objects < 0 {
		return errors.New("-objects must be 0 (none) or more")
	}
	f := &reqfile.File{
		Method:    "POST",
		Path:      o.path,
		Headers:   [][2]string{{"Content-Type", "application/json"}},
		KeyHeader: "Idempotency-Key",
		SigHeader: "X-Signature",
	}
	var err error
	if o.objects == 0 {
		f.BodyPrefix, f.BodySuffix, err = template(o.body, len(key(0)))
	} else {
		f.Objects = true
		f.BodyPrefix, f.BodyMiddle, f.BodySuffix, err = objectTemplate(o.body, len(key(0)), len(object(0, o.objects)))
	}
	if err != nil {
		return err
	}
	if err := f.WriteHeader(out, o.n); err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	mac := hmac.New(sha256.New, []byte(o.secret))
	body := make([]byte, 0, o.body)
	var sum [sha256.Size]byte
	var hexsum [2 * sha256.Size]byte
	for i := 0; i < o.n; i++ {
		k, obj := key(i), ""
		if f.Objects {
			obj = object(i, o.objects)
		}
		body = f.AppendBody(body[:0], k, obj)
		mac.Reset()
		mac.Write(body)
		hex.Encode(hexsum[:], mac.Sum(sum[:0]))
		w.WriteString(k)
		w.WriteByte(' ')
		w.WriteString(o.prefix)
		w.Write(hexsum[:])
		if f.Objects {
			w.WriteByte(' ')
			w.WriteString(obj)
		}
		w.WriteByte('\n')
	}
	return w.Flush()
}

// key is delivery i's idempotency key: UUID-shaped, 36 bytes, distinct for
// every i below 2^32.
func key(i int) string {
	return fmt.Sprintf("%08x-7c1e-4b7a-9d3f-%012x", i, uint64(i)*7919)
}

// object is delivery i's object id among n: obj_ and i mod n, zero-padded
// to the width of n-1 (at least 4 digits), so every id has the same length.
func object(i, n int) string {
	return fmt.Sprintf("obj_%0*d", max(4, len(strconv.Itoa(n-1))), i%n)
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

// objectTemplate returns the three parts of the same JSON order event with
// an object id at data.object.id, size bytes long once a keyLen-byte key
// sits between the first two and an objLen-byte id between the last two.
func objectTemplate(size, keyLen, objLen int) (string, string, string, error) {
	prefix := `{"id":"`
	middle := `","type":"order.paid","api_version":"2025-01-01","created":1767225600,"livemode":false,` +
		`"data":{"object":{"id":"`
	suffix := `","object":"order","amount":4200,"currency":"eur","status":"paid",` +
		`"customer":{"id":"cus_bench","email":"bench@example.com","name":"Bench Customer"},` +
		`"items":[{"sku":"sku_1","qty":1,"price":4200}],"metadata":{"source":"clawgate-bench"},"note":"`
	tail := `"}}}`
	pad := size - len(prefix) - keyLen - len(middle) - objLen - len(suffix) - len(tail)
	if pad < 0 {
		return "", "", "", fmt.Errorf("-body %d is too small: at least %d bytes", size, size-pad)
	}
	return prefix, middle, suffix + strings.Repeat("x", pad) + tail, nil
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}
