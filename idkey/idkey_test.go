package idkey

import "testing"

func TestScoped(t *testing.T) {
	for _, tc := range []struct{ route, key, want string }{
		{"orders", "evt_1", "orders:evt_1"},
		{"orders", "", "orders:"},
		{"a.b-c_d", "x:y", "a.b-c_d:x:y"},
	} {
		if got := Scoped(tc.route, tc.key); got != tc.want {
			t.Errorf("Scoped(%q, %q) = %q, want %q", tc.route, tc.key, got, tc.want)
		}
	}
}
