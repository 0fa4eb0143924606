// Package reqfile reads and writes the benchmark's file of pre-signed
// webhook deliveries, shared by bench/cmd/presign (writer), bench/cmd/rate
// (Go reader) and bench/wrk/deliveries.lua (wrk's reader).
//
// Every delivery has the same method, path and headers except two: its
// idempotency key and its signature. Its body is a fixed template with the
// key spliced in once (bodies differ, so every signature is different). So
// that 600,000 deliveries of 1 KiB do not make a 800 MB file, the file holds
// the template once and then one "KEY SIGNATURE" line per delivery:
//
//	clawgate-bench-requests 1
//	method POST
//	path /webhook/bench
//	header Content-Type: application/json
//	key-header Idempotency-Key
//	sig-header X-Signature
//	body-prefix {"id":"
//	body-suffix ","type":"order.paid",...}
//	count 600000
//	0000000a-7c1e-4b7a-9d3f-00000000a1b2 sha256=5f0c...
//	...
//
// Delivery i is: method path, the fixed headers, key-header: KEY,
// sig-header: SIGNATURE, and the body body-prefix + KEY + body-suffix, whose
// HMAC the signature is. Neither template half contains a newline.
package reqfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Magic is the first line of a request file.
const Magic = "clawgate-bench-requests 1"

// File is a parsed request file.
type File struct {
	Method     string
	Path       string
	Headers    [][2]string // fixed headers, in order
	KeyHeader  string
	SigHeader  string
	BodyPrefix string
	BodySuffix string
	Keys       []string
	Sigs       []string // full header values, prefix included
}

// AppendBody appends to dst the body of the delivery whose key is key: the
// body template with the key in its place.
func (f *File) AppendBody(dst []byte, key string) []byte {
	dst = append(dst, f.BodyPrefix...)
	dst = append(dst, key...)
	return append(dst, f.BodySuffix...)
}

// WriteHeader writes everything up to and including the count line.
func (f *File) WriteHeader(w io.Writer, count int) error {
	for _, s := range []string{f.Method, f.Path, f.KeyHeader, f.SigHeader, f.BodyPrefix, f.BodySuffix} {
		if strings.ContainsAny(s, "\r\n") {
			return fmt.Errorf("reqfile: %q contains a newline", s)
		}
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, Magic)
	fmt.Fprintln(bw, "method", f.Method)
	fmt.Fprintln(bw, "path", f.Path)
	for _, h := range f.Headers {
		fmt.Fprintf(bw, "header %s: %s\n", h[0], h[1])
	}
	fmt.Fprintln(bw, "key-header", f.KeyHeader)
	fmt.Fprintln(bw, "sig-header", f.SigHeader)
	fmt.Fprintln(bw, "body-prefix", f.BodyPrefix)
	fmt.Fprintln(bw, "body-suffix", f.BodySuffix)
	fmt.Fprintln(bw, "count", count)
	return bw.Flush()
}

// Read parses a request file.
func Read(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() || sc.Text() != Magic {
		return nil, fmt.Errorf("%s: not a request file (first line must be %q)", path, Magic)
	}
	f := &File{}
	count := -1
	for count < 0 && sc.Scan() {
		name, val, _ := strings.Cut(sc.Text(), " ")
		switch name {
		case "method":
			f.Method = val
		case "path":
			f.Path = val
		case "header":
			k, v, ok := strings.Cut(val, ": ")
			if !ok {
				return nil, fmt.Errorf("%s: bad header line %q", path, sc.Text())
			}
			f.Headers = append(f.Headers, [2]string{k, v})
		case "key-header":
			f.KeyHeader = val
		case "sig-header":
			f.SigHeader = val
		case "body-prefix":
			f.BodyPrefix = val
		case "body-suffix":
			f.BodySuffix = val
		case "count":
			if count, err = strconv.Atoi(val); err != nil || count < 1 {
				return nil, fmt.Errorf("%s: bad count %q", path, val)
			}
		default:
			return nil, fmt.Errorf("%s: unknown line %q", path, sc.Text())
		}
	}
	if count < 0 {
		return nil, fmt.Errorf("%s: no count line", path)
	}
	f.Keys = make([]string, 0, count)
	f.Sigs = make([]string, 0, count)
	for sc.Scan() {
		k, s, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			return nil, fmt.Errorf("%s: bad delivery line %d", path, len(f.Keys)+1)
		}
		f.Keys = append(f.Keys, k)
		f.Sigs = append(f.Sigs, s)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(f.Keys) != count {
		return nil, errors.New(path + ": count line says " + strconv.Itoa(count) + " deliveries, file has " + strconv.Itoa(len(f.Keys)))
	}
	return f, nil
}
