package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The scaling table: how a delivery's cost grows with the work. run.sh
// runs the BenchmarkScale* Go benchmarks (proxy and queue packages) and
// passes their output with -scale; each benchmark line becomes a row.

// scaleRow is one benchmark line: BenchmarkScaleBody/body=64KiB-2 ...
type scaleRow struct {
	dim, param, op string // "body", "64KiB", "" (or "unique", "ack", ...)
	backend        string // queue rows: memory, redis
	ns, cpu        float64
	bytes, allocs  float64
	extra          map[string]float64 // held-bytes/key, redis-bytes/key
}

// scaleDims names each benchmark's dimension in the table, in its order.
var scaleDims = []struct{ bench, name string }{
	{"BenchmarkScaleBody", "body size"},
	{"BenchmarkScaleRoutes", "routes"},
	{"BenchmarkScaleScheme", "signature scheme"},
	{"BenchmarkScaleKeysHeld", "finished keys held (memory)"},
	{"BenchmarkScaleKeysHeldRedis", "finished keys held (Redis)"},
	{"BenchmarkScaleQueueDepth", "queue depth"},
}

// readScale parses Go benchmark output; lines that are not results of a
// BenchmarkScale benchmark are skipped.
func readScale(path string) ([]scaleRow, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return parseScale(fh)
}

func parseScale(r io.Reader) ([]scaleRow, error) {
	var rows []scaleRow
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkScale") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i] // the GOMAXPROCS suffix
			}
		}
		parts := strings.Split(name, "/")
		row := scaleRow{dim: parts[0], extra: map[string]float64{}}
		for _, p := range parts[1:] {
			if _, v, ok := strings.Cut(p, "="); ok {
				row.param = v
			} else if row.dim == "BenchmarkScaleQueueDepth" && row.backend == "" {
				row.backend = p
			} else {
				row.op = p
			}
		}
		// f[1] is the iteration count; then value-unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("scale: %q: value %q: %v", sc.Text(), f[i], err)
			}
			switch f[i+1] {
			case "ns/op":
				row.ns = v
			case "cpu-us/op":
				row.cpu = v
			case "B/op":
				row.bytes = v
			case "allocs/op":
				row.allocs = v
			case "MB/s":
			default:
				row.extra[f[i+1]] = v
			}
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// scaleTable writes the rows as one table, grouped by dimension in
// scaleDims' order; "× first" compares a row's CPU per operation with the
// first row of the same dimension and operation.
func scaleTable(w io.Writer, md bool, rows []scaleRow) {
	head := []string{"dimension", "case", "µs per op (one at a time)", "CPU µs per op", "× first", "B/op", "allocs/op", "held per key"}
	var out [][]string
	for _, d := range scaleDims {
		first := map[string]float64{}
		for _, r := range rows {
			if r.dim != d.bench {
				continue
			}
			c := r.param
			if r.backend != "" {
				c = r.backend + ", " + c
			}
			if r.op != "" {
				c += ", " + r.op
			}
			group := r.backend + "/" + r.op
			ratio := "1.00"
			if f, ok := first[group]; ok && f > 0 {
				ratio = fmt.Sprintf("%.2f", r.cpu/f)
			} else {
				first[group] = r.cpu
			}
			held := ""
			if v, ok := r.extra["held-bytes/key"]; ok {
				held = fmt.Sprintf("%.0f B heap", v)
			}
			if v, ok := r.extra["redis-bytes/key"]; ok {
				held = fmt.Sprintf("%.0f B in Redis", v)
			}
			out = append(out, []string{d.name, c, fmt.Sprintf("%.1f", r.ns/1000), fmt.Sprintf("%.1f", r.cpu), ratio,
				fmt.Sprintf("%.0f", r.bytes), fmt.Sprintf("%.0f", r.allocs), held})
		}
	}
	table(w, md, head, out)
}

// scaleMarkdown writes the "How the cost grows" section.
func scaleMarkdown(w io.Writer, rows []scaleRow) {
	fmt.Fprintf(w, "\n## How the cost grows\n\n")
	fmt.Fprintf(w, "The `BenchmarkScale*` Go benchmarks (`proxy/scale_bench_test.go`, `queue/scale_bench_test.go`), run by `make bench` "+
		"after the HTTP rounds. Each drives one case at a time in one goroutine: a delivery through the fasthttp door's handler "+
		"(no client socket; the upstream is a fasthttp server in the same process, about 2 µs of each delivery), or the queue "+
		"backend's calls. \"µs per op\" is wall time per operation; \"CPU µs per op\" the process's user and system CPU per "+
		"operation (from getrusage: the gateway's, the in-process upstream's and the runtime's, not Redis's), which is what "+
		"grows with the work; \"× first\" divides it by the first row of its group. One at a time, every Redis round trip "+
		"pays its own wake-ups, which a loaded gateway shares between requests, so the Redis rows are higher than the "+
		"per-request CPU of the HTTP rounds above. Held per key: the live heap the memory store's finished keys take after a "+
		"full GC (100-byte answers included), or Redis's `used_memory` grown by them.\n\n")
	scaleTable(w, true, rows)
}
