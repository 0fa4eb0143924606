// Package reqfile reads and writes the benchmark's file of pre-signed
// webhook deliveries, shared by bench/cmd/presign (writer), bench/cmd/rate
// (Go reader) and bench/wrk/deliveries.lua (wrk's reader).
//
// Every delivery has the same method, path and headers except two: its
// idempotency key and its signature. Its body is a fixed template with the
// key spliced in once (bodies differ, so every signature is different) and,
// in the object form, an object id spliced in after it. So that 600,000
// deliveries of 1 KiB do not make a 800 MB file, the file holds the template
// once and then one "KEY SIGNATURE" line per delivery:
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
// HMAC the signature is. No template part contains a newline.
//
// The object form (presign -objects N) gives the deliveries a second varying
// field, an object id that many deliveries share (what a route's order.by
// reads): the header has one more line, body-middle, between body-prefix and
// body-suffix, and every delivery line a third field, the object id:
//
//	body-prefix {"id":"
//	body-middle ","type":"order.paid",...,"data":{"object":{"id":"
//	body-suffix ","object":"order",...}}}
//	count 600000
//	0000000a-7c1e-4b7a-9d3f-00000000a1b2 sha256=5f0c... obj_0010
//
// and delivery i's body is body-prefix + KEY + body-middle + OBJ +
// body-suffix, signed whole. A file without the body-middle line is read as
// before (two fields a line, the signature everything after the first
// space); in the object form the object id is the last field, after the last
// space.
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
	// BodyMiddle sits between the key and the object id in the object form
	// (Objects); unused otherwise.
	BodyMiddle string
	BodySuffix string
	// Objects: the file is in the object form (a body-middle line, an
	// object id on every delivery line). False: the plain form, whose
	// bodies carry the key only.
	Objects bool
	Keys    []string
	Sigs    []string // full header values, prefix included
	Objs    []string // the object ids, in the object form only (nil otherwise)
}

// AppendBody appends to dst the body of the delivery whose key is key and,
// in the object form, whose object id is obj: the body template with both in
// their places. obj is ignored in the plain form.
func (f *File) AppendBody(dst []byte, key, obj string) []byte {
	dst = append(dst, f.BodyPrefix...)
	dst = append(dst, key...)
	if f.Objects {
		dst = append(dst, f.BodyMiddle...)
		dst = append(dst, obj...)
	}
	return append(dst, f.BodySuffix...)
}

// Body appends to dst the body of delivery i (0-based) of a file Read.
func (f *File) Body(dst []byte, i int) []byte {
	obj := ""
	if f.Objects {
		obj = f.Objs[i]
	}
	return f.AppendBody(dst, f.Keys[i], obj)
}

// WriteHeader writes everything up to and including the count line.
func (f *File) WriteHeader(w io.Writer, count int) error {
	for _, s := range []string{f.Method, f.Path, f.KeyHeader, f.SigHeader, f.BodyPrefix, f.BodyMiddle, f.BodySuffix} {
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
	if f.Objects {
		fmt.Fprintln(bw, "body-middle", f.BodyMiddle)
	}
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
		case "body-middle":
			f.BodyMiddle, f.Objects = val, true
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
	if f.Objects {
		f.Objs = make([]string, 0, count)
	}
	for sc.Scan() {
		k, s, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			return nil, fmt.Errorf("%s: bad delivery line %d", path, len(f.Keys)+1)
		}
		if f.Objects {
			sp := strings.LastIndexByte(s, ' ')
			if sp < 0 || sp == len(s)-1 {
				return nil, fmt.Errorf("%s: delivery line %d has no object id (the file has a body-middle line)", path, len(f.Keys)+1)
			}
			f.Objs = append(f.Objs, s[sp+1:])
			s = s[:sp]
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
