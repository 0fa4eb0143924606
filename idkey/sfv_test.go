package idkey

import "testing"

func TestSFString(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{`"abc"`, "abc", true},
		{`""`, "", true},
		{`"a\"b"`, `a"b`, true},
		{`"\\"`, `\`, true},
		{`"a;b=c"`, "a;b=c", true},
		{`"x";a`, "x", true},
		{`"x";a;b`, "x", true},
		{`"x"; a=1`, "x", true},
		{`"x";a=-1;b=123456789012345;c=123456789012.123`, "x", true},
		{`"x";a=1234567890123456`, "", false},
		{`"x";a=1234567890123.1`, "", false},
		{`"x";a=1.`, "", false},
		{`"x";a=-`, "", false},
		{`"x";a=?2`, "", false},
		{`"x";a=?`, "", false},
		{`"x";a=:abc`, "", false},
		{`"x";a=:a*c:`, "", false},
		{`"x";a=@1.5`, "", false},
		{`"x";a=@`, "", false},
		{`"x";a=%"a%2"`, "", false},
		{`"x";a=%"a%2F"`, "", false},
		{`"x";a=%"`, "", false},
		{`"x";a=%x`, "", false},
		{`"x";a="unterminated`, "", false},
		{`"x";a=`, "", false},
		{`"x";a=!`, "", false},
		{`"x";1a=1`, "", false},
		{`"x" ;a`, "", false},
		{`"x";`, "", false},
		{`"x"y`, "", false},
		{`"x`, "", false},
		{`"\x"`, "", false},
		{"\"\t\"", "", false},
		{"\"\x7f\"", "", false},
		{`"é"`, "", false},
	}
	for _, tt := range tests {
		got, ok := parseSFStringItem(tt.in)
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseSFStringItem(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
