// Package logging writes clawgate's JSON log lines cheaply: a slog.Handler
// that renders the same lines as slog's JSONHandler with plain appends into
// pooled buffers, and a Buffered writer that batches them into few writes.
// Every delivery logs one access line, so on the request path these two
// take the log from a fifth of the gateway's CPU to a few percent (see
// docs/benchmarks.md).
package logging

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Handler is a slog.Handler writing one JSON object per line:
// {"time":"RFC3339Nano","level":"INFO","msg":"...",attrs...}, like
// slog.JSONHandler (durations as nanoseconds, errors as their text, groups as
// nested objects).
type Handler struct {
	w      io.Writer
	mu     *sync.Mutex // serialises writes to w
	level  slog.Leveler
	prefix []byte // attrs from WithAttrs, rendered, each followed by ','
	groups int    // groups opened in prefix by WithGroup
	open   bool   // a group was just opened: no attr in it yet
}

var _ slog.Handler = (*Handler)(nil)

// NewHandler returns a Handler writing to w lines at or above level (nil:
// info).
func NewHandler(w io.Writer, level slog.Leveler) *Handler {
	if level == nil {
		level = slog.LevelInfo
	}
	return &Handler{w: w, mu: new(sync.Mutex), level: level}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Handle implements slog.Handler.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	bp, b := h.begin(r.Time, r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b = appendAttr(b, a)
		return true
	})
	return h.end(bp, b)
}

// HandleAttrs writes the line Handle writes for a record of t, level, msg
// and attrs, without making the record, which allocates for more than
// five attributes: attrs may be an array on the caller's stack. The
// caller checks Enabled first, as slog.Logger does.
func (h *Handler) HandleAttrs(t time.Time, level slog.Level, msg string, attrs []slog.Attr) error {
	bp, b := h.begin(t, level, msg)
	for _, a := range attrs {
		b = appendAttr(b, a)
	}
	return h.end(bp, b)
}

// begin starts a line in a pooled buffer: time, level, message and the
// attributes of WithAttrs.
func (h *Handler) begin(t time.Time, level slog.Level, msg string) (*[]byte, []byte) {
	bp := bufs.Get().(*[]byte)
	b := (*bp)[:0]
	b = append(b, '{')
	if !t.IsZero() {
		b = append(b, `"time":"`...)
		b = t.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `",`...)
	}
	b = append(b, `"level":`...)
	b = appendString(b, level.String())
	b = append(b, `,"msg":`...)
	b = appendString(b, msg)
	b = append(b, ',')
	b = append(b, h.prefix...)
	return bp, b
}

// end closes the line begun in b, writes it and gives the buffer back.
func (h *Handler) end(bp *[]byte, b []byte) error {
	b = trimComma(b)
	for i := 0; i < h.groups; i++ {
		b = trimComma(b)
		b = append(b, '}')
	}
	b = append(b, '}', '\n')
	h.mu.Lock()
	_, err := h.w.Write(b)
	h.mu.Unlock()
	if cap(b) <= 64<<10 {
		*bp = b
		bufs.Put(bp)
	}
	return err
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := *h
	h2.prefix = append([]byte(nil), h.prefix...)
	for _, a := range as {
		h2.prefix = appendAttr(h2.prefix, a)
	}
	return &h2
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.prefix = appendString(append([]byte(nil), h.prefix...), name)
	h2.prefix = append(h2.prefix, ":{"...)
	h2.groups++
	return &h2
}

func trimComma(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == ',' {
		return b[:len(b)-1]
	}
	return b
}

// appendAttr renders a as `"key":value,`; empty attrs are skipped, as slog
// does.
func appendAttr(b []byte, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return b
	}
	if a.Value.Kind() == slog.KindGroup {
		attrs := a.Value.Group()
		if len(attrs) == 0 {
			return b
		}
		if a.Key != "" {
			b = appendString(b, a.Key)
			b = append(b, ":{"...)
		}
		for _, ga := range attrs {
			b = appendAttr(b, ga)
		}
		if a.Key != "" {
			b = append(trimComma(b), '}')
			b = append(b, ',')
		}
		return b
	}
	b = appendString(b, a.Key)
	b = append(b, ':')
	b = appendValue(b, a.Value)
	return append(b, ',')
}

func appendValue(b []byte, v slog.Value) []byte {
	switch v.Kind() {
	case slog.KindString:
		return appendString(b, v.String())
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindFloat64:
		return appendFloat(b, v.Float64())
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		return strconv.AppendInt(b, int64(v.Duration()), 10)
	case slog.KindTime:
		b = append(b, '"')
		b = v.Time().AppendFormat(b, time.RFC3339Nano)
		return append(b, '"')
	}
	any := v.Any()
	if err, ok := any.(error); ok {
		return appendString(b, err.Error())
	}
	j, err := json.Marshal(any)
	if err != nil {
		return appendString(b, "!ERROR:"+err.Error())
	}
	return append(b, j...)
}

// appendFloat writes f as JSON; NaN and infinities, which JSON lacks, as
// strings.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f != f:
		return append(b, `"NaN"`...)
	case f > 1.7976931348623157e308:
		return append(b, `"+Inf"`...)
	case f < -1.7976931348623157e308:
		return append(b, `"-Inf"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced, and <, >, & and U+2028/2029
// escaped as encoding/json does.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&15])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
