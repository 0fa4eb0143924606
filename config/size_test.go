package config

import (
	"errors"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
	}{
		{"0", 0},
		{"1024", 1024},
		{"512B", 512},
		{"512b", 512},
		{"64KiB", 64 << 10},
		{"64kib", 64 << 10},
		{"1MiB", 1 << 20},
		{"1GiB", 1 << 30},
		{"2TiB", 2 << 40},
		{"10KB", 10000},
		{"1MB", 1000000},
		{"3GB", 3000000000},
		{"1TB", 1000000000000},
		{"1.5MiB", 3 << 19},
		{"0.5KiB", 512},
		{" 64 KiB ", 64 << 10},
		{"8388607TiB", 8388607 << 40},
		{"9223372036854775807", 1<<63 - 1},
		{"9223372036854775807B", 1<<63 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseByteSize(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("ParseByteSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseByteSizeErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "invalid size: empty; use a number of bytes or a size such as 64KiB or 1MiB"},
		{"   ", "invalid size: empty; use a number of bytes or a size such as 64KiB or 1MiB"},
		{"-1", `invalid size: "-1" is negative`},
		{"-64KiB", `invalid size: "-64KiB" is negative`},
		{"KiB", `invalid size: "KiB" does not start with a number; use a size such as 64KiB or 1MiB`},
		{".", `invalid size: "." does not start with a number; use a size such as 64KiB or 1MiB`},
		{"1.2.3MiB", `invalid size: "1.2.3MiB" does not start with a number; use a size such as 64KiB or 1MiB`},
		{"10 parsecs", `invalid size: "10 parsecs" has unknown unit "parsecs"; use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB`},
		{"1M", `invalid size: "1M" has unknown unit "M"; use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB`},
		{"0x10", `invalid size: "0x10" has unknown unit "x10"; use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB`},
		{"1e3", `invalid size: "1e3" has unknown unit "e3"; use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB`},
		{"0.1B", `invalid size: "0.1B" is not a whole number of bytes`},
		{"8388608TiB", `invalid size: "8388608TiB" is too large`},
		{"9223372036854775808", `invalid size: "9223372036854775808" is too large`},
		{"99999999999999999999999KiB", `invalid size: "99999999999999999999999KiB" is too large`},
		{"9999999999999999999.5MiB", `invalid size: "9999999999999999999.5MiB" is too large`},
		{strings.Repeat("9", 100), `invalid size: "` + strings.Repeat("9", 64) + `..." is too long to be a size`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseByteSize(tt.in)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("ParseByteSize(%q) error = %v, want %q", tt.in, err, tt.want)
			}
			if !errors.Is(err, ErrBadSize) {
				t.Errorf("error does not wrap ErrBadSize")
			}
		})
	}
}

func TestByteSizeString(t *testing.T) {
	tests := []struct {
		in   ByteSize
		want string
	}{
		{0, "0B"},
		{1, "1B"},
		{1000, "1000B"},
		{1024, "1KiB"},
		{64 << 10, "64KiB"},
		{1536, "1536B"},
		{1 << 20, "1MiB"},
		{3 << 19, "1536KiB"},
		{1 << 30, "1GiB"},
		{5 << 40, "5TiB"},
		{1<<63 - 1, "9223372036854775807B"},
		{-5, "-5B"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
		if tt.in < 0 {
			continue
		}
		back, err := ParseByteSize(tt.in.String())
		if err != nil || back != tt.in {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", tt.in.String(), back, err, int64(tt.in))
		}
	}
}

func TestByteSizeYAML(t *testing.T) {
	tests := []struct {
		in      string
		want    ByteSize
		wantErr string
	}{
		{"size: 4096", 4096, ""},
		{"size: 0x100", 256, ""},
		{"size: 1_000", 1000, ""},
		{`size: "2048"`, 2048, ""},
		{"size: 64KiB", 64 << 10, ""},
		{"size: 1.5 MiB", 3 << 19, ""},
		{"size: ~", 7, ""}, // null keeps the value already there
		{"size: -1", 0, "yaml: unmarshal errors:\n  line 1: invalid size: -1 is negative"},
		{"size: 99999999999999999999", 0, "yaml: unmarshal errors:\n  line 1: invalid size: \"99999999999999999999\" is too large"},
		{"size: 1.5", 0, "yaml: unmarshal errors:\n  line 1: invalid size: \"1.5\" is not a whole number of bytes"},
		{"size: lots", 0, "yaml: unmarshal errors:\n  line 1: invalid size: \"lots\" does not start with a number; use a size such as 64KiB or 1MiB"},
		{"size: [1]", 0, "yaml: unmarshal errors:\n  line 1: invalid size: expected a size such as 64KiB or 1MiB, got a list"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			v := struct {
				Size ByteSize `yaml:"size"`
			}{Size: 7}
			err := yaml.Unmarshal([]byte(tt.in), &v)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || v.Size != tt.want {
				t.Fatalf("got %d, %v; want %d", v.Size, err, tt.want)
			}
		})
	}
}

func TestByteSizeMarshalYAML(t *testing.T) {
	out, err := yaml.Marshal(struct {
		Size ByteSize `yaml:"size"`
	}{64 << 10})
	if err != nil || string(out) != "size: 64KiB\n" {
		t.Fatalf("Marshal = %q, %v", out, err)
	}
}
