package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Size units, binary (KiB = 1024) and decimal (KB = 1000).
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
	TiB ByteSize = 1 << 40
)

// sizeUnits maps a lower-cased unit to its multiplier.
var sizeUnits = map[string]int64{
	"":    1,
	"b":   1,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
}

// ErrBadSize is wrapped by every error ParseByteSize returns.
var ErrBadSize = errors.New("invalid size")

// ParseByteSize parses a size: a whole number of bytes ("1024"), or a number
// and a unit: B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB
// (powers of 1000), e.g. "64KiB", "1.5MiB", "10 KB". Units are
// case-insensitive. Negative sizes, fractions of a byte and sizes above
// 2^63-1 bytes are rejected.
func ParseByteSize(s string) (ByteSize, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return 0, fmt.Errorf("%w: empty; use a number of bytes or a size such as 64KiB or 1MiB", ErrBadSize)
	}
	if len(in) > 64 {
		return 0, fmt.Errorf("%w: %q is too long to be a size", ErrBadSize, in[:64]+"...")
	}
	if strings.HasPrefix(in, "-") {
		return 0, fmt.Errorf("%w: %q is negative", ErrBadSize, in)
	}
	end := 0
	for end < len(in) && (in[end] >= '0' && in[end] <= '9' || in[end] == '.') {
		end++
	}
	num, unit := in[:end], strings.ToLower(strings.TrimSpace(in[end:]))
	if num == "" || num == "." || strings.Count(num, ".") > 1 {
		return 0, fmt.Errorf("%w: %q does not start with a number; use a size such as 64KiB or 1MiB", ErrBadSize, in)
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("%w: %q has unknown unit %q; use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB", ErrBadSize, in, strings.TrimSpace(in[end:]))
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("%w: %q is too large", ErrBadSize, in)
		}
		return ByteSize(n * mult), nil
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("%w: %q does not start with a number; use a size such as 64KiB or 1MiB", ErrBadSize, in)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("%w: %q is not a whole number of bytes", ErrBadSize, in)
	}
	n := r.Num()
	if !n.IsInt64() {
		return 0, fmt.Errorf("%w: %q is too large", ErrBadSize, in)
	}
	return ByteSize(n.Int64()), nil
}

// UnmarshalYAML accepts an integer (bytes) or a string ParseByteSize
// understands.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := byteSizeOf(n)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
	}
	*b = v
	return nil
}

// byteSizeOf decodes a size node.
func byteSizeOf(n *yaml.Node) (ByteSize, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("%w: expected a size such as 64KiB or 1MiB, got %s", ErrBadSize, kindName(n))
	}
	if n.ShortTag() == "!!int" {
		var v int64
		if err := n.Decode(&v); err != nil {
			return 0, fmt.Errorf("%w: %s is too large", ErrBadSize, clip(n.Value))
		}
		if v < 0 {
			return 0, fmt.Errorf("%w: %d is negative", ErrBadSize, v)
		}
		return ByteSize(v), nil
	}
	return ParseByteSize(n.Value)
}

// MarshalYAML writes the size as String does.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// String formats the size in the largest binary unit that divides it
// exactly: 65536 is "64KiB", 1000 is "1000B". ParseByteSize reads it back.
func (b ByteSize) String() string {
	if b == 0 {
		return "0B"
	}
	for _, u := range []struct {
		size ByteSize
		name string
	}{{TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}} {
		if b%u.size == 0 {
			return strconv.FormatInt(int64(b/u.size), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}
