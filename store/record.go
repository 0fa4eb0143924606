package store

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Finished records are stored in Redis in a compact binary form:
//
//	byte 0      version (recordVersion)
//	byte 1      flags: bit 0 set = the fingerprint is a canonical hex SHA-256
//	            stored as its 32 raw bytes; other bits must be zero
//	bytes 2-3   status, big-endian uint16
//	fingerprint 32 raw bytes (flag set), or uvarint length + bytes
//	content     uvarint length + content type bytes
//	body        uvarint length + body bytes, which must end the record
//
// Every length is checked against what is left, so a truncated, padded or
// otherwise damaged record is reported as ErrCorrupt instead of being
// misread.
const (
	recordVersion  = 1
	flagRawFP      = 1 << 0
	recordHeader   = 4
	maxStatus      = 999
	maxFingerprint = 1 << 10
	maxContentType = 1 << 10
)

// encodeRecord appends the binary form of out to dst.
func encodeRecord(dst []byte, out Outcome) ([]byte, error) {
	if out.Status < 0 || out.Status > maxStatus {
		return dst, fmt.Errorf("store: status %d out of range 0-%d", out.Status, maxStatus)
	}
	if len(out.Fingerprint) > maxFingerprint {
		return dst, fmt.Errorf("store: fingerprint of %d bytes is too long", len(out.Fingerprint))
	}
	if len(out.ContentType) > maxContentType {
		return dst, fmt.Errorf("store: content type of %d bytes is too long", len(out.ContentType))
	}
	var raw [32]byte
	canonical := parseFingerprint(out.Fingerprint, &raw)
	var flags byte
	if canonical {
		flags |= flagRawFP
	}
	dst = append(dst, recordVersion, flags, byte(out.Status>>8), byte(out.Status))
	if canonical {
		dst = append(dst, raw[:]...)
	} else {
		dst = binary.AppendUvarint(dst, uint64(len(out.Fingerprint)))
		dst = append(dst, out.Fingerprint...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(out.ContentType)))
	dst = append(dst, out.ContentType...)
	dst = binary.AppendUvarint(dst, uint64(len(out.Body)))
	dst = append(dst, out.Body...)
	return dst, nil
}

// recordSize is the exact length encodeRecord produces for out.
func recordSize(out Outcome) int {
	n := recordHeader
	var raw [32]byte
	if parseFingerprint(out.Fingerprint, &raw) {
		n += 32
	} else {
		n += uvarintLen(uint64(len(out.Fingerprint))) + len(out.Fingerprint)
	}
	n += uvarintLen(uint64(len(out.ContentType))) + len(out.ContentType)
	n += uvarintLen(uint64(len(out.Body))) + len(out.Body)
	return n
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// decodeRecord parses a record written by encodeRecord. The returned body is
// a fresh copy; b is not retained. Any malformation yields an error wrapping
// ErrCorrupt.
func decodeRecord(b []byte) (Outcome, error) {
	return decode(b, true)
}

// decodeRecordOwned is decodeRecord for a b the caller hands over: the
// body aliases b instead of being copied.
func decodeRecordOwned(b []byte) (Outcome, error) {
	return decode(b, false)
}

func decode(b []byte, copyBody bool) (Outcome, error) {
	var out Outcome
	if len(b) < recordHeader {
		return out, corruptf("record of %d bytes is shorter than its header", len(b))
	}
	if b[0] != recordVersion {
		return out, corruptf("unknown record version %d", b[0])
	}
	flags := b[1]
	if flags&^flagRawFP != 0 {
		return out, corruptf("unknown record flags %#x", flags)
	}
	status := int(binary.BigEndian.Uint16(b[2:4]))
	if status > maxStatus {
		return out, corruptf("status %d out of range", status)
	}
	out.Status = status
	rest := b[recordHeader:]
	if flags&flagRawFP != 0 {
		if len(rest) < 32 {
			return out, corruptf("truncated fingerprint")
		}
		out.Fingerprint = hex.EncodeToString(rest[:32])
		rest = rest[32:]
	} else {
		fp, r, err := readField(rest, maxFingerprint, "fingerprint")
		if err != nil {
			return out, err
		}
		out.Fingerprint = string(fp)
		rest = r
	}
	ct, rest, err := readField(rest, maxContentType, "content type")
	if err != nil {
		return out, err
	}
	out.ContentType = internContentType(ct)
	body, rest, err := readField(rest, len(rest), "body")
	if err != nil {
		return out, err
	}
	if len(rest) != 0 {
		return out, corruptf("%d trailing bytes", len(rest))
	}
	switch {
	case len(body) == 0:
	case copyBody:
		out.Body = append([]byte(nil), body...)
	default:
		out.Body = body[:len(body):len(body)]
	}
	return out, nil
}

// readField reads a uvarint length and that many bytes, refusing lengths
// over limit or over what is left.
func readField(b []byte, limit int, what string) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, nil, corruptf("bad %s length", what)
	}
	b = b[k:]
	if n > uint64(limit) || n > uint64(len(b)) {
		return nil, nil, corruptf("%s length %d exceeds the %d bytes left", what, n, len(b))
	}
	return b[:n], b[n:], nil
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// parseFingerprint reports whether fp is a canonical (lower-case, 64 digit)
// hex SHA-256 and, if so, decodes it into raw.
func parseFingerprint(fp string, raw *[32]byte) bool {
	if len(fp) != 64 {
		return false
	}
	for i := 0; i < 32; i++ {
		hi, ok1 := lowerHex(fp[2*i])
		lo, ok2 := lowerHex(fp[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		raw[i] = hi<<4 | lo
	}
	return true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// commonContentTypes are shared instead of being stored once per record.
var commonContentTypes = map[string]string{}

func init() {
	for _, ct := range []string{
		"",
		"application/json",
		"application/json; charset=utf-8",
		"application/json;charset=utf-8",
		"application/problem+json",
		"application/x-www-form-urlencoded",
		"application/xml",
		"text/plain",
		"text/plain; charset=utf-8",
		"text/html",
		"text/html; charset=utf-8",
		"text/xml",
		"text/xml; charset=utf-8",
	} {
		commonContentTypes[ct] = ct
	}
}

// internContentType returns a shared copy of b when it is a common content
// type (no allocation), else a new string.
func internContentType(b []byte) string {
	if s, ok := commonContentTypes[string(b)]; ok {
		return s
	}
	return string(b)
}

// EncodeOutcome returns out in the binary record form finished keys are
// stored in; the delivery queue keeps its finished keys the same way.
func EncodeOutcome(out Outcome) ([]byte, error) {
	return encodeRecord(make([]byte, 0, recordSize(out)), out)
}

// DecodeOutcome parses a record made by EncodeOutcome; a damaged one is
// reported as ErrCorrupt.
func DecodeOutcome(b []byte) (Outcome, error) {
	return decodeRecord(b)
}
